"""The test files' recorded durations, which set the order pytest-xdist hands files out in."""

from __future__ import annotations

import json

from tests.file_durations import FileDurations


def test_a_run_replaces_the_files_it_ran_keeps_the_others_and_drops_files_that_are_gone(tmp_path) -> None:
    (tmp_path / "tests").mkdir()
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "tests" / name).write_text("")
    path = tmp_path / "tests" / "durations.json"
    path.write_text(json.dumps({"tests/test_a.py": 10.0, "tests/test_b.py": 20.0, "tests/test_gone.py": 5.0}))
    durations = FileDurations(path)
    durations.add("tests/test_a.py::test_one", 1.25)
    durations.add("tests/test_a.py::test_two[x]", 2.0)
    durations.write()
    assert json.loads(path.read_text()) == {"tests/test_a.py": 3.2, "tests/test_b.py": 20.0}
    assert FileDurations(path).of("tests/test_b.py") == 20.0


def test_a_file_never_measured_counts_as_no_time(tmp_path) -> None:
    assert FileDurations(tmp_path / "durations.json").of("tests/test_new.py") == 0.0

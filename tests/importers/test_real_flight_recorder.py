"""torch's own Flight Recorder dump (2 gloo ranks on this machine): it loads through the
restricted unpickler, and its entries carry every field the test writer writes, with its types."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sleuth.errors import ImportFileError
from sleuth.importers import read_flight_recorder
from sleuth.importers.safe_pickle import load_plain
from tests.importers.realjobs import run_job
from tests.importers.writers import write_flight_recorder

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real-fr")
    env = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}
    run_job([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
             "-m", "tests.importers.frjob", str(out)], env=env)
    return out


def test_torch_s_pickle_loads_without_running_code_and_matches_the_writer(real: Path, emulated, tmp_path: Path) -> None:
    dump = load_plain((real / "pickle" / "fr_trace_rank_0").read_bytes(), "rank 0")
    ours = load_plain(write_flight_recorder(tmp_path, emulated.records, emulated.spec)[0].read_bytes(), "ours")
    assert {"version", "pg_config", "pg_status", "entries"} <= set(dump)
    theirs = dump["entries"][0]
    mine = next(e for e in ours["entries"] if e["state"] == "completed")
    # every field the writer writes is torch's, with torch's type (the times are None until
    # discovered: gloo never discovers any; duration_ms only with timing on NCCL)
    for key, value in mine.items():
        if key in ("duration_ms", "time_discovered_started_ns", "time_discovered_completed_ns"):
            assert key == "duration_ms" or key in theirs
            continue
        assert key in theirs, key
        assert type(theirs[key]) is type(value), (key, theirs[key], value)
    assert [e["profiling_name"] for e in dump["entries"]][:3] == ["gloo:all_reduce", "gloo:all_reduce", "gloo:all_gather"]
    assert theirs["process_group"] == ("0", "default_pg") and isinstance(dump["pg_config"], dict)


def test_torch_s_json_dump_has_the_same_entries(real: Path) -> None:
    pickled = load_plain((real / "pickle" / "fr_trace_rank_1").read_bytes(), "rank 1")
    dumped = json.loads((real / "json" / "fr_trace_rank_1").read_text())
    assert [e["profiling_name"] for e in dumped["entries"]] == [e["profiling_name"] for e in pickled["entries"]]
    assert dumped["entries"][0]["process_group"] == list(pickled["entries"][0]["process_group"])
    assert dumped["entries"][0]["time_discovered_completed_ns"] == 0  # JSON's "not discovered"


def test_gloo_dumps_are_refused_naming_what_they_lack(real: Path) -> None:
    # gloo's operators are never discovered (every entry "scheduled", no time but the issue), and
    # its groups sit in pg_config under an empty name (torch 2.15): the error said only the latter.
    with pytest.raises(ImportFileError, match=r"fr_trace_rank_0: a gloo job's dump: torch's Flight Recorder "
                                              r"records no start or completion time for gloo operators"):
        read_flight_recorder(real / "pickle", job="gloo")

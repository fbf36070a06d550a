"""Progress bars (sleuth.progress): drawn on a terminal, silent elsewhere, never on stdout."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pytest
from rich.console import Console

from sleuth.cli import main
from sleuth.progress import progress, track


class TerminalStderr(io.StringIO):
    """A stderr that says it is a terminal (as a user's shell is)."""

    def isatty(self) -> bool:
        return True


def test_nothing_is_written_to_a_stderr_that_is_not_a_terminal(monkeypatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich would call a pipe a terminal; the bar still stays off
    assert list(track(range(5), "counting")) == [0, 1, 2, 3, 4]
    with progress("steps", total=2) as steps:
        steps.advance(description="second")
        steps.advance()
        assert not steps.shown
    assert stderr.getvalue() == ""


def test_a_given_console_that_is_not_a_terminal_gets_nothing() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    assert list(track(["a", "b"], "letters", console=console)) == ["a", "b"]
    assert out.getvalue() == ""


def test_a_terminal_console_draws_the_bar_with_its_count() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    seen = list(track(range(3), "scenarios", console=console))
    assert seen == [0, 1, 2]
    drawn = out.getvalue()
    assert "scenarios" in drawn and "3/3" in drawn


def test_steps_rename_the_work_under_way_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with progress("reading", total=2, console=console) as steps:
        assert steps.shown
        steps.advance(description="scoring")
        console.print("")  # a print inside the block redraws the bar
        steps.advance()
    assert "reading" in out.getvalue() and "scoring" in out.getvalue()


def test_a_negative_total_is_refused() -> None:
    with pytest.raises(ValueError, match="total"):
        with progress("x", total=-1):
            pass


def test_a_command_prints_the_same_json_on_stdout_with_a_bar_on_stderr(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "run"
    assert main(["sim", "--generate", "fattree:hosts=2,gpus=4,pod=2,spines=1", "--tp", "2", "--pp", "2", "--dp", "2",
                 "--iterations", "24", "--microbatches", "2", "--fault", "gpu:h0001/1,slow=1.6,start=12",
                 "--seed", "3", "--out", str(folder), "--no-labels"]) == 0

    def localize_json(stderr: io.StringIO) -> tuple[str, str]:
        stdout = io.StringIO()
        with monkeypatch.context() as patch, contextlib.redirect_stdout(stdout):
            patch.setattr(sys, "stderr", stderr)
            assert main(["localize", "--records", str(folder), "--json"]) == 0
        return stdout.getvalue(), stderr.getvalue()

    monkeypatch.delenv("FORCE_COLOR", raising=False)
    piped_out, piped_err = localize_json(io.StringIO())
    terminal_out, terminal_err = localize_json(TerminalStderr())
    incidents = json.loads(piped_out)
    assert incidents and piped_err == ""
    assert "localize" in terminal_err  # the bar was drawn on the terminal ...
    # ... and stdout is the same JSON, byte for byte but the run's own timings.
    strip = lambda docs: [{k: v for k, v in d.items() if k != "seconds"} for d in docs]
    assert strip(json.loads(terminal_out)) == strip(incidents)


def test_reach_sets_the_bar_to_a_measure_and_refuses_a_negative_one() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with progress("chaos: starting", total=300, console=console) as steps:
        steps.reach(120, description="chaos: faults come")
    assert "chaos: faults come" in out.getvalue() and "120/300" in out.getvalue()
    with pytest.raises(ValueError, match="completed"):
        with progress("x", total=3) as steps:
            steps.reach(-1)


def test_localize_names_each_file_of_a_many_file_logger_folder_on_its_one_bar(tmp_path, monkeypatch) -> None:
    from sleuth.progress import Steps
    from sleuth.recordio import read_parquet, write_parquet
    from sleuth.records import IterationBatch

    emulated = tmp_path / "sim"
    assert main(["sim", "--generate", "fattree:hosts=2,gpus=4,pod=2,spines=1", "--tp", "2", "--pp", "2", "--dp", "2",
                 "--iterations", "12", "--microbatches", "2", "--seed", "3", "--out", str(emulated), "--no-labels"]) == 0
    logger = tmp_path / "logger"  # the logger's local mode: a file per rank, and iterations/ likewise
    (logger / "iterations").mkdir(parents=True)
    (logger / "job.json").write_bytes((emulated / "job.json").read_bytes())
    records = read_parquet(emulated / "records.parquet")
    iterations = read_parquet(emulated / "iterations.parquet", IterationBatch)
    for rank in range(8):
        write_parquet(records.take(records["rank"] == rank), logger / f"rank-{rank:05d}.parquet")
        write_parquet(iterations.take(iterations["rank"] == rank), logger / "iterations" / f"rank-{rank:05d}.parquet")
    described: list[str] = []
    monkeypatch.setattr(Steps, "describe", lambda self, description: described.append(description))
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["localize", "--records", str(logger), "--json"]) == 0
    reading = [d for d in described if d.startswith("localize: reading records, ")]
    assert reading[0] == "localize: reading records, 1 of 8 files (rank-00000.parquet)"
    assert reading[7] == "localize: reading records, 8 of 8 files (rank-00007.parquet)"
    assert reading[8:] == [f"localize: reading records, {k} of 8 files (iterations/rank-{k - 1:05d}.parquet)"
                           for k in range(1, 9)]


def test_without_a_timer_no_thread_draws_and_each_change_is_drawn_at_once() -> None:
    import threading

    from rich.live import _RefreshThread

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with progress("blocks", total=3, console=console, redraw_on_timer=False) as steps:
        assert not any(isinstance(thread, _RefreshThread) for thread in threading.enumerate())
        steps.advance()
        assert "1/3" in out.getvalue()  # drawn by the advance itself, not by a later tick
        steps.reach(2, description="blocks, second")
        assert "blocks, second" in out.getvalue() and "2/3" in out.getvalue()
    assert list(track(range(2), "pairs", console=console, redraw_on_timer=False)) == [0, 1]

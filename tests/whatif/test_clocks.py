"""Ranks' clocks read from their collectives (``sleuth.whatif.clocks``), on a real gloo job's records
(``tests/localizer/loaded_gloo``) whose ranks' times are moved as hosts' clocks that disagree would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sleuth.cli import main
from sleuth.records_folder import read_records
from sleuth.whatif.clocks import clock_offsets, on_one_clock

RUNS = Path(__file__).parents[1] / "localizer" / "loaded_gloo"
#: Rank 1 a second ahead (a host without NTP), rank 3 20 ms behind (NTP far off): both beyond the
#: few milliseconds a loaded machine's gloo collectives end apart.
SKEW = {1: 1_000_000_000, 3: -20_000_000}


def _skewed(run: str, folder: Path) -> Path:
    """A copy of ``run``'s records folder with each rank of ``SKEW`` on a clock that far ahead."""
    shutil.copytree(RUNS / run, folder)
    for rank, offset in SKEW.items():
        for path in [*folder.glob(f"rank-{rank:05d}-*.parquet"), *folder.glob(f"iterations/rank-{rank:05d}-*.parquet")]:
            table = pq.read_table(path)
            for name in ("t_issue_ns", "t_start_ns", "t_end_ns"):
                if name in table.column_names:
                    column = table.column_names.index(name)
                    table = table.set_column(column, table.schema.field(name),
                                             pc.add(table[name], pa.scalar(offset, table[name].type)))
            pq.write_table(table, path)
    return folder


def test_ranks_whose_clocks_are_off_are_found_from_their_collectives_and_read_on_their_peers_clock(tmp_path):
    records, iterations = read_records(_skewed("ddp-spike", tmp_path / "run"))
    offsets = clock_offsets(records)
    assert set(offsets.offsets_ns) == set(SKEW)
    for rank, offset in SKEW.items():
        assert abs(offsets.offsets_ns[rank] - offset) <= offsets.spread_ns
    aligned, aligned_iterations = on_one_clock(records, iterations, offsets)
    original, original_iterations = read_records(RUNS / "ddp-spike")
    for batch, truth in ((aligned, original), (aligned_iterations, original_iterations)):
        order, truth_order = np.lexsort((batch["t_start_ns"], batch["rank"])), np.lexsort((truth["t_start_ns"], truth["rank"]))
        moved = batch["t_start_ns"][order] - truth["t_start_ns"][truth_order]
        assert np.abs(moved).max() <= offsets.spread_ns
    assert len(aligned) == len(records) and aligned.strings == records.strings


def test_clocks_in_step_are_left_as_they_are():
    for run in ("ddp-spike", "train-seqlen", "fsdp-moderate"):
        records, iterations = read_records(RUNS / run)
        offsets = clock_offsets(records)
        assert not offsets, (run, offsets)
        assert on_one_clock(records, iterations, offsets) == (records, iterations)


def test_localize_reads_a_job_whose_hosts_clocks_disagree_as_it_reads_it_on_one_clock(tmp_path, capsys):
    assert main(["localize", "--records", str(_skewed("ddp-spike", tmp_path / "run")), "--json"]) == 0
    captured = capsys.readouterr()
    found = json.loads(captured.out)
    blamed = {i["suspects"][0]["device"]: i["iterations"] for i in found if i["suspects"]}
    assert list(blamed) == ["gpu:vm/2"], found
    assert set(range(15, 25)) <= set(blamed["gpu:vm/2"]), found
    assert "rank 1's clock runs +" in captured.err and "rank 3's clock runs -" in captured.err, captured.err


def test_attribute_reads_what_the_job_paid_as_on_one_clock(tmp_path, capsys):
    assert main(["attribute", "--records", str(RUNS / "ddp-spike"), "--json"]) == 0
    synced = json.loads(capsys.readouterr().out)
    assert main(["attribute", "--records", str(_skewed("ddp-spike", tmp_path / "run")), "--json"]) == 0
    captured = capsys.readouterr()
    skewed = json.loads(captured.out)
    assert skewed["slowdown"] > 1.5 and abs(skewed["slowdown"] / synced["slowdown"] - 1) < 0.01, (skewed, synced)
    assert "rank 1's clock runs +" in captured.err, captured.err

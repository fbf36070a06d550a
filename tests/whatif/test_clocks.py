"""Hosts' clocks read from their ranks' collectives (``sleuth.whatif.clocks``), on a real gloo job's
records (``tests/localizer/loaded_gloo``) whose ranks 1 and 3 are placed on hosts of their own and
their times moved as those hosts' clocks, disagreeing with the first's, would move them; and on
emulated jobs whose hosts' clocks disagree."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sleuth.cli import main
from sleuth.jobspec import JobSpec
from sleuth.records_folder import read_records
from sleuth.sim import Emulation
from sleuth.sim.suites import suite
from sleuth.localizer import localize
from sleuth.cli.localize import say_clocks
from sleuth.whatif.clocks import ClockOffsets, OnOneClockSource, clock_offsets, on_one_clock, read_on_one_clock

from tests.sim.conftest import emulate
from tests.stream.detection.conftest import emulation

RUNS = Path(__file__).parents[1] / "localizer" / "loaded_gloo"
#: Rank 1 on a host a second ahead (no NTP), rank 3 on one 20 ms behind (NTP far off): both beyond
#: the few milliseconds a loaded machine's gloo collectives end apart.
SKEW = {1: 1_000_000_000, 3: -20_000_000}
HOSTS = {1: "vm-b", 3: "vm-c"}


def _skewed(run: str, folder: Path) -> Path:
    """A copy of ``run``'s records folder with each rank of ``SKEW`` on a host of its own (``HOSTS``)
    whose clock runs that far ahead of the first host's."""
    shutil.copytree(RUNS / run, folder)
    job = json.loads((folder / "job.json").read_text())
    for placement in job["ranks"]:
        if placement["rank"] in HOSTS:
            placement["host"], placement["gpu"] = HOSTS[placement["rank"]], 0
    (folder / "job.json").write_text(json.dumps(job))
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


def test_hosts_whose_clocks_are_off_are_found_from_their_ranks_collectives_and_read_on_their_peers_clock(tmp_path):
    folder = _skewed("ddp-spike", tmp_path / "run")
    records, iterations = read_records(folder)
    offsets = clock_offsets(records, JobSpec.read(folder))
    assert set(offsets.offsets_ns) == set(SKEW)
    assert offsets.hosts_ns == {HOSTS[r]: offsets.offsets_ns[r] for r in SKEW}
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
        spec = JobSpec.read(RUNS / run)
        assert not clock_offsets(records, spec)  # one host, one clock: nothing to tell
        apart = dataclasses.replace(spec, placements=tuple(
            dataclasses.replace(p, host=f"vm-{p.rank}", gpu=0) for p in spec.placements))
        offsets = clock_offsets(records, apart)
        assert not offsets and offsets.across, (run, offsets)
        assert on_one_clock(records, iterations, offsets) == (records, iterations)


def test_localize_reads_a_job_whose_hosts_clocks_disagree_as_it_reads_it_on_one_clock(tmp_path, capsys):
    assert main(["localize", "--records", str(_skewed("ddp-spike", tmp_path / "run")), "--json"]) == 0
    captured = capsys.readouterr()
    found = json.loads(captured.out)
    blamed = {i["suspects"][0]["device"]: i["iterations"] for i in found if i["suspects"]}
    assert list(blamed) == ["gpu:vm/2"], found
    assert set(range(15, 25)) <= set(blamed["gpu:vm/2"]), found
    assert "host vm-b's clock runs +0.99" in captured.err and "host vm-c's clock runs -0.02" in captured.err, captured.err


def test_attribute_reads_what_the_job_paid_as_on_one_clock(tmp_path, capsys):
    synced_folder = _skewed("ddp-spike", tmp_path / "synced")
    for rank in SKEW:  # the same hosts, their clocks put back in step
        for path in [*synced_folder.glob(f"rank-{rank:05d}-*.parquet"), *synced_folder.glob(f"iterations/rank-{rank:05d}-*.parquet")]:
            shutil.copy(RUNS / "ddp-spike" / path.relative_to(synced_folder), path)
    assert main(["attribute", "--records", str(synced_folder), "--json"]) == 0
    synced = json.loads(capsys.readouterr().out)
    assert main(["attribute", "--records", str(_skewed("ddp-spike", tmp_path / "run")), "--json"]) == 0
    captured = capsys.readouterr()
    skewed = json.loads(captured.out)
    assert skewed["slowdown"] > 1.5 and abs(skewed["slowdown"] / synced["slowdown"] - 1) < 0.01, (skewed, synced)
    assert "host vm-b's clock runs +" in captured.err, captured.err


@pytest.mark.parametrize("world", [128, 1024])
def test_every_hosts_clock_is_read_from_its_collectives_and_a_pipelines_stages_through_their_transfers(world):
    # NTP-like offsets on every host (up to 10 ms), one host without NTP (0.7 s); at 1,024 GPUs (pp4)
    # the middle stages share no collective with other stages: their transfers join them.
    [scenario] = [s for s in [*suite("from-start", seed=5)[:1], *suite("scale", seed=5)[:1]] if s.layout.world == world]
    hosts = scenario.topology.hosts[: scenario.layout.n_hosts]
    rng = np.random.default_rng(world)
    clocks = {host: int(rng.uniform(0, 10e6)) for host in hosts} | {hosts[3]: 700_000_000}
    emulation = Emulation(dataclasses.replace(scenario, iterations=8, host_clocks_ns=clocks))
    offsets = clock_offsets(emulation.records(), emulation.job_spec())
    truth = np.array([clocks[h] for h in hosts]) - np.median([clocks[h] for h in hosts])
    found = np.array([offsets.hosts_ns.get(h, 0) for h in hosts])
    assert set(offsets.hosts_ns) == set(hosts)
    assert np.abs(found - truth).max() <= 50_000, np.abs(found - truth).max()  # 50 µs of offsets of ms to 0.7 s


def test_a_source_read_on_one_clock_localizes_a_job_whose_hosts_clocks_disagree_as_one_in_step():
    # The streaming localizer reads an irregular iteration's ranks from ClickHouse through this source.
    synced = emulation("gpu:h0003/1,slow=1.5,start=15", iterations=30)
    skewed = Emulation(dataclasses.replace(synced.scenario, host_clocks_ns={"h0001": 30_000_000, "h0002": 400_000_000}))
    irregular = [i for i in synced.irregular_iterations() if i >= 15][:3]
    offsets = clock_offsets(skewed.records(iterations=[irregular[0]]), skewed.job_spec())
    ahead = {h: offsets.hosts_ns.get(h, 0) - offsets.hosts_ns.get("h0000", 0) for h in ("h0001", "h0002", "h0003")}
    assert abs(ahead["h0001"] - 30_000_000) < 10_000 and abs(ahead["h0002"] - 400_000_000) < 10_000, ahead
    assert abs(ahead["h0003"]) < 10_000, ahead
    found = localize(OnOneClockSource(skewed, offsets), irregular_iterations=irregular, topology=synced.scenario.topology)
    truth = localize(synced, irregular_iterations=irregular, topology=synced.scenario.topology)
    assert [i.suspects[0].device for i in found] == [i.suspects[0].device for i in truth] == ["gpu:h0003/1"]
    assert [i.iterations for i in found] == [i.iterations for i in truth]
    stray = localize(skewed, irregular_iterations=irregular, topology=synced.scenario.topology)
    assert [i.suspects[0].device for i in stray] != ["gpu:h0003/1"]  # what reading the stored times as they are gives


def test_a_pipeline_whose_stages_share_no_collective_across_hosts_is_read_through_its_transfers():
    # tp8 pp4 dp1: each stage one host; only the embedding group spans hosts (the first and last).
    clocks = {"h0001": 3_000_000, "h0002": 250_000_000}
    emulation = emulate(tp=8, pp=4, dp=1, fabric="fattree:hosts=4,gpus=8,pod=2,spines=2", iterations=6,
                        exact=False, host_clocks_ns=clocks)
    offsets = clock_offsets(emulation.records(), emulation.job_spec())
    ahead = {h: offsets.hosts_ns.get(h, 0) - offsets.hosts_ns.get("h0000", 0) for h in ("h0001", "h0002", "h0003")}
    truth = {"h0001": 3_000_000, "h0002": 250_000_000, "h0003": 0}
    assert all(abs(ahead[h] - truth[h]) <= 50_000 for h in truth), ahead


def test_stderr_names_the_hosts_furthest_off_and_counts_the_rest(capsys):
    hosts = {f"h{k:04d}": (k + 1) * 1_000_000 * (-1) ** k for k in range(8)}
    say_clocks(ClockOffsets({k: o for k, o in enumerate(hosts.values())}, 2_000.0, hosts,
                            {h: (k,) for k, h in enumerate(hosts)}, 100))
    lines = capsys.readouterr().err.splitlines()
    assert [line.split("'")[0] for line in lines[:5]] == [f"sleuth: host h{k:04d}" for k in (3, 4, 5, 6, 7)]
    assert "host h0007's clock runs -0.008000 s" in lines[4] and "rank 7 are read" in lines[4]
    assert lines[5] == "sleuth: 3 more hosts' clocks run up to 0.003000 s from their peers'; their ranks' times are read on one clock"


def test_a_clock_that_drifts_is_read_iteration_by_iteration():
    # A host without NTP, 0.3 s ahead and drifting: the emulated job runs 0.17 s, so 1 ms a second
    # moves its clock as a quartz 50 ppm off moves a job's twenty times longer.
    em = emulation("gpu:h0003/1,slow=1.5,start=15", iterations=30)
    records, iterations = em.records(), em.iterations()
    ranks, drift = [4, 5, 6, 7], 1e-3  # h0001's GPUs
    moved = {}
    for name, batch, fields in (("records", records, ("t_issue_ns", "t_start_ns", "t_end_ns")),
                                ("iterations", iterations, ("t_start_ns", "t_end_ns"))):
        on_host = np.isin(batch["rank"], ranks)
        columns = dict(batch.columns)
        for field in fields:
            columns[field] = columns[field] + np.where(on_host, 300_000_000 + (drift * columns[field]).astype(np.int64), 0)
        moved[name] = type(batch)(columns, batch.strings)
    aligned, aligned_iterations, summary = read_on_one_clock(moved["records"], moved["iterations"], em.job_spec())
    ahead = summary.hosts_ns["h0001"] - summary.hosts_ns.get("h0000", 0)
    assert 300_000_000 < ahead < 300_000_000 + drift * em.iteration_times().sum()
    assert summary.wander_ns["h0001"] > 0.5 * drift * em.iteration_times()[1:].sum()
    for batch, truth in ((aligned, records), (aligned_iterations, iterations)):
        apart = batch["t_end_ns"] - truth["t_end_ns"]
        assert np.ptp(apart) <= 2 * drift * em.iteration_times().max(), np.ptp(apart)  # one iteration's drift at most
    constant = clock_offsets(moved["records"], em.job_spec())  # one reading of the whole run
    once, _ = on_one_clock(moved["records"], moved["iterations"], constant)
    assert np.ptp(once["t_end_ns"] - records["t_end_ns"]) > 5 * np.ptp(aligned["t_end_ns"] - records["t_end_ns"])

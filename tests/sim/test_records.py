"""The emulator's records keep the CommOps contract, byte for byte reproducibly, served lazily."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.recordio import read_parquet
from sleuth.records import IterationBatch, OpKind
from sleuth.sim import parse_fault, write_emulation
from sleuth.sim.schedule import Pass, one_f_one_b, walk_order
from sleuth.sources import RecordSource

from tests.sim.conftest import emulate

FABRIC = "fattree:hosts=8,gpus=4,pod=2,spines=2"


def _job(seed: int = 7, **options):
    return emulate(tp=2, pp=2, dp=2, cp=2, ep=2, fabric=FABRIC, exact=False, seed=seed, microbatches=3,
                   iterations=6, faults=[parse_fault("nic:h0003/1,slow=3,profile=spike,rate=0.5")], **options)


def test_same_seed_same_files_byte_for_byte(tmp_path: Path) -> None:
    a = write_emulation(_job(), tmp_path / "a")
    b = write_emulation(_job(), tmp_path / "b")
    for name in a:
        assert a[name].read_bytes() == b[name].read_bytes(), name
    c = write_emulation(_job(seed=8), tmp_path / "c")
    assert a["records"].read_bytes() != c["records"].read_bytes()


def test_files_read_back(tmp_path: Path) -> None:
    emulation = _job()
    files = write_emulation(emulation, tmp_path)
    records = read_parquet(files["records"])
    assert records.equals(emulation.records())
    assert read_parquet(files["iterations"], IterationBatch).equals(emulation.iterations())
    assert JobSpec.read(tmp_path) == emulation.job_spec()
    assert records.problems() == []


def test_collectives_and_p2p_match_across_members() -> None:
    emulation = _job()
    spec = emulation.job_spec()
    records = emulation.records()
    comm = records.decoded("comm")
    p2p = np.isin(records["op"], [OpKind.SEND, OpKind.RECV])
    # Every collective instance (comm, seq) has every member, one op kind, one end time.
    keys = {}
    for c, seq, rank, op, end in zip(comm[~p2p], records["seq"][~p2p], records["rank"][~p2p],
                                     records["op"][~p2p], records["t_end_ns"][~p2p]):
        keys.setdefault((c, int(seq)), []).append((int(rank), int(op), int(end)))
    for (c, _), members in keys.items():
        assert sorted(m[0] for m in members) == sorted(spec.communicator(c).ranks)
        assert len({m[1] for m in members}) == 1 and len({m[2] for m in members}) == 1
    # Every send has exactly one receive with (comm, {rank, peer}, seq), the same end, and bytes.
    sends, recvs = {}, {}
    for c, seq, rank, peer, op, end, nbytes in zip(comm[p2p], records["seq"][p2p], records["rank"][p2p],
                                                   records["peer"][p2p], records["op"][p2p],
                                                   records["t_end_ns"][p2p], records["nbytes"][p2p]):
        if op == OpKind.SEND:
            sends[(c, int(rank), int(peer), int(seq))] = (int(end), int(nbytes))
        else:
            recvs[(c, int(peer), int(rank), int(seq))] = (int(end), int(nbytes))
    assert sends and sends == recvs
    assert {c.split(".")[0] for c in comm[p2p]} == {"pp", "cp"}
    assert {c.split(".")[0] for c in comm[~p2p]} == {"tp", "ep", "dp", "edp", "embd"}
    assert (records["t_start_ns"] >= records["t_issue_ns"]).all()


def test_a_few_ranks_are_served_without_materializing_the_rest() -> None:
    emulation = _job()
    assert isinstance(emulation, RecordSource)
    everything = emulation.records()
    wanted = [3, 17, 30]
    some = emulation.ranks_records(wanted, iterations=[1, 4, 99])
    mask = np.isin(everything["rank"], wanted) & np.isin(everything["iteration"], [1, 4])
    assert some.equals(everything.take(mask))
    flags, base = emulation.abnormal(wanted, iterations=[1, 4])
    all_flags, all_base = emulation.abnormal(range(32))
    assert np.array_equal(flags, all_flags[mask]) and np.array_equal(base, all_base[mask])
    iterations = emulation.iterations(ranks=[3], iterations=[2])
    assert iterations["rank"].tolist() == [3] and iterations["iteration"].tolist() == [2]


def test_the_truth_names_devices_and_labels_iterations() -> None:
    emulation = _job()
    truth = emulation.truth()
    assert truth.faults[0]["device"] == "nic:h0003/1" and truth.faults[0]["kind"] == "nic"
    assert len(truth.iterations) == 6
    active = truth.faults[0]["active_iterations"]
    assert active
    for row in truth.iterations:
        if row.iteration < active[0]:
            assert row.time_ns == row.counterfactual_ns
        if row.iteration in active:
            assert row.time_ns > row.counterfactual_ns and row.faults_active == (0,)
    clean = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3)
    assert clean.counterfactual is clean.timeline
    assert not clean.abnormal(range(8))[0].any()


def test_a_fault_costs_its_time_where_in_force_and_nothing_beside_a_slower_one() -> None:
    lone = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=8, faults=[parse_fault("gpu:h0001/1,slow=1.5,start=4")])
    truth = lone.truth()
    active = [t for t in truth.iterations if t.faults_active]
    [cost] = lone.fault_costs()
    assert cost == pytest.approx(sum(t.time_ns for t in active) / sum(t.counterfactual_ns for t in active))
    assert cost > 1.1
    # Two GPUs of one pipeline stage: the stage waits for the slower, so the faster one costs nothing beside it.
    both = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=8,
                   faults=[parse_fault("gpu:h0001/1,slow=2.0,start=2"), parse_fault("gpu:h0001/0,slow=1.3,start=4")])
    slower, beside = both.fault_costs()
    assert slower > 1.3 and beside == pytest.approx(1.0)
    never = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=4, faults=[parse_fault("gpu:h0001/1,slow=1.5,start=9")])
    assert never.fault_costs() == (1.0,)


def test_one_f_one_b_and_the_walk_order() -> None:
    assert one_f_one_b(0, 4, 6)[:5] == ((Pass.FORWARD, 0), (Pass.FORWARD, 1), (Pass.FORWARD, 2),
                                        (Pass.FORWARD, 3), (Pass.BACKWARD, 0))
    assert one_f_one_b(3, 4, 2) == ((Pass.FORWARD, 0), (Pass.BACKWARD, 0), (Pass.FORWARD, 1), (Pass.BACKWARD, 1))
    order = walk_order(4, 6)
    seen = set()
    for stage, block in order:
        kind, k = one_f_one_b(stage, 4, 6)[block]
        needs = stage - 1 if kind is Pass.FORWARD else stage + 1
        if 0 <= needs < 4:
            assert (needs, kind, k) in seen
        seen.add((stage, kind, k))
    assert len(seen) == 4 * 12


def test_drift_creeps_and_stride_spaces_iterations() -> None:
    emulation = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=20, drift=0.07, stride=1000)
    assert emulation.iteration_ids()[-1] == 19000
    times = emulation.iteration_times()
    assert 1.05 < times[-1] / times[0] < 1.08


def test_comm_drift_lengthens_transfers_not_compute() -> None:
    steady = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=10)
    drifting = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=10, comm_drift=0.2)

    def durations(emulation, iteration: int) -> tuple[np.ndarray, np.ndarray]:
        records = emulation.records()
        at = (records["iteration"] == iteration) & (records["rank"] == 0)
        return records["op"][at], (records["t_end_ns"] - records["t_start_ns"])[at]

    ops, first = durations(drifting, 0)
    _, last = durations(drifting, 9)
    _, steady_last = durations(steady, 9)
    assert np.array_equal(first, durations(steady, 0)[1])  # the drift starts at nothing
    # A collective of ranks that arrive together lasts its transfer time: now 20% longer.
    collective = (ops == int(OpKind.ALL_REDUCE)) & (steady_last > 0)
    assert collective.any()
    ratio = last[collective] / steady_last[collective]
    assert np.all(ratio >= 1.0) and 1.15 < np.median(ratio) < 1.25
    # Compute does not drift: the step is longer by less than its transfers are.
    assert drifting.iteration_times()[-1] < 1.2 * steady.iteration_times()[-1]


def test_drift_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="comm_drift must be in"):
        emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=4, comm_drift=1.5)


def test_routing_tells_readers_what_is_known_and_changes_no_timing() -> None:
    static = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3)
    ecmp = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3, routing="ecmp")
    assert ecmp.scenario.describe()["routing"] == "ecmp" and static.scenario.describe()["routing"] == "static"
    assert np.array_equal(ecmp.records()["t_end_ns"], static.records()["t_end_ns"])
    with pytest.raises(ConfigError, match="routing must be one of ecmp, static"):
        emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3, routing="ospf")


def test_a_hosts_clock_moves_its_ranks_times_and_nothing_else() -> None:
    synced = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3)
    skewed = emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3, host_clocks_ns={"h0001": 7_000_000})
    moved = np.isin(synced.records()["rank"], [4, 5, 6, 7])  # h0001's GPUs
    for name in ("t_issue_ns", "t_start_ns", "t_end_ns"):
        shift = skewed.records()[name].astype(np.int64) - synced.records()[name].astype(np.int64)
        assert set(shift[moved]) == {7_000_000} and set(shift[~moved]) == {0}, name
    rows = np.isin(synced.iterations()["rank"], [4, 5, 6, 7])
    shift = skewed.iterations()["t_end_ns"].astype(np.int64) - synced.iterations()["t_end_ns"].astype(np.int64)
    assert set(shift[rows]) == {7_000_000} and set(shift[~rows]) == {0}
    assert np.array_equal(skewed.iteration_times(), synced.iteration_times())  # the truth is on true time
    assert skewed.scenario.describe()["host_clocks_ns"] == {"h0001": 7_000_000}
    assert pickle.loads(pickle.dumps(skewed.scenario)) == skewed.scenario  # to the emulator's worker processes
    with pytest.raises(ConfigError, match="host_clocks_ns names 'h0007', not one of the job's 2 hosts"):
        emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3, host_clocks_ns={"h0007": 1})
    for offset in (0.5, -1, True):
        with pytest.raises(ConfigError, match=r"host_clocks_ns\['h0000'\] must be an int of nanoseconds, 0 or more"):
            emulate(tp=2, pp=2, dp=2, fabric=FABRIC, iterations=3, host_clocks_ns={"h0000": offset})

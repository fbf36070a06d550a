"""The counterfactual replay against the emulator's own fault-free twin of each run."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.stream.detection import abnormal_mask
from sleuth.stream.detection.counterfactual import EXCESS, CounterfactualReplay
from sleuth.stream.detection.features import OperatorWindows

from .conftest import emulation, f1, small_model

NIC = "nic:h0002/0,slow=4,profile=fluctuation,start=10"
GPU = "gpu:h0003/1,slow=1.5,start=15"


def replayed(em, ranks=range(16)) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """(replayed duration, certain, recorded duration) per record of ``ranks``, one chunk an
    iteration, windows fed every instance (the transfer ratios' reference is the run's own); and
    each chunk's ``Replayed``."""
    records = em.ranks_records(ranks)
    windows, replay = OperatorWindows(), CounterfactualReplay()
    duration, certain, chunks = np.full(len(records), np.nan), np.zeros(len(records), bool), []
    for it in sorted(set(records["iteration"].tolist())):
        at = np.flatnonzero(records["iteration"] == it)
        chunk = windows.features(records.take(at), em.iterations(ranks=ranks, iterations=[it]))
        result = replay.replay(chunk)
        duration[at[chunk.index]], certain[at[chunk.index]] = result.duration, result.certain
        chunks.append(result)
        windows.push(chunk, np.ones(len(chunk.rows), bool))
    return duration, certain, (records["t_end_ns"] - records["t_start_ns"]).astype(np.float64), chunks


def test_a_run_without_faults_replays_as_recorded() -> None:
    # Jitter and garbage-collection pauses are part of the fault-free run: nothing is put back.
    duration, certain, recorded, chunks = replayed(emulation())
    assert certain.all()
    assert np.array_equal(duration, recorded)
    assert sum(c.restored_groups + c.restored_ranks for c in chunks) == 0


@pytest.mark.parametrize("fault, restored", [(NIC, "restored_groups"), (GPU, "restored_ranks")])
def test_replay_recovers_the_fault_free_durations(fault: str, restored: str) -> None:
    em = emulation(fault)
    labels, counterfactual = em.abnormal(range(16))
    duration, certain, recorded, chunks = replayed(em)
    assert certain.all() and sum(getattr(c, restored) for c in chunks) > 0
    # Within 1% of the fault-free twin for nine in ten operators; the rest are a slow GPU's own
    # short operators, whose compute jitter the replay cannot tell from its slowdown.
    error = duration / counterfactual
    assert np.percentile(error, 5) > 0.99 and np.percentile(error, 95) < 1.01
    # The forest alone, on the same records, misses or over-flags some the replay gets right.
    flags = recorded > EXCESS * duration
    assert f1(flags, labels) > 0.99
    assert f1(flags, labels) > f1(abnormal_mask(em.records(), em.iterations(), model=small_model(),
                                                counterfactual=False), labels)


def test_abnormal_mask_takes_the_replay_where_it_holds_whole_groups() -> None:
    em = emulation(NIC)
    labels, _ = em.abnormal(range(16))
    flags = abnormal_mask(em.records(), em.iterations(), model=small_model())
    assert f1(flags, labels) > 0.99


def test_groups_with_members_elsewhere_fall_back_to_the_forest() -> None:
    # Ranks 0-7 are one data-parallel replica: their data-parallel all-reduces' other members
    # are on ranks 8-15, which this chunk does not hold.
    em = emulation(NIC)
    records = em.ranks_records(range(8))
    at = np.flatnonzero(records["iteration"] == 12)
    chunk = OperatorWindows().features(records.take(at), em.iterations(ranks=range(8), iterations=[12]))
    result = CounterfactualReplay().replay(chunk)
    dp = np.char.startswith(records.take(at).decoded("comm")[chunk.index].astype(str), "dp")
    assert dp.any() and not result.certain[dp].any()
    assert result.certain.any()  # what ran before the first all-reduce is the replay's
    fallback = np.arange(len(chunk.index)) % 2 == 0
    flags = CounterfactualReplay().abnormal(chunk, fallback)
    assert np.array_equal(flags[~result.certain], fallback[~result.certain])


@pytest.mark.parametrize("name", ["transfer_cut", "compute_cut", "excess"])
@pytest.mark.parametrize("value", [1.0, 0.5, float("nan"), True, "2"])
def test_cuts_must_lie_above_one(name: str, value) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be a number above 1"):
        CounterfactualReplay(**{name: value})


def test_records_whose_order_contradicts_itself_leave_the_chunk_to_the_forest(caplog) -> None:
    # Rank 0 runs all-reduce A then B, rank 1 runs B then A, each starting the second at 20 ns:
    # only skewed clocks give such records, and their replay never settles (each pass moves A
    # later). With A's transfer put back the replay must stop and speak for nothing.
    from sleuth.records import OpKind
    from sleuth.stream.detection.features import FEATURE_NAMES, Chunk

    X = np.full((4, len(FEATURE_NAMES)), np.nan)
    X[:, FEATURE_NAMES.index("op")] = int(OpKind.ALL_REDUCE)
    X[:, FEATURE_NAMES.index("nbytes")] = 1024
    X[:, FEATURE_NAMES.index("transfer_ratio")] = [3.0, 1.0, 1.0, 3.0]  # group A slowed x3
    chunk = Chunk(X=X, index=np.arange(4), rows=np.arange(4), duration=np.full(4, 10.0),
                  transfer=np.array([-10.0, 10.0, -10.0, 10.0]), iteration=np.zeros(4, np.int64),
                  start=np.array([0, 20, 0, 20]), group=np.array([0, 1, 1, 0]), rank_rows=np.array([0, 0, 1, 1]))
    result = CounterfactualReplay().replay(chunk)
    assert not result.certain.any() and np.array_equal(result.duration, chunk.duration)
    assert "did not settle" in caplog.text
    fallback = np.array([True, False, True, False])
    assert np.array_equal(CounterfactualReplay().abnormal(chunk, fallback), fallback)


def test_a_stream_detector_given_whole_jobs_flags_what_the_replay_finds() -> None:
    from sleuth.stream.detection import StreamDetector
    from sleuth.stream.detection.rank_state import RankState

    em = emulation(NIC)
    labels, _ = em.abnormal(range(16))
    records = em.records()
    flagged = {}
    for counterfactual in (False, True):
        detector = StreamDetector(small_model(), counterfactual=counterfactual, clock=lambda: 0)
        rows = []
        for it in range(40):  # one batch per iteration of the whole job
            rows += detector.update(records.take(np.flatnonzero(records["iteration"] == it)),
                                    em.iterations(iterations=[it]), RankState())
        flagged[counterfactual] = {(r[1], r[3], r[2]) for r in rows}
    truth = set(zip(records["rank"][labels].tolist(), records["seq"][labels].tolist(),
                    records.decoded("comm")[labels].tolist()))

    def score(found: set) -> float:
        return 2 * len(found & truth) / (len(found) + len(truth))

    assert score(flagged[True]) > 0.99 and score(flagged[True]) > score(flagged[False])

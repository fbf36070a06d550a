"""What every importer shares: naming, numbering, iterations (sleuth.importers.assemble)."""

from __future__ import annotations

import pytest

from sleuth.errors import ImportFileError
from sleuth.importers.assemble import assemble
from sleuth.importers.model import SourceComm, SourceOp, SourceRank, Stream
from sleuth.records import OpKind

RANKS = [SourceRank(0, "a", None, "f0"), SourceRank(1, "a", None, "f1"), SourceRank(2, "b", 3, "f2"),
         SourceRank(3, "b", None, "f3")]


def _op(rank, comm, kind, order, *, peer=-1, seq=-1, nbytes=64):
    return SourceOp(rank, comm, kind, peer, nbytes, seq, order, 10 * order, 10 * order + 1, 10 * order + 5)


def test_p2p_operators_are_numbered_per_direction_and_peer_and_collectives_densely() -> None:
    comms = [SourceComm("g", None, (0, 1, 2, 3)), SourceComm("p", "pipeline", (0, 2))]
    ops = [_op(0, "g", OpKind.ALL_REDUCE, 0, seq=(7, 0)), _op(0, "g", OpKind.ALL_REDUCE, 1, seq=(7, 1)),
           _op(0, "p", OpKind.SEND, 2, peer=2), _op(0, "p", OpKind.SEND, 3, peer=2), _op(0, "p", OpKind.RECV, 4, peer=2),
           _op(2, "p", OpKind.RECV, 0, peer=0), _op(2, "g", OpKind.ALL_REDUCE, 1, seq=(7, 1)),
           _op(2, "p", OpKind.RECV, 2, peer=0), _op(2, "p", OpKind.SEND, 3, peer=0)]
    imported = assemble("j", RANKS, comms, ops, {})
    rows = [(r["rank"], r["comm"], r["op"], r["seq"]) for r in imported.records.rows()]
    assert rows == [(0, "world", 1, 0), (0, "world", 1, 1), (0, "pp.0", 7, 0), (0, "pp.0", 7, 1), (0, "pp.0", 8, 0),
                    (2, "pp.0", 8, 0), (2, "world", 1, 1), (2, "pp.0", 8, 1), (2, "pp.0", 7, 0)]
    # no stream: no iterations, and each rank without a GPU index takes its host's lowest free one
    assert set(imported.records["iteration"].tolist()) == {-1}
    assert [(p.host, p.gpu) for p in imported.spec.placements] == [("a", 0), ("a", 1), ("b", 3), ("b", 0)]


def test_iterations_follow_the_operator_period_and_an_aperiodic_rank_gets_minus_one() -> None:
    comms = [SourceComm("g", None, (0, 1, 2, 3))]
    pattern = ["x", "y", "z"]
    ops = [_op(0, "g", OpKind.ALL_REDUCE, k, seq=k) for k in range(12)]
    streams = {0: Stream(0, tuple(pattern[k % 3] for k in range(12))), 1: Stream(0, tuple(range(12)))}
    ops += [_op(1, "g", OpKind.ALL_REDUCE, k, seq=k) for k in range(12)]
    imported = assemble("j", RANKS, comms, ops, streams)
    its = imported.records["iteration"].tolist()
    assert its[:12] == [k // 3 for k in range(12)] and its[12:] == [-1] * 12
    assert "rank 1: its operators repeat with no period, so its iterations are -1" in imported.notes


def test_two_communicators_over_the_same_ranks_and_kind_are_told_apart_by_their_key() -> None:
    comms = [SourceComm("0xa", "TENSOR_MODEL_PARALLEL_GROUP", (0, 1)), SourceComm("0xb", "tensor", (0, 1))]
    ops = [_op(0, "0xa", OpKind.ALL_GATHER, 0, seq=0), _op(0, "0xb", OpKind.ALL_GATHER, 1, seq=0)]
    imported = assemble("j", RANKS, comms, ops, {})
    assert [c.comm for c in imported.spec.communicators] == ["tp.0", "tp.0~0xb"]


def test_a_rank_without_a_file_is_named() -> None:
    with pytest.raises(ImportFileError, match=r"ranks \[1\] have no file"):
        assemble("j", [RANKS[0], RANKS[2]], [], [], {})

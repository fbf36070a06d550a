"""How the gateway keys Kafka messages: each rank's records on one key, a model replica's ranks on the same one."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.layout import ParallelLayout
from sleuth.records import IterationBatch, OpKind, RecordBatch
from sleuth.stream.ingest import kafka_records

#: tensor 2, pipeline 2, data-parallel 2: replica 0 is ranks 0, 1, 4, 5 and replica 2 is ranks 2, 3, 6, 7.
LAYOUT = ParallelLayout(8, 2, 2, 2)


def records(ranks: list[int], job: str = "job-a") -> RecordBatch:
    n = len(ranks)
    start = 10**18 + np.arange(n) * 1000
    return RecordBatch.from_columns(
        job=job, rank=ranks, comm="tp.0", seq=np.arange(n), op=np.full(n, int(OpKind.ALL_REDUCE)),
        peer=np.full(n, -1), nbytes=np.full(n, 1 << 20), iteration=np.zeros(n, np.int64),
        t_issue_ns=start, t_start_ns=start, t_end_ns=start + 500,
    )


def keys_by_rank(messages: list[tuple[bytes, bytes]]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for key, value in messages:
        for rank in set(kafka_records.from_message(value)["rank"].tolist()):
            assert out.setdefault(rank, key) == key  # one key a rank
    return out


def test_the_ranks_of_a_replica_share_a_key_when_the_layout_is_known() -> None:
    batch = records([0, 1, 2, 3, 4, 5, 6, 7] * 3)
    keys = keys_by_rank(kafka_records.to_messages(batch, max_records=2, layout_of={"job-a": LAYOUT}.get))
    assert keys == {0: b"job-a/0", 1: b"job-a/0", 4: b"job-a/0", 5: b"job-a/0",
                    2: b"job-a/2", 3: b"job-a/2", 6: b"job-a/2", 7: b"job-a/2"}
    assert [int(r) for r in LAYOUT.replica_of(np.arange(8))] == [0, 0, 2, 2, 0, 0, 2, 2]


def test_without_a_layout_each_rank_is_its_own_key() -> None:
    batch = records([3, 1, 3, 0])
    assert keys_by_rank(kafka_records.to_messages(batch)) == {0: b"job-a/0", 1: b"job-a/1", 3: b"job-a/3"}
    other_job = {"job-b": LAYOUT}.get  # a layout for another job changes nothing here
    assert keys_by_rank(kafka_records.to_messages(batch, layout_of=other_job)) == {0: b"job-a/0", 1: b"job-a/1", 3: b"job-a/3"}


def test_a_ranks_records_keep_their_order_within_its_key() -> None:
    batch = records([5, 4, 5, 1, 5, 4])
    messages = kafka_records.to_messages(batch, max_records=1, layout_of={"job-a": LAYOUT}.get)
    seqs: dict[int, list[int]] = {}
    for _, value in messages:
        part = kafka_records.from_message(value)
        for rank, seq in zip(part["rank"].tolist(), part["seq"].tolist()):
            seqs.setdefault(rank, []).append(seq)
    assert seqs == {5: [0, 2, 4], 4: [1, 5], 1: [3]}


def test_iterations_travel_on_their_ranks_keys() -> None:
    iterations = IterationBatch.from_columns(job="job-a", rank=[6, 1, 7], iteration=[3, 3, 3],
                                             t_start_ns=[5, 6, 7], t_end_ns=[9, 9, 9])
    messages = kafka_records.iteration_messages(iterations, layout_of={"job-a": LAYOUT}.get)
    keys = {rank: k for k, v in messages for rank in kafka_records.iterations_from_message(v)["rank"].tolist()}
    assert keys == {1: b"job-a/0", 6: b"job-a/2", 7: b"job-a/2"}


def test_a_replica_travels_in_one_message_per_batch() -> None:
    # Kafka's cost is per message: a replica's ranks share one message, not one each.
    batch = records([0, 1, 2, 3, 4, 5, 6, 7] * 3)
    messages = kafka_records.to_messages(batch, layout_of={"job-a": LAYOUT}.get)
    assert sorted(key for key, _ in messages) == [b"job-a/0", b"job-a/2"]
    assert sum(len(kafka_records.from_message(v)) for _, v in messages) == len(batch)


def test_a_hostile_string_table_costs_each_message_only_its_own_strings() -> None:
    # Issue 32: 4,096 ranks and a 500,000-entry string table. Compacting each rank's slice against
    # the whole table took O(ranks x table) (minutes, the gateway's GIL held); now O(records).
    n, table = 4096, 500_000
    strings = ["job-a"] + [f"c{i}" for i in range(table - 1)]
    start = 10**18 + np.arange(n)
    batch = RecordBatch({"job": np.zeros(n, np.uint32), "rank": np.arange(n, dtype=np.uint32),
                         "comm": (np.arange(n, dtype=np.uint32) * 97) % table + 1, "seq": np.zeros(n, np.uint64),
                         "op": np.ones(n, np.uint8), "peer": np.full(n, -1, np.int32),
                         "nbytes": np.ones(n, np.uint64), "iteration": np.zeros(n, np.int64),
                         "t_issue_ns": start, "t_start_ns": start, "t_end_ns": start + 5}, strings)
    messages = kafka_records.to_messages(batch)
    assert len(messages) == n
    back = RecordBatch.concat(kafka_records.from_message(v) for _, v in messages)
    assert all(len(kafka_records.from_message(v).strings) == 2 for _, v in messages[:10])
    assert sorted(back.decoded("comm").tolist()) == sorted(batch.decoded("comm").tolist())


def test_a_message_holds_a_positive_whole_number_of_records() -> None:
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match=f"^max_records must be a positive integer, got {bad}$"):
            kafka_records.to_messages(RecordBatch.empty(), max_records=bad)

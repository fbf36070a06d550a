"""The columnar record type shared by every part."""

import numpy as np
import pytest

from sleuth.errors import RecordError
from sleuth.records import IterationBatch, OpKind, RecordBatch


def make_records(n: int = 4, job: str = "job-a") -> RecordBatch:
    return RecordBatch.from_columns(
        job=job,
        rank=np.arange(n),
        comm=[f"tp.{i % 2}" for i in range(n)],
        seq=np.arange(n) + 10,
        op=[OpKind.ALL_REDUCE] * n,
        peer=[-1] * n,
        nbytes=[1 << 20] * n,
        iteration=[3] * n,
        t_issue_ns=np.arange(n) * 100,
        t_start_ns=np.arange(n) * 100 + 5,
        t_end_ns=np.arange(n) * 100 + 50,
    )


def test_columns_keep_their_dtypes_and_strings_are_coded():
    batch = make_records()
    assert len(batch) == 4
    assert batch["rank"].dtype == np.uint32
    assert batch["t_end_ns"].dtype == np.int64
    assert batch["comm"].dtype == np.uint32
    assert batch.decoded("comm").tolist() == ["tp.0", "tp.1", "tp.0", "tp.1"]
    assert batch.decoded("job").tolist() == ["job-a"] * 4
    assert sorted(batch.strings) == ["job-a", "tp.0", "tp.1"]


def test_string_fields_as_utf8_bytes_are_the_decoded_strings_encoded_and_numbers_stay_numbers():
    batch = make_records(job="jöb-ä")
    assert batch.utf8("job").tolist() == ["jöb-ä".encode()] * 4
    assert batch.utf8("comm").tolist() == [s.encode() for s in batch.decoded("comm")]
    assert batch.utf8("rank") is batch["rank"]
    assert batch.take(np.zeros(4, bool)).utf8("job").tolist() == []


def test_columns_are_read_only_and_the_callers_array_is_not():
    ranks = np.arange(4, dtype=np.uint32)
    batch = RecordBatch.from_columns(**(_plain_columns(4) | {"rank": ranks}))
    with pytest.raises(ValueError):
        batch["rank"][0] = 7
    ranks[0] = 7  # still writable for its owner


def _plain_columns(n: int) -> dict:
    return {name: [0] * n for name in ("seq", "peer", "nbytes", "iteration", "t_issue_ns", "t_start_ns", "t_end_ns")} | {
        "op": [1] * n,
        "comm": ["tp.0"] * n,
        "job": "j",
    }


def test_concat_merges_string_tables():
    a, b = make_records(job="job-a"), make_records(job="job-b")
    both = RecordBatch.concat([a, b])
    assert len(both) == 8
    assert both.decoded("job").tolist() == ["job-a"] * 4 + ["job-b"] * 4
    assert both.take(slice(4, 8)).equals(b)
    assert not both.take(slice(0, 4)).equals(b)


def test_take_and_compact_drop_unused_strings():
    batch = RecordBatch.concat([make_records(job="job-a"), make_records(job="job-b")])
    only_b = batch.take(batch.decoded("job") == "job-b").compact()
    assert "job-a" not in only_b.strings
    assert only_b.equals(make_records(job="job-b"))


def test_unequal_columns_are_refused_naming_the_column():
    columns = dict(make_records().columns)
    columns["seq"] = columns["seq"][:3]
    with pytest.raises(RecordError, match="'seq' has 3 values"):
        RecordBatch(columns, make_records().strings)


def test_values_that_do_not_fit_are_refused_naming_the_column():
    with pytest.raises(RecordError, match=r"'rank': value -1 does not fit uint32"):
        RecordBatch.from_columns(**(_plain_columns(2) | {"rank": [0, -1]}))
    with pytest.raises(RecordError, match=r"'nbytes' holds float 1.5"):
        RecordBatch.from_columns(**(_plain_columns(2) | {"rank": [0, 1], "nbytes": [1.5, 2.0]}))
    with pytest.raises(RecordError, match=r"'comm' holds int 3"):
        RecordBatch.from_columns(**(_plain_columns(2) | {"rank": [0, 1], "comm": ["tp.0", 3]}))


def test_string_code_outside_the_table_is_refused():
    columns = dict(make_records().columns)
    columns["comm"] = np.full(4, 99, dtype=np.uint32)
    with pytest.raises(RecordError, match="code 99 is outside the string table"):
        RecordBatch(columns, make_records().strings)


def test_missing_and_unknown_fields_are_named():
    with pytest.raises(RecordError, match="'t_end_ns' is missing"):
        RecordBatch.from_columns(**{k: v for k, v in (_plain_columns(1) | {"rank": [0]}).items() if k != "t_end_ns"})
    with pytest.raises(RecordError, match=r"unknown fields \['color'\]"):
        RecordBatch.from_columns(**(_plain_columns(1) | {"rank": [0], "color": [1]}))


def test_problems_name_each_broken_rule():
    assert make_records().problems() == []
    bad = RecordBatch.from_columns(
        **(
            _plain_columns(3)
            | {
                "rank": [0, 1, 2],
                "op": [1, 200, int(OpKind.SEND)],
                "peer": [-1, -5, -1],
                "t_start_ns": [10, 10, 10],
                "t_end_ns": [20, 5, 20],
            }
        )
    )
    problems = "\n".join(bad.problems())
    assert "op: unknown op kind in 1 records (first at index 1: 200)" in problems
    assert "peer: peer below -1" in problems
    assert "t_end_ns: ends before it starts" in problems
    assert "send/recv without a peer" in problems


def test_op_kind_labels_and_parse():
    assert OpKind.REDUCE_SCATTER.label == "reduce_scatter"
    assert OpKind.parse("all_to_all") is OpKind.ALL_TO_ALL
    assert OpKind.SEND.is_p2p and not OpKind.BROADCAST.is_p2p
    with pytest.raises(RecordError, match="unknown op kind 'allreduce'"):
        OpKind.parse("allreduce")


def test_iteration_batch_and_structured_view():
    its = IterationBatch.from_columns(job="j", rank=[0, 1], iteration=[5, 5], t_start_ns=[0, 1], t_end_ns=[9, 10])
    rows = its.to_structured()
    assert rows["job"].tolist() == ["j", "j"]
    assert rows["t_end_ns"].tolist() == [9, 10]
    assert IterationBatch.empty().equals(IterationBatch.concat([]))
    with pytest.raises(RecordError, match="cannot concatenate a RecordBatch into a IterationBatch"):
        IterationBatch.concat([make_records()])


def test_one_per_identity_drops_repeats_and_orders_by_identity_with_strings_by_their_text():
    a, b = make_records(job="job-b"), make_records(job="job-a")
    twice = RecordBatch.concat([a, b, a.take(np.array([2, 0]))])  # job-b's first and third records again
    once = twice.one_per_identity()
    assert len(once) == 8
    assert once.decoded("job").tolist() == ["job-a"] * 4 + ["job-b"] * 4
    assert once.take(slice(4, 8)).equals(a)
    assert once["rank"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_one_per_identity_keeps_records_that_differ_in_any_part_of_their_identity():
    columns = {"job": "j", "rank": 0, "comm": "tp.0", "seq": 1, "op": int(OpKind.ALL_REDUCE), "peer": -1, "nbytes": 8,
               "iteration": 3, "t_issue_ns": 0, "t_start_ns": 5, "t_end_ns": 50}
    changed = [{}, {"seq": 99}, {"op": int(OpKind.ALL_GATHER)}, {"peer": 5}, {"iteration": 4}, {"comm": "dp.0"},
               {"rank": 7}, {"job": "k"}]
    variants = [RecordBatch.from_columns(**{name: value if name == "job" else [value]
                                            for name, value in (columns | change).items()}) for change in changed]
    assert len(RecordBatch.concat(variants).one_per_identity()) == len(changed)

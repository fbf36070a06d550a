"""Record batches to and from Parquet and JSON lines, losslessly."""

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sleuth import recordio
from sleuth.errors import RecordError
from sleuth.records import IterationBatch, RecordBatch
from sleuth.records_folder import read_records

from .record_factory import random_records


def test_parquet_round_trip_is_exact(tmp_path):
    batch = random_records(20_000, seed=1)
    path = recordio.write_parquet(batch, tmp_path / "r.parquet")
    assert recordio.read_parquet(path).equals(batch)


def test_parquet_names_are_readable_without_sleuth(tmp_path):
    batch = random_records(100, seed=2)
    path = recordio.write_parquet(batch, tmp_path / "r.parquet")
    table = pq.read_table(path)
    assert table.column("comm").to_pylist() == batch.decoded("comm").tolist()
    assert table.schema.field("t_start_ns").type == pa.int64()


def test_folder_of_parquet_files_reads_in_name_order(tmp_path):
    a, b = random_records(10, seed=3), random_records(10, seed=4, job="other")
    recordio.write_parquet(b, tmp_path / "rank-0001.parquet")
    recordio.write_parquet(a, tmp_path / "rank-0000.parquet")
    assert recordio.read_parquet(tmp_path).equals(RecordBatch.concat([a, b]))


def test_plain_string_columns_written_by_other_tools_are_accepted(tmp_path):
    batch = random_records(50, seed=5)
    table = recordio.to_arrow(batch)
    plain = table.set_column(2, "comm", table.column("comm").cast(pa.string()))
    pq.write_table(plain, tmp_path / "plain.parquet")
    assert recordio.read_parquet(tmp_path / "plain.parquet").equals(batch)


def test_parquet_errors_name_the_file_and_column(tmp_path):
    table = recordio.to_arrow(random_records(5, seed=6)).drop_columns(["seq"])
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(RecordError, match=r"bad.parquet: .*lacks columns \['seq'\]"):
        recordio.read_parquet(tmp_path / "bad.parquet")
    with pytest.raises(RecordError, match="holds records, not iterations"):
        recordio.read_parquet(recordio.write_parquet(random_records(5, seed=6), tmp_path / "r.parquet"), IterationBatch)
    with pytest.raises(RecordError, match="no .parquet files"):
        recordio.read_parquet(tmp_path / "empty-dir" if (tmp_path / "empty-dir").mkdir() is None else None)


def test_jsonl_round_trip_is_exact_including_unknown_op_numbers():
    batch = random_records(2_000, seed=7)
    columns = dict(batch.columns)
    columns["op"] = columns["op"].copy()
    columns["op"][0] = 250  # outside OpKind: still carried, as a number
    batch = RecordBatch(columns, batch.strings)
    out = io.StringIO()
    assert recordio.write_jsonl(batch, out) == 2_000
    first = out.getvalue().splitlines()[0]
    assert '"op":250' in first
    out.seek(0)
    assert recordio.read_jsonl(out).equals(batch)


def test_jsonl_uses_op_labels():
    out = io.StringIO()
    recordio.write_jsonl(random_records(1, seed=8), out)
    assert '"op":"' in out.getvalue()


def test_jsonl_errors_name_line_and_field():
    good = io.StringIO()
    recordio.write_jsonl(random_records(2, seed=9), good)
    first, second = good.getvalue().splitlines()
    with pytest.raises(RecordError, match="line 2: not JSON"):
        recordio.read_jsonl(io.StringIO(first + "\n{oops\n"))
    with pytest.raises(RecordError, match=r"line 2: field 'rank' must be an integer, got '3'"):
        recordio.read_jsonl(io.StringIO(first + "\n" + second.replace('"rank":', '"rank":"3","x":') + "\n"))
    with pytest.raises(RecordError, match=r"line 1: unknown op kind 'allreduce'"):
        recordio.read_jsonl(io.StringIO('{"job":"j","rank":0,"comm":"c","seq":0,"op":"allreduce","peer":-1,'
                                        '"nbytes":0,"iteration":0,"t_issue_ns":0,"t_start_ns":0,"t_end_ns":0}\n'))


def test_iteration_batches_round_trip(tmp_path):
    its = IterationBatch.from_columns(
        job=["a", "b", "a"], rank=[0, 1, 2], iteration=[1, 1, 2],
        t_start_ns=np.array([1, 2, 3]) * 10**18, t_end_ns=np.array([2, 3, 4]) * 10**18,
    )
    path = recordio.write_parquet(its, tmp_path / "it.parquet")
    assert recordio.read_parquet(path, IterationBatch).equals(its)
    out = io.StringIO()
    recordio.write_jsonl(its, out)
    out.seek(0)
    assert recordio.read_jsonl(out, IterationBatch).equals(its)


def test_reading_a_folder_tells_of_each_file_read_in_name_order(tmp_path):
    for k in (1, 0, 2):
        recordio.write_parquet(random_records(5, seed=10 + k), tmp_path / f"rank-000{k}.parquet")
    heard = []
    recordio.read_parquet(tmp_path, on_file=lambda file, done, total: heard.append((file.name, done, total)))
    assert heard == [("rank-0000.parquet", 1, 3), ("rank-0001.parquet", 2, 3), ("rank-0002.parquet", 3, 3)]


def test_a_records_folder_holding_a_batch_twice_reads_each_record_once(tmp_path):
    batch = random_records(50, seed=3)
    recordio.write_parquet(batch, tmp_path / "rank-0000.parquet")
    recordio.write_parquet(batch.take(np.arange(10, 30)), tmp_path / "rank-0000-resent.parquet")
    records, _ = read_records(tmp_path)
    assert records.equals(batch.one_per_identity())
    assert len(records) == len(batch.one_per_identity()) > 0

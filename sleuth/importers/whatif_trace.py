"""The What-if paper's released traces → sleuth records (``sleuth import whatif-trace``).

What the format is (the artifact of "Understanding Stragglers in Large Model Training Using
What-if Analysis", ByteDance-Seed/StragglerAnalysis, its readme and ``analyzer/metatypes.py``):
one Parquet file per job, a row per operation of a Megatron-LM job, one traced worker per
(data-parallel rank, pipeline stage), with ``dp_rank``, ``stage``, ``rank`` (the worker's global
rank), ``step``, ``optype``, ``start_ts``, ``duration`` and ``seq_id`` (the operation's place among
its type's in the worker's step); ``mc``, ``gmc`` and ``mb_id`` (model chunk, global chunk,
micro-batch) are not needed here. A ``meta-*.yaml`` beside it gives the job's sizes
(``dp_size``, ``pp_size``, ``tp_size``, ``dsp_size``, ``vpp_size``, ``world_size``).

Which rows become which records (the paper's dependency model, ``analyzer/dependency_model.py``):

* computation (``forward-compute``, ``backward-compute``, ``optimizer``, ``gc``) is no record: it is
  the time between a worker's operators, as the logger sees it;
* ``grads-reduce-scatter``, ``params-all-gather`` and ``separate-grads-all-reduce`` are collectives of
  the stage's data-parallel group (reduce-scatter, all-gather, all-reduce);
* ``embedding-grads-all-reduce`` joins the first and the last stage of one data-parallel rank;
* ``optimizer-clip-main-grad`` (the gradient norm) joins every worker;
* ``layernorm-grads-all-reduce`` runs within the worker's tensor-parallel group, whose other ranks
  the trace does not hold: it stays in the worker's time between operators, as computation does;
* ``forward-send`` / ``-recv`` and ``backward-send`` / ``-recv`` are the pipeline's pairs: a forward
  send goes to the next stage, a backward send to the one before. The profiler also wrote sends
  and receives that were never launched: those at the pipeline's ends (a first stage's forward
  receive, a last stage's forward send, and the backward ones alike), a receive that starts after
  the worker's last computation of its direction started, and a send that ends before its first
  computation of that direction ended (the paper's rule, with its 50 µs allowance for clocks).
  They are left out (counted in a note). The rest pair in order, step by step; a step whose
  sends and receives between two workers still disagree in number loses those pairs (a note).

Ranks: the workers, numbered stage-major (stage × data-parallel ranks + data-parallel index), so
that the stage's data-parallel group is contiguous as Megatron lays them out. Each stands for its
tensor-parallel group. Hosts and GPUs come from the trace's global ``rank``: host
``h{rank // gpus_per_host}``, GPU ``rank % gpus_per_host`` (assumption: ranks fill hosts in order).

Times: ``start_ts`` and ``duration`` in seconds (``time_unit``), the start of a record its issue;
floating-point times are exact to twice the spacing of doubles at their largest value (the job
spec's ``time_resolution_ns``; 477 ns for seconds since 1970), and an operator that ends within it
after its worker's next one starts ended back to back with it.
Iterations: the trace's own steps, kept as numbered (sampled steps stay apart). Volumes are not in
the trace: every record's ``nbytes`` is 0, so the transfers of one type on one kind of group are
one volume's peers.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from sleuth.errors import ConfigError, ImportFileError
from sleuth.importers.assemble import assemble
from sleuth.importers.model import Imported, SourceComm, SourceOp, SourceRank
from sleuth.records import OpKind
from sleuth.topology.ids import host_name
from sleuth.validation import positive_int
from sleuth.whatif.keys import dense_ids, first_of_each

__all__ = ["TIME_UNITS", "read_whatif_trace"]

#: Seconds of one unit of ``start_ts`` and ``duration``.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

_COMPUTE = ("forward-compute", "backward-compute", "optimizer", "gc")
_DATA_PARALLEL = {"grads-reduce-scatter": OpKind.REDUCE_SCATTER, "params-all-gather": OpKind.ALL_GATHER,
                  "separate-grads-all-reduce": OpKind.ALL_REDUCE}
_EMBEDDING, _CLIP, _TENSOR_PARALLEL = "embedding-grads-all-reduce", "optimizer-clip-main-grad", "layernorm-grads-all-reduce"
#: A pipeline operation: its kind, the stage of its peer (+1 the next), its direction.
_PIPELINE = {"forward-send": (OpKind.SEND, 1, "forward"), "forward-recv": (OpKind.RECV, -1, "forward"),
             "backward-send": (OpKind.SEND, -1, "backward"), "backward-recv": (OpKind.RECV, 1, "backward")}
_KNOWN = (*_COMPUTE, *_DATA_PARALLEL, _EMBEDDING, _CLIP, _TENSOR_PARALLEL, *_PIPELINE)
_COLUMNS = ("dp_rank", "stage", "step", "optype", "start_ts", "duration", "seq_id")
#: How far the paper's rule lets a send or receive lie past a computation's bounds (clocks), in seconds.
_CLOCK_ALLOWANCE_S = 5e-5


def read_whatif_trace(trace: str | Path, *, meta: str | Path | None = None, job: str | None = None,
                      gpus_per_host: int = 8, time_unit: str = "s") -> Imported:
    """The records and job spec of one trace (``meta``: its ``meta-*.yaml``, checked against the
    trace; ``job``: default the meta's ``trial_name``, else the file's name)."""
    path = Path(trace)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    positive_int("--gpus-per-host", gpus_per_host)
    if time_unit not in TIME_UNITS:
        raise ConfigError(f"--time-unit {time_unit!r}: one of {', '.join(TIME_UNITS)}")
    sizes = _meta(Path(meta)) if meta is not None else {}
    rows = _rows(path)
    notes: list[str] = []
    unknown = sorted(set(rows["optype"].tolist()) - set(_KNOWN))
    if unknown:
        raise ImportFileError(f"{path}: column 'optype' holds {unknown}, which the format does not define "
                              f"(known: {', '.join(_KNOWN)})")
    if int(sizes.get("vpp_size", 1)) > 1 or ("mc" in rows and np.any(rows["mc"] > 0)):
        raise ImportFileError(f"{path}: an interleaved pipeline (vpp_size > 1, model chunks in 'mc'): its sends "
                              "and receives wrap around the stages, which this import does not pair")
    dp_ranks, dp_index = np.unique(rows["dp_rank"], return_inverse=True)
    stages, stage = np.unique(rows["stage"], return_inverse=True)
    n_dp, n_pp = len(dp_ranks), len(stages)
    if "pp_size" in sizes and int(sizes["pp_size"]) != n_pp:
        raise ImportFileError(f"{path}: {n_pp} pipeline stages in column 'stage', {meta} says pp_size {sizes['pp_size']}")
    worker = (stage * n_dp + dp_index).astype(np.int64)
    world = n_dp * n_pp
    absent = sorted(set(range(world)) - set(worker.tolist()))
    if absent:
        raise ImportFileError(f"{path}: no rows for (dp_rank, stage) {[(int(dp_ranks[w % n_dp]), int(stages[w // n_dp])) for w in absent]}"
                              f": every worker of the {n_dp} x {n_pp} grid must be traced")
    scale = TIME_UNITS[time_unit] * 1e9
    start = np.rint(rows["start_ts"] * scale).astype(np.int64)
    end = np.rint((rows["start_ts"] + rows["duration"]) * scale).astype(np.int64)
    ranks = _ranks(rows, worker, world, gpus_per_host, path)
    comms = _communicators(n_dp, n_pp)
    keep = _launched(rows, worker, stage, start, end, n_pp, notes)
    # The float times' resolution: the spacing of doubles at the trace's largest time, at least a nanosecond.
    resolution_ns = max(1, int(np.ceil(2 * np.spacing(float(np.max(rows["start_ts"] + rows["duration"]))) * scale)))
    ops = _operators(rows, worker, stage, dp_index, start, end, keep, n_dp, n_pp, resolution_ns, notes)
    left_in_gaps = int(np.isin(rows["optype"], [_TENSOR_PARALLEL]).sum())
    if left_in_gaps:
        notes.append(f"{left_in_gaps} {_TENSOR_PARALLEL} operations run within tensor-parallel groups the trace "
                     "holds one rank of: their time counts as the worker's computation")
    replicas = int(sizes.get("dp_size", n_dp)) * int(sizes.get("dsp_size", 1))
    if replicas != n_dp:
        notes.append(f"the trace holds {n_dp} data-parallel ranks, the meta's dp_size x dsp_size is {replicas}")
    if sizes and int(sizes.get("tp_size", 1)) > 1:
        notes.append(f"each worker stands for its tensor-parallel group of {sizes['tp_size']} (one rank of it traced)")
    notes.append("the trace gives no volumes: every record's nbytes is 0")
    return assemble(job or str(sizes.get("trial_name") or path.stem), ranks, comms, ops, {}, notes=notes,
                    time_resolution_ns=resolution_ns)


def _meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"--meta {path}: no such file")
    try:
        sizes = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ImportFileError(f"{path}: not YAML ({error})") from None
    if not isinstance(sizes, dict):
        raise ImportFileError(f"{path}: expected a mapping of the job's sizes, got {type(sizes).__name__}")
    for name in ("dp_size", "pp_size", "tp_size", "dsp_size", "vpp_size", "world_size"):
        value = sizes.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ImportFileError(f"{path}: {name} is {value!r}, expected a positive integer")
    return sizes


def _rows(path: Path) -> dict[str, np.ndarray]:
    """The trace's columns as arrays, checked."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as error:  # pyarrow raises several kinds for a file that is not Parquet
        raise ImportFileError(f"{path}: not a Parquet file ({error})") from None
    missing = [c for c in _COLUMNS if c not in table.column_names]
    if missing:
        raise ImportFileError(f"{path}: no column {missing} (a What-if trace has {', '.join(_COLUMNS)})")
    rows: dict[str, np.ndarray] = {}
    for name in (*_COLUMNS, "rank", "mc"):
        if name not in table.column_names:
            continue
        column = table.column(name)
        if column.null_count:
            raise ImportFileError(f"{path}: column {name!r} has {column.null_count} empty values")
        values = np.asarray(column.to_pylist() if name == "optype" else column.to_numpy())
        if name != "optype" and values.dtype.kind not in ("iuf" if name in ("start_ts", "duration") else "iu"):
            raise ImportFileError(f"{path}: column {name!r} holds {values.dtype} values, expected numbers")
        rows[name] = values.astype(str) if name == "optype" else values
    if not len(rows["step"]):
        raise ImportFileError(f"{path}: no rows")
    for name in ("duration", "start_ts"):
        bad = ~np.isfinite(rows[name]) | (rows[name] < 0)
        if bad.any():
            raise ImportFileError(f"{path}: column {name!r} row {int(np.flatnonzero(bad)[0])} is "
                                  f"{rows[name][bad][0]!r}, expected a finite value >= 0")
    return rows


def _ranks(rows: dict[str, np.ndarray], worker: np.ndarray, world: int, gpus_per_host: int, path: Path) -> list[SourceRank]:
    """Each worker's place: its global rank's host and GPU (its worker number without a ``rank`` column)."""
    global_rank = np.arange(world)
    if "rank" in rows:
        rank = rows["rank"].astype(np.int64)
        pairs = first_of_each(worker, rank)
        named = np.bincount(worker[pairs], minlength=world)
        if (named != 1).any():
            w = int(np.flatnonzero(named != 1)[0])
            raise ImportFileError(f"{path}: worker {w} (one dp_rank and stage) has global ranks "
                                  f"{sorted(set(rank[pairs][worker[pairs] == w].tolist()))}")
        global_rank[worker[pairs]] = rank[pairs]
        if len(np.unique(global_rank)) != world:
            raise ImportFileError(f"{path}: two (dp_rank, stage) workers share a global rank")
    return [SourceRank(w, host_name(int(g) // gpus_per_host), int(g) % gpus_per_host, str(path))
            for w, g in enumerate(global_rank)]


def _communicators(n_dp: int, n_pp: int) -> list[SourceComm]:
    comms = [SourceComm("world", None, tuple(range(n_dp * n_pp)))]
    if n_dp > 1:
        comms += [SourceComm(f"dp{s}", "DATA_PARALLEL_GROUP", tuple(s * n_dp + d for d in range(n_dp))) for s in range(n_pp)]
    if n_pp > 1:
        comms += [SourceComm(f"pp{d}", "PIPELINE_MODEL_PARALLEL_GROUP", tuple(s * n_dp + d for s in range(n_pp)))
                  for d in range(n_dp)]
        comms += [SourceComm(f"embd{d}", "EMBEDDING_GROUP", (d, (n_pp - 1) * n_dp + d)) for d in range(n_dp)]
    return comms


def _launched(rows: dict[str, np.ndarray], worker: np.ndarray, stage: np.ndarray, start: np.ndarray,
              end: np.ndarray, n_pp: int, notes: list[str]) -> np.ndarray:
    """Which rows are operations that ran: the pipeline's never-launched sends and receives left out."""
    optype = rows["optype"]
    keep = np.ones(len(optype), bool)
    cell = dense_ids(worker, rows["step"].astype(np.int64))
    allowance = int(_CLOCK_ALLOWANCE_S * 1e9)
    dropped = 0
    for name, (kind, toward, direction) in _PIPELINE.items():
        mine = optype == name
        if not mine.any():
            continue
        # No stage beyond the pipeline's ends to send to or receive from.
        at_end = (stage + toward < 0) | (stage + toward >= n_pp)
        computes = optype == f"{direction}-compute"
        if kind is OpKind.RECV:
            last_start = np.full(cell.max() + 1, np.iinfo(np.int64).min)
            np.maximum.at(last_start, cell[computes], start[computes])
            late = start > last_start[cell] + allowance
        else:
            first_end = np.full(cell.max() + 1, np.iinfo(np.int64).max)
            np.minimum.at(first_end, cell[computes], end[computes])
            late = end < first_end[cell] - allowance
        drop = mine & (at_end | late)
        dropped += int(drop.sum())
        keep &= ~drop
    if dropped:
        notes.append(f"{dropped} pipeline sends and receives that were never launched (the trace's no-ops) are left out")
    return keep


def _operators(rows: dict[str, np.ndarray], worker: np.ndarray, stage: np.ndarray, dp_index: np.ndarray,
               start: np.ndarray, end: np.ndarray, keep: np.ndarray, n_dp: int, n_pp: int, resolution_ns: int,
               notes: list[str]) -> list[SourceOp]:
    optype, step, seq_id = rows["optype"], rows["step"].astype(np.int64), rows["seq_id"].astype(np.int64)
    comm = np.full(len(optype), "", dtype=object)
    kind = np.zeros(len(optype), np.int64)
    peer = np.full(len(optype), -1, np.int64)
    for name, op in _DATA_PARALLEL.items():
        at = (optype == name) & (n_dp > 1)
        comm[at] = [f"dp{s}" for s in stage[at]]
        kind[at] = int(op)
    at = (optype == _EMBEDDING) & (n_pp > 1) & ((stage == 0) | (stage == n_pp - 1))
    comm[at] = [f"embd{d}" for d in dp_index[at]]
    kind[at] = int(OpKind.ALL_REDUCE)
    at = (optype == _CLIP) & (n_dp * n_pp > 1)
    comm[at] = "world"
    kind[at] = int(OpKind.ALL_REDUCE)
    for name, (op, toward, _) in _PIPELINE.items():
        at = (optype == name) & keep
        comm[at] = [f"pp{d}" for d in dp_index[at]]
        kind[at] = int(op)
        peer[at] = worker[at] + toward * n_dp
    kept = np.flatnonzero((kind > 0) & keep)
    kept = kept[_paired(kept, kind, worker, peer, step, notes)]
    # A collective's key on its communicator, equal on every member: its step, then its members'
    # earliest start, so that a communicator's collectives are numbered in the order they ran.
    collective = kept[peer[kept] < 0]
    group = dense_ids(_codes(comm[collective].astype(str)), step[collective], _codes(optype[collective]), seq_id[collective])
    earliest = np.full(group.max() + 1 if len(group) else 0, np.iinfo(np.int64).max)
    np.minimum.at(earliest, group, start[collective])
    key: dict[int, tuple] = {int(row): (int(step[row]), int(earliest[g]), str(optype[row]), int(seq_id[row]))
                             for row, g in zip(collective, group)}
    order = kept[np.lexsort((start[kept], step[kept], worker[kept]))]
    end = _back_to_back(order, worker, start, end, resolution_ns)
    position = Counter[int]()
    ops = []
    for row in order.tolist():
        w = int(worker[row])
        ops.append(SourceOp(w, str(comm[row]), OpKind(int(kind[row])), int(peer[row]), 0, key.get(row, -1),
                            position[w], int(start[row]), int(start[row]), int(end[row]), int(step[row])))
        position[w] += 1
    return ops


def _back_to_back(order: np.ndarray, worker: np.ndarray, start: np.ndarray, end: np.ndarray,
                  resolution_ns: int) -> np.ndarray:
    """``end``, where an operator (rows ``order``, each worker's in start order) ends within the
    times' resolution after the next one of its worker starts, set to that start: a start plus a
    duration in floating point lands a rounding off the next start it met, and an operator that
    outlasts its successor's start reads as one that did not hold its worker."""
    end = end.copy()
    this, after = order[:-1], order[1:]
    touching = (worker[this] == worker[after]) & (end[this] > start[after]) & (end[this] - start[after] <= resolution_ns)
    end[this[touching]] = start[after[touching]]
    return end


def _codes(labels: np.ndarray) -> np.ndarray:
    """Each string's dense id, for ``dense_ids``."""
    return np.unique(labels, return_inverse=True)[1].reshape(-1)


def _paired(rows: np.ndarray, kind: np.ndarray, worker: np.ndarray, peer: np.ndarray, step: np.ndarray,
            notes: list[str]) -> np.ndarray:
    """Which of ``rows`` to keep: every collective, and the sends and receives of the (step, sender,
    receiver) channels whose sends and receives agree in number (pairs are matched in order)."""
    p2p = peer[rows] >= 0
    sends = kind[rows] == int(OpKind.SEND)
    sender = np.where(sends, worker[rows], peer[rows])
    receiver = np.where(sends, peer[rows], worker[rows])
    if not p2p.any():
        return np.ones(len(rows), bool)
    of = dense_ids(step[rows][p2p], sender[p2p], receiver[p2p])
    balance = np.bincount(of, weights=np.where(sends[p2p], 1, -1))
    agree = balance[of] == 0
    if not agree.all():
        notes.append(f"{int((~agree).sum())} pipeline sends and receives in {int((balance != 0).sum())} step-channels "
                     "whose counts disagree are left out")
    keep = np.ones(len(rows), bool)
    keep[np.flatnonzero(p2p)[~agree]] = False
    return keep

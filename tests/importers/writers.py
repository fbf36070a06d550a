"""Writers of the foreign formats, following the tools' own sources (not sleuth's readers).

* :func:`write_inspector`: NVIDIA/nccl ``ext-profiler/inspector`` JSON output, verbose mode:
  ``inspectorCommInfoHeader`` (``id`` = ``"0x%lx"`` of the comm hash, ``comm_name``, ``rank``,
  ``n_ranks``, ``nnodes``), ``inspectorCommInfoMetaHeader`` (format ``v4.0``/``v4.4``,
  ``git_rev``, ``rec_mechanism``, ``dump_timestamp_us``, ``hostname``, ``pid``),
  ``inspectorCompletedColl``/``P2p`` and their ``...Verbose`` event traces; times are
  ``inspectorGetTime()`` (``gettimeofday``, µs); ``p2p_sn`` is the per-communicator counter
  the plugin bumps at each P2P start; files are ``<hostname>-pid<pid>.log``; each dump writes,
  per communicator, its completed collectives, then its P2P operators. Style ``"v4.0"`` repeats
  header and metadata on every record; ``"v4.1"`` too, with the kernel channels as ``KernelCh``
  entries of an ``events`` list (``inspectorCompletedOpChildEventList``); ``"v4.4"`` writes
  header and metadata once per communicator and dump in a ``dump_stats`` record that the
  following records inherit.
* :func:`write_flight_recorder`: torch/csrc/distributed/c10d ``FlightRecorder::dump_dict`` (and
  ``dump_json``): ``version``, ``pg_config`` (``ranks`` as ``ranks_str``: ``"[0, 1]"``),
  ``pg_status``, ``entries`` with the keys of ``getCollectiveTrace``; P2P operators are written
  as ``batch_isend_irecv`` does: the operator's entry (never timed) and an ``nccl:coalesced``
  entry with the same ``p2p_seq_id`` carrying the times. Discovery times lag the truth by the
  watchdog's polling (``poll_ns`` here); ``duration_ms`` is a float32, as torch stores it.
* :func:`write_torch_profiler`: an NCCL job's PyTorch profiler traces as libkineto's
  ``ChromeTraceLogger`` writes them (``baseTimeNanoseconds``, ``ts``/``dur`` in µs with three
  decimals, ``distributedInfo.pg_config``, ``host_name``): per operator the ``record_param_comms``
  CPU op of ProcessGroupNCCL (the args torch's own test of them lists: ``Collective name``,
  ``In``/``Out msg nelems``, ``Group size``, ``Process Group Name``/``Description``/``Ranks`` as
  ``str(list)``, ``Rank``: the peer's group rank for a send or receive, ``dtype``, ``Seq`` counted
  from 1) and its kernel on the GPU carrying the same args; ``ProfilerStep#N`` per iteration.

Each takes an emulator run (records + job spec), so tests know the truth of every operator.
:func:`with_world_all_reduces` and :func:`wrap_flight_recorder` give a run and its dumps the
shapes of a long job's: an operator outside the step's pattern every few steps, buffers that
wrapped at a different operator on each rank.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import struct
from collections import defaultdict
from pathlib import Path

import numpy as np

from sleuth.jobspec import JobSpec
from sleuth.records import OpKind, RecordBatch

#: The wall clock of the emulated job's time 0: 2025-07-18, µs (what gettimeofday gives).
EPOCH_US = 1_752_867_229_000_000
EPOCH_NS = EPOCH_US * 1000

#: Megatron-core's group_desc of each emulated kind (the name a job gives its groups).
MEGATRON_DESC = {
    "tp": "TENSOR_MODEL_PARALLEL_GROUP",
    "dp": "DATA_PARALLEL_GROUP",
    "pp": "PIPELINE_MODEL_PARALLEL_GROUP",
    "embd": "EMBEDDING_GROUP",
}

_NCCL_FUNC = {
    OpKind.ALL_REDUCE: "AllReduce", OpKind.ALL_GATHER: "AllGather", OpKind.REDUCE_SCATTER: "ReduceScatter",
    OpKind.BROADCAST: "Broadcast", OpKind.REDUCE: "Reduce", OpKind.SEND: "Send", OpKind.RECV: "Recv",
}
_TORCH_NAME = {
    OpKind.ALL_REDUCE: "all_reduce", OpKind.ALL_GATHER: "_allgather_base", OpKind.REDUCE_SCATTER: "_reduce_scatter_base",
    OpKind.BROADCAST: "broadcast", OpKind.REDUCE: "reduce", OpKind.ALL_TO_ALL: "all_to_all",
}

#: The world operator every writer appends after the run (torch's final all-reduce of a metric):
#: it gives the Inspector a communicator over every process.
WORLD_BYTES = 1 << 20


def rank_ops(records: RecordBatch, rank: int) -> list[dict]:
    """The emulated rank's operators in issue order (the order the job called them)."""
    mine = records.take(records["rank"] == rank)
    rows = list(mine.rows())
    rows.sort(key=lambda row: (row["t_issue_ns"], row["t_start_ns"]))
    return rows


def world_op(records: RecordBatch, rank: int) -> dict:
    """The final world all-reduce of ``rank``: issued after the job's last operator, 1 ms long."""
    last = int(records["t_end_ns"].max())
    return {"rank": rank, "comm": "world", "seq": 0, "op": int(OpKind.ALL_REDUCE), "peer": -1, "nbytes": WORLD_BYTES,
            "iteration": -1, "t_issue_ns": last + 10_000 + rank * 1000, "t_start_ns": last + 20_000,
            "t_end_ns": last + 1_020_000}


def comm_hash(name: str) -> str:
    return "0x%x" % int.from_bytes(hashlib.blake2b(name.encode(), digest_size=7).digest(), "big")


# -- NCCL Inspector ---------------------------------------------------------------------------


def write_inspector(
    folder: Path, records: RecordBatch, spec: JobSpec, *, style: str = "v4.0", names: bool = True,
    world: bool = True, dump_every_ns: int = 5_000_000,
) -> dict[int, Path]:
    """One log per rank (process) in ``folder``; returns rank → file."""
    folder.mkdir(parents=True, exist_ok=True)
    groups = {c.comm: c for c in spec.communicators}
    kinds = {c.comm: c.kind for c in spec.communicators}
    nodes = {c.comm: len({spec.placement(r).host for r in c.ranks}) for c in spec.communicators}
    if world:
        groups["world"] = type(spec.communicators[0])("world", "world", tuple(range(spec.world)))
        kinds["world"], nodes["world"] = "world", len({p.host for p in spec.placements})
    files = {}
    for rank in range(spec.world):
        host = spec.placement(rank).host
        pid = 4000 + rank
        ops = rank_ops(records, rank) + ([world_op(records, rank)] if world else [])
        p2p_sn: dict[str, int] = defaultdict(int)
        completed: dict[tuple[int, str], list[tuple[str, dict]]] = defaultdict(list)  # (dump tick, comm) → ops
        for op in ops:
            kind = OpKind(op["op"])
            group = groups[op["comm"]]
            sn = None
            if kind.is_p2p:
                p2p_sn[op["comm"]] += 1  # __atomic_add_fetch: the first is 1
                sn = p2p_sn[op["comm"]]
            perf = _inspector_perf(op, kind, group, sn, events=style == "v4.1")
            tick = op["t_end_ns"] // dump_every_ns + 1
            completed[(tick, op["comm"])].append(("p2p" if kind.is_p2p else "coll", perf))
        lines = []
        for tick in sorted({tick for tick, _ in completed}):
            for comm in groups:
                batch = completed.get((tick, comm))
                if not batch:
                    continue
                header = {"id": comm_hash(comm),
                          "comm_name": MEGATRON_DESC.get(kinds[comm], "unknown") if names else "unknown",
                          "rank": groups[comm].ranks.index(rank), "n_ranks": len(groups[comm].ranks),
                          "nnodes": nodes[comm]}
                metadata = {"inspector_output_format_version": style, "git_rev": "9019a1912",
                            "rec_mechanism": "nccl_profiler_interface",
                            "dump_timestamp_us": EPOCH_US + tick * dump_every_ns // 1000, "hostname": host, "pid": pid}
                ordered = [c for c in batch if c[0] == "coll"] + [c for c in batch if c[0] == "p2p"]
                if style == "v4.4":
                    stats = {"coll_records": sum(c[0] == "coll" for c in batch), "coll_dropped_total": 0,
                             "coll_dropped_since_last_dump": 0, "p2p_records": sum(c[0] == "p2p" for c in batch),
                             "p2p_dropped_total": 0, "p2p_dropped_since_last_dump": 0}
                    lines.append({"header": header, "metadata": metadata, "dump_stats": stats})
                    lines.extend({f"{what}_perf": perf} for what, perf in ordered)
                else:
                    lines.extend({"header": header, "metadata": metadata, f"{what}_perf": perf} for what, perf in ordered)
        path = folder / f"{host}-pid{pid}.log"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        files[rank] = path
    return files


def _inspector_perf(op: dict, kind: OpKind, group, sn: int | None, *, events: bool = False) -> dict:
    issue = EPOCH_US + op["t_issue_ns"] // 1000
    start = EPOCH_US + op["t_start_ns"] // 1000
    stop = EPOCH_US + op["t_end_ns"] // 1000
    exec_us = (op["t_end_ns"] - op["t_start_ns"]) // 1000  # the GPU clock's count
    # Two channels: the kernel is seen to start on one first and to stop on the other last.
    channels = [(start, max(start, stop - 1)), (min(start + 1, stop), stop)]
    bw = op["nbytes"] / 1e9 / max(exec_us / 1e6, 1e-9)
    prefix = "p2p" if kind.is_p2p else "coll"
    perf = {prefix: _NCCL_FUNC[kind]}
    if not kind.is_p2p:
        perf.update(coll_algo="RING", coll_proto="SIMPLE", coll_sn=op["seq"])
    else:
        perf.update(p2p_sn=sn, p2p_peer=group.ranks.index(op["peer"]))
    perf.update({
        f"{prefix}_msg_size_bytes": op["nbytes"], f"{prefix}_exec_time_us": exec_us,
        f"{prefix}_timing_source": "kernel_gpu", f"{prefix}_algobw_gbs": bw, f"{prefix}_busbw_gbs": bw,
        "event_trace_sn": {f"{prefix}_start_sn": 1, f"{prefix}_stop_sn": 2, "kernel_events": [
            {"channel_id": ch, "kernel_start_sn": 3 + 3 * ch, "kernel_stop_sn": 5 + 3 * ch, "kernel_record_sn": 4 + 3 * ch}
            for ch in range(len(channels))]},
        "event_trace_ts": {f"{prefix}_start_ts": issue, f"{prefix}_stop_ts": issue + 3, "kernel_events": [
            {"channel_id": ch, "kernel_start_ts": a, "kernel_stop_ts": b, "kernel_record_ts": b}
            for ch, (a, b) in enumerate(channels)]},
    })
    if events:  # v4.1: the start/stop pair stays, the channels move to "events" (with a proxy op)
        kernels = perf["event_trace_ts"].pop("kernel_events")
        sns = perf["event_trace_sn"].pop("kernel_events")
        perf["events"] = [
            {"event_type": "KernelCh", "channel_id": k["channel_id"],
             "event_trace_sn": {key: v for key, v in n.items() if key != "channel_id"},
             "event_trace_ts": {key: v for key, v in k.items() if key != "channel_id"}}
            for k, n in zip(kernels, sns)
        ] + [{"event_type": "ProxyOp", "proxy_id": 1, "proxy_rank": 0, "proxy_pid": 1, "proxy_start_ts": start,
              "proxy_stop_ts": stop, "proxy_duration_us": stop - start, "proxy_states": []}]
    return perf


# -- PyTorch Flight Recorder -----------------------------------------------------------------


def write_flight_recorder(
    folder: Path, records: RecordBatch, spec: JobSpec, *, poll_ns: int = 100_000, timing: bool = True,
    as_json: bool = False, prefix: str = "nccl_trace_rank_", host_ahead_ns: int = 0, host_ahead_spread_ns: int = 0,
) -> dict[int, Path]:
    """One dump per rank in ``folder``; returns rank → file. ``host_ahead_ns``: how long before its
    GPU starts an operator the host issued it, as a host running ahead does (the emulator's keep up),
    and each operator up to ``host_ahead_spread_ns`` more (uniform, seeded by rank): how far a host
    runs ahead varies with the work queued on its GPU."""
    folder.mkdir(parents=True, exist_ok=True)
    pg_names = {"world": "0"}
    pg_desc = {"world": "default_pg"}
    for index, comm in enumerate(spec.communicators, start=1):
        pg_names[comm.comm] = str(index)
        pg_desc[comm.comm] = MEGATRON_DESC.get(comm.kind, "undefined")
    members = {c.comm: c.ranks for c in spec.communicators} | {"world": tuple(range(spec.world))}
    files = {}
    for rank in range(spec.world):
        config = {pg_names[c]: {"name": pg_names[c], "desc": pg_desc[c], "ranks": _ranks_str(members[c])}
                  for c in members if rank in members[c]}
        entries: list[dict] = []
        ahead = np.random.default_rng(rank)
        coll_seq: dict[str, int] = defaultdict(int)
        p2p_seq: dict[str, int] = defaultdict(int)
        for op_id, op in enumerate(rank_ops(records, rank) + [world_op(records, rank)]):
            created = EPOCH_NS + op["t_issue_ns"] - host_ahead_ns - int(ahead.integers(0, host_ahead_spread_ns + 1))
            kind = OpKind(op["op"])
            comm = op["comm"]
            group = (pg_names[comm], pg_desc[comm])
            if kind.is_p2p:
                p2p_seq[comm] += 1
            else:
                coll_seq[comm] += 1
            me = members[comm].index(rank)
            if kind is OpKind.SEND:
                title = f"nccl:send {me}->{members[comm].index(op['peer'])}"
            elif kind is OpKind.RECV:
                title = f"nccl:recv {me}<-{members[comm].index(op['peer'])}"
            else:
                title = f"nccl:{_TORCH_NAME[kind]}"
            sizes, dtypes = _tensor(op["nbytes"])
            base = {
                "pg_id": int(pg_names[comm]), "process_group": group, "thread_name": "pt_main_thread",
                "thread_id": "140001", "collective_seq_id": coll_seq[comm], "p2p_seq_id": p2p_seq[comm],
                "op_id": op_id, "time_created_ns": created, "input_sizes": sizes, "input_dtypes": dtypes,
                "output_sizes": sizes, "output_dtypes": dtypes, "timeout_ms": 600000, "is_p2p": kind.is_p2p,
                "retired": True,
            }
            # The start event exists only with timing (WorkNCCL makes ncclStartEvent_ when enableTiming).
            started = EPOCH_NS + _discovered(op["t_start_ns"], poll_ns, rank) if timing else None
            ended = EPOCH_NS + _discovered(op["t_end_ns"], poll_ns, rank)
            timed = {"state": "completed", "time_discovered_started_ns": started, "time_discovered_completed_ns": ended}
            if timing:  # float32 milliseconds, as Entry::duration_ (std::optional<float>)
                timed["duration_ms"] = struct.unpack("f", struct.pack("f", (op["t_end_ns"] - op["t_start_ns"]) / 1e6))[0]
            if kind.is_p2p:  # batch_isend_irecv: the op, then the group's end entry that is timed
                entries.append({**base, "profiling_name": title, "state": "scheduled",
                                "time_discovered_started_ns": None, "time_discovered_completed_ns": None})
                entries.append({**base, "profiling_name": "nccl:coalesced", "input_sizes": [], "input_dtypes": [],
                                "output_sizes": [], "output_dtypes": [], **timed})
            else:
                entries.append({**base, "profiling_name": title, **timed})
        for record_id, entry in enumerate(entries):
            entry["record_id"] = record_id
        dump = {"version": "2.4", "comm_lib_version": "2.21.5", "pg_config": config,
                "pg_status": {pg_names[c]: {"last_enqueued_collective": coll_seq[c], "last_started_collective": coll_seq[c],
                                            "last_completed_collective": coll_seq[c]} for c in members if rank in members[c]},
                "entries": entries}
        path = folder / f"{prefix}{rank}"
        if as_json:  # dump_json: tuples become lists, "not discovered" is 0, pg_status values strings
            for entry in dump["entries"]:
                entry["time_discovered_started_ns"] = entry["time_discovered_started_ns"] or 0
                entry["time_discovered_completed_ns"] = entry["time_discovered_completed_ns"] or 0
            path.write_text(json.dumps(dump), encoding="utf-8")
        else:
            path.write_bytes(pickle.dumps(dump, protocol=2))
        files[rank] = path
    return files


def _ranks_str(ranks) -> str:
    return "[" + ", ".join(str(r) for r in ranks) + "]"


def _tensor(nbytes: int) -> tuple[list[list[int]], list[str]]:
    if nbytes % 2 == 0:
        return [[nbytes // 2]], ["BFloat16"]
    return [[nbytes]], ["Byte"]


def _discovered(t_ns: int, poll_ns: int, rank: int) -> int:
    """When ``rank``'s watchdog, waking every ``poll_ns``, notices an event that happened at ``t_ns``:
    each process's watchdog thread keeps its own phase (the golden ratio's spread of them)."""
    phase = int(poll_ns * ((rank * 0.6180339887) % 1.0))
    return ((t_ns - phase) // poll_ns + 1) * poll_ns + phase


def expected_float32_ns(nanoseconds: int) -> int:
    """``duration_ms`` as torch keeps it (float32 ms), back in ns: what an importer can know."""
    return round(struct.unpack("f", struct.pack("f", nanoseconds / 1e6))[0] * 1e6)


def as_numpy(rows: list[dict], field: str) -> np.ndarray:
    return np.array([row[field] for row in rows])


# -- PyTorch profiler (Kineto) ----------------------------------------------------------------

#: ``record_param_comms``'s collective names (ProcessGroupNCCL's, as torch's test of them reads them).
_PARAM_COMMS_NAME = {
    OpKind.ALL_REDUCE: "allreduce", OpKind.ALL_GATHER: "_allgather_base", OpKind.REDUCE_SCATTER: "_reduce_scatter_base",
    OpKind.BROADCAST: "broadcast", OpKind.REDUCE: "reduce", OpKind.ALL_TO_ALL: "all_to_all", OpKind.SEND: "send",
    OpKind.RECV: "recv",
}
#: ``baseTimeNanoseconds``: Kineto floors the wall clock to a quarter year (91.25 days) so that µs stay exact.
_QUARTER_NS = 7_884_000 * 10**9


def write_torch_profiler(folder: Path, records: RecordBatch, spec: JobSpec, *, gzip_odd: bool = True) -> dict[int, Path]:
    """One trace per rank in ``folder`` (odd ranks gzipped when ``gzip_odd``); returns rank → file."""
    folder.mkdir(parents=True, exist_ok=True)
    base = EPOCH_NS - EPOCH_NS % _QUARTER_NS
    pg_names = {"world": "0"} | {c.comm: str(k) for k, c in enumerate(spec.communicators, start=1)}
    pg_desc = {"world": "default_pg"} | {c.comm: MEGATRON_DESC.get(c.kind, "undefined") for c in spec.communicators}
    members = {"world": tuple(range(spec.world))} | {c.comm: c.ranks for c in spec.communicators}

    def ts(t_ns: int) -> float:
        return round((EPOCH_NS + t_ns - base) / 1000, 3)

    files = {}
    for rank in range(spec.world):
        place = spec.placement(rank)
        events: list[dict] = []
        ops = rank_ops(records, rank)
        firsts: dict[int, int] = {}
        for op in ops:
            firsts.setdefault(op["iteration"], op["t_issue_ns"])
        last = max(op["t_end_ns"] for op in ops)
        marks = sorted(firsts.items())
        for (step, start), (_, end) in zip(marks, [*marks[1:], (None, last + 1000)]):
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 100 + rank,
                           "tid": 1, "ts": ts(start), "dur": round((end - start) / 1000, 3), "args": {}})
        seqs: dict[tuple[str, bool], int] = defaultdict(int)
        for external, op in enumerate(ops, start=1):
            kind, comm = OpKind(op["op"]), op["comm"]
            group = members[comm]
            seqs[comm, kind.is_p2p] += 1
            sizes, dtypes = _tensor(op["nbytes"])
            nelems, dtype = sizes[0][0], dtypes[0]
            args = {"Collective name": _PARAM_COMMS_NAME[kind], "In msg nelems": nelems,
                    "Out msg nelems": nelems * (len(group) if kind is OpKind.ALL_GATHER else 1),
                    "Group size": len(group), "dtype": dtype, "Process Group Name": pg_names[comm],
                    "Process Group Description": pg_desc[comm], "Process Group Ranks": str(list(group)),
                    "Rank": group.index(op["peer"] if kind.is_p2p else rank), "Seq": seqs[comm, kind.is_p2p]}
            issue_us = min(5.0, (op["t_start_ns"] - op["t_issue_ns"]) / 1000)
            events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100 + rank, "tid": 1,
                           "ts": ts(op["t_issue_ns"]), "dur": round(issue_us, 3), "args": {"External id": external, **args}})
            events.append({"ph": "X", "cat": "kernel", "name": f"ncclDevKernel_{_NCCL_FUNC.get(kind, 'AllToAll')}_Sum_bf16_RING_LL",
                           "pid": place.gpu, "tid": 20, "ts": ts(op["t_start_ns"]),
                           "dur": round((op["t_end_ns"] - op["t_start_ns"]) / 1000, 3),
                           "args": {"External id": external, "correlation": 10_000 + external, "device": place.gpu,
                                    "stream": 20, **args}})
        trace = {"schemaVersion": 1, "host_name": place.host, "baseTimeNanoseconds": base, "displayTimeUnit": "ms",
                 "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": spec.world, "pg_count": len(members),
                                     "pg_config": [{"pg_name": pg_names[c], "pg_desc": pg_desc[c],
                                                    "backend_config": "cuda:nccl", "pg_size": len(members[c]),
                                                    "ranks": list(members[c])} for c in members if rank in members[c]]},
                 "traceEvents": events}
        data = json.dumps(trace).encode()
        path = folder / f"{place.host}_{4000 + rank}.{rank}.pt.trace.json"
        if gzip_odd and rank % 2:
            path = path.with_name(path.name + ".gz")
            data = gzip.compress(data)
        path.write_bytes(data)
        files[rank] = path
    return files


def with_world_all_reduces(records: RecordBatch, spec: JobSpec, every: int) -> RecordBatch:
    """``records`` with a small all-reduce of every rank on ``world`` after each ``every``-th
    iteration (a loss or timer all-reduce every few steps), in that iteration."""
    end = records["t_end_ns"]
    steps = list(range(every - 1, int(records["iteration"].max()), every))
    last = np.repeat([int(end[records["iteration"] == i].max()) for i in steps], spec.world)
    n = len(last)
    extra = RecordBatch.from_columns(
        job=spec.job, rank=np.tile(np.arange(spec.world), len(steps)), comm="world",
        seq=np.repeat(np.arange(1, len(steps) + 1), spec.world), op=np.full(n, int(OpKind.ALL_REDUCE)),
        peer=np.full(n, -1), nbytes=np.full(n, 4096), iteration=np.repeat(steps, spec.world),
        t_issue_ns=last + 1_000, t_start_ns=last + 2_000, t_end_ns=last + 50_000)
    return RecordBatch.concat([records, extra])


def wrap_flight_recorder(files: dict[int, Path], keep: int, earlier: dict[int, int]) -> None:
    """Each rank's pickled dump cut to its last ``keep`` entries, as a buffer of that size that
    wrapped; the ranks in ``earlier`` ran that many more operators before (their record ids move on)."""
    for rank, path in files.items():
        dump = pickle.loads(path.read_bytes())
        dump["entries"] = dump["entries"][-keep:]
        for entry in dump["entries"]:
            entry["record_id"] += earlier.get(rank, 0)
        path.write_bytes(pickle.dumps(dump, protocol=2))

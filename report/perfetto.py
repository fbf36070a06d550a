"""An incident's operator timeline as a Chrome trace (Trace Event Format JSON), for Perfetto.

``sleuth report --perfetto FILE`` writes it; open the file at https://ui.perfetto.dev or in
``chrome://tracing``. What it holds:

* the operators of the report's timeline ranks (the ranks the search visited, then the members
  of the root operators' groups; ``evidence.timeline_ranks``) in the iteration before the
  incident's first irregular one and the iteration its first root operator ran in, so that a
  normal iteration sits beside the slow one;
* one complete event (``"ph": "X"``) per operator: ``ts`` its device start and ``dur`` its
  duration, in microseconds after ``otherData.origin_ns`` (the earliest start exported, host
  clock), kept to the nanosecond with three decimals; ``name`` the operator kind and
  communicator (``all_reduce dp.0``); ``args`` communicator, seq, op, bytes, iteration, peer
  (point-to-point), issue-to-start delay and the operator's role in the incident; ``cat`` that
  role: ``root`` (a root operator on one of its ranks), ``root-group`` (the same collective on
  the group's other members), ``examined`` (the search examined it) or ``operator``; the first
  three also carry a ``cname`` (chrome://tracing's reserved colours ``terrible``, ``bad`` and
  ``yellow``; Perfetto colours by name and ignores it);
* ``pid`` a host (numbered in the order of the job spec's hosts, named by ``process_name``
  metadata events), ``tid`` a rank (named ``rank N`` by ``thread_name``). The format asks
  that events on one thread nest, and a rank's operators may overlap (a send beside an
  all-reduce): an operator that overlaps one already on its rank's track goes on an extra
  track of that rank, ``tid = rank + world × lane``, named ``rank N · lane L`` and sorted
  right under the rank;
* one flow (``"ph": "s"`` … ``"t"`` … ``"f"``, ``"bp": "e"``) per root operator instance,
  linking its group's operators (root and root-group) in the order they started, each flow
  event in the middle of the operator it binds to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.errors import ConfigError
from sleuth.localizer.incident import Incident
from sleuth.records import OpKind
from sleuth.sources import RecordSource

from sleuth.report.evidence import timeline_ranks

__all__ = ["ROLE_COLOURS", "perfetto_trace", "trace_iterations", "write_trace"]

#: cat of an operator -> chrome://tracing's reserved colour name (``cname``); others keep the viewer's.
ROLE_COLOURS = {"root": "terrible", "root-group": "bad", "examined": "yellow"}


def trace_iterations(incident: Incident) -> tuple[int, ...]:
    """The iteration before the first irregular one, and the one the first root operator ran in."""
    first = min(incident.iterations)
    ran = incident.roots[0].ran if incident.roots else first
    return tuple(sorted({first - 1, first, ran}))


def _role(incident: Incident) -> Callable[[int, str, int], str]:
    """rank, comm, seq -> the operator's role in the incident (the ``cat`` of its event)."""
    roots = {(rank, r.comm, r.seq) for r in incident.roots for rank in (r.ranks or (r.rank,))}
    groups = {(r.comm, r.seq) for r in incident.roots}
    examined = {(s.rank, s.comm, s.seq) for s in incident.steps}

    def role(rank: int, comm: str, seq: int) -> str:
        if (rank, comm, seq) in roots:
            return "root"
        if (comm, seq) in groups:
            return "root-group"
        return "examined" if (rank, comm, seq) in examined else "operator"

    return role


def _lanes(rank: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A lane per operator such that no two operators of one rank on one lane overlap (greedy, by start)."""
    lane = np.zeros(len(rank), dtype=np.int64)
    ends: dict[int, list[int]] = {}
    for k in np.lexsort((end, start, rank)).tolist():
        lanes = ends.setdefault(int(rank[k]), [])
        free = next((j for j, e in enumerate(lanes) if e <= start[k]), None)
        if free is None:
            free = len(lanes)
            lanes.append(0)
        lanes[free] = int(end[k])
        lane[k] = free
    return lane


def perfetto_trace(incident: Incident, source: RecordSource, *, iterations: Sequence[int] | None = None) -> dict[str, Any]:
    """The Trace Event Format document of ``incident``'s timeline (see the module's description)."""
    spec = source.job_spec()
    if spec.job != incident.job:
        raise ConfigError(f"the records are of job {spec.job!r}, the incident {incident.incident!r} of job {incident.job!r}")
    wanted = tuple(sorted(set(iterations))) if iterations is not None else trace_iterations(incident)
    if not wanted:
        raise ConfigError("iterations must name at least one iteration")
    ranks = timeline_ranks(incident, source, incident.roots[0].ran if incident.roots else incident.iterations[0])
    batch = source.ranks_records(list(ranks), iterations=list(wanted))
    if not len(batch):
        raise ConfigError(f"no records of ranks {list(ranks)[:8]}{' ...' if len(ranks) > 8 else ''} in iterations "
                          f"{list(wanted)} of job {incident.job!r}: is this the incident's records folder?")
    batch = batch.take(np.lexsort((batch["seq"], batch["t_start_ns"], batch["rank"])))
    rank = batch["rank"].astype(np.int64)
    start, end = batch["t_start_ns"].astype(np.int64), batch["t_end_ns"].astype(np.int64)
    origin = int(start.min())
    lane = _lanes(rank, start, end)
    comm = batch.decoded("comm").tolist()
    hosts = list(dict.fromkeys(spec.placement(r).host for r in range(spec.world)))
    pid_of = {h: k + 1 for k, h in enumerate(hosts)}
    role_of = _role(incident)

    def us(ns: int) -> float:
        return round((ns - origin) / 1000, 3)

    events: list[dict[str, Any]] = []
    used = sorted({(int(r), int(l)) for r, l in zip(rank.tolist(), lane.tolist())})
    for host in dict.fromkeys(spec.placement(r).host for r, _ in used):
        events.append({"ph": "M", "name": "process_name", "pid": pid_of[host], "tid": 0, "args": {"name": host}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid_of[host], "tid": 0,
                       "args": {"sort_index": pid_of[host]}})
    for r, l in used:
        pid, tid = pid_of[spec.placement(r).host], r + spec.world * l
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": f"rank {r}" if l == 0 else f"rank {r} · lane {l}"}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": r * 64 + l}})

    names = {k.value: k.label for k in OpKind}
    members: dict[tuple[str, int, int], list[int]] = {}  # root instance -> indices into events
    for k in range(len(batch)):
        r, c, s, code = int(rank[k]), comm[k], int(batch["seq"][k]), int(batch["op"][k])
        op = names.get(code, "unknown")
        role = role_of(r, c, s)
        args: dict[str, Any] = {"comm": c, "seq": s, "op": op, "bytes": int(batch["nbytes"][k]),
                                "iteration": int(batch["iteration"][k]), "role": role,
                                "issue_to_start_us": round((int(start[k]) - int(batch["t_issue_ns"][k])) / 1000, 3)}
        if code in names and OpKind(code).is_p2p:
            args["peer"] = int(batch["peer"][k])
        event = {"ph": "X", "name": f"{op} {c}", "cat": role, "ts": us(int(start[k])),
                 "dur": round((int(end[k]) - int(start[k])) / 1000, 3), "pid": pid_of[spec.placement(r).host],
                 "tid": r + spec.world * int(lane[k]), "args": args}
        if role in ROLE_COLOURS:
            event["cname"] = ROLE_COLOURS[role]
        if role in ("root", "root-group"):
            members.setdefault((c, s, int(batch["iteration"][k])), []).append(len(events))
        events.append(event)

    flows = []
    for flow_id, ((c, s, it), indices) in enumerate(sorted(members.items()), start=1):
        if len(indices) < 2:
            continue  # a flow needs two ends
        ordered = sorted(indices, key=lambda i: (events[i]["ts"], events[i]["tid"]))
        for j, i in enumerate(ordered):
            phase = "s" if j == 0 else "f" if j == len(ordered) - 1 else "t"
            flow = {"ph": phase, "id": flow_id, "name": f"root {c}#{s}", "cat": "root",
                    "ts": round(events[i]["ts"] + events[i]["dur"] / 2, 3), "pid": events[i]["pid"],
                    "tid": events[i]["tid"], "args": {"comm": c, "seq": s, "iteration": it}}
            if phase == "f":
                flow["bp"] = "e"
            flows.append(flow)
    return {
        "traceEvents": events + flows,
        "displayTimeUnit": "ms",
        "otherData": {"job": incident.job, "incident": incident.incident, "origin_ns": origin,
                      "iterations": list(wanted), "ranks": list(ranks),
                      "clock": "ts is microseconds after origin_ns, the host clock in nanoseconds"},
    }


def write_trace(trace: dict[str, Any], path: str | Path) -> Path:
    """Write ``trace`` as JSON to ``path`` (its folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace, separators=(",", ":")) + "\n", encoding="utf-8")
    return path

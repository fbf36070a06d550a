"""``sleuth report --perfetto``: the incident's timeline as Trace Event Format JSON, checked against
the format's documented fields (no Python parser of the format installs without fetching a binary)
and against the records it came from."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from sleuth.cli import main
from sleuth.errors import ConfigError
from sleuth.records import OpKind
from sleuth.report.perfetto import ROLE_COLOURS, _lanes, perfetto_trace, trace_iterations

from .conftest import Emulated

METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
            "thread_sort_index": "sort_index"}


def check_schema(trace: dict) -> None:
    """What the Trace Event Format asks of each event type we write, and what Perfetto needs to draw it."""
    assert set(trace) == {"traceEvents", "displayTimeUnit", "otherData"} and trace["displayTimeUnit"] in ("ms", "ns")
    named_pids, named_threads = set(), set()
    for event in trace["traceEvents"]:
        assert isinstance(event["name"], str) and event["name"]
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M":
            key = METADATA[event["name"]]
            assert set(event["args"]) == {key}
            if event["name"] == "process_name":
                named_pids.add(event["pid"])
            if event["name"] == "thread_name":
                named_threads.add((event["pid"], event["tid"]))
        elif event["ph"] == "X":
            assert isinstance(event["ts"], float | int) and event["ts"] >= 0
            assert isinstance(event["dur"], float | int) and event["dur"] >= 0
            assert isinstance(event["cat"], str) and isinstance(event["args"], dict)
            assert event.get("cname") == ROLE_COLOURS.get(event["cat"])
        else:
            assert event["ph"] in ("s", "t", "f") and isinstance(event["id"], int) and event["cat"] == "root"
            assert (event["ph"] == "f") == (event.get("bp") == "e")
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in slices} <= named_pids
    assert {(e["pid"], e["tid"]) for e in slices} <= named_threads
    # Events on one thread must nest; ours never overlap at all.
    by_thread = defaultdict(list)
    for e in slices:
        by_thread[(e["pid"], e["tid"])].append((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)))
    for spans in by_thread.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_the_trace_holds_every_operator_at_its_recorded_times(emulated: Emulated) -> None:
    incident, source = emulated.incident, emulated.source
    trace = json.loads(json.dumps(perfetto_trace(incident, source)))  # what a reader of the file sees
    check_schema(trace)
    other = trace["otherData"]
    assert other["iterations"] == list(trace_iterations(incident))
    assert min(incident.iterations) - 1 in other["iterations"] and incident.roots[0].ran in other["iterations"]
    records = source.ranks_records(other["ranks"], iterations=other["iterations"])
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(records) > 0
    world, spec = source.job_spec().world, source.job_spec()
    # A rank both sends and receives at one (comm, seq) of a pipeline: the op and peer tell them apart.
    recorded = {(int(r), c, int(s), OpKind(int(o)).label, int(p) if OpKind(int(o)).is_p2p else None):
                (int(a), int(b), int(n), int(i)) for r, c, s, o, p, a, b, n, i in zip(
        records["rank"], records.decoded("comm"), records["seq"], records["op"], records["peer"],
        records["t_start_ns"], records["t_end_ns"], records["nbytes"], records["iteration"])}
    assert len(recorded) == len(records)
    hosts = list(dict.fromkeys(spec.placement(r).host for r in range(world)))
    for e in slices:
        rank = e["tid"] % world
        args = e["args"]
        start, end, nbytes, iteration = recorded.pop((rank, args["comm"], args["seq"], args["op"], args.get("peer")))
        assert round(e["ts"] * 1000) + other["origin_ns"] == start  # to the nanosecond
        assert round(e["dur"] * 1000) == end - start
        assert e["args"]["bytes"] == nbytes and e["args"]["iteration"] == iteration
        assert e["name"] == f"{e['args']['op']} {e['args']['comm']}"
        assert hosts[e["pid"] - 1] == spec.placement(rank).host
    assert min(e["ts"] for e in slices) == 0 and not recorded  # each record once


def test_root_operators_are_marked_and_linked_by_a_flow(emulated: Emulated) -> None:
    incident = emulated.incident
    trace = perfetto_trace(incident, emulated.source)
    root = incident.roots[0]
    world = emulated.source.job_spec().world
    marked = [e for e in trace["traceEvents"] if e["ph"] == "X"
              and (e["args"]["comm"], e["args"]["seq"]) == (root.comm, root.seq)]
    assert {e["tid"] % world for e in marked if e["cat"] == "root"} == set(root.ranks)
    members = set(emulated.source.job_spec().communicator(root.comm).ranks)
    assert {e["tid"] % world for e in marked} == members and len(members) > len(root.ranks)
    assert all(e["cat"] == "root-group" and e["cname"] == "bad" for e in marked if e["tid"] % world not in root.ranks)
    flow = [e for e in trace["traceEvents"] if e["ph"] in "stf" and e["args"]["comm"] == root.comm
            and e["args"]["seq"] == root.seq]
    assert [e["ph"] for e in flow] == ["s", *["t"] * (len(marked) - 2), "f"] and len({e["id"] for e in flow}) == 1
    for event in flow:  # each flow event lies inside the operator it binds to
        assert any(m["tid"] == event["tid"] and m["ts"] < event["ts"] < m["ts"] + m["dur"] for m in marked)
    examined = {(s.rank, s.comm, s.seq) for s in incident.steps}
    assert all((e["tid"] % world, e["args"]["comm"], e["args"]["seq"]) in examined
               for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "examined")


def test_overlapping_operators_of_a_rank_go_on_separate_lanes() -> None:
    rank = np.array([0, 0, 0, 1, 0])
    start = np.array([0, 5, 10, 0, 12])
    end = np.array([10, 8, 20, 30, 15])
    assert _lanes(rank, start, end).tolist() == [0, 1, 0, 0, 1]


def test_the_cli_writes_the_trace_and_refuses_bad_requests(emulated: Emulated, tmp_path, capsys) -> None:
    out = tmp_path / "trace" / "incident.json"
    base = ["report", "--incident", str(emulated.incident_json), "--records", str(emulated.records)]
    assert main([*base, "--perfetto", str(out)]) == 0
    assert "https://ui.perfetto.dev" in capsys.readouterr().out
    assert json.loads(out.read_text())["otherData"]["incident"] == emulated.incident.incident
    assert main(base) == 2
    assert "-o FILE (the HTML report), --perfetto TRACE" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="at least one iteration"):
        perfetto_trace(emulated.incident, emulated.source, iterations=[])
    with pytest.raises(ConfigError, match="no records of ranks"):
        perfetto_trace(emulated.incident, emulated.source, iterations=[10_000])

"""Every query of docs/sql.md, run on the real ClickHouse filled with an emulated job and its incidents,
against the same answer computed in Python from the emulator's data."""

from __future__ import annotations

import dataclasses
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from sleuth.localizer.incident import Incident
from sleuth.oncall.alerts import severity_of
from sleuth.oncall.service import build_alerter
from sleuth.oncall.verdicts import CONFIRMED, label_rows, store_verdict
from sleuth.storage import schema
from sleuth.storage.labels import ClickHouseLabelStore
from sleuth.storage.sink import ClickHouseSink
from sleuth.storage.tables import incident_rows
from sleuth.stream import connect
from sleuth.stream.detection.training import read_labelled

from ..stream.harness import private_settings

pytestmark = pytest.mark.services

COOKBOOK = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
_QUERY = re.compile(r"^### (\w+) — .*?\n```sql\n(.*?)```", re.S | re.M)


def cookbook() -> dict[str, str]:
    return dict(_QUERY.findall(COOKBOOK.read_text()))


def test_the_cookbook_has_at_least_ten_queries() -> None:
    queries = cookbook()
    assert len(queries) >= 10
    assert len(queries) == COOKBOOK.read_text().count("```sql")  # every sql block has a named heading


@pytest.fixture(scope="module")
def filled(services, emulated_run):
    """A private database with the emulated job's records, iterations, abnormal operators (the emulator's
    labels), its incident and a copy of it under a second job, their alerts and one verdict."""
    settings = private_settings(services)
    client = connect.clickhouse_client(settings, database="default")
    db = settings.clickhouse_database
    schema.migrate(client, db)
    records, iterations, labels = read_labelled(emulated_run.folder)
    ClickHouseSink(client, db).write(records, iterations, [emulated_run.spec])
    flagged = records.take(labels)
    client.execute(
        f"INSERT INTO {db}.abnormal_ops (job, rank, comm, seq, iteration, op, peer, t_start_ns, duration_ns, score, "
        "detected_ns) VALUES",
        [(j, int(r), c, int(s), int(i), int(o), int(p), int(t0), int(t1 - t0), 1.0, 1)
         for j, r, c, s, i, o, p, t0, t1 in zip(flagged.decoded("job"), flagged["rank"], flagged.decoded("comm"),
                                                flagged["seq"], flagged["iteration"], flagged["op"], flagged["peer"],
                                                flagged["t_start_ns"], flagged["t_end_ns"])])
    first = emulated_run.incidents[0]
    other = dataclasses.replace(first, job="sim-b", incident=first.incident.replace("sim", "sim-b", 1))
    incidents = list(emulated_run.incidents) + [other]
    for incident in incidents:
        for table, rows in incident_rows(incident, created_ns=time.time_ns()).items():
            client.execute(f"INSERT INTO {db}.{table} VALUES", rows)
    alerter = build_alerter(settings, client=client)
    for incident in incidents:
        alerter.on_incident(Incident.from_json(incident.to_json()))  # as the alerter reads the incidents topic
    store_verdict(ClickHouseLabelStore(client, db), first, CONFIRMED)
    client.disconnect()
    reader = connect.clickhouse_client(settings, database=db)  # the cookbook's queries name tables unqualified
    try:
        yield settings, reader, records, iterations, labels, incidents
    finally:
        reader.execute(f"DROP DATABASE IF EXISTS {db}")
        reader.disconnect()


def run(filled, name: str, **params) -> list[tuple]:
    return filled[1].execute(cookbook()[name], params)


def same(actual: list[tuple], expected: list[tuple]) -> None:
    assert len(actual) == len(expected), (actual, expected)
    for got, want in zip(actual, expected):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, float):
                assert g == pytest.approx(w, rel=1e-9, abs=1e-9), (got, want)
            else:
                assert g == w, (got, want)


def kinds(comms: np.ndarray) -> np.ndarray:
    return np.array([c.split(".", 1)[0] for c in comms], dtype=object)


def test_slowest_ranks(filled) -> None:
    records = filled[2]
    collective = records["peer"] == -1
    comm, seq = records.decoded("comm")[collective], records["seq"][collective]
    start, rank = records["t_start_ns"][collective], records["rank"][collective]
    first: dict = {}
    for c, s, t in zip(comm, seq, start):
        first[(c, s)] = min(first.get((c, s), t), t)
    late = defaultdict(list)
    for c, s, t, r in zip(comm, seq, start, rank):
        late[int(r)].append(int(t - first[(c, s)]))
    expected = sorted(((r, float(np.mean(v)) / 1e6, len(v)) for r, v in late.items()), key=lambda x: (-x[1], x[0]))[:5]
    same(run(filled, "slowest_ranks", job="sim"), expected)


def test_op_p99_by_kind(filled) -> None:
    records = filled[2]
    keep = records["iteration"] >= 0
    groups = defaultdict(list)
    for i, k, d in zip(records["iteration"][keep], kinds(records.decoded("comm")[keep]),
                       (records["t_end_ns"] - records["t_start_ns"])[keep]):
        groups[(int(i), k)].append(int(d))
    expected = []
    for (i, k), durations in sorted(groups.items()):
        durations.sort()
        expected.append((i, k, durations[min(int(0.99 * len(durations)), len(durations) - 1)], len(durations)))
    same(run(filled, "op_p99_by_kind", job="sim"), expected)


def test_iteration_times(filled) -> None:
    its = filled[3]
    spans: dict = {}
    for i, t0, t1 in zip(its["iteration"], its["t_start_ns"], its["t_end_ns"]):
        lo, hi, n = spans.get(int(i), (t0, t1, 0))
        spans[int(i)] = (min(lo, t0), max(hi, t1), n + 1)
    same(run(filled, "iteration_times", job="sim"), [(i, int(hi - lo), n) for i, (lo, hi, n) in sorted(spans.items())])


def test_bandwidth_by_kind(filled) -> None:
    records = filled[2]
    sums = defaultdict(lambda: [0, 0])
    for k, b, d in zip(kinds(records.decoded("comm")), records["nbytes"], records["t_end_ns"] - records["t_start_ns"]):
        sums[k][0] += int(b)
        sums[k][1] += int(d)
    same(run(filled, "bandwidth_by_kind", job="sim"), [(k, b, b / d) for k, (b, d) in sorted(sums.items())])


def test_abnormal_ops_per_iteration(filled) -> None:
    records, labels = filled[2], filled[4]
    per = defaultdict(set)
    # One row per operator instance: abnormal_ops is keyed like records (…, comm, seq, op, peer).
    for i, r, c, q, o, p in zip(records["iteration"][labels], records["rank"][labels], records.decoded("comm")[labels],
                                records["seq"][labels], records["op"][labels], records["peer"][labels]):
        per[int(i)].add((int(r), c, int(q), int(o), int(p)))
    same(run(filled, "abnormal_ops_per_iteration", job="sim"),
         [(i, len(ops), len({key[0] for key in ops})) for i, ops in sorted(per.items())])


def test_suspects_this_week(filled) -> None:
    incidents = filled[5]
    found: dict = {}
    for incident in incidents:
        for s in incident.suspects:
            kind, n, jobs, best = found.get(s.device, (s.kind, 0, set(), 0.0))
            found[s.device] = (kind, n + 1, jobs | {incident.job}, max(best, s.score))
    expected = sorted(((d, k, n, len(j), b) for d, (k, n, j, b) in found.items()), key=lambda x: (-x[2], x[0]))
    same(run(filled, "suspects_this_week"), expected)


def test_gpu_hours_lost_per_job(filled) -> None:
    per = defaultdict(list)
    for incident in filled[5]:
        per[incident.job].append(incident.impact)
    expected = sorted(((j, len(v), sum(i.gpu_hours_lost for i in v), max(i.slowdown for i in v)) for j, v in per.items()),
                      key=lambda x: (-x[2], x[0]))
    same(run(filled, "gpu_hours_lost_per_job"), expected)


def test_incidents_by_cause(filled) -> None:
    counts = Counter(i.cause.value for i in filled[5])
    jobs = defaultdict(set)
    for i in filled[5]:
        jobs[i.cause.value].add(i.job)
    expected = sorted(((c, n, len(jobs[c])) for c, n in counts.items()), key=lambda x: (-x[1], x[0]))
    same(run(filled, "incidents_by_cause"), expected)


def test_search_cost(filled) -> None:
    expected = sorted((i.job, i.incident, i.ranks_fetched, i.world, i.ranks_fetched / i.world) for i in filled[5])
    same(run(filled, "search_cost"), expected)


def test_incident_traversal(filled) -> None:
    incident = filled[5][0]
    expected = [(k, s.rank, s.comm, s.seq, s.iteration, s.action.value) for k, s in enumerate(incident.steps)]
    same(run(filled, "incident_traversal", incident=incident.incident), expected)


def test_open_alerts(filled) -> None:
    settings = filled[0]
    latest: dict = {}
    for incident in filled[5]:  # in arrival order: the latest evidence per (job, device) wins
        for s in incident.suspects:
            previous = latest.get((incident.job, s.device), (None, 0, -1))
            latest[(incident.job, s.device)] = (incident, previous[1] + 1, max(previous[2], max(incident.iterations)))
    rows = []
    for (job, device), (incident, n, last) in latest.items():
        impact = incident.to_dict()["impact"]  # alerts are built from the JSON the localizer publishes
        severity = severity_of(impact["slowdown"], impact["gpu_hours_lost"],
                               critical_slowdown=settings.alert_critical_slowdown,
                               critical_gpu_hours=settings.alert_critical_gpu_hours).value
        rows.append((job, device, severity, impact["slowdown"], impact["gpu_hours_lost"], n, last))
    expected = sorted(rows, key=lambda x: (x[2] != "critical", -x[3], x[0], x[1]))
    same(run(filled, "open_alerts"), expected)


def test_oncall_verdicts(filled) -> None:
    incident = filled[5][0]
    rows = label_rows(incident, CONFIRMED, labeled_ns=0)
    same(run(filled, "oncall_verdicts"), [(f"oncall:confirmed:{incident.incident}", 1, len(rows))])

"""deploy/grafana/sleuth.json: every series it queries is one sleuth exports, with the labels it groups
by, and (where Debian's promtool is installed) every query parses as PromQL."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from sleuth import metrics

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "sleuth.json"
#: The series names each kind of metric exports (prometheus_client's text format).
SUFFIXES = {Counter: ("_total",), Gauge: ("",), Histogram: ("_bucket", "_sum", "_count"), Info: ("_info",)}
#: PromQL words that look like metric names in an expression.
FUNCTIONS = {"sum", "max", "count", "rate", "increase", "histogram_quantile", "by", "le"}


def exported() -> dict[str, set[str]]:
    """Series name -> its label names, for every metric in sleuth.metrics."""
    series: dict[str, set[str]] = {}
    for name in metrics.__all__:
        metric = getattr(metrics, name)
        kind = next((k for k in SUFFIXES if isinstance(metric, k)), None)
        if kind is None:
            continue
        family = metric._name  # prometheus_client strips _total and _info from the name it was given
        labels = set(metric._labelnames) | ({"le"} if kind is Histogram else set())
        if kind is Info:
            labels |= set(next(iter(metric.collect())).samples[0].labels)
        for suffix in SUFFIXES[kind]:
            series[family + suffix] = labels
    return series


def queries() -> list[tuple[str, str]]:
    """(panel title, expression) for every target of every panel."""
    board = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in board["panels"] for target in panel["targets"]]


def test_every_series_the_dashboard_queries_is_exported_with_its_labels() -> None:
    series = exported()
    assert "sleuth_build_info" in series and {"version", "python"} <= series["sleuth_build_info"]
    used = set()
    for title, expr in queries():
        names = {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", re.sub(r"\[[^]]*\]|\"[^\"]*\"", "", expr))
                 if w.startswith("sleuth_")}
        assert names, f"panel {title!r}: {expr} queries no sleuth series"
        unknown = names - set(series)
        assert not unknown, f"panel {title!r}: {sorted(unknown)} is not a series sleuth exports"
        grouped = {label.strip() for group in re.findall(r"by \(([^)]*)\)", expr) for label in group.split(",")}
        offered = set().union(*(series[n] for n in names))
        assert grouped <= offered, f"panel {title!r}: groups by {sorted(grouped - offered)}, which {sorted(names)} lack"
        used |= names
    # Every metric sleuth defines has a panel (a histogram through any of its series).
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in series}
    assert families <= {re.sub(r"_(bucket|sum|count)$", "", n) for n in used}


def test_the_dashboard_is_a_grafana_dashboard_on_a_chosen_prometheus() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] and board["title"] and isinstance(board["schemaVersion"], int)
    [variable] = board["templating"]["list"]
    assert variable == {**variable, "name": "datasource", "type": "datasource", "query": "prometheus"}
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)) and all(t["datasource"] == panel["datasource"] for t in panel["targets"])
    # No two panels overlap on Grafana's 24-column grid.
    cells = [(p["title"], x, y) for p in board["panels"] for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
             for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])]
    assert len({(x, y) for _t, x, y in cells}) == len(cells)


def test_every_query_parses_as_promql(tmp_path) -> None:
    assert shutil.which("promtool"), "promtool is missing: deploy/install.sh installs it (Debian package prometheus)"
    # promtool parses expressions in recording rules: one rule per query.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"sleuth_dashboard:query{k}", "expr": expr} for k, (_title, expr) in enumerate(queries())]}]}
    path = tmp_path / "rules.json"  # YAML is a superset of JSON
    path.write_text(json.dumps(rules))
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(queries())} rules found" in done.stdout

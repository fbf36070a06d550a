"""The HTML incident report from emulator data: its figures' data, the page in headless Chromium, the CLI."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from matplotlib import image as mpimg

from sleuth.cli import main
from sleuth.errors import ConfigError
from sleuth.jobspec import JobSpec
from sleuth.report import gather
from sleuth.report.evidence import Role
from sleuth.sources import MemorySource
from sleuth.storage.report_queries import IncidentQueries, quote

from .browser import is_local_reference, visit
from .conftest import SLOW_GPU, Emulated

FIGURES = ("fig-iterations", "fig-timeline", "fig-traversal", "fig-topology", "fig-scores", "fig-impact", "fig-heatmap")
KEY_IDS = {
    "summary", "incident-id", "job-id", "cause", "top-suspect", "roots-table", "suspects-table", "steps-table",
    *FIGURES, *(f"sql-{name}-0" for name in ("iterations", "timeline", "traversal", "topology", "scores", "impact")),
}


def slow_rank(emulated: Emulated) -> int:
    spec = emulated.source.job_spec()
    host, gpu = SLOW_GPU.removeprefix("gpu:").split("/")
    [rank] = [p.rank for p in spec.placements if p.host == host and p.gpu == int(gpu)]
    return rank


def test_the_figures_show_the_incident_and_its_records(emulated: Emulated) -> None:
    incident = emulated.incident
    assert incident.suspects[0].device == SLOW_GPU  # the input is what the report is about
    data = gather(incident, emulated.source, emulated.topology)

    # Iteration times: the mean over the visited ranks, computed here from the raw iteration records.
    batch = emulated.source.iterations(ranks=list(incident.traversal))
    for iteration, shown in zip(data.iterations.iterations, data.iterations.times_ms):
        mine = batch["iteration"] == iteration
        assert shown == pytest.approx(np.mean(batch["t_end_ns"][mine] - batch["t_start_ns"][mine]) / 1e6)
    assert set(data.iterations.iterations[data.iterations.irregular].tolist()) == set(incident.iterations)
    assert data.iterations.baseline_ms == pytest.approx(incident.impact.baseline_ns / 1e6)

    # Timeline: the slow GPU's rank is on it, its root operator marked; every visited rank is a row.
    timeline = data.timeline
    rank = slow_rank(emulated)
    assert rank in timeline.ranks and set(incident.traversal) <= set(timeline.ranks)
    roots = timeline.role == int(Role.ROOT)
    assert rank in set(timeline.rank[roots].tolist())
    first_root = incident.roots[0]
    assert timeline.iteration == first_root.ran  # the iteration its seq belongs to
    assert {label.split(" ")[0] for label in np.array(timeline.label)[roots]} == {f"{first_root.comm}#{first_root.seq}"}
    records = emulated.source.ranks_records(timeline.ranks, iterations=[timeline.iteration])
    assert len(timeline.rank) == len(records)
    assert (timeline.role == int(Role.VISITED)).any()

    # Topology: the suspect is drawn and highlighted, with its NIC, leaf and spines around it.
    hood = data.neighbourhood
    assert hood.suspects == frozenset({SLOW_GPU}) and not hood.left_out
    drawn = {node.device for node in hood.nodes}
    nic = emulated.topology.nic_of(SLOW_GPU)
    assert {SLOW_GPU, nic, *emulated.topology.leaves_of(nic), "host:h0003"} <= drawn
    assert any(node.device.startswith("spine:") for node in hood.nodes)
    # SQL is there for every figure, with the ids filled in.
    assert set(data.queries) == {"iterations", "timeline", "traversal", "topology", "scores", "impact"}
    assert all(quote(incident.incident) in q[0] or quote(incident.job) in q[0] for q in data.queries.values())


def test_the_report_opens_offline_in_headless_chromium(emulated: Emulated, tmp_path) -> None:
    page = tmp_path / "report.html"
    assert main([
        "report", "--incident", str(emulated.incident_json), "--records", str(emulated.records),
        "--topology", str(emulated.fabric), "-o", str(page),
    ]) == 0
    html = page.read_text(encoding="utf-8")
    assert SLOW_GPU in html and emulated.incident.incident in html

    seen = visit(page.as_uri())
    assert seen.screenshot.startswith(b"\x89PNG\r\n\x1a\n")
    pixels = mpimg.imread(io.BytesIO(seen.screenshot), format="png")
    assert pixels.shape[1] >= 1000 and pixels.shape[0] >= 2000  # the whole page, not an empty viewport
    assert len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 50  # drawn figures, not a blank page
    assert KEY_IDS <= seen.ids, KEY_IDS - seen.ids
    assert seen.figures_drawn == set(FIGURES)
    assert seen.console_errors == ()
    assert set(seen.requests) == {page.as_uri()}, seen.requests  # the page itself, nothing else
    assert [r for r in seen.references if not is_local_reference(r)] == []
    assert emulated.incident.incident in seen.title


def test_the_browser_checks_catch_a_page_that_fetches_or_fails(tmp_path) -> None:
    # The same checks on a page that breaks every rule: they must see it.
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><title>bad</title></head><body><p id="x">x</p>'
        '<img src="http://127.0.0.1:9/missing.png"><script>console.error("boom")</script></body></html>'
    )
    seen = visit(page.as_uri())
    assert "x" in seen.ids
    assert any("boom" in message for message in seen.console_errors)
    assert "http://127.0.0.1:9/missing.png" in seen.requests
    assert [r for r in seen.references if not is_local_reference(r)] == ["http://127.0.0.1:9/missing.png"]


def test_records_of_another_job_are_refused(emulated: Emulated) -> None:
    spec = emulated.source.job_spec()
    other = JobSpec.from_dict({**spec.to_dict(), "job": "another"})
    source = MemorySource(other, emulated.source.ranks_records(range(spec.world)), emulated.source.iterations())
    with pytest.raises(ConfigError, match="job 'another'"):
        gather(emulated.incident, source, emulated.topology)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--incident", "{dir}/nope.json", "--records", "{records}"], "--incident {dir}/nope.json: no such file"),
        (["--incident", "{incident}", "--records", "{dir}/nope"], "--records {dir}/nope: no such file"),
        (["--incident", "{incident}", "--records", "{records}", "other-id"], "no incident 'other-id'"),
        (["--incident", "{incident}"], "--incident and --records go together"),
        (["--incident", "{dir}/bad.json", "--records", "{records}"], "not an incident document (t_from_ns: missing)"),
        (["--incident", "{dir}/text.json", "--records", "{records}"], "not JSON"),
        (["--incident", "{incident}", "--records", "{records}", "--topology", "{dir}/nope.yaml"], "--topology"),
        ([], "name an incident ID"),
    ],
)
def test_bad_report_arguments_name_what_is_wrong(emulated: Emulated, tmp_path, capsys, arguments, message) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"job": "j", "incident": "i"}))
    (tmp_path / "text.json").write_text("not json")
    values = {"dir": tmp_path, "records": emulated.records, "incident": emulated.incident_json}
    argv = ["report", *(a.format(**values) for a in arguments), "-o", str(tmp_path / "out.html")]
    assert main(argv) == 2
    assert message.format(**values) in capsys.readouterr().err
    assert not (tmp_path / "out.html").exists()


def test_sql_literals_are_quoted_and_database_names_checked() -> None:
    assert quote("it's a \\ test") == "'it\\'s a \\\\ test'"
    queries = IncidentQueries("sleuth", "job'1", "inc-1")
    assert "job = 'job\\'1' AND incident = 'inc-1'" in queries.suspects()
    with pytest.raises(ConfigError, match="database name"):
        IncidentQueries("bad name; DROP", "j", "i")

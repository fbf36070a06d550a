"""``benchmarks/results.py`` and its renderers (``benchmarks/sections/``): RESULTS.md's sections and figure
from the benchmarks' JSON, its generated blocks rewritten in place, and the committed RESULTS.md
checked against the committed JSON."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = _ROOT / "benchmarks" / "results.py"
_RESULTS_MD = _ROOT / "benchmarks" / "RESULTS.md"


@pytest.fixture(scope="module")
def results():
    spec = importlib.util.spec_from_file_location("bench_results", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sections(results):
    """The renderers' package, ``benchmarks/sections/`` (on the path once results.py is loaded)."""
    return importlib.import_module("sections")


def _row(suite: str, name: str, devices: list[str], suspects: list[str], s: float, truth: float, **more) -> dict:
    return {"suite": suite, "name": name, "devices": devices, "suspects": suspects, "causes": more.get("causes", []),
            "triggers": more.get("triggers", []), "slowdown": s, "slowdown_truth": truth,
            "correct": more.get("correct"), "correct_top2": more.get("correct_top2"),
            "hardware_alarm": bool(suspects)}


DOCUMENT = {
    "seeds": [7],
    "accuracy": {"all": {"n": 2, "sleuth": 1.0, "sleuth_top2": 0.5}},
    "nonhardware": {"nonhw-seqlen@7": ["seqlen_imbalance"]},
    "slowdown": {"n": 4, "within_5pct": 3, "within_5pct_without_pauses": 2},
    "rows": [
        {**_row("types", "types-gpu", ["gpu:h0001/2"], ["gpu:h0001/2"], 1.21, 1.2, causes=["compute"],
                triggers=["irregular"], correct=True, correct_top2=True), "slowdown_truth_without_pauses": 1.205},
        _row("network", "network-spine", ["spine:s1"], ["nic:h0002/0", "spine:s1"], 1.03, 1.26, causes=["network"],
             triggers=["irregular"], correct=True, correct_top2=False),
        _row("clean", "clean-0", [], ["gpu:h0003/0"], 1.02, 1.019),
        _row("nonhw", "nonhw-seqlen", [], [], 1.03, 1.04, causes=["seqlen_imbalance"], triggers=["slowdown"]),
    ],
}


def test_the_section_has_a_row_per_scenario_and_the_summary_the_json_holds(sections) -> None:
    section = sections.localizer_section(DOCUMENT)
    lines = section.splitlines()
    assert lines[2] == ("| types | types-gpu | gpu:h0001/2 | gpu:h0001/2 | compute | irregular | 1.2100 | 1.2000 "
                        "| 1.2050 | yes | yes |")
    # A row from before the pause-free twin has a dash in its column.
    assert "| network | network-spine | spine:s1 | nic:h0002/0, spine:s1 | network | irregular | 1.0300 | 1.2600 | - | yes | no |" in lines
    assert "| clean | clean-0 | - | gpu:h0003/0 | - | - | 1.0200 | 1.0190 | - | - | - |" in lines
    summary = lines[-1]
    assert summary.startswith("Seed 7: 2 of 2 faulty scenarios right by any suspect, 1 of 2 by the top two")
    assert "clean runs 1 of 1 alarmed" in summary and "nonhw-seqlen read as seqlen_imbalance" in summary
    assert "S within 5% of the truth on 3 of 4 (outside: network-spine 1.030 against 1.260)" in summary
    assert "within 5% of the twin without its pauses on 2 of 4" in summary


def test_a_run_of_several_seeds_names_each_non_hardware_scenario_s_seed(sections) -> None:
    document = {**DOCUMENT, "seeds": [7, 8], "nonhardware": {"nonhw-seqlen@7": ["seqlen_imbalance"],
                                                             "nonhw-seqlen@8": []}}
    summary = sections.localizer_section(document).splitlines()[-1]
    assert summary.startswith("Seeds 7, 8: ")
    assert "non-hardware causes: nonhw-seqlen (7) read as seqlen_imbalance, nonhw-seqlen (8) read as nothing;" in summary


def test_the_figure_names_the_scenarios_outside_the_band(sections, tmp_path) -> None:
    path = tmp_path / "figures" / "s.svg"
    sections.localizer_figure(DOCUMENT, path)
    drawn = path.read_text()
    assert drawn.startswith("<?xml") and "network-spine" in drawn and "types-gpu" not in drawn
    sections.localizer_figure(DOCUMENT, tmp_path / "again.svg")
    assert (tmp_path / "again.svg").read_text() == drawn  # the same JSON draws the same file


def test_other_json_is_refused_with_what_is_missing(sections) -> None:
    with pytest.raises(ValueError, match="no 'rows' list"):
        sections.localizer_section({"accuracy": {}})
    with pytest.raises(ValueError, match="no scenario has both S and its truth"):
        sections.localizer_figure({"rows": [{"suite": "a", "name": "b", "slowdown": None}]}, Path("unused.svg"))


def test_the_attribution_section_has_a_row_per_scale_and_a_dash_where_detection_was_not_timed(sections) -> None:
    rows = [{"world": 1024, "seed": 5, "records": 1886208, "attribution_s": 2.114, "slowdown": 1.11784,
             "stragglers_slowdown": 1.078, "slowdown_truth": 1.0615, "slowdown_truth_without_pauses": 1.0701,
             "top_worker_group_has_fault": True, "top_worker_group": 8, "detection_s": 4.05, "ratio": 0.5214},
            {"world": 8192, "seed": 5, "records": 9166848, "attribution_s": 19.49, "slowdown": 1.1491,
             "stragglers_slowdown": 1.0819, "slowdown_truth": 1.0622, "top_worker_group_has_fault": False,
             "top_worker_group": 8}]
    lines = sections.attribution_section({"rows": rows}).splitlines()
    assert lines[2] == "| 1,024 | 5 | 1,886,208 | 2.11 | 4.05 | 0.521 | 1.1178 | 1.0780 | 1.0615 | 1.0701 | True (8 ranks) |"
    # A run from before the pause-free twin has a dash in its column.
    assert lines[3] == "| 8,192 | 5 | 9,166,848 | 19.49 | - | - | 1.1491 | 1.0819 | 1.0622 | - | False (8 ranks) |"
    with pytest.raises(ValueError, match="bench_attribution.py"):
        sections.attribution_section({"rows": [{"world": 8}]})


def test_the_attribution_section_has_the_one_part_columns_only_where_that_baseline_ran(sections) -> None:
    row = {"world": 16384, "seed": 7, "records": 18333696, "attribution_s": 52.71, "slowdown": 1.1196,
           "one_part_s": 74.86, "parts_ratio": 0.7041, "one_part_slowdown": 1.1196}
    lines = sections.attribution_section({"rows": [row]}).splitlines()
    assert "| one part s | parts ratio | S, one part |" in lines[0]
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert lines[2] == "| 16,384 | 7 | 18,333,696 | 52.71 | - | - | 74.86 | 0.704 | 1.1196 | 1.1196 | - | - | - | - |"


def test_the_streaming_section_has_a_row_per_scale_and_the_reads_columns_only_where_clickhouse_was_read(sections) -> None:
    memory = {"world": 8192, "seed": 3, "records_per_iteration": 763904, "window": 12,
              "round_s": {"median": 1.3, "max": 1.94}, "window_round_s": {"median": 5.59, "max": 14.43},
              "round_ratio": 0.2326, "sustained_at": 12, "opened_at": 12, "opening_round_s": 5.65,
              "incidents": [{"at": 7, "cause": "stage_imbalance", "top": None, "round_s": 5.19}],
              "top_suspect_is_fault": True, "full_round_s": 31.71, "ratio": 0.178}
    lines = sections.streaming_section({"rows": [memory]}).splitlines()
    assert lines[2] == ("| 8,192 | 3 | 763,904 | 1.30, 1.94 | 5.59, 14.43 | 0.233 | `stage_imbalance` at 7 (5.19 s) "
                        "| 12 (12) | 5.65 | True | 31.71 | 0.178 |")
    assert lines[1].count("---") == 12
    stored = memory | {"read_s": {"median": 0.86, "max": 1.05}, "opening_read_s": 0.81, "incidents": []}
    lines = sections.streaming_section({"rows": [stored]}).splitlines()
    assert "| read s (median, max) |" in lines[0] and lines[1].count("---") == 13
    assert "| 0.86, 1.05 | none | 12 (12) | 5.65 (0.81) |" in lines[2]
    with pytest.raises(ValueError, match="'round_s'"):
        sections.streaming_section({"rows": [{"world": 8}]})


def test_the_live_section_has_a_row_per_scale_and_seed_and_says_when_no_incident_named_the_fault(sections) -> None:
    row = {"world": 8192, "seed": 5, "records_per_iteration": 763904, "pace_s": 2.0, "job_iteration_s": 0.098,
           "insert_s": {"median": 0.9, "max": 1.15}, "interval_s": 1.0, "sustained_at": 12, "rounds": 19,
           "incidents_before": [{"cause": "stage_imbalance", "top": None, "iterations": [5, 8]}], "opened_at": 12,
           "trigger": "slowdown", "top": "gpu:h0129/7", "latency_s": 3.3, "round_s": 2.63, "offline_s": 16.89, "ratio": 0.195}
    missed = {key: value for key, value in row.items() if key not in ("top", "round_s", "offline_s", "ratio")}
    lines = sections.live_section({"rows": [row, missed | {"opened_at": None, "latency_s": None}]}).splitlines()
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|") == lines[3].count("|")
    assert lines[2] == ("| 8,192 | 5 | 763,904 | 2.0 | 0.90, 1.15 | 19 | `stage_imbalance` in 5-8 | 12 (12) | `gpu:h0129/7` "
                        "| 3.30 | 2.63 | 16.89 | 0.195 |")
    assert "| None (12) | none | - | - | - | - |" in lines[3]
    with pytest.raises(ValueError, match="'latency_s'"):
        sections.live_section({"rows": [{"world": 8}]})


def test_a_fault_free_run_of_any_suite_but_hiccups_counts_as_a_clean_run(sections) -> None:
    rows = [_row("clean", "clean-0", [], [], 1.02, 1.019), {**_row("clocks", "clocks-clean", [], ["gpu:h0001/0"], 1.02, 1.019),
            "fault_free": True}, {**_row("hiccups", "hiccups-1", [], [], 1.02, 1.019), "fault_free": True}]
    summary = sections.localizer_section({**DOCUMENT, "rows": rows}).splitlines()[-1]
    assert "clean runs 1 of 2 alarmed" in summary and "hiccup runs 0 of 1 alarmed" in summary


_LIVE_ROW = {"world": 1024, "seed": 9, "records_per_iteration": 157184, "pace_s": 2.0, "insert_s": {"median": 0.2, "max": 0.3},
             "rounds": 12, "incidents_before": [], "opened_at": 12, "sustained_at": 12, "top": "gpu:h0001/2",
             "latency_s": 1.24, "round_s": 1.1, "offline_s": 2.5, "ratio": 0.44}


def _block(kind: str, name: str, body: str) -> str:
    return f"<!-- results.py {kind} {name} -->\n{body}<!-- end results.py -->\n"


def test_write_renders_each_block_from_its_json_and_leaves_the_text_around_it(results, sections, tmp_path) -> None:
    (tmp_path / "live.json").write_text(json.dumps({"rows": [_LIVE_ROW]}))
    (tmp_path / "attribution.json").write_text(json.dumps({"rows": [{"world": 8, "seed": 1, "records": 10,
                                                                      "attribution_s": 0.5}]}))
    before = "# Results\n\nLive, the figures:\n"
    between = "\nText between blocks, | not a table |, kept.\n<!-- an ordinary comment -->\n"
    text = (before + _block("live", "live.json", "| an old hand copy |\n") + between
            + _block("attribution", "attribution.json", "") + "The end, no newline")
    written = results.render_blocks(text, tmp_path)
    live = sections.live_section({"rows": [_LIVE_ROW]})
    assert "| 1,024 | 9 | 157,184 | 2.0 | 0.20, 0.30 | 12 | none | 12 (12) | `gpu:h0001/2` | 1.24 |" in live
    assert written == (before + _block("live", "live.json", "\n" + live + "\n") + between
                       + _block("attribution", "attribution.json", "\n" + sections.attribution_section(
                           json.loads((tmp_path / "attribution.json").read_text())) + "\n")
                       + "The end, no newline")
    assert "an old hand copy" not in written
    assert results.render_blocks(written, tmp_path) == written  # a second run changes nothing


@pytest.mark.parametrize(("text", "message"), [
    ("intro\n<!-- results.py live live.json -->\n| table |\n", r"line 2: the block of live.json is not closed: .* before the end of the file"),
    ("<!-- results.py live live.json -->\n\n<!-- results.py live live.json -->\n<!-- end results.py -->\n",
     r"line 1: the block of live.json is not closed: .* before line 3"),
    ("a\nb\n<!-- results.py whatif live.json -->\n<!-- end results.py -->\n",
     r"line 3: unknown kind 'whatif' \(known: localizer, attribution, streaming, live, ingest, loaded, import, follow, "
     r"progress\)"),
    ("<!-- results.py live live.json live.json -->\n<!-- end results.py -->\n",
     r"line 1: live.json live.json: not what live renders .*live renders one JSON file, not 2"),
    ("<!-- results.py live missing.json -->\n<!-- end results.py -->\n", r"line 1: missing.json: No such file"),
    ("<!-- results.py attribution live.json -->\n<!-- end results.py -->\n",
     r"line 1: live.json: not what attribution renders .*bench_attribution.py"),
    ("<!-- results.py live -->\n", r"line 1: .* is not a marker: write <!-- results.py KIND JSON -->"),
    ("text\n<!-- end results.py -->\n", r"line 2: <!-- end results.py --> without a <!-- results.py KIND JSON -->"),
])
def test_write_refuses_a_bad_block_naming_its_line_and_what_is_wrong(results, tmp_path, text, message) -> None:
    (tmp_path / "live.json").write_text(json.dumps({"rows": [_LIVE_ROW]}))
    with pytest.raises(ValueError, match=message):
        results.render_blocks(text, tmp_path)


def test_the_command_line_writes_in_place_and_keeps_write_apart_from_one_section(results, tmp_path, capsys) -> None:
    (tmp_path / "live.json").write_text(json.dumps({"rows": [_LIVE_ROW]}))
    page = tmp_path / "page.md"
    page.write_text(_block("live", str(tmp_path / "live.json"), ""))  # an absolute path stays absolute
    assert results.main(["--write", str(page)]) == 0
    assert "| `gpu:h0001/2` | 1.24 |" in page.read_text()
    page.write_text("<!-- results.py live nowhere.json -->\n<!-- end results.py -->\n")
    assert results.main(["--write", str(page)]) == 2
    assert "page.md: line 1: nowhere.json: No such file" in capsys.readouterr().err
    assert results.main(["live", str(tmp_path / "live.json")]) == 0
    assert "| `gpu:h0001/2` | 1.24 |" in capsys.readouterr().out
    for argv in (["--write", str(page), "live", "x.json"], ["live"], [], ["whatif", "x.json"]):
        with pytest.raises(SystemExit) as refused:
            results.main(argv)
        assert refused.value.code == 2


def test_results_md_s_generated_blocks_are_what_the_committed_json_renders(results) -> None:
    text = _RESULTS_MD.read_text()
    kinds = {m["kind"] for m in results.BLOCK_BEGIN.finditer(text)}
    # Every renderer has a block to check: a RESULTS.md that lost its markers would pass vacuously.
    assert kinds == {*results.SECTIONS, *results.RUN_SECTIONS}, f"RESULTS.md has generated blocks of {sorted(kinds)} only"
    assert results.render_blocks(text) == text, (
        "benchmarks/RESULTS.md's generated blocks are not what benchmarks/results.py renders from their JSON: "
        "regenerate them with `.venv/bin/python benchmarks/results.py --write benchmarks/RESULTS.md`")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_to_a_results_md_section_names_one_of_its_headings() -> None:
    text = _RESULTS_MD.read_text()
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), flags=re.M):
        slug, n = _slug(heading), 1
        while slug in anchors:  # GitHub numbers a repeated heading's anchor
            slug, n = f"{_slug(heading)}-{n}", n + 1
        anchors.add(slug)
    assert _slug("The hooks' own CPU per operator") == "the-hooks-own-cpu-per-operator"
    assert _slug("Issue 32, item 5: 16,384 ranks") == "issue-32-item-5-16384-ranks"
    links = [(path.relative_to(_ROOT), anchor) for path in [_ROOT / "README.md", *sorted((_ROOT / "docs").glob("*.md"))]
             for anchor in re.findall(r"RESULTS\.md#([\w-]+)", path.read_text())]
    links += [(Path("benchmarks/RESULTS.md"), anchor) for anchor in re.findall(r"\]\(#([\w-]+)\)", text)]
    assert len(links) >= 10
    broken = [f"{path}: #{anchor}" for path, anchor in links if anchor not in anchors]
    assert not broken, f"links to no heading of benchmarks/RESULTS.md: {broken}"


def test_the_ingest_section_gives_each_stage_and_run_against_the_encoding_baseline(sections) -> None:
    document = {"baseline_encode_rps": 2_000_000.0,
                "stages": {"detection_rps": 500_000.0, "gateway_decode_validate_rps": 1_000_000.0},
                "end_to_end": [{"workers": 2, "rps": 200_000.0, "latency_p50_s": 0.3, "latency_p99_s": 0.5,
                                "latency_load_rps": 100_000.0,
                                "overload": {"offered_rps": 400_000.0, "accepted_rps": 390_000.0,
                                             "peak_rss_mib": {"gateway": 150.4, "worker0": 2048.0}}}]}
    section = sections.ingest_section(document)
    # The stages in the order a record passes them, whatever the JSON's order.
    assert section.index("| gateway: protobuf decode and validation | 1,000,000 (0.50) |") < \
        section.index("| worker: detection (the deployed detectors) | 500,000 (0.25) |")
    assert "| **end to end, 2 workers** | **200,000 (0.100)** |" in section
    assert "| 2 | 0.30 / 0.50 (100,000) | 400,000 / 390,000 | gateway 150, worker0 2,048 |" in section
    with pytest.raises(ValueError, match="not bench_ingest.py's output"):
        sections.ingest_section({"rows": []})


def test_the_loaded_jobs_section_puts_a_column_per_run_and_the_wrong_ones_in_bold(sections) -> None:
    incident = {"cause": "compute", "iterations": [5, 29], "suspects": ["gpu:vm/2"], "slowdown": 1.234}
    rows = [{"job": "spike", "run": 0, "truth": "gpu", "right": True, "incidents": [incident]},
            {"job": "spike", "run": 1, "truth": "gpu", "right": False, "incidents": [{**incident, "suspects": []}]},
            {"job": "clean", "run": 0, "truth": "none", "right": True, "incidents": []}]
    section = sections.loaded_section({"rows": rows})
    assert "| spike | gpu | compute 5-29 gpu:vm/2 x1.23 | **compute 5-29 x1.23** |" in section
    assert "| clean | none | nothing | - |" in section
    assert section.rstrip().endswith("**2 of 3 right.**")
    with pytest.raises(ValueError, match="not bench_loaded_jobs.py's output"):
        sections.loaded_section({"rows": [{"job": "x"}]})


def test_the_import_section_gives_each_format_and_each_watchdog_lag_with_and_without_durations(sections) -> None:
    document = {"records": 22400, "ranks": 8, "truth": "gpu:h0001/1",
                "nccl_inspector": {"import_s": 0.8164, "records_per_s": 27444, "top_suspect": "gpu:h0001/1"},
                "flight_recorder": [
                    {"watchdog_lag_ms": 20, "timing": False, "start_error_us_median": 10014.0,
                     "start_error_us_p99": 19803.7, "top_suspect": "nvswitch:h0001"},
                    {"watchdog_lag_ms": 0.1, "timing": True, "start_error_us_median": 5.0, "start_error_us_p99": 36.2,
                     "top_suspect": "gpu:h0001/1"}]}
    lines = sections.import_section(document).splitlines()
    assert lines[0] == "22,400 records, 8 ranks, the slow GPU `gpu:h0001/1`."
    assert "| NCCL Inspector | 0.816 | 27,444 | - | gpu:h0001/1 |" in lines
    # The lags in order, a side the run did not take a dash, a suspect other than the truth marked.
    assert lines[-2:] == ["| 0.1 ms | 5 µs / 36 µs, gpu:h0001/1 | - |", "| 20 ms | - | 10.0 ms / 19.8 ms, nvswitch:h0001 (wrong) |"]
    with pytest.raises(ValueError, match="not bench_import.py's output: no 'flight_recorder' list and 'truth'"):
        sections.import_section({"rows": []})


def test_the_follow_section_has_a_row_per_folder_size(sections) -> None:
    size = {"steps": 2000, "records": 128000, "poll_s": 0.1033, "import_s": 0.0461, "ratio_to_import": 2.273,
            "core_share": 0.171}
    lines = sections.follow_section({"benchmark": "follow", "sizes": [size]}).splitlines()
    assert lines[2] == "| 2,000 | 128,000 | 0.103 s | 0.046 s | 2.27 | 0.17 |"
    with pytest.raises(ValueError, match="not bench_follow.py's output"):
        sections.follow_section({"sizes": [size]})


_PROGRESS = {"benchmark": "progress", "ranks": 8192, "iterations": 2000, "rows": 16384000,
             "active_jobs_s": {"median": 0.0071, "max": 0.0181}, "every_rank_s": {"median": 0.1546, "max": 0.17},
             "completed_s": {"median": 0.1325, "max": 0.1465}, "every_row_s": {"median": 0.4393, "max": 0.4582},
             "active_jobs_ratio": 0.0457, "completed_ratio": 0.3015}


def test_the_progress_section_has_a_row_per_run_from_the_files_a_marker_names(results, sections, tmp_path, capsys) -> None:
    longer = _PROGRESS | {"ranks": 1024, "iterations": 40000, "rows": 40960000}
    lines = sections.progress_section([_PROGRESS, longer]).splitlines()
    assert lines[2] == "| 8,192 ranks, 2,000 steps | 16,384,000 | 0.155 s | 0.007 s | 0.046 | 0.439 s | 0.133 s | 0.301 |"
    assert lines[3].startswith("| 1,024 ranks, 40,000 steps | 40,960,000 |")
    (tmp_path / "a.json").write_text(json.dumps(_PROGRESS))
    (tmp_path / "b.json").write_text(json.dumps(longer))
    written = results.render_blocks(_block("progress", "a.json b.json", ""), tmp_path)
    assert written == _block("progress", "a.json b.json", "\n" + "\n".join(lines) + "\n\n")
    assert results.main(["progress", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    assert capsys.readouterr().out.splitlines() == lines
    with pytest.raises(ValueError, match="not bench_progress.py's output"):
        sections.progress_section([_PROGRESS, {"benchmark": "follow"}])

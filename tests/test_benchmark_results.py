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
     r"hotpath, outage, cuda, nccl, nccl_gpu, detection, keys, idle, spec, chaos, lost, baselines, suite, traces, "
     r"progress, overhead, hooks, throughput, gateway, clickhouse, reach\)"),
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
    longer = sections.ingest_section({**document, "iterations": 96,
                                      "stages": {"decode_detection_warm_rps": 900_000.0, "decode_detection_rps": 600_000.0}})
    assert longer.index("| worker: decode and detection (the deployed") < longer.index(
        "| worker: decode and detection, the run's second half (the vote screen learned from the first) | 900,000 (0.45) |")
    assert "| **end to end, 2 workers, 96 iterations** | **200,000 (0.100)** |" in longer
    assert "CPU µs" not in longer
    runs = [{**document["end_to_end"][0], "cpu_us_per_record": {"gateway": 0.9, "worker0": 1.25, "clickhouse": 1.0}}]
    assert "| 2 | gateway 0.90, worker0 1.25, clickhouse 1.00 (3.15) |" in sections.ingest_section({**document, "end_to_end": runs})
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


def test_the_lost_records_section_gives_s_as_lost_and_filled_in_against_the_whole(sections) -> None:
    row = {"scenario": "from-start-gpu", "seed": 5885, "share": 0.01, "lost": 35014, "filled": 35000,
           "slowdown_whole": 1.3526, "slowdown_as_lost": 1.0356, "slowdown_filled": 1.2677, "ratio_as_lost": 0.7656,
           "ratio_filled": 0.9372, "top2_whole": True, "top2_filled": False}
    summary = {"0.01": {"rows": 1, "top2_whole": 1, "top2_filled": 0, "within_5pct_as_lost": 0, "within_5pct_filled": 0,
                        "worst_ratio_filled": 0.9372}}
    section = sections.lost_section({"benchmark": "lost_records", "rows": [row], "summary": summary})
    assert "| from-start-gpu | 5885 | 1.0% | 35,014 / 35,000 | 1.3526 | 1.0356 (0.766) | 1.2677 (0.937) | yes / no |" in section
    assert "1.0% lost: top two right on 0 of 1 filled in (1 whole); S within 5% of the whole's on 0 filled in, 0 as lost; " \
           "the lowest ratio filled in 0.937." in section
    with pytest.raises(ValueError, match="not bench_lost_records.py's output: no 'summary'"):
        sections.lost_section({"benchmark": "lost_records", "rows": []})


def test_the_import_section_gives_each_format_and_each_watchdog_lag_with_and_without_durations(sections) -> None:
    document = {"records": 22400, "ranks": 8, "truth": "gpu:h0001/1",
                "nccl_inspector": {"import_s": 0.8164, "records_per_s": 27444, "top_suspect": "gpu:h0001/1"},
                "flight_recorder": [
                    {"watchdog_lag_ms": 20, "timing": False, "start_error_us_median": 10014.0,
                     "start_error_us_p99": 19803.7, "top_suspect": "nvswitch:h0001"},
                    {"watchdog_lag_ms": 0.1, "timing": True, "start_error_us_median": 5.0, "start_error_us_p99": 36.2,
                     "top_suspect": "gpu:h0001/1"},
                    {"watchdog_lag_ms": 100, "timing": False, "start_error_us_median": 5.0, "start_error_us_p99": 5.0,
                     "top_suspect": None, "not_reported": 1},
                    {"watchdog_lag_ms": 100, "timing": True, "host_ahead_ms": 20, "start_error_us_median": 20005.0,
                     "start_error_us_p99": 20005.0, "top_suspect": None},
                    {"watchdog_lag_ms": 100, "timing": True, "host_ahead_ms": 0, "host_ahead_spread_ms": 20,
                     "start_error_us_median": 9000.0, "start_error_us_p99": 19000.0, "top_suspect": "host:h0001"}]}
    lines = sections.import_section(document).splitlines()
    assert lines[0] == "22,400 records, 8 ranks, the slow GPU `gpu:h0001/1`."
    assert "| NCCL Inspector | 0.816 | 27,444 | - | gpu:h0001/1 |" in lines
    # The lags in order, a side the run did not take a dash, a suspect other than the truth marked, an
    # incident left unreported under the lag said so.
    assert lines[-3:] == ["| 0.1 ms | 5 µs / 36 µs, gpu:h0001/1 | - | - | - |",
                          "| 20 ms | - | 10.0 ms / 19.8 ms, nvswitch:h0001 (wrong) | - | - |",
                          "| 100 ms | - | 5 µs / 5 µs, none, 1 under the lag not reported | 20.0 ms / 20.0 ms, none (wrong) "
                          "| 9.0 ms / 19.0 ms, host:h0001 (wrong) |"]
    with pytest.raises(ValueError, match="not bench_import.py's output: no 'flight_recorder' and 'truth'"):
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


def test_the_hot_path_section_gives_c_against_its_python_twin_and_the_no_op_baseline(sections) -> None:
    document = {"benchmark": "logger_hotpath", "ops_per_run": 1000000, "repeats": 3,
                "ns_per_op_median": {"recorder_c": 248.2, "session_c": 418.0, "recorder_python": 1330.4,
                                     "session_python": 2210.0, "baseline_noop_calls": 101.0},
                "ratio_python_over_c_recorder": 5.36, "ratio_python_over_c_session": 5.29,
                "ratio_c_recorder_over_noop_baseline": 2.46, "goal_c_ns": 500}
    lines = sections.hotpath_section(document).splitlines()
    assert lines[2] == "| the recorder | 248 | 1,330 | 5.36 |"
    assert lines[3].endswith("| 418 | 2,210 | 5.29 |")
    assert lines[-1] == ("Median of 3 runs of 1,000,000 operators; goal for C: ≤ 500 ns. Baseline (a no-op method called "
                         "twice an operator): 101 ns, the C recorder 2.46 times it.")
    with pytest.raises(ValueError, match="not bench_logger_hotpath.py's output"):
        sections.hotpath_section({"ns_per_op_median": {}})


def _overhead(capture: str, cpu_rounds: list[float]) -> dict:
    return {"benchmark": "logger_step_overhead", "capture": capture, "rounds": 3, "iters": 30, "together": True,
            "cpu": {"step_ms": {"off": [80.0, 84.0, 90.0], "on": [82.0, 86.0, 93.0]},
                    "ratio_on_over_off_per_round": cpu_rounds, "ratio_on_over_off_median": sorted(cpu_rounds)[1]},
            "wall": {"step_ms": {"off": [1.0], "on": [1.0]}, "ratio_on_over_off_per_round": [0.991, 1.006, 1.001],
                     "ratio_on_over_off_median": 1.001}}


def test_the_overhead_section_has_a_row_per_capture_with_each_ratio_s_rounds(sections) -> None:
    lines = sections.overhead_section([_overhead("native", [1.02, 1.038, 1.03]),
                                       _overhead("functions", [1.08, 1.03, 1.036])]).splitlines()
    assert lines[2] == "| native | 3 × 30, together | 1.030 (1.020-1.038) | 1.001 (0.991-1.006) | 84.0 → 86.0 |"
    assert lines[3].startswith("| functions | 3 × 30, together | 1.036 (1.030-1.080) |")
    with pytest.raises(ValueError, match="not bench_logger_overhead.py's output: .*'capture'"):
        sections.overhead_section([{key: v for key, v in _overhead("native", [1.0, 1.0]).items() if key != "capture"}])


def test_the_outage_section_gives_memory_held_against_its_bounds(sections) -> None:
    document = {"benchmark": "logger_outage_memory", "fed_mib": 512.3, "records": 5200000, "buffer_bound_mib": 64,
                "spill_bound_mib": 128, "peak_held_mib": 63.98, "rss_growth_over_baseline_mib": 75.2, "spilled_mib": 122.4,
                "dropped_records_counted": 1230000}
    assert sections.outage_section(document).splitlines()[2] == (
        "| 512 MiB (5,200,000) | 64.0 MiB (64) | +75 MiB | 122 MiB (128) | 1,230,000 |")
    with pytest.raises(ValueError, match="not bench_logger_outage.py's output"):
        sections.outage_section({"benchmark": "logger_hotpath"})


def _hooks(capture: str, floor: int | None) -> dict:
    return {"benchmark": "logger_hooks_per_operator", "capture": capture, "hooks": "NativeHooks",
            "baseline_ns_per_op_without_hooks": 5391, "ns_per_op_with_hooks": 6078, "hooks_ns_per_op_median_paired": 558,
            "hooks_ns_per_op_iqr_paired": [424, 807], "ratio_with_over_without": 1.1275, "torch_hook_floor_ns_per_op": floor}


def test_the_hooks_section_has_a_row_per_capture_and_a_dash_where_no_floor_was_timed(sections) -> None:
    lines = sections.hooks_section([_hooks("native", 150), _hooks("functions", None)]).splitlines()
    assert lines[2] == "| native (`NativeHooks`) | 5,391 | 6,078 | 558 | 424-807 | 1.13 | 150 |"
    assert lines[3].endswith("| 1.13 | — |")
    with pytest.raises(ValueError, match="not bench_logger_hooks.py's output"):
        sections.hooks_section([_hooks("native", 1), {"capture": "native"}])


def _f1(f1: float, recall: float = 1.0) -> dict:
    return {"f1": f1, "precision": 1.0, "recall": recall}


def _scores(detector: float, forest: float, **more) -> dict:
    return {"detector": _f1(detector, more.get("recall", 1.0)), "forest": _f1(forest), "three_sigma": _f1(0.6),
            "knn": _f1(0.5), "svm": _f1(0.02), "ranks_scored": more.get("ranks", 128), **more.get("world", {})}


def test_the_detection_section_has_a_row_per_scale_and_fault_type_the_forest_in_bold_below_the_goal(sections) -> None:
    document = {
        "score_10k": {"operators": 10000, "forest_ms": 31.84, "three_sigma_ms": 11.9, "ratio": 2.68},
        "iterations": {"delta_monitor": {"accuracy": 0.9991, "iterations": 5000}, "median_rule": {"accuracy": 0.834},
                       "unverified_change_points": {"accuracy": 0.728}},
        "operators": {
            "per_scale": {"2048": _scores(1.0, 0.997, world={"world": 2048}),
                          "1024-nic": _scores(1.0, 0.96, world={"world": 1024}),
                          "1024": _scores(1.0, 1.0, world={"world": 1024})},
            "per_type": {"spike-gpu": _scores(0.989, 0.983, recall=0.978), "fluctuation-gpu": _scores(1.0, 1.0)}},
        "drift": {"shipped": {"tuned_min_f1": 0.979, "tuned_f1": 0.9891, "untuned_min_f1": 0.979, "untuned_f1": 0.9891,
                              "decisions_changed_by_tuning": 0, "note": "tuning moved 0 split thresholds",
                              "tunings": [{"nodes": 0}], "days": [{"abnormal": 3}, {"abnormal": 0, "flags_on_clean_day": 20},
                                                                  {"abnormal": 0, "flags_on_clean_day": 13}]}},
    }
    section = sections.detection_section(document)
    lines = section.splitlines()
    # The slow GPU's scales first, then the NIC's; the types as one row a device.
    assert lines[2:6] == ["| 1,024 GPUs | 1.000 | 1.000 | 0.600 | 0.500 | 0.020 |",
                          "| 2,048 GPUs | 1.000 | 0.997 | 0.600 | 0.500 | 0.020 |",
                          "| 1,024 GPUs, NIC at 1/8 | 1.000 | **0.960** | 0.600 | 0.500 | 0.020 |",
                          "| GPU spike / fluctuation (128 ranks) | 0.989 / 1.000 | 0.983 / 1.000 | 0.600 / 0.600 "
                          "| 0.500 / 0.500 | 0.020 / 0.020 |"]
    assert "mean F1 0.9978 over the 5 scenarios, lowest 0.989 (spike-gpu, recall 0.978)" in section
    assert "the δ monitor is 0.999 accurate (median rule 0.834, unverified change points 0.728)" in section
    assert "Scoring 10,000 operators: 31.8 ms (median of 20), 2.7x 3-sigma on the same window (11.9 ms)" in section
    assert "| shipped (scale-free features) | 0.9790 / 0.9891 | 0.9790 / 0.9891 | 0 | 0 |" in lines
    assert "33 false alarms on the 2 days without abnormal operators" in section
    assert sections.detection_section({"drift": document["drift"]}).startswith("| forest |")  # --skip operators
    with pytest.raises(ValueError, match="not bench_detection.py's output: no 'operators' or 'drift'"):
        sections.detection_section({"rows": []})


def test_the_real_traces_section_puts_each_reading_beside_the_slow_device_the_wrong_ones_in_bold(sections) -> None:
    found = {"cause": "compute", "iterations": [15, 24], "first": "gpu:vm/2"}
    blip = {"cause": "network", "iterations": [13, 13], "first": "nvswitch:vm"}
    rows = [{"trace": "loaded_ddp/spike", "world": 4, "truth": "gpu:vm/2", "also": [],
             "offline": {"incidents": [found], "right": True}, "live": {"incidents": [found, blip], "right": False}},
            {"trace": "h200_ddp/ramp", "world": 4, "truth": "gpu:node2/0", "also": ["gpu:node3/0"],
             "offline": {"incidents": [], "right": False}, "live": {"incidents": [], "right": True}}]
    section = sections.traces_section({"rows": rows})
    assert ("| loaded_ddp/spike | 4 | gpu:vm/2 | compute 15-24 gpu:vm/2 | **compute 15-24 gpu:vm/2; network 13-13 "
            "nvswitch:vm** |") in section
    assert "| h200_ddp/ramp | 4 | gpu:node2/0 (also gpu:node3/0) | **nothing** | nothing |" in section
    assert section.rstrip().endswith("**Right: offline 1 of 2, live 1 of 2.**")
    with pytest.raises(ValueError, match="not bench_real_traces.py's output"):
        sections.traces_section({"rows": [{"trace": "x"}]})


def test_the_throughput_section_has_a_row_per_batch_size(sections) -> None:
    document = {"records": 1886208, "max_messages": 32, "worker_batches": 96, "detection_cpu_rps": 467164.2,
                "cpu_ratio_to_baseline": 0.15081, "baseline_encode_cpu_rps": 3097000.0, "abnormal_rows": 120, "irregularities": 2}
    assert sections.throughput_section([document]).splitlines()[2] == (
        "| M = 32, 96 batches | 1,886,208 | 467,164 | 0.1508 | 3,097,000 | 120, 2 |")
    # Runs that timed the detectors apart from the decoding: a column for them alone.
    alone = {**document, "judge_cpu_rps": 1025591.3, "judge_cpu_ratio_to_baseline": 0.2881}
    assert sections.throughput_section([alone]).splitlines()[2] == (
        "| M = 32, 96 batches | 1,886,208 | 467,164 | 0.1508 | 1,025,591 (0.2881) | 3,097,000 | 120, 2 |")
    with pytest.raises(ValueError, match="not bench_detection_throughput.py's output: .*'max_messages'"):
        sections.throughput_section([{"detection_cpu_rps": 1.0}])


def test_the_keys_section_puts_replica_against_rank_keys_a_column_per_worker_count(sections) -> None:
    document = {"partitions": 64, "scenarios": {
        "types-spike-nic": {"world": 128, "workers": {"4": {"replica": 0.938, "rank": 0.558, "ratio": 1.681},
                                                      "16": {"replica": 0.865, "rank": 0.474, "ratio": 1.825}}},
        "scale-1024-nic": {"world": 1024, "workers": {"4": {"replica": 0.901, "rank": 0.708, "ratio": 1.273}}}}}
    lines = sections.keys_section(document).splitlines()
    assert lines[0] == "| scenario | GPUs | 4 workers: replica / rank (ratio) | 16 workers: replica / rank (ratio) |"
    assert lines[2] == "| types-spike-nic | 128 | 0.938 / 0.558 (1.68) | 0.865 / 0.474 (1.82) |"
    assert lines[3] == "| scale-1024-nic | 1,024 | 0.901 / 0.708 (1.27) | - |"
    with pytest.raises(ValueError, match="not bench_worker_keys.py's output"):
        sections.keys_section({"scenarios": {}})


def test_the_idle_jobs_section_puts_dropping_against_never_dropping(sections) -> None:
    def run(idle_s: float, jobs: int, heap: int) -> dict:
        return {"idle_s": idle_s, "jobs_held": jobs, "rank_rows": jobs * 64, "identities": jobs * 128, "heap_bytes": heap,
                "s_per_batch": 0.0881}
    document = {"baseline": run(1e12, 60, 6_610_000), "evicting": run(60.0, 2, 354_000), "heap_ratio": 0.0536}
    lines = sections.idle_section(document).splitlines()
    assert lines[2] == "| baseline (never dropped) | 60 | 3,840 | 7,680 | 6.61 MB | 0.088 |"
    assert lines[3] == "| `SLEUTH_JOB_IDLE_S=60` | 2 | 128 | 256 | 0.35 MB (ratio 0.054) | 0.088 |"
    with pytest.raises(ValueError, match="not bench_idle_jobs.py's output"):
        sections.idle_section({"baseline": {}})


def test_the_spec_section_puts_the_store_s_reads_and_the_wire_against_the_scheme_before(sections) -> None:
    document = {"world": 16384, "layout": "tp8 pp8 dp256", "communicators": 4162, "entry_bytes": 168,
                "baseline_entry_bytes": 105185, "rank0_reads_registration": 32768, "rank0_bytes_read_registration": 2970000,
                "baseline_rank0_reads_registration": 16384, "baseline_rank0_bytes_read_registration": 1723351040,
                "rank0_reads_new_group_on_8_ranks": 16, "baseline_rank0_reads_new_group_on_8_ranks": 16384,
                "registration_s": 3.2, "spec_wire_bytes": 149360, "baseline_spec_wire_bytes": 459806,
                "spec_kafka_message_bytes": 149500, "kafka_cap_bytes": 1 << 20}
    section = sections.spec_section(document)
    assert "| rank 0's reads, registration | 16,384 entries, 1.72 GB | 32,768 reads, 2.97 MB |" in section
    assert "| the merged spec (4,162 communicators) on the wire | 459,806 bytes | 149,360 bytes (14% of Kafka's 1 MiB cap" in section
    with pytest.raises(ValueError, match="not bench_spec_registration.py's output"):
        sections.spec_section({"entry_bytes": 1})


def test_the_cuda_section_puts_the_recorder_and_hooks_against_cuda_s_own_calls(sections) -> None:
    document = {"benchmark": "logger_cuda_path", "gpu": "NVIDIA H200", "torch": "2.11.0+cu130",
                "hot_path": {"ops_per_run": 1000000, "repeats": 5, "cuda_ns_per_op_median": 2355.0, "host_ns_per_op_median": 258.0,
                             "cuda_event_record_ns": 1387.1, "ratio_cuda_over_two_event_records": 0.85},
                "never_synchronizes": {"kernel_s": 1.0, "ops": 256, "stream_busy_after_issuing": True,
                                       "completed_by_a_poll_while_busy": 0},
                "launch_queue": {"kernel_launches_queued_before_a_call_waits": 1021,
                                 "logged_operators_queued_before_a_call_waits": 510},
                "hooks": {"baseline_ns_per_all_reduce_without_hooks": 22192, "hooks_ns_per_op_median_paired": 9485,
                          "ratio_with_over_without": 1.2971,
                          "behind_a_kernel": {"records_written": 220200, "records_expected": 220200, "dropped": 0}}}
    section = sections.cuda_section(document)
    assert ("| `begin_cuda` + `end_cuda`, ns per operator (median of 5 × 1,000,000) | 2,355 | two `cudaEventRecord` calls "
            "at 1,387 each (ratio 0.85); host-clock `begin` + `end` 258 |") in section
    assert "| hooks on NCCL, ns per all-reduce (median paired) | +9,485 (ratio 1.30) | 22,192 without the hooks |" in section
    assert "| 510 logged operators | 1,021 plain kernel launches |" in section
    with pytest.raises(ValueError, match="not bench_logger_cuda.py's output"):
        sections.cuda_section({"benchmark": "logger_hotpath", "hot_path": {}})


def test_the_nccl_gpu_section_puts_the_plugin_against_nccl_without_it_and_records_against_torch_s_count(sections) -> None:
    document = {"environment": {"gpu": "NVIDIA H200", "nccl": "2.28.9", "torch": "2.11.0+cu130"},
                "op_loop": {"world": 2, "bytes": 4096, "ops_per_block": 5000, "blocks": 5, "ns_per_op_on": [46288.7, 58291.7],
                            "median_off": 46506.7, "median_on": 52290.2, "ratio": 1.1244},
                "ddp_steps": {"world": 4, "iters": 300, "step_ms_on": [5.02, 5.22], "median_off": 5.1008, "median_on": 5.1171,
                              "ratio": 1.0032},
                "ddp_fault": {"c10d_ops_counted": {"0": 1502, "1": 1502}, "records_per_rank": {"1": 1502, "0": 1502}},
                "coverage": {"fsdp": {"c10d_ops_counted": {"0": {"c10d::_allgather_base_": 240, "c10d::barrier": 1}},
                                      "records_per_rank": {"0": 240}}, "seconds": 12.5}}
    lines = sections.nccl_gpu_section(document).splitlines()
    assert lines[0] == "| on one NVIDIA H200 (NCCL 2.28.9, torch 2.11.0+cu130) | with the plugin | same-run baseline |"
    assert lines[2].endswith("2 rounds) | 52,290 | 46,507 without it (ratio 1.12) |")
    assert lines[3] == "| DDP step, ms (4 ranks, 2 rounds of 300 steps) | 5.12 | 5.10 without it (ratio 1.003) |"
    assert lines[4] == "| ddp fault: records per rank | 1,502, 1,502 | torch's c10d operators counted: 1,502, 1,502 |"
    # A rank whose records fall short of torch's count is marked.
    assert lines[5] == "| fsdp: records per rank | 240 | torch's c10d operators counted: 241 (differ) |"
    with pytest.raises(ValueError, match="not bench_nccl_gpu.py's output"):
        sections.nccl_gpu_section({"op_loop": {}})


def test_the_nccl_section_puts_sleuth_s_plugin_against_a_plugin_that_only_allocates(sections) -> None:
    document = {"benchmark": "nccl_profiler", "iters": 100000, "repeats": 5, "ns_per_op_sleuth": 828.4,
                "ns_per_op_baseline_plugin": 387.1, "ns_per_op_added": 441.3, "ratio": 2.14, "records_written_per_run": 300001}
    assert sections.nccl_section(document).splitlines()[2] == "| 5 × 100,000 iterations | 828 | 387 | +441 | 2.14 | 300,001 |"
    with pytest.raises(ValueError, match="not bench_nccl_profiler.py's output"):
        sections.nccl_section({"benchmark": "nccl_profiler"})


def test_the_gateway_section_has_a_column_per_run(sections) -> None:
    run = {"world": 16384, "batches_per_rank": 1, "ranks_per_s": 566.2, "all_ranks_confirmed_s": 28.94, "ranks_failed": 0,
           "confirmed_after_s_p50": 18.1, "confirmed_after_s_p99": 28.9, "stream_s_p50": 17.6, "stream_s_p99": 27.7,
           "attempts_mean": 1.0, "gateway_peak_rss_mb_during_ranks": 394.2, "gateway_rss_before_mb": 114.0,
           "gateway_peak_threads": 29, "baseline_one_stream_batches_per_s": 1121.3, "ranks_vs_one_stream": 0.5051}
    lines = sections.gateway_section([run, run | {"batches_per_rank": 5, "all_ranks_confirmed_s": None}]).splitlines()
    assert lines[0] == "| | run 1: 16,384 ranks, 1 batch a stream | run 2: 16,384 ranks, 5 batches a stream |"
    assert "| every rank's batches confirmed after | 28.9 s | - |" in lines
    assert "| rank streams' batches / s over one stream's | 0.51 | 0.51 |" in lines
    with pytest.raises(ValueError, match="not bench_gateway_ranks.py's output"):
        sections.gateway_section([{"ranks_per_s": 1.0}])


def test_the_clickhouse_section_puts_each_benchmark_s_runs_in_one_row(sections) -> None:
    def insert(rps: float, ratio: float) -> dict:
        return {"world": 512, "batches": 192, "baseline_encode_rps": 2842611.9, "stages": {"clickhouse_insert_rps": rps},
                "ratios_to_baseline": {"stage_clickhouse_insert_rps": ratio}}
    big = {"benchmark": "clickhouse_big_read", "rows": 1228800, "select_records_s": 0.25, "ratio": 0.216}
    reads = {"benchmark": "clickhouse_read", "rows": [{"world": 4096, "reads": 92, "rows": 196800, "read_s": 9.17, "ratio": 0.252}]}
    stepped = {"benchmark": "clickhouse_read", "rows": [{"world": 4096, "reads": 170, "rows": 532880, "read_s": 36.39,
                                                         "ratio": 0.174, "read_cpu_s": 2.11, "blocks_cpu_ratio": 0.184}]}
    lines = sections.clickhouse_section([insert(1074981.9, 0.3782), big, insert(1152846.1, 0.6059), reads,
                                         stepped]).splitlines()
    assert lines[2:] == [
        "| inserts, 512 GPUs, 192 batches (protobuf encoding) | 1,074,982 and 1,152,846 records/s (0.378, 0.606) |",
        "| one 1,228,800-row read (the driver's plain columnar read) | 0.250 s (0.22) |",
        "| 4,096 GPUs, the localizer's reads (the same reads with `FINAL`) | 92 reads, 196,800 rows: 9.17 s (0.252); "
        "170 reads, 532,880 rows: 36.39 s (0.174) |",
        "| the same reads' CPU in the localizer's process (the server's default read steps) | 2.11 s (0.184) |"]
    with pytest.raises(ValueError, match="not bench_ingest.py --insert-only's, .* output: no 'stages' with"):
        sections.clickhouse_section([big, {"benchmark": "follow"}])


def test_the_chaos_section_counts_what_was_lost_and_the_faults_by_kind(sections) -> None:
    document = {"records_confirmed": 1285056, "records_lost": 0, "records_double_counted": 0, "iterations_confirmed": 9312,
                "iterations_lost": 0, "iterations_double_counted": 1, "incidents_raised": 15, "alerts_lost": 0,
                "alerts_unannounced": 0, "faults_injected": {"broker_kill": 2, "gateway_kill": 3}, "jobs": 17,
                "records_dropped_by_loggers": 0, "seconds": 330.3}
    lines = sections.chaos_section(document).splitlines()
    assert "| records confirmed / lost / double counted | 1,285,056 / 0 / 0 |" in lines
    assert "| iterations confirmed / lost / double counted | 9,312 / 0 / 1 |" in lines
    assert "| faults: broker_kill, gateway_kill | 2, 3 |" in lines and lines[-1] == "| wall time | 330 s |"
    with pytest.raises(ValueError, match="not bench_chaos.py's output: no 'faults_injected'"):
        sections.chaos_section({"records_confirmed": 1})


def test_the_reach_section_has_a_row_per_scale_the_slow_gpu_against_the_slow_nic(sections) -> None:
    def row(world: int, kind: str, fetched: float, latency: float, correct: bool = True) -> dict:
        return {"suite": "scale" if kind == "gpu" else "scale-nic", "world": world, "kind": kind, "correct": correct,
                "fetched": fetched, "read_whole": 0.0063, "records_read": 0.0118, "latency_s": latency}
    rows = [row(2048, "gpu", 0.02, 0.5), row(2048, "gpu", 0.04, 1.5, correct=False), row(2048, "nic", 0.074, 2.355),
            row(4096, "nic", 1.0, 2.7), {"suite": "dims", "name": "dims-3d", "world": 128}]
    # Two runs' seeds pooled: a scale's row counts the rows of both.
    lines = sections.reach_section([{"rows": rows[:1]}, {"rows": rows[1:]}]).splitlines()
    assert lines[2] == "| 2,048 | 1/2 | 1/1 | 3.0% (4.0%) / 7.4% (7.4%) | 0.63% / 0.63% | 1.18% / 1.18% | 1.0 s (1.5 s) / 2.4 s (2.4 s) |"
    assert lines[3] == "| 4,096 | 0/0 | 1/1 | - / 100.0% (100.0%) | - / 0.63% | - / 1.18% | - / 2.7 s (2.7 s) |"
    with pytest.raises(ValueError, match="not bench_localizer.py's output with the scale suites"):
        sections.reach_section([{"rows": [{"suite": "dims", "world": 128}]}])


def test_the_baselines_section_has_a_row_per_fault_kind_from_one_gpu_to_the_fabric(sections) -> None:
    def summary(n: int, sleuth: float, earliest: float | None) -> dict:
        return {"n": n, "sleuth": sleuth, "sleuth_top2": 1.0, "earliest": earliest, "random_walk": earliest,
                "nvrx_relative_median": earliest}
    document = {"accuracy": {"by_kind": {"nic": summary(4, 1.0, 0.0), "gpu": summary(14, 0.93, 0.2857),
                                         "concurrent": summary(2, 1.0, None)}}}
    lines = sections.baselines_section(document).splitlines()
    assert lines[0] == "| fault kind | n | sleuth | sleuth, top 2 | earliest | random walk | NVRx relative median |"
    assert lines[2:] == ["| gpu | 14 | 0.93 | 1.00 | 0.29 | 0.29 | 0.29 |", "| nic | 4 | 1.00 | 1.00 | 0.00 | 0.00 | 0.00 |",
                         "| concurrent | 2 | 1.00 | 1.00 | not run | not run | not run |"]
    with pytest.raises(ValueError, match="with its baselines"):
        sections.baselines_section({"accuracy": {"by_kind": {"gpu": summary(1, 1.0, None)}}})
    with pytest.raises(ValueError, match="no 'accuracy'"):
        sections.baselines_section({"rows": []})


_CI_LOG = """...
========== 1600 passed, 3 warnings in 801.34s (0:13:21) ==========
Success: no issues found in 232 source files
\tCommand being timed: "bash .ci/run"
\tElapsed (wall clock) time (h:mm:ss or m:ss): 14:46.33
\tMaximum resident set size (kbytes): 3530160
"""


def test_the_suite_s_figures_come_from_a_ci_log_under_gnu_time_and_render_as_one_row(sections) -> None:
    spec = importlib.util.spec_from_file_location("ci_figures", _ROOT / "benchmarks" / "ci_figures.py")
    assert spec is not None and spec.loader is not None
    ci_figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ci_figures)
    found = ci_figures.figures(_CI_LOG)
    assert found == {"passed": 1600, "failed": 0, "pytest_s": 801.34, "wall_s": 886.33, "max_rss_kb": 3530160,
                     "typecheck_files": 232}
    assert ci_figures.figures("2 failed, 1598 passed in 790.00s\n" + _CI_LOG.split("\n", 2)[2])["failed"] == 2
    with pytest.raises(ValueError, match="no GNU time's wall clock and no GNU time's maximum resident set size"):
        ci_figures.figures("1600 passed in 801.34s")
    lines = sections.suite_section({"benchmark": "ci_figures", "commit": "74d2320", **found}).splitlines()
    assert lines[-1] == "| `74d2320` | 1,600 | 0 | 13:21.3 | 14:46.3 | 3.53 GB | clean, 232 files |"

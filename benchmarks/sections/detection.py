"""Detection's sections: ``bench_detection.py`` (F1 per scenario against the baselines, iterations,
scoring time, the drifting month), ``bench_detection_throughput.py`` (a worker's records/s, a row a
batch size) and ``bench_worker_keys.py`` (F1 of the workers' shares by key)."""

from __future__ import annotations

from statistics import fmean

from .cells import require

__all__ = ["FOREST_GOAL", "detection_section", "keys_section", "throughput_section"]

#: The forest alone, which the workers run, is short of the issue's goal below this F1 (in bold).
FOREST_GOAL = 0.97
#: ``bench_detection.py``'s methods, the table's columns.
_METHODS = (("detector", "detector"), ("forest", "forest"), ("three_sigma", "3-sigma"), ("knn", "KNN"), ("svm", "SVM"))
#: The drifting month's forests, as RESULTS.md names them.
_FORESTS = (("shipped", "shipped (scale-free features)"),
            ("per_job_all_features", "per job, every feature (trained on week 1 of another seed)"),
            ("per_job_drift_prone_only", "per job, drift-prone nanosecond features only"))


def detection_section(document: dict) -> str:
    """``bench_detection.py``'s F1 per scenario of the detector, the forest (in bold below the goal)
    and the baselines, the iteration methods and scoring time against 3-sigma, and the drifting
    month's forests tuned against untuned, as markdown; a part the run skipped is left out."""
    if "operators" not in document and "drift" not in document:
        raise ValueError("not bench_detection.py's output: no 'operators' or 'drift'")
    out = []
    if "operators" in document:
        out.append(_operators(document["operators"]))
    said = []
    if "iterations" in document:
        it = document["iterations"]
        said.append(f"Iterations ({it['delta_monitor']['iterations']:,}): the δ monitor is {it['delta_monitor']['accuracy']:.3f} "
                    f"accurate (median rule {it['median_rule']['accuracy']:.3f}, unverified change points "
                    f"{it['unverified_change_points']['accuracy']:.3f}).")
    if "score_10k" in document:
        score = document["score_10k"]
        said.append(f"Scoring {score['operators']:,} operators: {score['forest_ms']:.1f} ms (median of 20), "
                    f"{score['ratio']:.1f}x 3-sigma on the same window ({score['three_sigma_ms']:.1f} ms), same run.")
    if said:
        out.append(" ".join(said) + "\n")
    if "drift" in document:
        out.append(_drift(document["drift"]))
    return "\n".join(out)


def _operators(operators: dict) -> str:
    lines = ["| scenario | " + " | ".join(name for _, name in _METHODS) + " |", "|---" * (len(_METHODS) + 1) + "|"]
    scales = sorted(operators["per_scale"].items(), key=lambda item: (item[0].endswith("-nic"), item[1]["world"]))
    for key, scores in scales:
        label = f"{scores['world']:,} GPUs" + (", NIC at 1/8" if key.endswith("-nic") else "")
        lines.append(f"| {label} | " + " | ".join(_f1(method, scores[method]["f1"]) for method, _ in _METHODS) + " |")
    types = operators["per_type"]
    for device in ("gpu", "nic"):
        kinds = [k for k in ("spike", "fluctuation", "persistent") if f"{k}-{device}" in types]
        if not kinds:
            continue
        ranks = types[f"{kinds[0]}-{device}"]["ranks_scored"]
        cells = [" / ".join(_f1(method, types[f"{k}-{device}"][method]["f1"]) for k in kinds) for method, _ in _METHODS]
        lines.append(f"| {device.upper()} {' / '.join(kinds)} ({ranks:,} ranks) | " + " | ".join(cells) + " |")
    every = [*operators["per_scale"].values(), *types.values()]
    lowest_name, lowest = min([*operators["per_scale"].items(), *types.items()], key=lambda item: item[1]["detector"]["f1"])
    return "\n".join(lines) + "\n" + (
        f"\nThe detector: mean F1 {fmean(s['detector']['f1'] for s in every):.4f} over the {len(every)} scenarios, "
        f"lowest {lowest['detector']['f1']:.3f} ({lowest_name}, recall {lowest['detector']['recall']:.3f}).\n")


def _f1(method: str, f1: float) -> str:
    return f"**{f1:.3f}**" if method == "forest" and f1 < FOREST_GOAL else f"{f1:.3f}"


def _drift(drift: dict) -> str:
    lines = ["| forest | tuned: worst day / month | untuned: worst day / month | thresholds moved | decisions changed |",
             "|---|---|---|---|---|"]
    for key, name in _FORESTS:
        if key in drift:
            f = drift[key]
            lines.append(f"| {name} | {f['tuned_min_f1']:.4f} / {f['tuned_f1']:.4f} | {f['untuned_min_f1']:.4f} / "
                         f"{f['untuned_f1']:.4f} | {sum(t['nodes'] for t in f['tunings']):,} | {f['decisions_changed_by_tuning']:,} |")
    shipped = drift.get("shipped")
    if shipped is None:
        return "\n".join(lines) + "\n"
    clean = [day for day in shipped["days"] if not day["abnormal"]]
    return "\n".join(lines) + "\n" + (
        f"\nThe shipped forest, tuned: {sum(day['flags_on_clean_day'] for day in clean):,} false alarms on the "
        f"{len(clean)} days without abnormal operators; {shipped['note']}.\n")


def throughput_section(documents: list[dict]) -> str:
    """A row per ``bench_detection_throughput.py`` run (a batch size each): records/s of CPU and its
    ratio to the same run's protobuf encoding, as markdown."""
    require(documents, "bench_detection_throughput.py", "detection_cpu_rps", "max_messages")
    # Runs since the stages were timed apart also give the detectors' own rate, the decoding left out.
    alone = all("judge_cpu_rps" in d for d in documents)
    lines = ["| batches | records | records/s of CPU | CPU ratio to the baseline |"
             + (" detection alone (no decoding): records/s of CPU (ratio) |" if alone else "")
             + " baseline records/s of CPU | found (abnormal rows, irregularities) |",
             "|---|---|---|---|" + ("---|" if alone else "") + "---|---|"]
    lines += [f"| M = {d['max_messages']:,}, {d['worker_batches']:,} batches{_slices(d)} | {d['records']:,} | {d['detection_cpu_rps']:,.0f} "
              f"| {d['cpu_ratio_to_baseline']:.4f} |"
              + (f" {d['judge_cpu_rps']:,.0f} ({d['judge_cpu_ratio_to_baseline']:.4f}) |" if alone else "")
              + f" {d['baseline_encode_cpu_rps']:,.0f} | {d['abnormal_rows']:,}, {d['irregularities']:,} |"
              for d in documents]
    return "\n".join(lines) + "\n"


def _slices(document: dict) -> str:
    """How a run's batches were judged: in slices of whole iterations, or whole (runs before slicing name none)."""
    size = document.get("slice_records")
    if size is None:
        return ""
    return ", each whole" if size >= document["records"] else f", judged in slices of whole iterations up to {size:,} records"


def keys_section(document: dict) -> str:
    """``bench_worker_keys.py``'s F1 of every worker's operators, replica keys against rank keys (the
    baseline), a row per scenario and a column per worker count, as markdown."""
    require(document, "bench_worker_keys.py", "scenarios", "partitions")
    scenarios = document["scenarios"]
    counts = sorted({int(w) for s in scenarios.values() for w in s["workers"]})
    lines = ["| scenario | GPUs | " + " | ".join(f"{w} workers: replica / rank (ratio)" for w in counts) + " |",
             "|---|---|" + "---|" * len(counts)]
    for name, s in scenarios.items():
        cells = [_keyed(s["workers"][str(w)]) if str(w) in s["workers"] else "-" for w in counts]
        lines.append(f"| {name} | {s['world']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _keyed(f1: dict) -> str:
    return f"{f1['replica']:.3f} / {f1['rank']:.3f} ({f1['ratio']:.2f})"

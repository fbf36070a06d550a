"""Detection benchmark: abnormal operators, drift, irregular iterations, scoring time; prints JSON.

    .venv/bin/python benchmarks/bench_detection.py [--scales 1024,2048,4096,8192] [--ranks all|N]

Every scenario uses seed 7 (the shipped model trained on seeds 101-102, threshold on 103-106; see
scripts/train_default_model.py), so nothing here was seen in training.

* ``operators.per_scale`` (a slow GPU, suite ``scale``: keys ``1024`` ...; a NIC at an eighth of its
  bandwidth, suite ``scale-nic``: keys ``1024-nic`` ...) / ``operators.per_type``: F1, precision, recall of the shipped
  ``detector`` (on a whole job, the forest overruled by the counterfactual replay:
  ``stream/detection/counterfactual.py``; on a sample, the forest), of the ``forest`` alone (its own streaming windows:
  only instances it judged normal enter them) and of the baselines:
  3-sigma per operator series, KNN, SVM (trained on seed-101 rows), the untuned forest being the
  forest itself. The baselines score features whose windows were cleaned by the *labels* (an
  advantage the forest does not get). ``--ranks all`` (the default) scores every rank of each job,
  which is what a job's workers see together; ``--ranks N`` only a sample, N whole tensor groups per
  scale scenario and N / 2 per type scenario, always including the faulty GPU's or NIC's
  (``training_rows.sample_ranks``): quicker, but a sample's F1 moves with which ranks it holds (seed 7's
  NIC spike scored 0.88 to 0.99 on samples of 2 to 16 groups, 0.971 on the whole job). KNN and SVM
  score at most 50,000 rows of each (a uniform sample). ``detectability``: the share of abnormal operators whose duration
  lies inside their own fault-free range, and the F1 of a judge that misses those and gets the
  rest right (``detectability()``). ``forest_at_own_best_threshold``: the forest's F1 at the vote
  share (``DetectionRules.threshold_grid``) best for that scenario alone, chosen in hindsight; the
  shipped threshold is one for every scenario.
* ``drift``: a month (90 recorded iterations, 3 a day): compute creeping up 7% and every transfer
  time by ``--comm-drift`` (default 20%), with a flapping GPU from its first day; F1 per day of
  the forest with weekly drift tuning against the untuned forest, and how many decisions the
  tuning changed (when none, ``note`` says so). Compute drift moves iteration times but barely
  any operator's duration; transfer drift moves the operators' own durations (Holmes fig. 10a).
* ``iterations``: accuracy, false-positive and false-negative rate per iteration method against
  "the faults made it > 10% longer than its fault-free twin", over the types, clean, drift and
  scale suites.
* ``score_10k``: time to score one rank's window of ~10,000 operators (features, forest, the
  counterfactual replay, window update), median of 20, against 3-sigma on the same window in the
  same run (``ratio``).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace

import numpy as np

from sleuth.progress import track
from sleuth.sim import Emulation, Fault, FaultKind, Profile, suite
from sleuth.sim.training_rows import emulation_rows, sample_ranks
from sleuth.stream.detection import AbnormalOperatorForest, DriftTuner, OperatorWindows, load_default_model
from sleuth.stream.detection.baselines import (
    KNNDetector, SVMDetector, ThreeSigma, median_rule, unverified_change_points,
)
from sleuth.stream.detection.features import DRIFT_PRONE, FEATURE_NAMES
from sleuth.stream.detection.iteration_monitor import irregular_iterations, job_iteration_times
from sleuth.stream.detection.counterfactual import CounterfactualReplay
from sleuth.stream.detection.offline import detector_decisions, iteration_chunks, replay, training_set
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.topology import DeviceKind

SEED = 7
TRAIN_MONTH_SEED = 104  # the per-job drift forest's week (drift suite); the shipped model's seeds are 101-106
MAX_BASELINE_ROWS = 50_000


def prf(flags: np.ndarray, labels: np.ndarray) -> dict:
    tp = int((flags & labels).sum())
    p = tp / max(int(flags.sum()), 1)
    r = tp / max(int(labels.sum()), 1)
    return {"f1": round(2 * p * r / (p + r), 4) if p + r else 0.0, "precision": round(p, 4), "recall": round(r, 4),
            "abnormal": int(labels.sum())}


def detectability(records, labels: np.ndarray, counterfactual: np.ndarray) -> dict:
    """How far the labelled-abnormal operators stand out of the fault-free run's own variation.

    An operator identity (rank, position in the iteration's program) has one fault-free duration
    per iteration (the counterfactual, jitter included). An abnormal instance whose duration lies
    inside that range looks like a normal instance of the same operator: a judge of each operator
    by its own duration alone (even one that knew every fault-free duration) flags it only if it
    flags a fault-free instance at least as long. ``f1_if_those_missed`` is the F1 of a judge that
    misses them and gets everything else right; a detector passes it only with context (the same
    slot on other ranks, the rank's other operators). ``excess`` is duration / counterfactual - 1 of the
    abnormal instances, ``spread`` the fault-free variation (IQR / 1.349 / median) of their identities.
    """
    duration = (records["t_end_ns"] - records["t_start_ns"]).astype(np.float64)
    base = counterfactual.astype(np.float64)
    # Records come ordered by rank, iteration, program order: the position within a (rank,
    # iteration) run is the operator's place in the program.
    run = records["rank"].astype(np.int64) << 32 | (records["iteration"].astype(np.int64) & 0xFFFFFFFF)
    first = np.r_[True, run[1:] != run[:-1]]
    position = np.arange(len(run)) - np.maximum.accumulate(np.where(first, np.arange(len(run)), 0))
    identity = np.unique(records["rank"].astype(np.int64) << 24 | position, return_inverse=True)[1].reshape(-1)
    n = int(identity.max()) + 1 if len(identity) else 0
    low, high = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(low, identity, base)
    np.maximum.at(high, identity, base)
    inside = labels & (duration <= high[identity]) & (duration >= low[identity])
    share = float(inside.sum() / max(int(labels.sum()), 1))
    order = np.lexsort((base, identity))
    starts = np.flatnonzero(np.r_[True, identity[order][1:] != identity[order][:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    quartile = {q: base[order][starts + ((counts - 1) * q).astype(np.int64)] for q in (0.25, 0.5, 0.75)}
    spread = ((quartile[0.75] - quartile[0.25]) / 1.349 / quartile[0.5])[identity]
    excess = duration / base - 1.0
    return {"abnormal_inside_fault_free_range": round(share, 4), "f1_if_those_missed": round(2 * (1 - share) / (2 - share), 4),
            "excess_median": round(float(np.median(excess[labels])), 4) if labels.any() else None,
            "excess_q25": round(float(np.percentile(excess[labels], 25)), 4) if labels.any() else None,
            "spread_median": round(float(np.median(spread[labels])), 4) if labels.any() else None}


def score_methods(em: Emulation, ranks: np.ndarray, model, baselines: dict, rng) -> dict:
    records = em.ranks_records(ranks)
    iterations = em.iterations(ranks=ranks)
    labels, counterfactual = em.abnormal(ranks)
    # The replay needs every member of a group, which only the whole job gives.
    votes, flags = detector_decisions(records, iterations, model.forest, window=model.window, min_history=model.min_history,
                                      counterfactual=len(ranks) == em.scenario.layout.world)
    out = {"detector": prf(flags, labels), "forest": prf(votes >= model.forest.threshold, labels)}
    # The scenario's own best threshold, in hindsight: tells a forest that ranks the operators
    # badly from one whose single threshold, shared by every scenario, sits wrong for this one.
    by_threshold = {t: prf(votes >= t, labels) for t in DETECTION_RULES.threshold_grid}
    best = max(by_threshold, key=lambda t: by_threshold[t]["f1"])
    out["forest_at_own_best_threshold"] = {"threshold": best, **by_threshold[best]}
    X, y = training_set(records, iterations, labels, window=model.window, min_history=model.min_history)
    out["three_sigma"] = prf(baselines["three_sigma"].predict(X), y)
    pick = rng.choice(len(y), min(len(y), MAX_BASELINE_ROWS), replace=False)
    for name in ("knn", "svm"):
        out[name] = prf(baselines[name].predict(X[pick]), y[pick])
    out["detectability"] = detectability(records, labels, counterfactual)
    out["operators_scored"] = int(len(records))
    out["ranks_scored"] = int(len(ranks))
    return out


def scored_ranks(em: Emulation, groups: int | None) -> np.ndarray:
    """Every rank of the job when ``groups`` is None, else ``groups`` tensor groups (``training_rows.sample_ranks``)."""
    return np.arange(em.scenario.layout.world) if groups is None else sample_ranks(em, groups)


def operators(scales: list[int], groups: int | None, model, baselines: dict) -> dict:
    rng = np.random.default_rng(0)
    per_scale = {}
    at_scale = [(sc, suffix) for name, suffix in (("scale", ""), ("scale-nic", "-nic"))
                for sc in suite(name, seed=SEED) if sc.layout.world in scales]
    for sc, suffix in track(at_scale, "operators at scale"):
        em = Emulation(sc)
        key = f"{sc.layout.world}{suffix}"
        per_scale[key] = score_methods(em, scored_ranks(em, groups), model, baselines, rng)
        per_scale[key]["world"] = sc.layout.world
        del em
    per_type = {}
    # Half as many groups for the 128-GPU types suite: it has 32 tensor groups, a scale run 128 or more.
    type_groups = None if groups is None else max(groups // 2, 1)
    for sc in track(suite("types", seed=SEED), "operators per fault type"):
        em = Emulation(sc)
        per_type[sc.name.removeprefix("types-")] = score_methods(em, scored_ranks(em, type_groups), model, baselines, rng)
    return {"per_scale": per_scale, "per_type": per_type}


def month(seed: int, comm_drift: float) -> Emulation:
    """The drift suite's month (90 recorded iterations, 3 a day, compute creeping up 7%, transfers
    by ``comm_drift``) with a GPU flapping all month."""
    base = suite("drift", seed=seed)[0]
    flapping = Fault(kind=FaultKind.GPU, device=base.topology.devices(DeviceKind.GPU)[37],
                     slow=1.5, profile=Profile.FLUCTUATION, start=2)
    return Emulation(replace(base, iterations=90, faults=(flapping,), comm_drift=comm_drift,
                             name="drift-month", job="sim-drift-month"))


def tuned_and_untuned(em: Emulation, ranks: np.ndarray, forest, window: int, min_history: int) -> dict:
    """F1 per day of ``forest`` as is and under weekly drift tuning; null on days without abnormal operators."""
    records, iterations = em.ranks_records(ranks), em.iterations(ranks=ranks)
    labels, _ = em.abnormal(ranks)
    day = records["iteration"] // em.scenario.stride // 3
    ends = dict(zip(iterations["iteration"].tolist(), iterations["t_end_ns"].tolist()))
    untuned_flags = replay(records, iterations, lambda chunk, _: forest.decide(chunk.X),
                           windows=OperatorWindows(window=window, min_history=min_history))
    tuner = DriftTuner(forest)
    windows = OperatorWindows(window=window, min_history=min_history)
    tuned_flags = np.zeros(len(records), bool)
    for positions, part, its in iteration_chunks(records, iterations):
        chunk = windows.features(part, its)
        flags, normal = tuner.model.decide(chunk.X)
        tuner.update(chunk.X, int(ends[int(part["iteration"][0])]))
        tuned_flags[positions[chunk.index]] = flags
        windows.push(chunk, normal, its)
    days = []
    for d in range(int(day.max()) + 1):
        at = day == d
        scored = bool(labels[at].any())
        days.append({"day": d + 1, "abnormal": int(labels[at].sum()),
                     "tuned": prf(tuned_flags[at], labels[at])["f1"] if scored else None,
                     "untuned": prf(untuned_flags[at], labels[at])["f1"] if scored else None,
                     "flags_on_clean_day": None if scored else int(tuned_flags[at].sum())})
    scored_days = [x for x in days if x["abnormal"]]
    t0 = records["t_start_ns"].min()
    changed = int((tuned_flags != untuned_flags).sum())
    moved = sum(t.nodes for t in tuner.tunings)
    return {"tuned_min_f1": min(x["tuned"] for x in scored_days), "untuned_min_f1": min(x["untuned"] for x in scored_days),
            "tuned_f1": prf(tuned_flags, labels)["f1"], "untuned_f1": prf(untuned_flags, labels)["f1"],
            "decisions_changed_by_tuning": changed,
            "note": (f"tuning moved {moved} split thresholds and changed {changed} of {len(records)} decisions"
                     + ("" if changed else ": the emulated drift moves no operator's features across"
                        " a split of this forest, so tuned and untuned agree; no degradation to show")),
            "tunings": [{"at_day": round((t.at_ns - t0) / 86400e9, 1), "reason": t.reason, "nodes": t.nodes,
                         "iteration_ns_delta": round(t.deltas["iteration_ns"])} for t in tuner.tunings],
            "days": days}


def drift_month(model, groups: int, comm_drift: float) -> dict:
    """The shipped forest, and a per-job forest over every feature (Holmes's setting) trained on the
    first week of another draw of the same month: the shipped one reads only scale-free features,
    so its thresholds have nothing to move; the per-job one splits on nanoseconds and needs tuning."""
    em = month(SEED, comm_drift)
    ranks = sample_ranks(em, groups)
    out = {"shipped": tuned_and_untuned(em, ranks, model.forest, model.window, model.min_history),
           "ranks_scored": int(len(ranks))}
    train = month(TRAIN_MONTH_SEED, comm_drift)
    week = range(0, 21 * train.scenario.stride, train.scenario.stride)  # recorded ids step by the stride
    X, y = training_set(train.ranks_records(ranks, iterations=week), train.iterations(ranks=ranks, iterations=week),
                        train.abnormal(ranks, iterations=week)[0], window=model.window, min_history=model.min_history)
    per_job = AbnormalOperatorForest(scale_free=False, n_estimators=model.forest.n_estimators,
                                     max_depth=model.forest.max_depth).fit(X, y)
    out["per_job_all_features"] = tuned_and_untuned(em, ranks, per_job, model.window, model.min_history)
    out["per_job_all_features"]["trained_on"] = f"days 1-7 of the month, seed {TRAIN_MONTH_SEED}"
    # The same forest on the drift-prone features alone (nanoseconds of the job's clock: the
    # setting Holmes fig. 10b tunes): the others are held constant in training, so no tree splits
    # on them, and it sees the drift the window-relative features cancel.
    absolute = X.copy()
    absolute[:, [FEATURE_NAMES.index(n) for n in FEATURE_NAMES if n not in DRIFT_PRONE]] = 0.0
    per_job_ns = AbnormalOperatorForest(scale_free=False, n_estimators=model.forest.n_estimators,
                                        max_depth=model.forest.max_depth).fit(absolute, y)
    out["per_job_drift_prone_only"] = tuned_and_untuned(em, ranks, per_job_ns, model.window, model.min_history)
    out["per_job_drift_prone_only"]["trained_on"] = f"days 1-7 of the month, seed {TRAIN_MONTH_SEED}"
    out["drift"] = {"compute": em.scenario.drift, "transfers": comm_drift}
    return out


def iteration_methods(scales: list[int]) -> dict:
    scenarios = suite("types", seed=SEED) + suite("clean", seed=SEED) + suite("drift", seed=SEED) + [
        sc for sc in suite("scale", seed=SEED) if sc.layout.world in scales[:2]]
    counts = {m: np.zeros(4, int) for m in ("delta_monitor", "median_rule", "unverified_change_points")}
    for sc in track(scenarios, "iteration monitors"):
        em = Emulation(sc)
        truth = em.truth()
        iterations = em.iterations()
        slowed = np.array([t.time_ns > 1.1 * t.counterfactual_ns for t in truth.iterations])
        ids, times = job_iteration_times(iterations)[sc.job]
        found = {i.iteration for i in irregular_iterations(iterations)}
        methods = {"delta_monitor": np.isin(ids, list(found)), "median_rule": median_rule(times),
                   "unverified_change_points": unverified_change_points(times)}
        for name, flags in methods.items():
            counts[name] += [int((flags & slowed).sum()), int((flags & ~slowed).sum()),
                             int((~flags & slowed).sum()), int((~flags & ~slowed).sum())]
    out = {}
    for name, (tp, fp, fn, tn) in counts.items():
        out[name] = {"accuracy": round((tp + tn) / (tp + fp + fn + tn), 4), "false_positive_rate": round(fp / max(fp + tn, 1), 4),
                     "false_negative_rate": round(fn / max(fn + tp, 1), 4), "iterations": int(tp + fp + fn + tn)}
    out["scenarios"] = [sc.name for sc in scenarios]
    return out


def score_time(model) -> dict:
    em = Emulation(suite("types", seed=SEED)[4])
    records = em.ranks_records([5])
    warm = records.take(np.flatnonzero(records["iteration"] < 20))
    window = records.take(np.flatnonzero((records["iteration"] >= 20) & (records["iteration"] < 57)))
    iterations = em.iterations(ranks=[5], iterations=range(20, 57))

    def prepared() -> OperatorWindows:
        windows = OperatorWindows(window=model.window, min_history=model.min_history)
        chunk = windows.features(warm)
        windows.push(chunk, np.ones(len(chunk.rows), bool))
        return windows

    def run(decide, counterfactual: bool) -> float:
        times = []
        for _ in range(20):
            windows, replayer = prepared(), CounterfactualReplay() if counterfactual else None
            started = time.perf_counter()
            chunk = windows.features(window, iterations)
            flags, normal = decide(chunk.X)
            if replayer is not None:
                flags = replayer.abnormal(chunk, flags)
            windows.push(chunk, normal, iterations)
            times.append(time.perf_counter() - started)
        return float(np.median(times))

    three_sigma = ThreeSigma().fit(np.zeros((1, len(model.forest.feature_means_))))
    forest_s = run(model.forest.decide, True)
    sigma_s = run(lambda X: (lambda flags: (flags, ~flags))(three_sigma.predict(X)), False)
    return {"operators": len(window), "forest_ms": round(forest_s * 1e3, 2), "three_sigma_ms": round(sigma_s * 1e3, 2),
            "ratio": round(forest_s / sigma_s, 2), "trees": model.forest.n_estimators}


def tensor_groups(text: str) -> int | None:
    """``--ranks``: 'all' (None) or a positive number of tensor groups."""
    if text == "all":
        return None
    try:
        groups = int(text)
    except ValueError:
        groups = 0
    if groups < 1:
        raise argparse.ArgumentTypeError(f"--ranks takes 'all' or a number of tensor groups >= 1, got {text!r}")
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1024,2048,4096,8192")
    parser.add_argument("--ranks", type=tensor_groups, default=None,
                        help="'all' (default): every rank of each job; N: N tensor groups per scale scenario, N / 2 per type")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: operators,drift,iterations,timing")
    parser.add_argument("--comm-drift", type=float, default=0.2, help="transfer-time drift over the month (default 0.2)")
    args = parser.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    model = load_default_model()
    started = time.monotonic()
    result: dict = {"machine": platform.processor() or platform.machine(), "seed": SEED,
                    "model": model.metadata.get("training", {}).get("script"), "trees": model.forest.n_estimators}
    if "timing" not in skip:
        result["score_10k"] = score_time(model)
    if "iterations" not in skip:
        result["iterations"] = iteration_methods(scales)
    if "operators" not in skip:
        X, y, _ = emulation_rows(suite("types", seed=101) + suite("network", seed=101), groups=4,
                                 progress="baselines' training rows")
        baselines = {"three_sigma": ThreeSigma().fit(X), "knn": KNNDetector().fit(X, y), "svm": SVMDetector().fit(X, y)}
        result["operators"] = operators(scales, args.ranks, model, baselines)
    if "drift" not in skip:
        result["drift"] = drift_month(model, 4, args.comm_drift)
    result["seconds"] = round(time.monotonic() - started)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

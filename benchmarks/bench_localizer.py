"""Benchmark of sleuth.localizer on emulator suites with held-out seeds; prints one JSON object.

    python benchmarks/bench_localizer.py [--seeds 201 202] [--scales 1024 2048] [--graph 8192 16384]
                                         [--suites dims types network concurrent ecmp nonhw clean from-start
                                                   moderate two-moderate hiccups ramp layouts clocks]
                                         [--baselines-up-to 4096] [--no-baselines] [--no-attribution]

Figures (sleuth and each baseline: ``earliest``, ``random_walk``, ``nvrx_relative_median``):
* ``graph``: grouped operator graph build time (s) and memory (bytes of its arrays, and the
  tracemalloc peak while building) at each ``--graph`` size (tp8 pp8); the naive operator x GPU
  graph's edge count for comparison;
* ``accuracy``: the fraction of faulty scenarios whose every injected device is among the
  incidents' suspects (``sleuth``; an incident lists the top K=2 of each fault it found, so a
  merged or two-sided incident lists more) and among the first two of its side, compute (GPUs,
  hosts) or network (``sleuth_top2``), in one incident (a spine counts as named by the spine
  layer that holds it, ``spines:...``), over all,
  per suite, per scenario, per fault ``kind`` (gpu, host, nic, link, leaf, spine; ``concurrent``
  for two at once), per ``dims`` (3D-6D) and per ``scale``. The baselines
  name GPUs only, so they score 0 on network faults by construction;
* ``by_scale``: per world size (the ``scale`` suite's slow GPU and the ``scale-nic`` suite's
  slow NIC), accuracy, also ``by_kind``, ``fetched`` (ranks any record was read of / world: the
  baselines read every rank, 1.0), ``read_whole`` (ranks read whole / world: the search judges an
  operator instance from its group's records of that communicator alone, ``localizer.fetch``),
  ``records_read`` (records read / the job's records in the window) and ``latency_s``
  (irregular iterations in to suspects out, fetching from the emulator included; a baseline's
  is its read of every rank plus its ranking), and how many iterations were δ-irregular in the
  emulator's truth;
* ``nonhardware``: the causes stage / sequence-length imbalance scenarios got;
* ``false_alarm_rate``: clean runs (the ``clean`` suite's, and any other fault-free run but the
  hiccups suite's: ``clocks-clean``) localized on their 5 slowest iterations (clean runs have no
  δ-irregular iteration at all, so this forces the search); any hardware suspect is an alarm;
  ``clean_incident_rate``: the same runs with any incident, a non-hardware cause's too (it pages as one);
  ``hiccup_alarm_rate``: the same over the ``hiccups`` suite's runs (whose only events are benign
  pauses), localized on their δ-irregular iterations alone;
* ``slowdown``: with the what-if attribution (the default; ``--no-attribution`` leaves it out),
  per scenario its S against the emulator's truth (actual / balanced twin time: faults off, the
  pipeline's work split evenly over its stages), the largest
  relative error and how many scenarios are within 5%; the same against the balanced twin with
  the emulator's benign pauses at no length (``..._without_pauses``: What-if's ideal puts a
  pause back too, so this is the truth S measures); the attribution's seconds are in each row;
* ``random`` and ``random-noisy`` (with ``--suites random random-noisy``, not in the default list):
  each suite's drawn scenarios, left out of every figure above and judged apart
  (``_random_summary``): faults that cost the job the slowdown line where in force found, those
  that did not, clean runs and non-hardware causes.

Irregular iterations are the emulator's ground-truth δ-irregular iterations (the detector is
another issue); a scenario with none (sequence-length imbalance) uses its 5 slowest after the
fault starts. The baselines read every rank, which takes minutes above 4,096 GPUs on these
machines: ``--baselines-up-to`` bounds the scale they run at. Timings are for comparison
between runs on these shared 2-core machines.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import tracemalloc

import numpy as np


def graph_figures(worlds: list[int]) -> dict:
    from sleuth.jobspec import JobSpec
    from sleuth.layout import ParallelLayout
    from sleuth.localizer import build_graph

    out = {}
    for world in worlds:
        spec = JobSpec.from_layout("bench", ParallelLayout(world, 8, 8, world // 64))
        tracemalloc.start()
        began = time.perf_counter()
        graph = build_graph(spec)
        seconds = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        mean_group = graph.n_edges / graph.n_groups
        out[str(world)] = {
            "build_s": round(seconds, 4),
            "array_bytes": graph.nbytes(),
            "tracemalloc_peak_bytes": peak,
            "groups": graph.n_groups,
            "group_rank_edges": graph.n_edges,
            "naive_edges_per_1000_ops_per_rank": int(1000 * world * mean_group),
        }
    return out


def _irregular(emulation) -> list[int]:
    return list(emulation.irregular_iterations()) or emulation.slowest_iterations()


def _kind(faults: list[str]) -> str:
    kinds = sorted({f.split(":")[0] for f in faults})
    return "concurrent" if len(faults) > 1 else kinds[0]


#: Iterations whose records the hosts' clocks are read from: hundreds of collectives across hosts
#: each, and a fraction of a 16,384-GPU job's records.
_CLOCK_ITERATIONS = 10


class ReadCounter:
    """The emulator as a RecordSource read on one clock (``offsets``) that counts what the localizer
    read: ranks read whole, and records."""

    def __init__(self, emulation, offsets) -> None:
        from sleuth.whatif.clocks import OnOneClockSource

        self.emulation = emulation
        self.source = OnOneClockSource(emulation, offsets)
        self.whole: set[int] = set()
        self.records = 0

    def job_spec(self):
        return self.emulation.job_spec()

    def iteration_ids(self):
        return self.emulation.iteration_ids()

    def iterations(self, *, ranks=None, iterations=None):
        return self.source.iterations(ranks=ranks, iterations=iterations)

    def ranks_records(self, ranks, *, iterations=None, comms=None):
        ranks = list(range(self.emulation.job_spec().world) if ranks is None else ranks)
        batch = self.source.ranks_records(ranks, iterations=iterations, comms=comms)
        if comms is None:
            self.whole.update(ranks)
        self.records += len(batch)
        return batch

    def job_records(self, iterations: int) -> int:
        """Records the whole job writes in ``iterations`` iterations."""
        plan = self.emulation.plan
        per_rank = np.array([len(stage.slots) for stage in plan.stages])[plan.stage_of]
        return int(per_rank.sum()) * iterations


def named(device: str, suspects: list[str]) -> bool:
    """Whether the suspects name ``device``: itself, or for a spine the spine layer holding it (under
    ECMP the set of equal-cost spines is the finest a localizer can tell a congested spine by)."""
    from sleuth.topology import spine_set_members

    return device in suspects or any(device in (spine_set_members(s) or ()) for s in suspects)


def named_at_top(device: str, incidents: list, *, k: int = 2) -> bool:
    """Whether an incident names ``device`` among the first ``k`` suspects of its side (compute:
    GPUs and hosts; network: the rest): an incident lists the top K of each fault it found."""
    from sleuth.topology import DeviceKind

    for incident in incidents:
        for compute in (True, False):
            side = [s.device for s in incident.suspects if (s.kind in (DeviceKind.GPU, DeviceKind.HOST)) == compute]
            if named(device, side[:k]):
                return True
    return False


def _attributed(emulation, offsets):
    """The attribution of the emulator's records read on one clock: that copy (2 GB at 8,192 GPUs)
    goes when this returns, before the search reads records of its own."""
    from sleuth.whatif.attribution import attribute
    from sleuth.whatif.clocks import on_one_clock

    records, rows = on_one_clock(emulation.records(), emulation.iterations(), offsets)
    return attribute(records, emulation.job_spec(), iterations=rows)


def run_scenario(scenario, *, baselines: bool, routing: str | None = None, attribution: bool = True,
                 forced: bool = True) -> dict:
    from sleuth.localizer import localize
    from sleuth.localizer.baselines import earliest_abnormal, random_walk, read_all, relative_median
    from sleuth.sim import Emulation
    from sleuth.whatif.clocks import clock_offsets

    emulation = Emulation(scenario)
    truth = emulation.truth()
    costs = emulation.fault_costs()
    emulation.forget_twins()  # the search reads the run as recorded only
    devices = [f["device"] for f in truth.faults if f["device"]]
    irregular = _irregular(emulation) if forced else [t.iteration for t in truth.iterations if t.irregular]
    window = min(100, scenario.iterations)
    # Hosts' clocks may disagree (the clocks suite): read on one clock, as ``sleuth localize`` does;
    # the emulator's clocks hold still, so one reading of the first iterations stands for all.
    read = emulation.records(iterations=emulation.iteration_ids()[:_CLOCK_ITERATIONS])
    clocked = time.perf_counter()
    offsets = clock_offsets(read, emulation.job_spec())
    clocks_s = time.perf_counter() - clocked
    clocks_records = len(read)
    del read  # a third of the job's records at 30 iterations: gone before the attribution reads them all
    counter = ReadCounter(emulation, offsets)
    attributed = _attributed(emulation, offsets) if attribution else None
    began = time.perf_counter()
    # The emulator hashes every GPU pair onto one spine; the scenario says whether that route is known.
    routing = routing or scenario.routing.value
    incidents = localize(counter, irregular_iterations=irregular, topology=scenario.topology, window=window, routing=routing,
                         attribution=attributed)
    latency = time.perf_counter() - began
    suspects = [s.device for i in incidents for s in i.suspects]
    faults = [f"{f['kind']}:{f['profile']}" for f in truth.faults]
    row = {
        "name": scenario.name,
        "world": scenario.layout.world,
        "faults": faults,
        "kind": _kind(faults) if devices else None,
        "devices": devices,
        "fault_free": not truth.faults,
        "clocks_s": round(clocks_s, 4),  # reading the hosts' clocks from the first iterations' records
        "clocks_records": clocks_records,
        "hosts_moved": len(offsets.hosts_ns),
        "irregular_iterations": sum(t.irregular for t in truth.iterations),
        "suspects": suspects,
        "causes": [i.cause.value for i in incidents],
        "routing": routing,
        # Per injected fault: what it costs where in force, and whether its device is named (and in the top two).
        "fault_costs": [{"device": f["device"], "cost": round(cost, 4),
                         **({"named": named(f["device"], suspects), "named_top2": named_at_top(f["device"], incidents)}
                            if f["device"] else {})} for f, cost in zip(truth.faults, costs)],
        "correct": bool(devices) and all(named(d, suspects) for d in devices),
        "correct_top2": bool(devices) and all(named_at_top(d, incidents) for d in devices),
        "hardware_alarm": any(i.cause.hardware for i in incidents),
        "any_incident": bool(incidents),
        "fetched": max((i.ranks_fetched for i in incidents), default=0) / scenario.layout.world,
        "read_whole": len(counter.whole) / scenario.layout.world,
        "records_read": counter.records / counter.job_records(window),
        "latency_s": round(latency, 3),
    }
    if attributed is not None:
        spent = sum(t.time_ns for t in truth.iterations)
        actual = spent / sum(t.balanced_ns for t in truth.iterations)
        pause_free = spent / float(emulation.pause_free_times(balanced=True).sum())
        row.update({
            "slowdown": round(attributed.slowdown, 4), "slowdown_truth": round(actual, 4),
            "slowdown_error": round(attributed.slowdown / actual - 1, 4),
            "slowdown_truth_without_pauses": round(pause_free, 4),
            "slowdown_error_without_pauses": round(attributed.slowdown / pause_free - 1, 4),
            "per_iteration_error": _per_iteration_error(attributed, truth),
            "attribution_s": round(attributed.seconds, 3),
            "triggers": [i.attribution.trigger for i in incidents if i.attribution is not None],
        })
    if baselines and devices:
        began = time.perf_counter()
        every = read_all(emulation, irregular_iterations=irregular, window=window)
        read_s = time.perf_counter() - began
        for name, method in (("earliest", earliest_abnormal), ("random_walk", random_walk), ("nvrx_relative_median", relative_median)):
            began = time.perf_counter()
            found = method(every)
            row[name] = all(d in found for d in devices)
            row[f"{name}_latency_s"] = round(read_s + time.perf_counter() - began, 3)
            row[f"{name}_fetched"] = 1.0
    return row


def _per_iteration_error(attributed, truth) -> float:
    """The mean over the attributed iterations of |S - its truth| (actual over the balanced twin),
    each iteration on its own: a cost that comes and goes is read where it is paid."""
    truths = {t.iteration: t.time_ns / t.balanced_ns for t in truth.iterations}
    errors = [abs(s - truths[i]) for i, s in zip(attributed.iterations, attributed.per_iteration) if i in truths]
    return round(float(np.mean(errors)), 4) if errors else None


def _clean(row: dict) -> bool:
    """A fault-free run that measures false alarms: the hiccups suite's benign pauses are counted apart."""
    return row["suite"] == "clean" or (row["fault_free"] and row["suite"] != "hiccups")


def _rate(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if key in r]
    return round(float(np.mean(values)), 4) if values else None


def _slowdown_summary(rows: list[dict]) -> dict:
    errors = [abs(r["slowdown_error"]) for r in rows]
    without_pauses = [abs(r["slowdown_error_without_pauses"]) for r in rows]
    return {
        "n": len(rows),
        "within_5pct": sum(e <= 0.05 for e in errors),
        "max_abs_error": round(max(errors), 4) if errors else None,
        "max_per_iteration_error": max((r["per_iteration_error"] for r in rows if r.get("per_iteration_error") is not None),
                                       default=None),
        "within_5pct_without_pauses": sum(e <= 0.05 for e in without_pauses),
        "max_abs_error_without_pauses": round(max(without_pauses), 4) if without_pauses else None,
        "by_scenario": {f"{r['name']}@{r['seed']}": [r["slowdown"], r["slowdown_truth"]] for r in rows},
    }


#: The suites of drawn scenarios, each judged apart (``_random_summary``).
_DRAWN = ("random", "random-noisy")


def _random_summary(rows: list[dict], *, line: float) -> dict:
    """A drawn suite's runs (``_DRAWN``), judged apart, each fault by what it costs the job where in
    force (``Emulation.fault_costs``): a drawn fault may cost nothing (a NIC none of the job's
    cross-host transfers use, a NIC beside a slower GPU), and the job's own uneven pipeline split is
    not its cost. A fault that paid the ``line`` is right when its device is named (``paid_right``;
    in the top two of its side: ``paid_right_top2``); a run whose faults did not may go unnamed, and
    is right when no other device is blamed; a fault-free run is right with no device blamed (the
    layout's own uneven split is a cause the job pays for, and may be named); a non-hardware cause
    that paid, when named and no device blamed."""
    def paid(row: dict) -> list[dict]:
        return [f for f in row["fault_costs"] if f["cost"] >= line]

    faulty = [r for r in rows if r["devices"]]
    unpaid = [r for r in faulty if not any(f["device"] for f in paid(r))]
    paid_faults = [f for r in faulty for f in paid(r) if f["device"]]
    clean = [r for r in rows if r["fault_free"]]
    nonhw = [r for r in rows if not r["devices"] and not r["fault_free"]]
    named_nonhw = [r for r in nonhw if paid(r)]
    cause = {"last_stage": "stage_imbalance", "seqlen": "seqlen_imbalance"}
    return {
        "n": len(rows), "paid_faults": len(paid_faults), "paid_right": sum(f["named"] for f in paid_faults),
        "paid_right_top2": sum(f["named_top2"] for f in paid_faults),
        "paid_missed": [f"{r['name']}@{r['seed']}: {f['device']}" for r in faulty for f in paid(r)
                        if f["device"] and not f["named_top2"]],
        "unpaid_faults": len(unpaid),
        "unpaid_other_device_blamed": [f"{r['name']}@{r['seed']}" for r in unpaid if r["hardware_alarm"] and not r["correct"]],
        "clean": len(clean), "clean_device_blamed": [f"{r['name']}@{r['seed']}" for r in clean if r["hardware_alarm"]],
        "clean_incidents": {f"{r['name']}@{r['seed']}": r["causes"] for r in clean if r["any_incident"]},
        "nonhardware_paid": len(named_nonhw),
        "nonhardware_named": sum(cause[r["faults"][0].split(":")[0]] in r["causes"] and not r["hardware_alarm"]
                                 for r in named_nonhw),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[201, 202])
    parser.add_argument("--scales", type=int, nargs="*", default=[1024, 2048])
    parser.add_argument("--graph", type=int, nargs="*", default=[8192, 16384])
    parser.add_argument("--suites", nargs="*", default=["dims", "types", "network", "concurrent", "ecmp", "nonhw", "clean", "from-start",
                                                         "moderate", "two-moderate", "hiccups", "ramp", "layouts", "clocks"])
    parser.add_argument("--no-attribution", action="store_true", help="localize from δ-irregular iterations alone")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--baselines-up-to", type=int, default=4096, metavar="WORLD",
                        help="run the baselines (which read every rank) on scale scenarios up to this world size")
    parser.add_argument("--routing", choices=("static", "ecmp"), default=None,
                        help="what the localizer is told of spine routing, for every scenario (default: each "
                             "scenario's own, static but in the ecmp suite)")
    args = parser.parse_args()

    from sleuth.progress import track
    from sleuth.settings import Settings
    from sleuth.sim import suite

    # (suite, seed, scenario, options) of every run, listed first so that the bar knows how many.
    runs: list[tuple[str, int, object, dict]] = []
    for seed in args.seeds:
        for name in args.suites:
            runs += [(name, seed, scenario, {"baselines": not args.no_baselines, "forced": name != "hiccups"})
                     for scenario in suite(name, seed=seed)]
        runs += [("scale", seed, scenario, {"baselines": not args.no_baselines and scenario.layout.world <= args.baselines_up_to})
                 for scenario in (*suite("scale", seed=seed), *suite("scale-nic", seed=seed))
                 if scenario.layout.world in args.scales]
    rows: list[dict] = []
    for name, seed, scenario, options in track(runs, "localizer scenarios"):
        rows.append({"suite": name, "seed": seed, **run_scenario(
            scenario, routing=args.routing, attribution=not args.no_attribution, **options)})

    methods = ("sleuth", "sleuth_top2", "earliest", "random_walk", "nvrx_relative_median")
    key_of = {"sleuth": "correct", "sleuth_top2": "correct_top2"}

    def summary(selected: list[dict]) -> dict:
        return {"n": len(selected), **{m: _rate(selected, key_of.get(m, m)) for m in methods}}

    def at_scale(selected: list[dict]) -> dict:
        out = {"n": len(selected), "irregular_iterations": _rate(selected, "irregular_iterations"),
               "by_kind": {k: summary([r for r in selected if r["kind"] == k]) for k in sorted({r["kind"] for r in selected})}}
        for m in methods:
            if m == "sleuth_top2":
                out[m] = {"accuracy": _rate(selected, key_of[m])}
                continue
            prefix = "" if m == "sleuth" else f"{m}_"
            out[m] = {
                "accuracy": _rate(selected, key_of.get(m, m)),
                "fetched": _rate(selected, f"{prefix}fetched"),
                **({"read_whole": _rate(selected, "read_whole"), "records_read": _rate(selected, "records_read")} if m == "sleuth" else {}),
                "latency_s": _rate(selected, f"{prefix}latency_s"),
            }
        return out

    # The drawn suites' faults may cost nothing: judged apart (``_random_summary``).
    drawn = {name: [r for r in rows if r["suite"] == name] for name in _DRAWN}
    rows_designed = [r for r in rows if r["suite"] not in _DRAWN]
    faulty = [r for r in rows_designed if r["devices"]]
    by = lambda key, rs=faulty: {k: summary([r for r in rs if key(r) == k]) for k in sorted({key(r) for r in rs})}
    scale_rows = [r for r in rows if r["suite"] == "scale"]
    clean = [r for r in rows_designed if _clean(r)]
    nonhw = [r for r in rows if r["suite"] == "nonhw"]
    report = {
        "machine": platform.machine(),
        "seeds": args.seeds,
        "routing": args.routing or "per scenario",
        "graph": graph_figures(args.graph),
        "accuracy": {
            "all": summary(faulty),
            "by_suite": by(lambda r: r["suite"]),
            "by_kind": by(lambda r: r["kind"]),
            "by_dims": by(lambda r: r["name"].split("-", 1)[1], [r for r in faulty if r["suite"] == "dims"]),
            "by_scenario": by(lambda r: r["name"].split("-", 1)[1] if "-" in r["name"] else r["name"]),
        },
        "by_scale": {str(w): at_scale([r for r in scale_rows if r["world"] == w]) for w in sorted({r["world"] for r in scale_rows})},
        "nonhardware": {r["name"] + f"@{r['seed']}": r["causes"] for r in nonhw},
        "false_alarm_rate": _rate(clean, "hardware_alarm"),
        "clean_incident_rate": _rate(clean, "any_incident"),
        "clean_runs": len(clean),
        "hiccup_alarm_rate": _rate([r for r in rows if r["suite"] == "hiccups"], "hardware_alarm"),
        "slowdown": _slowdown_summary([r for r in rows if "slowdown" in r]),
        **{name: _random_summary(runs, line=Settings.from_env().attribution_slowdown) for name, runs in drawn.items() if runs},
        "rows": rows,
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""The committed records of real jobs, read offline and by the streaming localizer; prints one JSON object.

    .venv/bin/python benchmarks/bench_real_traces.py [--traces gloo_logger/ddp-late ...]

Every records folder of a real job under ``tests/localizer`` (each group's README says how it ran
and what it holds: a rank slowed from a step, from the first, by a ramp, uneven batches, pauses, a
checkpoint) is read two ways:

* ``offline``: as ``sleuth localize`` reads it (``localize_records``: its δ-irregular iterations,
  its what-if episodes, on one leaf over the job's hosts);
* ``live``: as the streaming localizer reads its irregular iterations, all gathered at once (a job of
  a few seconds is one gathering), judged on every landed iteration, the job ended
  (``benign_pauses.localized``). The slowdown watch, which raises the sustained episodes on rounds of
  its own, is not run here: its incidents are what offline reads from the episodes.

Per trace and reading: each incident paged (cause, first and last iteration, the device it names
first), whether the device the trace's fault is on is named first by one (``named``), and every
other device named first (``others``; a device the trace's README says the job paid for beside the
fault, which nobody injected, is not counted). Right offline: the fault's device named, no other.
Right live: no other device named (the irregular iterations alone need not name the fault's: the
slowdown watch raises its episode). No same-run baseline: this measures right and wrong, not time.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from sleuth.jobspec import JobSpec
from sleuth.localizer import Incident
from sleuth.localizer.offline import localize_records, readied
from sleuth.records_folder import read_records
from sleuth.settings import Settings
from sleuth.sources import MemorySource
from sleuth.stream.detection import irregular_iterations
from sleuth.stream.services.benign_pauses import localized
from sleuth.topology.job_fabric import single_leaf

#: The traces' folder.
TRACES = Path(__file__).resolve().parents[1] / "tests" / "localizer"

#: Each trace's faulty device as its README tells it; None: no device is slow (uneven batches,
#: pauses moving between ranks, the machine's jitter, a checkpoint every 100 steps).
TRUTH: dict[str, str | None] = {
    "gloo_logger/ddp-late": "gpu:vm/3",
    "gloo_logger/ddp-late-streamed": "gpu:vm/3",
    "gloo_logger/ddp-from0-streamed": "gpu:vm/2",
    "gloo_logger/ddp-seqlen-streamed": None,
    "gloo_logger/ddp-seqlen-streamed-2": None,
    "gloo_logger/ddp-gc-streamed": None,
    "gloo_logger/ddp-ckpt": "gpu:vm/0",  # rank 0's own work every ten steps: its GPU, the beat in the advice
    "gloo_logger/ddp-ckpt100": None,
    "gloo_logger/ddp-ckpt100-2": None,
    "gloo_profiler/sleeper-cut": "gpu:vm/1",
    "loaded_ddp/spike": "gpu:vm/2",
    "loaded_ddp/spike-mixed": "gpu:vm/2",
    "loaded_ddp/spike-dips": "gpu:vm/2",
    "loaded_ddp/seqlen": None,
    "loaded_ddp/demo-pause": "gpu:vm/5",
    "loaded_gloo/ddp-spike": "gpu:vm/2",
    "loaded_gloo/ddp-clean": None,
    "loaded_gloo/ddp-seqlen": None,
    "loaded_gloo/ddp-seqlen-top-three": None,
    "loaded_gloo/train-seqlen": None,
    "loaded_gloo/fsdp-moderate": "gpu:vm/2",
    "loaded_gloo/train-slow": "gpu:vm/5",
    "h200_ddp/fault": "gpu:node2/0",
    "h200_ddp/fault-from-start": "gpu:node2/0",
    "h200_ddp/ramp": "gpu:node2/0",
    "h200_ddp/moderate": "gpu:node2/0",
    "h200_ddp/seqlen": None,
    "h200_jax/fault": "gpu:node2/0",
}

#: Devices a trace's job paid for beside its fault, which nobody injected (its README, its tests):
#: naming them is not wrong. Four ranks sharing one H200 under MPS: rank 3 the costliest before step 60.
ALSO: dict[str, set[str]] = {"h200_ddp/ramp": {"gpu:node3/0"}, "h200_ddp/fault": {"gpu:node3/0"}}


def paged(incidents: list[Incident]) -> list[dict]:
    """Each incident as on-call hears of it: its cause, iterations, and the device it names first."""
    return [{"cause": i.cause.value, "iterations": [i.iterations[0], i.iterations[-1]],
             "first": i.suspects[0].device if i.cause.hardware and i.suspects else None} for i in incidents]


def judged(found: list[dict], truth: str | None, also: set[str], *, must_name: bool) -> dict:
    """``found`` against the trace's faulty device: named first, other devices named first, right."""
    first = {incident["first"] for incident in found if incident["first"]}
    others = sorted(first - {truth} - also)
    named = truth in first if truth is not None else None
    return {"incidents": found, "named": named, "others": others,
            "right": not others and (named is not False or not must_name)}


def read(name: str, settings: Settings) -> dict:
    """One trace read offline and live, judged against its truth."""
    folder = TRACES / name
    spec = JobSpec.read(folder)
    records, iterations = read_records(folder)
    topology = single_leaf(spec)
    offline = localize_records(spec, records, iterations, topology=topology)
    ready = readied(records, iterations, spec)
    source = MemorySource(spec, ready.records, ready.iterations)
    irregular = [i.iteration for i in irregular_iterations(ready.iterations)
                 if i.iteration >= settings.attribution_warmup]
    last = int(ready.iterations["iteration"].max())
    live = localized(source, irregular, topology=topology, settings=settings, through=last, named_elsewhere=set(),
                     stopped=True) if irregular else []
    truth, also = TRUTH[name], ALSO.get(name, set())
    return {"trace": name, "truth": truth, "also": sorted(also), "world": spec.world,
            "offline": judged(paged(list(offline.incidents)), truth, also, must_name=True),
            "live": judged(paged([reading for _, reading in live if reading is not None]), truth, also,
                           must_name=False)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", nargs="+", default=list(TRUTH), choices=list(TRUTH), metavar="GROUP/NAME",
                        help="which traces (default: all)")
    args = parser.parse_args()
    settings = Settings()
    rows = [read(name, settings) for name in args.traces]
    print(json.dumps({
        "benchmark": "real_traces", "machine": platform.machine(), "rows": rows,
        "right": {side: sum(r[side]["right"] for r in rows) for side in ("offline", "live")}, "traces": len(rows),
    }, indent=2))


if __name__ == "__main__":
    main()

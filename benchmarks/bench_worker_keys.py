"""What one worker's share of a job is worth to the detector, by how the gateway keys the records.

    .venv/bin/python benchmarks/bench_worker_keys.py [--workers 4,16] [--partitions 64]

The records topic has ``--partitions`` partitions, spread round-robin over ``--workers`` workers;
a message goes to the partition Kafka's default partitioner picks for its key (murmur2, as
kafka-python and the Java client hash). Per emulated scenario (seed 7, never used for training)
and worker count, each worker's ranks are scored with the shipped model (windows fed by its own
votes, as in the stream), under two keys:

* ``replica``: ``<job>/<smallest rank of the model replica>``, what the gateway sends now
  (``stream.kafka_records``): a worker holds whole tensor and pipeline groups;
* ``rank``: ``<job>/<rank>``, the key before: a worker holds the ranks that hash to it.

Figures: the abnormal-operator F1 of every worker's ranks together (each worker scored apart),
per key, and ``ratio`` = replica F1 / rank F1. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from kafka.partitioner.default import murmur2

from sleuth.progress import track
from sleuth.sim import Emulation, suite
from sleuth.stream.detection import load_default_model
from sleuth.stream.detection.training import streaming_scores
from sleuth.stream.ingest.kafka_records import message_key

SEED = 7
SCENARIOS = (("types", "types-spike-nic"), ("types", "types-persistent-nic"), ("types", "types-persistent-gpu"),
             ("scale-nic", "scale-1024-nic"))


def worker_ranks(job: str, units: np.ndarray, partitions: int, workers: int) -> list[np.ndarray]:
    """Each worker's ranks, when rank r travels on key ``<job>/<units[r]>``."""
    partition = np.array([(murmur2(message_key(job, int(u))) & 0x7FFFFFFF) % partitions for u in units])
    return [np.flatnonzero(partition % workers == w) for w in range(workers)]


def f1_of_workers(em: Emulation, shares: list[np.ndarray], model) -> float:
    """F1 over every worker's operators, each worker replaying only its own ranks."""
    tp = flagged = abnormal = 0
    for ranks in shares:
        if not len(ranks):
            continue
        votes = streaming_scores(model.forest, em.ranks_records(ranks), em.iterations(ranks=ranks),
                                 window=model.window, min_history=model.min_history)
        flags, labels = votes >= model.forest.threshold, em.abnormal(ranks)[0]
        tp += int((flags & labels).sum())
        flagged += int(flags.sum())
        abnormal += int(labels.sum())
    return 2 * tp / max(flagged + abnormal, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="4,16", help="worker counts, comma-separated")
    parser.add_argument("--partitions", type=int, default=64, help="partitions of the records topic")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    if any(w < 1 or w > args.partitions for w in workers):
        parser.error(f"--workers must lie in 1..--partitions ({args.partitions}), got {args.workers}")
    model = load_default_model()
    started = time.monotonic()
    out = {"seed": SEED, "partitions": args.partitions, "threshold": model.forest.threshold, "scenarios": {}}
    for suite_name, name in track(SCENARIOS, "scenarios"):
        scenario = next(sc for sc in suite(suite_name, seed=SEED) if sc.name == name)
        em = Emulation(scenario)
        layout = scenario.layout
        ranks = np.arange(layout.world)
        by_workers = {}
        for count in workers:
            f1 = {key: round(f1_of_workers(em, worker_ranks(scenario.job, units, args.partitions, count), model), 4)
                  for key, units in (("replica", layout.replica_of(ranks)), ("rank", ranks))}
            f1["ratio"] = round(f1["replica"] / max(f1["rank"], 1e-9), 3)
            by_workers[str(count)] = f1
        out["scenarios"][name] = {"world": layout.world, "tp": layout.tp, "pp": layout.pp, "workers": by_workers}
    out["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

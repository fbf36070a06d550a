"""Train the default abnormal-operator model shipped with sleuth, from emulator suites.

    .venv/bin/python scripts/train_default_model.py            # writes stream/detection/default_model.zip

Seed 101 only: the benchmarks (benchmarks/bench_detection.py) use seeds 7 and up to 99,
so the shipped model never saw a benchmark scenario. Takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


from sleuth.sim import suite
from sleuth.stream.detection.model_file import save
from sleuth.stream.detection.training import emulation_rows, fit_model

TRAINING_SEEDS = (101,)
SUITES = ("types", "network", "concurrent", "nonhw", "clean")
OUT = Path(__file__).resolve().parents[1] / "stream" / "detection" / "default_model.zip"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", type=Path, default=OUT)
    parser.add_argument("--trees", type=int, default=30)
    parser.add_argument("--depth", type=int, default=14)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    started = time.monotonic()
    scenarios = [sc for seed in TRAINING_SEEDS for name in SUITES for sc in suite(name, seed=seed)]
    X, y, summary = emulation_rows(scenarios, rank_stride=8)
    print(f"{len(y)} rows ({int(y.sum())} abnormal) from {len(scenarios)} scenarios in {time.monotonic() - started:.0f} s",
          flush=True)
    summary.update(seeds=list(TRAINING_SEEDS), suites=list(SUITES), script="scripts/train_default_model.py")
    model = fit_model(X, y, training=summary, n_estimators=args.trees, max_depth=args.depth, n_jobs=args.jobs)
    metadata = save(model, args.out, training=summary)
    print(json.dumps({"out": str(args.out), "bytes": args.out.stat().st_size, "rows": len(y),
                      "seconds": round(time.monotonic() - started), "training": metadata["training"]["suites"]}))


if __name__ == "__main__":
    main()

"""``sleuth detect``: train, evaluate and inspect abnormal-operator models.

* ``sleuth detect train --records DIR --truth LABELS -o MODEL`` — train on labelled records
  (a folder ``sleuth sim`` wrote: records.parquet, iterations.parquet, labels/abnormal.parquet;
  ``--records`` may repeat) and write a versioned model file.
* ``sleuth detect eval --records DIR [--model MODEL]`` — precision, recall and F1 of a model on
  a labelled folder, plus the folder's irregular iterations (JSON).
* ``sleuth detect info [MODEL]`` — a model file's metadata (default: the shipped model).
* ``sleuth detect convert OLD NEW`` — rewrite a pickled model file (format 1, sleuth before skops)
  in the current format; unpickles OLD, so convert only files you trust.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from sleuth.cli.arguments import positive_int
from sleuth.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("detect", help="train and evaluate the abnormal-operator detector",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="detect_command", metavar="COMMAND")
    commands.required = True

    train = commands.add_parser("train", help="train a model on labelled records")
    train.add_argument("--records", action="append", required=True, metavar="DIR",
                       help="folder (or its records.parquet) with iterations.parquet beside it; repeatable")
    train.add_argument("--truth", action="append", metavar="LABELS",
                       help="labels Parquet (boolean 'abnormal' per record), one per --records "
                            "(default DIR/labels/abnormal.parquet)")
    train.add_argument("--labels-from-clickhouse", action="store_true",
                       help="apply on-call verdicts (`sleuth ack`) from ClickHouse `labels` over the folders' labels")
    train.add_argument("-o", "--out", required=True, type=Path, metavar="MODEL", help="model file to write")
    train.add_argument("--trees", type=positive_int("trees"), default=30, help="trees in the forest (default 30)")
    train.add_argument("--depth", type=positive_int("depth"), default=14, help="largest tree depth (default 14)")
    train.add_argument("--window", type=positive_int("window"), default=20,
                       help="normal durations kept per operator identity (default 20)")
    train.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser("eval", help="score a model on labelled records")
    evaluate.add_argument("--records", required=True, metavar="DIR", help="folder written by `sleuth sim`")
    evaluate.add_argument("--truth", metavar="LABELS", help="labels Parquet (default DIR/labels/abnormal.parquet)")
    evaluate.add_argument("--model", type=Path, help="model file (default: the shipped model)")
    evaluate.set_defaults(handler=_eval)

    info = commands.add_parser("info", help="print a model file's metadata")
    info.add_argument("model", nargs="?", type=Path, help="model file (default: the shipped model)")
    info.set_defaults(handler=_info)

    convert = commands.add_parser("convert", help="rewrite a pickled (format 1) model file in the current format")
    convert.add_argument("old", type=Path, help="pickled model file (unpickled: only a file you trust)")
    convert.add_argument("new", type=Path, help="model file to write")
    convert.set_defaults(handler=_convert)


def _train(args: argparse.Namespace) -> int:
    import numpy as np

    from sleuth.progress import progress
    from sleuth.stream.detection.model_file import save
    from sleuth.stream.detection.offline import training_set
    from sleuth.stream.detection.training import fit_model, read_labelled, sample_rows

    truths = args.truth or [None] * len(args.records)
    if len(truths) != len(args.records):
        raise ConfigError(f"--truth given {len(truths)} times for {len(args.records)} --records")
    xs, ys, seen = [], [], 0
    # One step per folder (read, featurize), then the forest's fit.
    with progress("detect train", total=len(args.records) + 1) as steps:
        for k, (folder, truth) in enumerate(zip(args.records, truths)):
            steps.describe(f"features of {folder}")
            records, iterations, labels = read_labelled(folder, truth=truth)
            if args.labels_from_clickhouse:
                labels = _with_oncall_labels(records, labels, folder)
            X, y = training_set(records, iterations, labels, window=args.window)
            seen += len(y)
            X, y = sample_rows(X, y, seed=args.seed + k)
            xs.append(X)
            ys.append(y)
            steps.advance()
        X, y = np.vstack(xs), np.concatenate(ys)
        if not y.any() or y.all():
            raise ConfigError("the labels hold only one class: training needs normal and abnormal operators")
        summary = {"records": [str(p) for p in args.records], "operators_seen": seen}
        steps.describe(f"fitting {args.trees} trees on {len(y)} rows")
        model = fit_model(X, y, window=args.window, training=summary, n_estimators=args.trees, max_depth=args.depth,
                          random_state=args.seed)
        steps.advance()
    metadata = save(model, args.out)
    print(json.dumps({"model": str(args.out), "rows": metadata["training"]["rows"],
                      "abnormal_rows": metadata["training"]["abnormal_rows"], "bytes": args.out.stat().st_size}))
    return 0


def _with_oncall_labels(records, labels, folder):
    from sleuth.settings import Settings
    from sleuth.storage.labels import ClickHouseLabelStore
    from sleuth.stream import connect
    from sleuth.stream.detection.training import apply_labels

    settings = Settings.from_env()
    client = connect.clickhouse_client(settings)
    try:
        verdicts = ClickHouseLabelStore(client, settings.clickhouse_database).labels(sorted(set(records.decoded("job"))))
    finally:
        client.disconnect()
    labels, changed = apply_labels(records, labels, verdicts)
    print(f"{folder}: {len(verdicts)} on-call labels from ClickHouse, {changed} records relabelled", file=sys.stderr)
    return labels


def _eval(args: argparse.Namespace) -> int:
    from sleuth.progress import progress
    from sleuth.stream.detection.iteration_monitor import irregular_iterations
    from sleuth.stream.detection.model_file import load
    from sleuth.stream.detection.offline import abnormal_mask
    from sleuth.stream.detection.training import read_labelled

    with progress("detect eval: reading records", total=2) as steps:
        records, iterations, labels = read_labelled(args.records, truth=args.truth)
        model = load(args.model) if args.model else None
        steps.advance(description=f"detect eval: scoring {len(records)} operators")
        flags = abnormal_mask(records, iterations, model=model)
        steps.advance()
    tp = int((flags & labels).sum())
    precision = tp / max(int(flags.sum()), 1)
    recall = tp / max(int(labels.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    irregular = irregular_iterations(iterations)
    json.dump({"operators": len(records), "abnormal": int(labels.sum()), "flagged": int(flags.sum()),
               "precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
               "irregular_iterations": [i.iteration for i in irregular],
               "irregularity_kinds": dict(Counter(i.kind.value for i in irregular))}, sys.stdout)
    print()
    return 0


def _info(args: argparse.Namespace) -> int:
    from importlib import resources

    from sleuth.stream.detection.model_file import DEFAULT_MODEL, read_metadata

    if args.model is None:
        with resources.as_file(resources.files("sleuth.stream.detection").joinpath(DEFAULT_MODEL)) as path:
            metadata = read_metadata(path)
    else:
        metadata = read_metadata(args.model)
    json.dump(metadata, sys.stdout, indent=1)
    print()
    return 0


def _convert(args: argparse.Namespace) -> int:
    from sleuth.stream.detection.legacy_model import convert

    metadata = convert(args.old, args.new)
    print(json.dumps({"model": str(args.new), "format_version": metadata["format_version"],
                      "bytes": args.new.stat().st_size}))
    return 0

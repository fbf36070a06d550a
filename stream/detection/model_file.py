"""Versioned model files: a zip holding ``metadata.json`` and the fitted model (joblib).

The metadata (format version, feature names, detector options, training summary, library
versions) is plain JSON, readable without unpickling (``read_metadata``); ``load`` refuses a file
of another format version or with other feature names, naming what differs. A model pickled
by another scikit-learn version still loads but is logged, since scikit-learn does not promise
that pickles move across versions.

Loading unpickles: load only model files you trust (your own, or the one shipped with sleuth).
"""

from __future__ import annotations

import io
import json
import logging
import platform
import zipfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import sklearn

from sleuth.errors import ConfigError
from sleuth.stream.detection.features import FEATURE_NAMES
from sleuth.stream.detection.forest import AbnormalOperatorForest

__all__ = ["FORMAT", "FORMAT_VERSION", "DetectorModel", "load", "load_default_model", "read_metadata", "save"]

_log = logging.getLogger(__name__)

FORMAT = "sleuth-abnormal-operator-model"
FORMAT_VERSION = 1
DEFAULT_MODEL = "default_model.zip"


@dataclass(frozen=True)
class DetectorModel:
    """A fitted forest with the window options its features were computed with, and its metadata."""

    forest: AbnormalOperatorForest
    window: int = 20
    min_history: int = 5
    metadata: dict[str, Any] = field(default_factory=dict)


def save(model: DetectorModel, path: str | Path, *, training: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``model`` to ``path``; returns the metadata written."""
    forest = model.forest
    if not hasattr(forest, "forest_"):
        raise ConfigError("cannot save an unfitted model: fit it first")
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "feature_names": list(FEATURE_NAMES),
        "window": model.window,
        "min_history": model.min_history,
        "params": {k: v for k, v in forest.get_params().items() if k != "n_jobs"},
        "feature_means": [None if np.isnan(v) else float(v) for v in forest.feature_means_],
        "training": training or model.metadata.get("training", {}),
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "scikit-learn": sklearn.__version__, "joblib": joblib.__version__},
    }
    buffer = io.BytesIO()
    joblib.dump(forest, buffer, compress=("zlib", 6))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", json.dumps(metadata, indent=1) + "\n")
        archive.writestr("model.joblib", buffer.getvalue())
    return metadata


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of a model file, without loading the model."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = json.loads(archive.read("metadata.json"))
    except FileNotFoundError:
        raise ConfigError(f"model file {path} does not exist") from None
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path} is not a sleuth model file ({error})") from None
    if metadata.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a sleuth model file (format {metadata.get('format')!r})")
    if metadata.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"{path}: model format version {metadata.get('format_version')} "
                          f"(this sleuth reads version {FORMAT_VERSION}); retrain with `sleuth detect train`")
    if metadata.get("feature_names") != list(FEATURE_NAMES):
        theirs, ours = metadata.get("feature_names") or [], list(FEATURE_NAMES)
        raise ConfigError(f"{path}: the model's features differ from this sleuth's "
                          f"(missing {sorted(set(ours) - set(theirs))}, extra {sorted(set(theirs) - set(ours))})")
    return metadata


def load(path: str | Path) -> DetectorModel:
    """A model file written by ``save``."""
    path = Path(path)
    metadata = read_metadata(path)
    trained_with = metadata.get("versions", {}).get("scikit-learn")
    if trained_with != sklearn.__version__:
        _log.warning("%s was saved with scikit-learn %s, this is %s", path, trained_with, sklearn.__version__)
    with zipfile.ZipFile(path) as archive:
        forest = joblib.load(io.BytesIO(archive.read("model.joblib")))
    if not isinstance(forest, AbnormalOperatorForest):
        raise ConfigError(f"{path} holds a {type(forest).__name__}, not an AbnormalOperatorForest")
    return DetectorModel(forest, metadata["window"], metadata["min_history"], metadata)


_default: DetectorModel | None = None


def load_default_model() -> DetectorModel:
    """The model shipped with sleuth (trained on emulator suites by scripts/train_default_model.py)."""
    global _default
    if _default is None:
        resource = resources.files("sleuth.stream.detection").joinpath(DEFAULT_MODEL)
        if not resource.is_file():
            raise ConfigError(f"the default model {DEFAULT_MODEL} is missing from the installed package; "
                              "run scripts/train_default_model.py")
        with resources.as_file(resource) as path:
            _default = load(path)
    return _default

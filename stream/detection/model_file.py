"""Versioned model files: a zip holding ``metadata.json`` and the fitted model (skops).

The metadata (format version, feature names, detector options, training summary, library
versions) is plain JSON (``read_metadata``); ``load`` refuses a file of another format version or
with other feature names, naming what differs. A model saved by another scikit-learn version
still loads but is logged, since scikit-learn does not promise that estimators move across versions.

The model is stored with ``skops.io``, which rebuilds objects from a schema and refuses any type not
in ``TRUSTED_TYPES`` (scikit-learn's own estimators and numpy arrays are trusted by skops itself):
loading a model file runs no code from it. Format version 1 files held a joblib pickle; ``load``
refuses them and names the command that converts one you trust (``legacy_model.py``).
"""

from __future__ import annotations

import json
import logging
import platform
import zipfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import skops
import skops.io
import sklearn

from sleuth.errors import ConfigError
from sleuth.stream.detection.features import FEATURE_NAMES
from sleuth.stream.detection.forest import AbnormalOperatorForest
from sleuth.stream.detection.rules import DETECTION_RULES

__all__ = ["FORMAT", "FORMAT_VERSION", "TRUSTED_TYPES", "DetectorModel", "load", "load_default_model",
           "read_metadata", "save"]

_log = logging.getLogger(__name__)

FORMAT = "sleuth-abnormal-operator-model"
FORMAT_VERSION = 2
#: Format version 1 stored the forest as a joblib pickle.
PICKLE_FORMAT_VERSION = 1
DEFAULT_MODEL = "default_model.zip"
MODEL_MEMBER = "model.skops"
#: The types a model file may hold beyond those skops trusts by default (scikit-learn estimators,
#: numpy arrays and builtins): our estimator and scikit-learn's Cython tree.
TRUSTED_TYPES = ("sklearn.tree._tree.Tree", "sleuth.stream.detection.forest.AbnormalOperatorForest")


@dataclass(frozen=True)
class DetectorModel:
    """A fitted forest with the window options its features were computed with, and its metadata."""

    forest: AbnormalOperatorForest
    window: int = DETECTION_RULES.operator_window
    min_history: int = DETECTION_RULES.min_history
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
                     "scikit-learn": sklearn.__version__, "skops": skops.__version__},
    }
    # skops writes a zip of its own; compressed there, stored as one member here.
    data = skops.io.dumps(forest, compression=zipfile.ZIP_DEFLATED, compresslevel=6)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", json.dumps(metadata, indent=1) + "\n")
        archive.writestr(MODEL_MEMBER, data)
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
    if metadata.get("format_version") == PICKLE_FORMAT_VERSION:
        raise ConfigError(f"{path} holds a pickled model (format version 1), which sleuth no longer loads because "
                          f"unpickling runs code from the file; if you trust it, convert it with "
                          f"`sleuth detect convert {path} NEW.zip`")
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
        try:
            data = archive.read(MODEL_MEMBER)
        except KeyError:
            raise ConfigError(f"{path} is not a sleuth model file (no {MODEL_MEMBER})") from None
    try:
        untrusted = set(skops.io.get_untrusted_types(data=data)) - set(TRUSTED_TYPES)
    except (zipfile.BadZipFile, KeyError, ValueError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: {MODEL_MEMBER} is not a skops file ({error})") from None
    if untrusted:
        raise ConfigError(f"{path} holds types sleuth does not load: {sorted(untrusted)}")
    forest = skops.io.loads(data, trusted=list(TRUSTED_TYPES))
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

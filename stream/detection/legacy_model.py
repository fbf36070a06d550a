"""Converting a format version 1 model file (a joblib pickle) to the current, skops-based format.

Only this module unpickles, and only when the user asks for it (``sleuth detect convert``):
unpickling runs code from the file, so convert only files you trust (your own, or one shipped
by an earlier sleuth). The forest is written again as it is, so that the converted model's
``predict_proba`` is the old one's, bit for bit.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from sleuth.errors import ConfigError
from sleuth.stream.detection.features import FEATURE_NAMES
from sleuth.stream.detection.forest import AbnormalOperatorForest
from sleuth.stream.detection.model_file import FORMAT, PICKLE_FORMAT_VERSION, DetectorModel, save

__all__ = ["convert", "load_pickled"]

PICKLE_MEMBER = "model.joblib"


def load_pickled(path: str | Path) -> DetectorModel:
    """The model in a format version 1 file. Unpickles: call it only on a file you trust."""
    import joblib

    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            metadata: dict[str, Any] = json.loads(archive.read("metadata.json"))
            if metadata.get("format") != FORMAT or metadata.get("format_version") != PICKLE_FORMAT_VERSION:
                raise ConfigError(f"{path} is not a pickled sleuth model file (format {metadata.get('format')!r}, "
                                  f"version {metadata.get('format_version')!r}; convert reads version {PICKLE_FORMAT_VERSION})")
            data = archive.read(PICKLE_MEMBER)
    except FileNotFoundError:
        raise ConfigError(f"model file {path} does not exist") from None
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path} is not a sleuth model file ({error})") from None
    if metadata.get("feature_names") != list(FEATURE_NAMES):
        raise ConfigError(f"{path}: the model's features differ from this sleuth's; retrain with `sleuth detect train`")
    forest = joblib.load(io.BytesIO(data))
    if not isinstance(forest, AbnormalOperatorForest):
        raise ConfigError(f"{path} holds a {type(forest).__name__}, not an AbnormalOperatorForest")
    return DetectorModel(forest, metadata["window"], metadata["min_history"], metadata)


def convert(old: str | Path, new: str | Path) -> dict[str, Any]:
    """Write the pickled model file ``old`` as a current model file ``new``; returns its metadata."""
    if Path(old).resolve() == Path(new).resolve():
        raise ConfigError(f"convert writes a new file: give an output other than {old}")
    model = load_pickled(old)
    metadata = save(model, new, training=model.metadata.get("training", {}))
    return metadata

"""Model files: stored with skops (no code runs on load); pickled files refused, and converted bit for bit."""

from __future__ import annotations

import io
import json
import zipfile

import joblib
import numpy as np
import pytest
import skops.io

from sleuth.cli import main
from sleuth.errors import ConfigError
from sleuth.stream.detection.features import FEATURE_NAMES
from sleuth.stream.detection.model_file import FORMAT, MODEL_MEMBER, load, load_default_model, read_metadata, save

from .conftest import small_model


def write_pickled(model, path) -> None:
    """A format version 1 file, as sleuth wrote them before skops: metadata.json and a joblib pickle."""
    metadata = {"format": FORMAT, "format_version": 1, "feature_names": list(FEATURE_NAMES),
                "window": model.window, "min_history": model.min_history, "training": {"rows": 7}}
    buffer = io.BytesIO()
    joblib.dump(model.forest, buffer, compress=("zlib", 6))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", json.dumps(metadata))
        archive.writestr("model.joblib", buffer.getvalue())


def features(n: int, seed: int) -> np.ndarray:
    """Rows around the model's training means, spread wide, some missing."""
    rng = np.random.default_rng(seed)
    means = np.nan_to_num(small_model().forest.feature_means_, nan=1.0)
    X = means * rng.lognormal(0.0, 1.0, size=(n, len(FEATURE_NAMES)))
    X[rng.random(X.shape) < 0.05] = np.nan
    return X


def test_a_pickled_model_is_refused_naming_the_convert_command(tmp_path) -> None:
    old = tmp_path / "old.zip"
    write_pickled(small_model(), old)
    with pytest.raises(ConfigError, match=r"pickled model .*`sleuth detect convert .*old\.zip NEW\.zip`"):
        load(old)


def test_convert_gives_the_same_votes_to_the_last_bit(tmp_path, capsys) -> None:
    old, new = tmp_path / "old.zip", tmp_path / "new.zip"
    write_pickled(small_model(), old)
    assert main(["detect", "convert", str(old), str(new)]) == 0
    assert json.loads(capsys.readouterr().out)["format_version"] == 2
    converted = load(new)
    assert read_metadata(new)["training"] == {"rows": 7} and converted.window == small_model().window
    with zipfile.ZipFile(new) as archive:
        assert set(archive.namelist()) == {"metadata.json", MODEL_MEMBER}  # no pickle left
    X = features(20_000, seed=5)
    before, after = small_model().forest.predict_proba(X), converted.forest.predict_proba(X)
    assert 0.0 < before[:, 1].mean() < 1.0  # the rows reach both classes' leaves
    assert np.array_equal(before.view(np.uint64), after.view(np.uint64))


def test_convert_refuses_a_current_file_and_its_own_output(tmp_path, capsys) -> None:
    current = tmp_path / "current.zip"
    save(small_model(), current)
    assert main(["detect", "convert", str(current), str(tmp_path / "x.zip")]) == 2
    assert "not a pickled sleuth model file" in capsys.readouterr().err and not (tmp_path / "x.zip").exists()
    write_pickled(small_model(), tmp_path / "old.zip")
    assert main(["detect", "convert", str(tmp_path / "old.zip"), str(tmp_path / "old.zip")]) == 2
    assert "give an output other than" in capsys.readouterr().err


class Payload:
    """Any type skops does not trust: a model file holding one must not load."""


def test_a_model_file_holding_an_untrusted_type_is_refused(tmp_path) -> None:
    path = tmp_path / "m.zip"
    save(small_model(), path)
    with zipfile.ZipFile(path) as archive:
        metadata = archive.read("metadata.json")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", metadata)
        archive.writestr(MODEL_MEMBER, skops.io.dumps(Payload()))
    with pytest.raises(ConfigError, match=r"types sleuth does not load: \[.*Payload'\]"):
        load(path)


def test_the_shipped_model_is_a_skops_file_and_scores() -> None:
    model = load_default_model()
    assert model.metadata["format_version"] == 2 and "skops" in model.metadata["versions"]
    scores = model.forest.score_samples(features(1_000, seed=1))
    assert scores.shape == (1_000,) and ((0 <= scores) & (scores <= 1)).all()

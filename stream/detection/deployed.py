"""The detectors a deployed worker runs (``sleuth worker``), built in one place so that what is
measured (``benchmarks/bench_ingest.py``) is what runs."""

from __future__ import annotations

from sleuth.settings import Settings
from sleuth.stream.detection.detect import Detector


def worker_detectors(settings: Settings) -> list[Detector]:
    """The stream detector on ``SLEUTH_DETECT_MODEL`` (else the shipped model); a bad model file
    fails here, naming the setting, before the worker joins its group."""
    from sleuth.stream.detection.model_file import load, load_default_model
    from sleuth.stream.detection.stream_detector import StreamDetector

    model = load(settings.detect_model) if settings.detect_model else load_default_model()
    return [StreamDetector(model)]

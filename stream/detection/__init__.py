"""Detection in the ingest workers: irregular iterations and abnormal operators.

Modules, one algorithm each:

* :mod:`~sleuth.stream.detection.iteration_monitor` — δ-irregularity (Holmes §3.1), confirmed
  change points (Greyhound §4.2), typing as spike / fluctuation / persistent
* :mod:`~sleuth.stream.detection.changepoint` — Bayesian online change-point detection
* :mod:`~sleuth.stream.detection.features` — per-operator features over per-identity windows
* :mod:`~sleuth.stream.detection.forest` — the random-forest detector (scikit-learn contract)
* :mod:`~sleuth.stream.detection.counterfactual` — replaying a chunk without the slowdowns it shows;
  overrules the forest where the chunk holds whole groups
* :mod:`~sleuth.stream.detection.drift` — drift auto-tuning of the trees' thresholds
* :mod:`~sleuth.stream.detection.baselines` — 3-sigma, KNN, SVM; median rule, unverified change points
* :mod:`~sleuth.stream.detection.offline` — replaying a batch; ``abnormal_mask``
* :mod:`~sleuth.stream.detection.training` — training sets from labelled folders, fitting, the decision threshold
* :mod:`~sleuth.stream.detection.model_file` — versioned model files; the shipped default model
* :mod:`~sleuth.stream.detection.stream_detector` — the workers' ``Detector``
* :mod:`~sleuth.stream.detection.publish` — irregularities to Kafka
* :mod:`~sleuth.stream.detection.rules` — ``DetectionRules``: δ, the labels' line, drift tuning, the threshold's grid

The streaming detectors read as river's do: ``update(...)`` with the next values, then read what it
found: ``BayesianChangePoint.drift_detected`` and ``change_at``, ``DriftTuner.tuned`` and ``model``;
``IterationMonitor.update`` returns the irregularities of the iterations the batch finished (one
batch finishes several).

The interface other parts build on:

``IterationMonitor(delta=1.1, window=10).update(iterations: IterationBatch) -> list[Irregularity]``
    streaming, per job; ``flush()`` finishes the iterations still open.
``irregular_iterations(iterations, *, delta=1.1, window=10) -> list[Irregularity]``
    the same over an offline batch.
``Irregularity(job, iteration, kind, duration_ns, baseline_ns, t_start_ns, t_end_ns, change_point)`` (``sleuth.irregularity``)
    a frozen dataclass; ``kind`` is an ``IrregularityKind``: "spike", "fluctuation", "persistent".
``load_default_model() -> DetectorModel``
    the model shipped with the package.
``abnormal_mask(records: RecordBatch, iterations: IterationBatch, *, model=None, counterfactual=True) -> np.ndarray``
    boolean, one per record: the abnormal operator instances of an offline batch.
"""

from sleuth.irregularity import Irregularity, IrregularityKind
from sleuth.stream.detection.drift import DriftTuner, Tuning
from sleuth.stream.detection.features import FEATURE_NAMES, OperatorWindows
from sleuth.stream.detection.forest import AbnormalOperatorForest
from sleuth.stream.detection.iteration_monitor import IterationMonitor, irregular_iterations
from sleuth.stream.detection.model_file import DetectorModel, load, load_default_model, save
from sleuth.stream.detection.offline import abnormal_mask
from sleuth.stream.detection.rules import DETECTION_RULES, DetectionRules
from sleuth.stream.detection.stream_detector import StreamDetector

__all__ = [
    "DETECTION_RULES",
    "FEATURE_NAMES",
    "AbnormalOperatorForest",
    "DetectionRules",
    "DetectorModel",
    "DriftTuner",
    "Irregularity",
    "IrregularityKind",
    "IterationMonitor",
    "OperatorWindows",
    "StreamDetector",
    "Tuning",
    "abnormal_mask",
    "irregular_iterations",
    "load",
    "load_default_model",
    "save",
]

"""The localizer: communication operator graph search and device scoring (Holmes §4.3-4.4).

Modules, one job each:

* :mod:`~sleuth.localizer.graph` — the grouped operator graph (operators ↔ communicator groups)
* :mod:`~sleuth.localizer.operators` — a fetched rank's operators as slot x iteration matrices
* :mod:`~sleuth.localizer.fetch` — progressive fetching through a ``RecordSource``
* :mod:`~sleuth.localizer.timing` — the blocking/transfer split of one operator
* :mod:`~sleuth.localizer.search` — Holmes Algorithm 1 (BFS over collectives, DFS along P2P)
* :mod:`~sleuth.localizer.cross_iteration` — irregularity rate R
* :mod:`~sleuth.localizer.scoring` — accumulation onto devices, MAP with Beta priors, decay H(d)
* :mod:`~sleuth.localizer.nonhardware` — stage and sequence-length imbalance
* :mod:`~sleuth.localizer.impact` — slowdown and GPU-hours lost
* :mod:`~sleuth.localizer.incident` — the ``Incident`` and its JSON
* :mod:`~sleuth.localizer.episodes` — one episode, one incident: which incidents continue which
* :mod:`~sleuth.localizer.localize` — :func:`localize`, all of the above end to end
* :mod:`~sleuth.localizer.rules` — ``LocalizerRules``: the shares, probes and bars the steps decide by
* :mod:`~sleuth.localizer.baselines` — earliest abnormal operator, random walk, NVRx relative median
"""

from sleuth.localizer.graph import OperatorGraph, build_graph
from sleuth.localizer.incident import Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.localize import localize
from sleuth.localizer.operators import Thresholds
from sleuth.localizer.rules import LOCALIZER_RULES, LocalizerRules
from sleuth.localizer.scoring import DEFAULT_PRIORS, Priors
from sleuth.localizer.search import Cause

__all__ = [
    "DEFAULT_PRIORS",
    "Cause",
    "Incident",
    "IncidentCause",
    "LOCALIZER_RULES",
    "LocalizerRules",
    "OperatorGraph",
    "Priors",
    "RootOperator",
    "Suspect",
    "Thresholds",
    "build_graph",
    "localize",
]

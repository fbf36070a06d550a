"""A fabric made up from a job spec alone, for when no topology file is given.

``sleuth localize`` without ``--topology`` and the streaming localizer without
``SLEUTH_LOCALIZER_TOPOLOGY`` both use it: every host the spec names is one host of GPUs (one NIC
per GPU) behind a single leaf, so compute faults are still placed exactly and network evidence
lands on the NICs and their links.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sleuth.topology.model import Topology

if TYPE_CHECKING:  # the job spec imports sleuth.topology.ids: no import cycle at run time
    from sleuth.jobspec import JobSpec

__all__ = ["single_leaf"]


def single_leaf(spec: JobSpec) -> Topology:
    """Each host of the spec with as many GPUs (and NICs) as its highest GPU index + 1, one leaf."""
    gpus: dict[str, int] = {}
    for placement in spec.placements:
        gpus[placement.host] = max(gpus.get(placement.host, 0), placement.gpu + 1)
    hosts = sorted(gpus)
    counts = np.array([gpus[h] for h in hosts], dtype=np.int64)
    n_nics = int(counts.sum())
    return Topology(
        hosts=tuple(hosts),
        host_gpus=counts,
        host_nics=counts,
        gpu_nic_local=np.concatenate([np.arange(c) for c in counts]),
        leaves=("l0",),
        spines=(),
        nic_leaf=np.stack((np.arange(n_nics), np.zeros(n_nics, dtype=np.int64)), axis=1),
        leaf_spine=np.empty((0, 2), dtype=np.int64),
    )

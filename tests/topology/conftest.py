"""Small hand-built fabrics, written as YAML, shared by the topology tests."""

from __future__ import annotations

import pytest

from sleuth.topology import Topology, loads_topology

# 2 hosts x 2 GPUs, one NIC per GPU, every NIC on one leaf, no spine.
ONE_LEAF = """\
hosts:
  - {name: a, gpus: 2, leaf: l0}
  - {name: b, gpus: 2, leaf: l0}
leaves: [l0]
"""

# 4 hosts x 2 GPUs on 2 leaves (h0, h1 on l0; h2, h3 on l1), each leaf linked to 2 spines.
TWO_LEAVES = """\
hosts:
  - {name: h0, gpus: 2, leaf: l0}
  - {name: h1, gpus: 2, leaf: l0}
  - {name: h2, gpus: 2, leaf: l1}
  - {name: h3, gpus: 2, leaf: l1}
leaves: [l0, l1]
spines: [s0, s1]
links:
  - [leaf:l0, spine:s0]
  - [leaf:l0, spine:s1]
  - [spine:s0, leaf:l1]
  - [spine:s1, leaf:l1]
"""

# Multi-homed NICs: x and w sit on l0 and l1; y on l0; z on l2. s0 joins l0-l2, s1 joins l1-l2.
MULTI_HOMED = """\
hosts:
  - {name: x, gpus: 1}
  - {name: y, gpus: 1, leaf: l0}
  - {name: z, gpus: 1, leaf: l2}
  - {name: w, gpus: 1}
leaves: [l0, l1, l2]
spines: [s0, s1]
links:
  - [nic:x/0, leaf:l0]
  - [nic:x/0, leaf:l1]
  - [nic:w/0, leaf:l0]
  - [nic:w/0, leaf:l1]
  - [leaf:l0, spine:s0]
  - [leaf:l2, spine:s0]
  - [leaf:l1, spine:s1]
  - [leaf:l2, spine:s1]
"""


@pytest.fixture
def one_leaf() -> Topology:
    return loads_topology(ONE_LEAF)


@pytest.fixture
def two_leaves() -> Topology:
    return loads_topology(TWO_LEAVES)


@pytest.fixture
def multi_homed() -> Topology:
    return loads_topology(MULTI_HOMED)

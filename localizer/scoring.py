"""Device scores (Holmes §4.4 and appendix D): accumulate irregularity rates, then MAP.

Accumulation. A compute root says the late rank computed slowly: its GPU, or its host's CPU
(contention slows every GPU of a host at once), is the cause. Which one is told by the host's
other GPUs (``peers.host_share``: the fraction of them as slow as the late rank, in the same
iterations), s: the root adds R·(1 - s) to the GPU and R·s to the host. A GPU slow alone (s ≈ 0)
keeps its evidence, a contended host (s ≈ 1) takes it, and two slow GPUs of one host stay two
GPUs (each sees one sibling of seven slow). Without a share (s = 0), compute is the GPU's. A network
root adds R to every network device on the paths between its ranks' GPUs (``topology.path``;
GPUs themselves are not network devices): the ring of the members in group order for ring
collectives and P2P (NCCL's ring; the emulator's units too), every pair for all-to-all. A
device on several of those paths still counts once per root, with the largest weight it has on
any of them (equal-cost spines share a path's evidence: weight 1/n each, unless the fabric's
routing is declared ``STATIC``: then each pair's one route takes it all). Under ECMP the set of
equal-cost spines (``topology.spine_layer``, an id ``spines:s0,s1,...`` of kind spine) takes the
whole of each such path's evidence as well: the flow crossed one of them, nobody knows which, so
a congested spine whose delays spread over many hosts' NICs is named as the spine layer, which
is on every slow path, rather than as the NICs at their ends, each on a few.

Topology decay H(d). Holmes: ``H(d) = ln(C(d) + ε - 1) / C(d)`` with C(d) the endpoints below
the device (``topology.nics_below``: NICs below a switch, GPUs of a host). It is meant to stop a
device shared by many endpoints (a spine) from winning just by summing its children's evidence.
As written it is negative for C(d) = 1 (ln ε) and 0 for C(d) = 2, which would make a GPU, a NIC
or its cable impossible to blame. Rule used here: **H(d) = 1 when C(d) = 1** (a device that
serves one endpoint shares nothing, so nothing to decay), and otherwise **H(d) = max(Holmes's
H(d), 1/C(d))**: never below the device's share if its evidence were split evenly among its C
endpoints. For C >= 4 Holmes's value is the larger one, so large switches decay as in the paper.
The decay used is H(d)^γ with γ = ``Priors.decay_power``, **0 by default**: the benchmark shows
that full decay (γ = 1) turns a faulty leaf over 4 NICs into its NICs (H = 0.35), while the
problem it solves (a spine summing its leaves' evidence) is already handled here by sharing a
path's evidence between equal-cost spines.

MAP (appendix D). With a Beta prior a(d) = α p(d), b(d) = α (1 - p(d)) per device kind:
``I(d) = (Σ R·H(d) + a(d)) / Σ_d' (Σ R·H(d') + a(d') + b(d'))``. The denominator is the same for
every device, so it decides nothing; the scores reported here divide by the sum of the
numerators over the devices with evidence instead, which keeps Holmes's ranking exactly and makes
the scores a probability distribution over the candidates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from sleuth.errors import ConfigError
from sleuth.records import OpKind
from sleuth.topology import DeviceKind, Routing, Topology, nics_below, route, spine_layer, spine_set_members
from sleuth.topology.ids import host_id

from sleuth.localizer.search import Cause, Root
from sleuth.validation import fraction, non_negative_number, positive_int

__all__ = ["DEFAULT_PRIORS", "Evidence", "Priors", "Score", "accumulate", "decay", "device_kind", "leading", "map_scores",
           "root_devices", "through_ties", "tied_advice", "tied_runs"]

EPSILON = 1e-6
#: Scores this close are one (``leading``): the same evidence summed in another order.
_TIED = 1e-9
#: A NIC and its own cable carry the same transfers and always tie: only a larger set is one the
#: records cannot tell apart (``tied_advice``, ``tied_runs``).
_PAIR = 2


def _tie(a: float, b: float) -> bool:
    """Whether two scores are one (``_TIED``)."""
    return math.isclose(a, b, rel_tol=_TIED)


# Holmes table 1: anomalous devices over three months (GPUs 58.7%, NICs 18.3%, links 9.5%,
# switches 4.8%, CPUs 3.2%, others 5.5%). Switches: leaf, spine and NVSwitch alike.
_TABLE_1 = {
    DeviceKind.GPU: 0.587,
    DeviceKind.NIC: 0.183,
    DeviceKind.LINK: 0.095,
    DeviceKind.LEAF: 0.048,
    DeviceKind.SPINE: 0.048,
    DeviceKind.NVSWITCH: 0.048,
    DeviceKind.HOST: 0.032,
}


@dataclass(frozen=True)
class Priors:
    """Prior probability p(d) of a device being anomalous, by kind, and the Beta scale α."""

    p: Mapping[DeviceKind, float] = field(default_factory=lambda: MappingProxyType(dict(_TABLE_1)))
    alpha: float = 1.0
    decay_power: float = 0.0  # γ: the decay used is H(d)^γ (0: none, 1: Holmes's, floored); see docs/localization.md

    def __post_init__(self) -> None:
        non_negative_number("priors.alpha", self.alpha)
        fraction("priors.decay_power", self.decay_power, zero=True)
        table = dict(self.p)
        for kind in DeviceKind:
            if kind not in table:
                raise ConfigError(f"priors: no prior for device kind {kind}")
            value = table[kind]
            fraction(f"priors: p({kind})", value, one=False)
        object.__setattr__(self, "p", MappingProxyType(table))

    @classmethod
    def from_mapping(cls, values: Mapping[str, float], *, alpha: float = 1.0, decay_power: float = 0.0) -> Priors:
        """Priors from ``{"gpu": 0.6, ...}``; kinds not named keep Holmes's table 1 value."""
        table = dict(_TABLE_1)
        for name, value in values.items():
            try:
                table[DeviceKind(name)] = value
            except ValueError:
                raise ConfigError(f"priors: unknown device kind {name!r}") from None
        return cls(table, alpha, decay_power)


DEFAULT_PRIORS = Priors()


@dataclass(frozen=True)
class Evidence:
    """Accumulated, undecayed irregularity rate of one device, and the iterations behind it."""

    total: float
    iterations: frozenset[int]


@dataclass(frozen=True)
class Score:
    """A device's posterior score (the scores of one ranking sum to 1)."""

    device: str
    kind: DeviceKind
    score: float
    evidence: float
    support: int  # iterations the root operators with evidence on the device ran in (or were abnormal again in)


def decay(c: int) -> float:
    """H(d) for a device with ``c`` endpoints below it (see the module docstring for the rule)."""
    positive_int("C(d)", c)
    if c == 1:
        return 1.0
    return max(math.log(c + EPSILON - 1) / c, 1.0 / c)


def accumulate(
    rates: Iterable[tuple[Root, float]],
    *,
    topology: Topology,
    gpus: Sequence[str],
    routing: Routing = Routing.ECMP,
    host_share: Mapping[int, float] = MappingProxyType({}),
) -> dict[str, Evidence]:
    """Evidence per device from ``(root, R)`` pairs; ``gpus[r]`` is rank r's GPU id.

    ``routing``: how flows pick among equal-cost spines (``sleuth.topology.Routing``); under
    ``STATIC`` each pair's one known route takes the whole evidence, so a spine can be singled out.
    ``host_share``: per late rank, the share s of its compute evidence that goes to its host.
    """
    totals: dict[str, float] = {}
    seen: dict[str, set[int]] = {}
    for root, rate in rates:
        if rate <= 0:
            continue
        found = root_devices(root, topology=topology, gpus=gpus, routing=routing, host_share=host_share)
        for device, weight in found.items():
            totals[device] = totals.get(device, 0.0) + rate * weight
            seen.setdefault(device, set()).update((root.ran, *root.again))
    return {d: Evidence(totals[d], frozenset(seen[d])) for d in totals}


def root_devices(
    root: Root,
    *,
    topology: Topology,
    gpus: Sequence[str],
    routing: Routing = Routing.ECMP,
    host_share: Mapping[int, float] = MappingProxyType({}),
) -> dict[str, float]:
    """The devices one root's evidence goes to, with their (positive) weights (see the module docstring)."""
    if root.cause is Cause.COMPUTE:
        gpu = gpus[root.rank]
        share = min(1.0, max(0.0, float(host_share.get(root.rank, 0.0))))
        split = {gpu: 1.0 - share, host_id(topology.host_of(gpu)): share}
        return {device: weight for device, weight in split.items() if weight > 0}
    members = [gpus[m] for m in root.members]
    if len(members) == 1:  # a P2P operator without a peer: its own GPU's way out
        nic = topology.nic_of(members[0])
        out = {} if nic is None else {nic: 1.0}
        for leaf in topology.leaves_of(nic) if nic else ():
            out[topology.link_between(leaf, nic)] = 1.0
        return out
    out: dict[str, float] = {}
    for a, b in _pairs(root, members):
        found = route(topology, a, b, routing=routing)
        for device, weight in found.weighted():
            if topology.kind(device) is DeviceKind.GPU:
                continue
            if weight > out.get(device, 0.0):
                out[device] = weight
        layer = spine_layer(topology, found) if found.branches else None
        if layer is not None:
            out[layer] = 1.0
    return out


def _pairs(root: Root, members: list[str]) -> list[tuple[str, str]]:
    """The GPU pairs a root's data crosses: every pair for an all-to-all (of up to 64 members), the
    one pair of a P2P transfer, the ring of the members in group order otherwise."""
    if root.op == OpKind.ALL_TO_ALL.label and len(members) <= 64:
        return [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    if len(members) == 2:
        return [(members[0], members[1])]
    return list(zip(members, members[1:] + members[:1]))


def layer_crossings(root: Root, layer: str, *, topology: Topology, gpus: Sequence[str], routing: Routing) -> int:
    """How many of a network root's GPU pairs cross the set of equal-cost spines ``layer``
    (``spine_layer``): each such hop of its data took one of them, which one nobody knows."""
    members = [gpus[m] for m in root.members]
    if root.cause is Cause.COMPUTE or len(members) < 2:
        return 0
    return sum(1 for a, b in _pairs(root, members)
               if (found := route(topology, a, b, routing=routing)).branches and spine_layer(topology, found) == layer)


def device_kind(topology: Topology, device: str) -> DeviceKind:
    """The kind of a device with evidence: a spine set counts as a spine."""
    return DeviceKind.SPINE if spine_set_members(device) is not None else topology.kind(device)


def map_scores(evidence: Mapping[str, Evidence], *, topology: Topology, priors: Priors = DEFAULT_PRIORS) -> tuple[Score, ...]:
    """Every device with evidence, scored (MAP with decay), best first; scores sum to 1."""
    numerators: dict[str, float] = {}
    endpoints: dict[str, int] = {}
    for device, found in evidence.items():
        kind = device_kind(topology, device)
        endpoints[device] = nics_below(topology, device)
        weight = decay(endpoints[device]) ** priors.decay_power
        numerators[device] = found.total * weight + priors.alpha * priors.p[kind]
    total = sum(numerators.values())
    if total <= 0:
        return ()
    scores = [
        Score(device, device_kind(topology, device), value / total, evidence[device].total, len(evidence[device].iterations))
        for device, value in numerators.items()
    ]
    # Equal scores: the device with fewer endpoints below it first, the narrower explanation of
    # the same delays (a leaf before the spine layer above it, which gets all of its evidence).
    scores.sort(key=lambda s: (-s.score, endpoints[s.device], s.device))
    return tuple(scores)


def tied_advice(suspects: Sequence[tuple[str, float]], *, shown: int = 8) -> str:
    """What on-call should do where more than two (device, score) suspects tie with the best
    (``leading``'s tie): the records cannot tell which of them it is (a NIC and its own cable are
    two, and always tie); empty otherwise."""
    if not suspects:
        return ""
    best = max(score for _, score in suspects)
    tied = [device for device, score in suspects if _tie(score, best)]
    if len(tied) <= _PAIR:
        return ""
    named = ", ".join(tied[:shown]) + (f" and {len(tied) - shown} more" if len(tied) > shown else "")
    return (f"{len(tied)} devices share the first place's evidence ({named}): any one of them, slow, would delay "
            "the same operators alike (every member of a collective ends it together), so these records cannot "
            "tell which. Test them one at a time, e.g. nccl-tests' all_reduce_perf or ib_write_bw between their hosts.")


def tied_runs(suspects: Sequence[tuple[str, float]]) -> list[tuple[str, ...]]:
    """The runs of consecutive (device, score) suspects whose scores tie (``leading``'s tie) of more
    than two devices (a NIC and its own cable are two, and always tie): each a set of devices the
    records cannot tell apart."""
    runs: list[list[str]] = []
    previous = math.nan
    for device, score in suspects:
        if runs and _tie(score, previous):
            runs[-1].append(device)
        else:
            runs.append([device])
        previous = score
    return [tuple(run) for run in runs if len(run) > _PAIR]


def through_ties(ranking: Sequence[Score], count: int) -> tuple[Score, ...]:
    """The first ``count`` of ``ranking`` (best first) and every further device tied with the last
    of them: a cut inside a tie would keep some of the devices the evidence cannot part by the
    sort's order alone."""
    if len(ranking) <= count or count < 1:
        return tuple(ranking[:max(count, 0)])
    last = ranking[count - 1].score
    return (*ranking[:count], *itertools.takewhile(lambda s: _tie(s.score, last), ranking[count:]))


def leading(ranking: Sequence[Score], top_k: int) -> tuple[Score, ...]:
    """The first ``top_k`` of ``ranking`` (best first) and every further device whose score ties the
    first's: the evidence cannot part them (a collective's members end it together, so every device
    on its ring gets the same evidence), and the sort's order among them names none."""
    if not ranking:
        return ()
    first = ranking[0].score
    return (*ranking[:top_k], *(s for s in ranking[top_k:] if _tie(s.score, first)))

"""Several faults at once: explaining away, one fault at a time.

One ranking over all root operators finds the strongest fault and, next to it, the devices that
share its evidence (its NIC beside a GPU's cable, a leaf beside its NICs). A second, weaker
fault's devices rank below those neighbours and fall out of the top K. So the suspects are
taken greedily: rank the roots, keep the top device and its best neighbours on the roots it
explains (the roots whose evidence reaches it), set those roots aside, and rank what is left.
A further fault counts only while the roots it explains keep a mean irregularity rate R of at
least ``min_share`` of the first fault's, so the leftovers of one fault (jitter, a stray hiccup:
delays that barely track the iteration time) do not become a second. The mean, not the total
evidence: the total grows with how many iterations and operators a fault touches (a link
flapping in 2 iterations of 9 is in few, a slow NIC delays every pipeline send of its GPU), while
R says how closely each of its delays drives the iteration time.

A switch does not lead a fault when one device below it carries nearly all of its evidence
(``dominant``): a NIC below a leaf or spine, or a leaf below a spine. Every path through that
device also crosses the switch above it, so the switches above a slow NIC, cable or leaf get its
evidence and, from any stray root through them, a little more; the lower device (a NIC with its
cable, which a NIC fault cannot be told from) explains the same delays at fewer endpoints.
A faulty switch delays many endpoints, so no one device below it carries nearly all of its
evidence; a faulty device below it does. The spine layer under ECMP (``spines:...``, of kind
spine) is on every cross-spine path, so a faulty leaf gives it all of the leaf's evidence, while
a congested spine's delays spread over several leaves. The regression scenarios are in
``tests/localizer/test_accuracy.py`` and ``tests/localizer/test_explain.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from sleuth.topology import DeviceKind

from sleuth.localizer.rules import LOCALIZER_RULES
from sleuth.localizer.scoring import Score, leading
from sleuth.localizer.search import Root
from sleuth.validation import fraction, integer

__all__ = ["leading_with_own_cables", "nic_beside_its_cable", "separate"]

Rated = Sequence[tuple[Root, float]]
_Named = TypeVar("_Named")
_COMPUTE_PREFIXES = (f"{DeviceKind.GPU.value}:", f"{DeviceKind.HOST.value}:")


def nic_beside_its_cable(suspects: Sequence[_Named], device: Callable[[_Named], str]) -> tuple[_Named, ...]:
    """``suspects`` in their order, but among the fabric's (all but GPUs and hosts, whose places
    stay) a NIC's own cable, or a cable's NIC, listed right after it: the two explain the same
    delays, which no record can part, so one is never read without the other."""
    fabric = [k for k, suspect in enumerate(suspects) if not device(suspect).startswith(_COMPUTE_PREFIXES)]
    ordered: list[int] = []
    for k in fabric:
        if k in ordered:
            continue
        ordered.append(k)
        nic = _nic_of(device(suspects[k]))
        partner = next((j for j in fabric if j > k and j not in ordered and nic is not None
                        and _nic_of(device(suspects[j])) == nic), None)
        if partner is not None:
            ordered.append(partner)
    out = list(suspects)
    for place, k in zip(fabric, ordered):
        out[place] = suspects[k]
    return tuple(out)


def leading_with_own_cables(ranking: Sequence[Score], top_k: int) -> tuple[Score, ...]:
    """``scoring.leading(ranking, top_k)`` with the own cable of each NIC among its first ``top_k``,
    and the NIC of each such cable, where ``ranking`` has it: the two carry the same transfers, so
    only their kinds' priors part their scores, and another NIC tied with the first must not push the
    first's cable out of the top. A longer tie than ``top_k`` (a ring's NICs, which no record can
    part) stays as it is: its top names none."""
    head = leading(ranking, top_k)
    if len(head) > top_k:  # ``leading`` goes past the top k only for devices tied with the first
        return head
    held = {s.device for s in head}
    partners = []
    for nic in (_nic_of(s.device) for s in head):
        partner = None if nic is None else next(
            (s for s in ranking if s.device not in held and _nic_of(s.device) == nic), None)
        if partner is not None:
            partners.append(partner)
            held.add(partner.device)
    return (*head, *partners)


def _nic_of(device: str) -> str | None:
    """The NIC a device id is (``nic:...``) or hangs a cable from (``link:...~nic:...``), else None."""
    if device.startswith(f"{DeviceKind.NIC.value}:"):
        return device
    if device.startswith(f"{DeviceKind.LINK.value}:"):
        return next((end for end in device.split(":", 1)[1].split("~") if end.startswith(f"{DeviceKind.NIC.value}:")), None)
    return None


def separate(
    rated: Rated,
    *,
    ranked: Callable[[Rated], Sequence[Score]],
    devices_of: Callable[[Root], Collection[str]],
    top_k: int,
    max_faults: int = LOCALIZER_RULES.max_faults,
    min_share: float = LOCALIZER_RULES.second_fault_share,
    dominant: float = LOCALIZER_RULES.dominant_below,
) -> list[tuple[Score, ...]]:
    """Per fault found, its top ``top_k`` suspects and any tied with its first (``scoring.leading``),
    strongest fault first.

    ``ranked(rated)``: the eligible devices of those roots, best first; ``devices_of(root)``:
    the devices a root's evidence goes to.
    """
    integer("max_faults", max_faults, low=1)
    fraction("min_share", min_share)
    fraction("dominant", dominant)
    remaining = [(root, rate) for root, rate in rated if rate > 0]
    faults: list[tuple[Score, ...]] = []
    lead = 0.0
    while remaining and len(faults) < max_faults:
        ranking = ranked(remaining)
        if not ranking:
            break
        top = _leading(ranking, remaining, ranked=ranked, devices_of=devices_of, dominant=dominant)
        explained = [(root, rate) for root, rate in remaining if top.device in devices_of(root)]
        strength = sum(rate for _, rate in explained) / len(explained)
        if faults and strength < min_share * lead:
            break
        lead = lead or strength
        # The top device first, then its neighbours on the roots it explains, and all that tie with it.
        on_its_roots = ranked(explained)
        first = next((s for s in on_its_roots if s.device == top.device), top)
        faults.append(leading_with_own_cables([first, *(s for s in on_its_roots if s.device != top.device)], top_k))
        remaining = [(root, rate) for root, rate in remaining if top.device not in devices_of(root)]
    return faults


#: Per switch kind, the kinds of device below it whose every path crosses it.
_BELOW = {DeviceKind.LEAF: (DeviceKind.NIC,), DeviceKind.SPINE: (DeviceKind.NIC, DeviceKind.LEAF)}


def _leading(
    ranking: Sequence[Score],
    remaining: Rated,
    *,
    ranked: Callable[[Rated], Sequence[Score]],
    devices_of: Callable[[Root], Collection[str]],
    dominant: float,
) -> Score:
    """The best device that is not a switch with one device below it carrying ``dominant`` of
    its evidence (that device's evidence on the roots through the switch)."""
    for score in ranking:
        below = _BELOW.get(score.kind)
        if below is None:
            return score
        through = [(root, rate) for root, rate in remaining if score.device in devices_of(root)]
        lower = max((s.evidence for s in ranked(through) if s.kind in below), default=0.0)
        if lower < dominant * score.evidence:
            return score
    return ranking[0]

"""Device ids: how every device of a fabric is named, and how a name is read back.

docs/design.md fixes one stable id per device, prefixed by its kind:

==============  ===========================  =============================================
kind            id                           example
==============  ===========================  =============================================
gpu             ``gpu:<host>/<i>``           ``gpu:h0042/3``
nvswitch        ``nvswitch:<host>``          ``nvswitch:h0042``
nic             ``nic:<host>/<i>``           ``nic:h0042/3``
host (CPU)      ``host:<host>``              ``host:h0042``
leaf            ``leaf:<name>``              ``leaf:p1r3``
spine           ``spine:<name>``             ``spine:s7``
link            ``link:<a>~<b>``             ``link:leaf:p1r3~nic:h0042/3``
==============  ===========================  =============================================

One more id names a *set* of devices rather than one: ``spines:<name>,<name>...`` (e.g.
``spines:s0,s1,s2,s3``), the equal-cost spines a path may cross when flows are hashed onto them
in a way sleuth never sees (ECMP). It is a suspect's id, not a device of the fabric: evidence
that crossed one of those spines, nobody knows which, names the set (the spine layer above the
path's leaves). Spine names are listed in the topology's order.

A link is itself a device (a cable can be the slow part), named after the two devices it
joins. Canonical order of the two ends: **sorted lexicographically as strings**, so the same
cable has one id whichever end a caller starts from. Because ``"leaf:" < "nic:"`` and
``"leaf:" < "spine:"``, every link id starts with its leaf: ``link:leaf:L~nic:H/i`` and
``link:leaf:L~spine:S``.

Names (hosts, leaves, spines) are restricted to ``[A-Za-z0-9][A-Za-z0-9_.-]*`` so that the
separators ``:``, ``/`` and ``~`` can never be ambiguous inside an id.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.errors import TopologyError

__all__ = [
    "DeviceKind",
    "DeviceRef",
    "NAME_PATTERN",
    "gpu_id",
    "host_id",
    "host_name",
    "is_valid_name",
    "kind_of",
    "leaf_id",
    "link_id",
    "nic_id",
    "nvswitch_id",
    "parse_device",
    "spine_id",
    "spine_set_id",
    "spine_set_members",
]


class DeviceKind(enum.StrEnum):
    """The kinds of device a fabric is made of; the value is the id prefix.

    A ``StrEnum``: a kind is its id prefix wherever a string goes (messages, JSON, ClickHouse).
    """

    GPU = "gpu"
    NVSWITCH = "nvswitch"
    NIC = "nic"
    HOST = "host"
    LEAF = "leaf"
    SPINE = "spine"
    LINK = "link"


NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
_INDEXED_RE = re.compile(rf"^({NAME_PATTERN})/(0|[1-9][0-9]*)$")
_KIND_BY_PREFIX = {kind.value: kind for kind in DeviceKind}


def is_valid_name(name: object) -> bool:
    """Whether ``name`` may name a host, leaf or spine."""
    return isinstance(name, str) and _NAME_RE.match(name) is not None


def host_name(index: int) -> str:
    """The default name of the ``index``-th host: ``h0000``, ``h0001``, ...

    Four digits, more only past 9999 (``h10000``). The parallel layout relies on exactly this
    format (rank r sits on ``h{r // gpus_per_host:04d}``), so generators must use this function.
    """
    return f"h{index:04d}"


def gpu_id(host: str, index: int) -> str:
    return f"gpu:{host}/{index}"


def nic_id(host: str, index: int) -> str:
    return f"nic:{host}/{index}"


def nvswitch_id(host: str) -> str:
    return f"nvswitch:{host}"


def host_id(host: str) -> str:
    return f"host:{host}"


def leaf_id(name: str) -> str:
    return f"leaf:{name}"


def spine_id(name: str) -> str:
    return f"spine:{name}"


_SPINE_SET = "spines:"


def spine_set_id(spines: Sequence[str]) -> str:
    """The id of a set of equal-cost spines, from their spine ids in the order given."""
    names = [parse_device(spine) for spine in spines]
    if len(names) < 2 or any(ref.kind is not DeviceKind.SPINE for ref in names):
        raise TopologyError(f"a spine set needs two or more spine ids, got {list(spines)!r}")
    return _SPINE_SET + ",".join(ref.name for ref in names)


def spine_set_members(device: str) -> tuple[str, ...] | None:
    """The spine ids a spine-set id names, in its order; None when ``device`` is no spine set."""
    if not isinstance(device, str) or not device.startswith(_SPINE_SET):
        return None
    return tuple(spine_id(name) for name in device[len(_SPINE_SET) :].split(","))


def link_id(a: str, b: str) -> str:
    """The id of the link joining devices ``a`` and ``b``, ends in canonical (sorted) order."""
    return f"link:{a}~{b}" if a <= b else f"link:{b}~{a}"


@dataclass(frozen=True, slots=True)
class DeviceRef:
    """A parsed device id.

    ``name`` is the host name for gpu/nic/nvswitch/host, the switch name for leaf/spine and
    empty for a link; ``index`` is the GPU or NIC index on its host (else -1); ``ends`` holds
    the two parsed ends of a link (else empty).
    """

    kind: DeviceKind
    name: str
    index: int = -1
    ends: tuple[DeviceRef, ...] = ()


def kind_of(device: str) -> DeviceKind:
    """The kind of a device id, from its prefix alone (no full validation)."""
    prefix, sep, _ = device.partition(":")
    kind = _KIND_BY_PREFIX.get(prefix) if sep else None
    if kind is None:
        raise TopologyError(f"unknown device kind {prefix!r} in device id {device!r}")
    return kind


def parse_device(device: object) -> DeviceRef:
    """Parse and validate a device id; raise :class:`TopologyError` naming the bad id."""
    if not isinstance(device, str):
        raise TopologyError(f"a device id must be a string, got {device!r}")
    kind = kind_of(device)
    rest = device[len(kind.value) + 1 :]
    if kind in (DeviceKind.GPU, DeviceKind.NIC):
        match = _INDEXED_RE.match(rest)
        if match is None:
            raise TopologyError(f"bad device id {device!r}: expected '{kind.value}:<host>/<index>'")
        return DeviceRef(kind, match.group(1), int(match.group(2)))
    if kind is DeviceKind.LINK:
        a, sep, b = rest.partition("~")
        if not sep or "~" in b:
            raise TopologyError(f"bad device id {device!r}: expected 'link:<device>~<device>'")
        ends = (parse_device(a), parse_device(b))
        if any(end.kind is DeviceKind.LINK for end in ends):
            raise TopologyError(f"bad device id {device!r}: a link cannot join links")
        if a > b:
            raise TopologyError(f"bad device id {device!r}: link ends must be sorted, use {link_id(a, b)!r}")
        return DeviceRef(kind, "", -1, ends)
    if not _NAME_RE.match(rest):
        raise TopologyError(f"bad device id {device!r}: expected '{kind.value}:<name>' with name {NAME_PATTERN}")
    return DeviceRef(kind, rest)

"""Injected faults: what is slow, by how much, and when; and the ``--fault`` grammar.

A fault is a device (or a non-hardware cause), a slowdown ``slow`` (> 1) and a time profile
that says, per iteration, how much of that slowdown is in force. What ``slow`` means by kind:

=============  ====================================================================
kind           effect of ``slow = x``
=============  ====================================================================
gpu            the GPU's compute takes x times as long
host           every GPU on the host computes x times as long, and every operator
               launch on it takes x times as long (CPU contention starves all of the
               host's GPUs; the launch overhead alone, microseconds, would not show)
nvswitch       NVLink bandwidth of every path through the host's NVSwitch / x
nic, link      bandwidth of every path through the device / x
leaf, spine    every path through the switch is limited to port rate / x (congestion;
               a switch has no bandwidth limit of its own, its ports run at the
               leaf-spine link rate)
last_stage     the last pipeline stage computes x times as much (imbalance)
seqlen         per micro-batch attention cost ∝ Σ s² over long-tailed document lengths
               (Dirichlet(alpha) shares of the sequence; ``slow`` is unused)
=============  ====================================================================

Profiles (per iteration factor in [1, x]):

* ``persistent``: a step to x at ``start`` (linear over ``ramp`` iterations when ramp > 0),
  until ``end``;
* ``fluctuation``: x for ``duty`` iterations out of every ``period`` (6 to 9, drawn from the
  seed when not given) — a flapping link is a link fluctuating with a large x;
* ``spike``: x for ``length`` iterations at random times, each iteration starting one with
  probability ``rate``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import numpy as np

from sleuth.errors import ConfigError, TopologyError
from sleuth.irregularity import IrregularityKind
from sleuth.topology import DeviceKind, Topology, kind_of, parse_device
from sleuth.validation import fraction, integer, number_above

__all__ = ["FAULT_GRAMMAR", "Fault", "FaultKind", "Profile", "parse_fault"]


class FaultKind(enum.StrEnum):
    """What a fault slows: a device of the fabric, by its kind (``DeviceKind``), or a non-hardware cause."""

    # The hardware kinds are the fabric's device kinds, so that a fault's kind is its device id's prefix.
    GPU = DeviceKind.GPU.value
    HOST = DeviceKind.HOST.value
    NVSWITCH = DeviceKind.NVSWITCH.value
    NIC = DeviceKind.NIC.value
    LINK = DeviceKind.LINK.value
    LEAF = DeviceKind.LEAF.value
    SPINE = DeviceKind.SPINE.value
    LAST_STAGE = "last_stage"
    SEQLEN = "seqlen"

    @property
    def device_kind(self) -> DeviceKind | None:
        """The kind of device the fault slows; None for a non-hardware cause."""
        return None if self in (FaultKind.LAST_STAGE, FaultKind.SEQLEN) else DeviceKind(self.value)

    @property
    def hardware(self) -> bool:
        return self.device_kind is not None

    @property
    def network(self) -> bool:
        """Whether the fault scales the bandwidth of the paths through its device."""
        return self.device_kind not in (None, DeviceKind.GPU, DeviceKind.HOST)


#: A fault's time profile is the kind of irregularity it makes: a spike, a fluctuation, a persistent step.
Profile = IrregularityKind


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One injected fault. ``device`` is a topology device id (``None`` for non-hardware kinds)."""

    kind: FaultKind
    device: str | None
    slow: float = 1.5
    profile: Profile = Profile.PERSISTENT
    start: int = 0
    end: int | None = None  # first iteration after the fault; None: until the end
    ramp: int = 0
    period: int | None = None
    duty: int = 2
    rate: float = 0.05
    length: int = 1
    alpha: float = 0.3

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FaultKind):
            raise ConfigError(f"fault kind must be a FaultKind, got {self.kind!r}")
        if self.kind.hardware and not self.device:
            raise ConfigError(f"a {self.kind} fault needs a device id")
        if not self.kind.hardware and self.device is not None:
            raise ConfigError(f"a {self.kind} fault has no device, got {self.device!r}")
        if self.device is not None and kind_of(self.device) is not self.kind.device_kind:
            raise ConfigError(f"device {self.device!r} is not a {self.kind}")
        number_above("slow", self.slow, 1)
        for name in ("start", "ramp", "duty", "length"):
            value = getattr(self, name)
            object.__setattr__(self, name, integer(name, value, low=1 if name in ("duty", "length") else 0))
        if self.end is not None:
            integer("end", self.end, low=self.start + 1, low_shown=f"start + 1 ({self.start + 1})")
        if self.period is not None:
            integer("period", self.period, low=self.duty + 1, low_shown=f"duty + 1 ({self.duty + 1})")
        fraction("rate", self.rate)
        number_above("alpha", self.alpha, 0, finite=False)

    def check(self, topology: Topology) -> None:
        """Fail naming the device when the topology has no such device."""
        if self.device is not None and self.device not in topology:
            raise ConfigError(f"fault device {self.device!r} is not in the topology")

    def factors(self, iterations: int, *, seed: int) -> np.ndarray:
        """Per-iteration slowdown in force, float64 array of ``iterations`` values in [1, slow].

        Random profiles (spike times, an unset fluctuation period) draw from ``seed`` only, so
        the same fault gives the same profile whatever else the scenario holds.
        """
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0xFA017]))
        i = np.arange(iterations)
        end = iterations if self.end is None else min(self.end, iterations)
        window = (i >= self.start) & (i < end)
        on = np.zeros(iterations, dtype=np.float64)
        if self.profile is Profile.PERSISTENT:
            if self.ramp:
                on = np.clip((i - self.start + 1) / self.ramp, 0.0, 1.0)
            else:
                on[:] = 1.0
        elif self.profile is Profile.FLUCTUATION:
            period = self.period if self.period is not None else int(rng.integers(6, 10))
            on = (((i - self.start) % period) < self.duty).astype(np.float64)
        else:
            starts = np.flatnonzero(rng.random(iterations) < self.rate)
            for begin in starts:
                on[begin : begin + self.length] = 1.0
        on = np.where(window, on, 0.0)
        return 1.0 + (self.slow - 1.0) * on

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "kind": self.kind.value,
            "hardware": self.kind.hardware,
            "slow": self.slow,
            "profile": self.profile.value,
            "start": self.start,
            "end": self.end,
            "ramp": self.ramp,
            "period": self.period,
            "duty": self.duty,
            "rate": self.rate,
            "length": self.length,
            "alpha": self.alpha,
        }

    def with_device(self, device: str) -> Fault:
        return replace(self, device=device)


_INT_KEYS = ("start", "end", "ramp", "period", "duty", "length")
_FLOAT_KEYS = ("slow", "rate", "alpha")

FAULT_GRAMMAR = """\
fault spec:  TARGET[,KEY=VALUE]...

TARGET is a device id of the topology or a non-hardware cause:
  gpu:<host>/<i>     slow compute            (slow = x1.05 .. x3)
  host:<host>        CPU contention: slow compute and launches on all the host's GPUs
  nvswitch:<host>    NVLink bandwidth / slow
  nic:<host>/<i>     NIC bandwidth / slow
  link:<a>~<b>       cable bandwidth / slow (flapping: profile=fluctuation, large slow)
  leaf:<name>        congestion: every path through the leaf slows
  spine:<name>       congestion: paths hashed (ECMP, per flow) onto the spine slow
  last_stage         the last pipeline stage computes slow x as much
  seqlen             attention cost per micro-batch ∝ Σ s² of long-tailed document lengths

KEYS (all optional):
  slow=X         slowdown factor, > 1 (default 1.5)
  profile=P      persistent (default) | fluctuation | spike
  start=I        first faulty iteration (default 0); end=I first healthy one again
  ramp=N         persistent: reach slow linearly over N iterations (default 0: a step)
  period=N       fluctuation: every N iterations (default: drawn from 6..9); duty=N of them on (default 2)
  rate=P         spike: probability an iteration starts a spike (default 0.05); length=N iterations (default 1)
  alpha=A        seqlen: Dirichlet concentration of document shares, smaller is more skewed (default 0.3)

examples:
  --fault gpu:h0042/3,slow=1.3
  --fault nic:h0001/0,slow=4,profile=spike,rate=0.1
  --fault link:leaf:p0r3~nic:h0001/3,slow=20,profile=fluctuation,period=7,duty=1
  --fault spine:s3,slow=2,start=50,ramp=20
  --fault host:h0007,slow=3,profile=fluctuation
  --fault last_stage,slow=1.2
  --fault seqlen,alpha=0.2
"""


def parse_fault(text: str) -> Fault:
    """A fault from its spec string (see :data:`FAULT_GRAMMAR`); ``ConfigError`` names the bad token."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"empty fault spec {text!r}")
    target, *tokens = [token.strip() for token in text.split(",")]
    if target in ("last_stage", "seqlen"):
        kind, device = FaultKind(target), None
    else:
        prefix = target.partition(":")[0]
        try:
            kind = FaultKind(prefix)
        except ValueError:
            raise ConfigError(
                f"fault {text!r}: unknown target {target!r} (a device id gpu:/host:/nvswitch:/nic:/link:/leaf:/spine:, "
                "or last_stage, seqlen)"
            ) from None
        if not kind.hardware or ":" not in target:
            raise ConfigError(f"fault {text!r}: bad target {target!r}")
        device = target
        try:
            parse_device(device)
        except TopologyError:
            raise ConfigError(f"fault {text!r}: bad device id {target!r}") from None
    options: dict[str, object] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ConfigError(f"fault {text!r}: bad token {token!r}, expected key=value")
        if key in options:
            raise ConfigError(f"fault {text!r}: key {key!r} given twice")
        if key == "profile":
            try:
                options[key] = Profile(value)
            except ValueError:
                raise ConfigError(
                    f"fault {text!r}: bad token {token!r}: profile is one of {', '.join(p.value for p in Profile)}"
                ) from None
        elif key in _INT_KEYS:
            try:
                options[key] = int(value)
            except ValueError:
                raise ConfigError(f"fault {text!r}: bad token {token!r}: {key} must be an integer") from None
        elif key in _FLOAT_KEYS:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if not math.isfinite(number):
                raise ConfigError(f"fault {text!r}: bad token {token!r}: {key} must be a number")
            options[key] = number
        else:
            known = ", ".join(("profile", *_INT_KEYS, *_FLOAT_KEYS))
            raise ConfigError(f"fault {text!r}: unknown key in token {token!r} (known: {known})")
    try:
        return Fault(kind=kind, device=device, **options)  # type: ignore[arg-type]
    except ConfigError as error:
        raise ConfigError(f"fault {text!r}: {error}") from None

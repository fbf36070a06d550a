"""Named, seeded sets of scenarios that the detection and localization benchmarks read.

Each suite is a function of a seed: the same seed gives the same scenarios (faulty devices are
drawn from it), another seed gives a held-out set of the same design.

=============  ===========================================================================
suite          scenarios
=============  ===========================================================================
scale          a slow GPU at 1,024, 2,048, 4,096, 8,192 and 16,384 GPUs (tp8, pp4 or pp8, 30
               iterations; x1.8 at pp4, x3 at pp8: each adds ~20% to the iteration time)
scale-nic      a NIC at an eighth of its bandwidth at the same scales and shapes
dims           3D (tp pp dp), 4D (+cp), 5D (+ep), 6D (+sequence parallel) at 64 GPUs
types          spike, fluctuation and persistent profiles, of a GPU and of a NIC
network        a degraded nic, link, leaf and spine; a CPU-contended host (slow compute)
concurrent     two faults at once (gpu+gpu, gpu+nic, link+host)
ecmp           a congested spine and a congested leaf on a fabric whose routing is ECMP (a
               localizer is not told which spine a flow hashes onto: it can name the spine
               layer, and must still name the leaf)
nonhw          last-stage imbalance, sequence-length imbalance
clean          fault-free runs (false-alarm measurement), three seeds
from-start     a slow GPU (x1.5) and a slow NIC (x6) present from the first iteration
moderate       steps of 5-20% in the iteration time, from iteration 20: a GPU at x1.2 and x1.35, a
               NIC at half its bandwidth (the steps they make: benchmarks/RESULTS.md)
two-moderate   a GPU at x1.2 from iteration 10, then a NIC at half its bandwidth from iteration 30
hiccups        fault-free runs whose only events are benign pauses: one, and three far apart
ramp           a GPU ramping to x1.6 over 20 iterations from iteration 10
layouts        tensor groups narrower than a host, at 64 GPUs: tp2 pp4 dp8, tp4 dp16 with ZeRO and
               tp2 ep4 dp8, each with a NIC at a quarter of its bandwidth from the first iteration,
               a GPU at x1.5 from iteration 20 and a contended host from iteration 20
clocks         hosts' clocks apart (each within 10 ms, one 0.7 s ahead): a GPU x1.5 from the first
               iteration, a NIC x6 from iteration 20, and a fault-free run
drift          a month of a job (iterations sampled every 20,000 steps) creeping up 7%,
               without and with a late persistent fault
random         24 scenarios none of which was designed: 64-256 GPUs, a layout, one fault (or two,
               or none) of any kind, profile, size and start, static or ECMP routing, all drawn
               from the seed; what a new user would try (some faults cost the job nothing: a NIC
               that none of the job's cross-host transfers use)
random-noisy   the random suite's scenarios on a noisier machine, also drawn from the seed: compute
               jitter 1-6%, transfer jitter 3-20%, benign pauses from none to one an iteration
               of 5-100 ms, the base iteration time creeping up by up to 5% over the run
=============  ===========================================================================

Fabrics are rail-optimized fat trees with pods of 4 hosts at small scale (so that leaves and
spines both carry traffic) and 32 hosts at 1,024 GPUs and up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from sleuth.errors import ConfigError
from sleuth.layout import ParallelLayout
from sleuth.topology import DeviceKind, Routing, Topology, generate, link_id

from sleuth.sim.engine import Timing
from sleuth.sim.faults import Fault, FaultKind, Profile
from sleuth.sim.model import ModelSpec
from sleuth.sim.scenario import Scenario

__all__ = ["SUITES", "suite"]

#: A contended host slows every GPU's compute on it, as a slow GPU slows its own: the x1.5 the
#: suites give a slow GPU (concurrent, from-start), so the two compute faults are equally hard.
HOST_SLOW = 1.5


def _fabric(world: int) -> Topology:
    hosts = world // 8
    pod = 4 if hosts <= 64 else 32
    spines = 4 if hosts <= 64 else 16
    return generate(f"fattree:hosts={hosts},gpus=8,pod={min(pod, hosts)},spines={spines}")


class _Picker:
    """Draws faulty devices from the suite's seed."""

    def __init__(self, topology: Topology, world: int, seed: int, salt: int) -> None:
        self.topology = topology
        self.world = world
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, salt]))

    def gpu(self) -> str:
        return self.topology.devices(DeviceKind.GPU)[int(self.rng.integers(self.world))]

    def host(self) -> str:
        return self.topology.devices(DeviceKind.HOST)[int(self.rng.integers(self.world // 8))]

    def nic(self) -> str:
        return self.topology.nic_of(self.gpu())  # type: ignore[return-value]

    def link(self) -> str:
        nic = self.nic()
        return link_id(self.topology.leaves_of(nic)[0], nic)

    def leaf(self) -> str:
        return self.topology.leaves_of(self.nic())[0]

    def spine(self) -> str:
        spines = self.topology.devices(DeviceKind.SPINE)
        return spines[int(self.rng.integers(len(spines)))]


def _scenario(name: str, layout: ParallelLayout, seed: int, faults: tuple[Fault, ...] = (), **options) -> Scenario:
    options.setdefault("topology", _fabric(layout.world))
    return Scenario(layout=layout, faults=faults, seed=seed, name=name, job=f"sim-{name}", **options)


def _base() -> ParallelLayout:
    return ParallelLayout(128, 4, 2, 16)


# (world, pp, GPU slowdown). A slow GPU costs the iteration in proportion to the share of compute
# in it: with 4 layers per stage (pp4) x1.8 adds 16-28% to the iteration time, with 2 (pp8) it
# takes x3.0 for the same 18-24% (the rest is pipeline waits and collectives, which one GPU does
# not lengthen as much). A fixed x1.3 left pp8 iterations flat (~97 ms), so nothing was
# δ-irregular and the suite measured nothing at 4,096 GPUs and up. pp stays <= 8 so that every
# stage keeps two layers (at pp16 one layer per stage hides even a x3 GPU behind the waits).
_SCALES = ((1024, 4, 1.8), (2048, 4, 1.8), (4096, 8, 3.0), (8192, 8, 3.0), (16384, 8, 3.0))


def _scale(seed: int) -> list[Scenario]:
    out = []
    for world, pp, slow in _SCALES:
        layout = ParallelLayout(world, 8, pp, world // (8 * pp))
        topology = _fabric(world)
        pick = _Picker(topology, world, seed, world)
        fault = Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=slow, start=10)
        out.append(_scenario(f"scale-{world}", layout, seed, (fault,), topology=topology, iterations=30))
    return out


def _scale_nic(seed: int) -> list[Scenario]:
    # An eighth, not the network suite's quarter: a NIC at a quarter of its speed can leave a large
    # job only one δ-irregular iteration, which measures the δ rule, not the search. An eighth is a
    # 400G port that trained down to 50G.
    out = []
    for world, pp, _ in _SCALES:
        layout = ParallelLayout(world, 8, pp, world // (8 * pp))
        topology = _fabric(world)
        pick = _Picker(topology, world, seed, world + 1)
        fault = Fault(kind=FaultKind.NIC, device=pick.nic(), slow=8.0, start=10)
        out.append(_scenario(f"scale-{world}-nic", layout, seed, (fault,), topology=topology, iterations=30))
    return out


def _dims(seed: int) -> list[Scenario]:
    shapes = (
        ("3d", ParallelLayout(64, 4, 2, 8), ModelSpec()),
        ("4d", ParallelLayout(64, 4, 2, 4, cp=2), ModelSpec()),
        ("5d", ParallelLayout(64, 2, 2, 4, cp=2, ep=2), ModelSpec()),
        ("6d", ParallelLayout(64, 2, 2, 4, cp=2, ep=2), ModelSpec(sequence_parallel=True, zero=True)),
    )
    out = []
    for k, (name, layout, model) in enumerate(shapes):
        topology = _fabric(64)
        pick = _Picker(topology, 64, seed, 100 + k)
        fault = Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.5, start=20)
        out.append(_scenario(f"dims-{name}", layout, seed, (fault,), topology=topology, model=model))
    return out


def _types(seed: int) -> list[Scenario]:
    out = []
    topology = _fabric(128)
    for k, profile in enumerate(Profile):
        for kind in (FaultKind.GPU, FaultKind.NIC):
            pick = _Picker(topology, 128, seed, 200 + 10 * k + (kind is FaultKind.NIC))
            device = pick.gpu() if kind is FaultKind.GPU else pick.nic()
            slow = 1.6 if kind is FaultKind.GPU else 4.0
            fault = Fault(kind=kind, device=device, slow=slow, profile=profile, start=20, rate=0.08)
            out.append(_scenario(f"types-{profile.value}-{kind.value}", _base(), seed, (fault,), topology=topology))
    return out


def _network(seed: int) -> list[Scenario]:
    out = []
    topology = _fabric(128)
    for k, kind in enumerate((FaultKind.NIC, FaultKind.LINK, FaultKind.LEAF, FaultKind.SPINE, FaultKind.HOST)):
        pick = _Picker(topology, 128, seed, 300 + k)
        device = getattr(pick, kind.value)()
        # A contended host at HOST_SLOW; the other kinds cut bandwidth to a quarter.
        fault = Fault(kind=kind, device=device, slow=HOST_SLOW if kind is FaultKind.HOST else 4.0, start=20)
        out.append(_scenario(f"network-{kind.value}", _base(), seed, (fault,), topology=topology))
    return out


def _ecmp(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 1400)
    faults = (Fault(kind=FaultKind.SPINE, device=pick.spine(), slow=4.0, start=20),
              Fault(kind=FaultKind.LEAF, device=pick.leaf(), slow=4.0, start=20))  # the network suite's x4
    return [
        _scenario(f"ecmp-{fault.kind.value}", _base(), seed, (fault,), topology=topology, routing=Routing.ECMP)
        for fault in faults
    ]


def _concurrent(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 400)
    # The second GPU is slower than the first: a slower-or-equal one in the same pipeline stage is
    # waited for no longer than the first already is, so it leaves the job's iteration times
    # exactly as they were, and nothing that reads iteration times can find it. A slower one lengthens them wherever it sits
    # (x1.6: by 4.5-5.5% in the same stage, never δ-irregular there, 13% in the other).
    pairs = (
        ("gpu-gpu", Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.5, start=20),
         Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.6, start=40)),
        ("gpu-nic", Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.5, start=20),
         Fault(kind=FaultKind.NIC, device=pick.nic(), slow=4.0, start=30)),
        ("link-host", Fault(kind=FaultKind.LINK, device=pick.link(), slow=6.0, profile=Profile.FLUCTUATION, start=20),
         Fault(kind=FaultKind.HOST, device=pick.host(), slow=HOST_SLOW, start=30)),
    )
    return [_scenario(f"concurrent-{name}", _base(), seed, (a, b), topology=topology) for name, a, b in pairs]


def _nonhw(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    return [
        _scenario("nonhw-last-stage", _base(), seed, (Fault(kind=FaultKind.LAST_STAGE, device=None, slow=1.3, start=20),), topology=topology),
        _scenario("nonhw-seqlen", _base(), seed, (Fault(kind=FaultKind.SEQLEN, device=None, slow=2.0, alpha=0.2, start=20),), topology=topology),
    ]


def _clean(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    return [_scenario(f"clean-{k}", _base(), seed * 10 + k, topology=topology) for k in range(3)]


def _from_start(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 900)
    return [
        _scenario("from-start-gpu", _base(), seed, (Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.5),), topology=topology),
        _scenario("from-start-nic", _base(), seed, (Fault(kind=FaultKind.NIC, device=pick.nic(), slow=6.0),), topology=topology),
    ]


def _moderate(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 1000)
    faults = (
        ("gpu-1.2", Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.2, start=20)),
        ("gpu-1.35", Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.35, start=20)),
        ("nic-2", Fault(kind=FaultKind.NIC, device=pick.nic(), slow=2.0, start=20)),
    )
    return [_scenario(f"moderate-{name}", _base(), seed, (fault,), topology=topology) for name, fault in faults]


def _two_moderate(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 1100)
    faults = (Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.2, start=10),
              Fault(kind=FaultKind.NIC, device=pick.nic(), slow=2.0, start=30))
    return [_scenario("two-moderate-gpu-nic", _base(), seed, faults, topology=topology)]


def _hiccups(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1200]))
    one = (int(rng.integers(10, 90)),)
    three = tuple(int(i) for i in np.sort(rng.choice(np.arange(5, 95, 30), 3, replace=False) + rng.integers(0, 20, 3)))
    return [
        _scenario(f"hiccups-{len(at)}", _base(), seed, topology=topology, timing=Timing(hiccup_rate=0.0, hiccups_at=at))
        for at in (one, three)
    ]


def _ramp(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 1300)
    fault = Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.6, start=10, ramp=20)
    return [_scenario("ramp-gpu", _base(), seed, (fault,), topology=topology)]


def _layouts(seed: int) -> list[Scenario]:
    # Where a host holds several tensor groups, a stage runs several data-parallel rings side by side
    # and one NIC slows one of them: its peers are the other rings, and where no pipeline pair
    # crosses the NIC, its ring's collectives are all there is to see it by.
    shapes = (
        ("tp2-pp4-dp8", ParallelLayout(64, 2, 4, 8), ModelSpec()),
        ("tp4-dp16-zero", ParallelLayout(64, 4, 1, 16), ModelSpec(zero=True)),
        ("tp2-ep4-dp8", ParallelLayout(64, 2, 1, 8, ep=4), ModelSpec()),
    )
    out = []
    topology = _fabric(64)
    for k, (name, layout, model) in enumerate(shapes):
        pick = _Picker(topology, 64, seed, 1500 + k)
        faults = (
            ("nic-from-start", Fault(kind=FaultKind.NIC, device=pick.nic(), slow=4.0)),
            ("gpu", Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.5, start=20)),
            ("host", Fault(kind=FaultKind.HOST, device=pick.host(), slow=HOST_SLOW, start=20)),
        )
        out += [_scenario(f"layouts-{name}-{what}", layout, seed, (fault,), topology=topology, model=model)
                for what, fault in faults]
    return out


def _clocks(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 1400)
    hosts = topology.hosts[: _base().n_hosts]
    # Every host as NTP leaves a datacenter's clocks at worst (within 10 ms), one host without it.
    clocks = {host: int(pick.rng.uniform(0, 10e6)) for host in hosts}
    clocks[hosts[int(pick.rng.integers(len(hosts)))]] = 700_000_000
    faults = (
        ("gpu-from-start", (Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.5),)),
        ("nic", (Fault(kind=FaultKind.NIC, device=pick.nic(), slow=6.0, start=20),)),
        ("clean", ()),
    )
    return [_scenario(f"clocks-{name}", _base(), seed, fault, topology=topology, host_clocks_ns=clocks)
            for name, fault in faults]


def _drift(seed: int) -> list[Scenario]:
    topology = _fabric(128)
    pick = _Picker(topology, 128, seed, 800)
    late = Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=1.3, start=80)
    options = dict(topology=topology, drift=0.07, stride=20000)
    return [
        _scenario("drift-clean", _base(), seed, **options),  # type: ignore[arg-type]  # options are _scenario keywords
        _scenario("drift-fault", _base(), seed, (late,), **options),
    ]


#: Scenarios the random suite draws per seed.
_RANDOM_SCENARIOS = 24
#: What the random suite's faults slow, equally likely; "two": a GPU, then a NIC 15 iterations later.
_RANDOM_KINDS = ("gpu", "host", "nic", "link", "leaf", "spine", "last_stage", "seqlen", "none", "two")
#: Each kind's slowdown range: a GPU or host in the moderate-to-broken range, a port trained down
#: to between half and an eighth of its speed, a switch at a half to a fifth.
_RANDOM_SLOW = {"gpu": (1.2, 2.5), "host": (1.3, 2.5), "nic": (2.0, 8.0), "link": (2.0, 8.0), "leaf": (2.0, 5.0),
                "spine": (2.0, 5.0), "last_stage": (1.2, 1.6)}


def _random(seed: int) -> list[Scenario]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1600]))
    out = []
    for k in range(_RANDOM_SCENARIOS):
        world = int(rng.choice((64, 128, 256)))
        shapes = [(tp, pp) for tp in (1, 2, 4, 8) for pp in (1, 2, 4) if world // (tp * pp) >= 2]
        tp, pp = shapes[int(rng.integers(len(shapes)))]
        layout = ParallelLayout(world, tp, pp, world // (tp * pp))
        topology = _fabric(world)
        pick = _Picker(topology, world, seed, 1600 + k)
        what = str(rng.choice(_RANDOM_KINDS))
        if what == "last_stage" and pp == 1:
            what = "gpu"  # one stage has no last stage to overload
        low, high = _RANDOM_SLOW.get(what, (1.5, 1.5))
        slow = float(rng.uniform(low, high))
        profile = Profile(str(rng.choice(["persistent"] * 6 + ["fluctuation"] * 2 + ["spike"])))
        start = int(rng.choice((0, 0, 10, 20)))
        ramp = int(rng.choice((0, 0, 0, 10))) if profile is Profile.PERSISTENT else 0
        faults: tuple[Fault, ...] = ()
        if what == "two":
            faults = (Fault(kind=FaultKind.GPU, device=pick.gpu(), slow=float(rng.uniform(1.3, 2.0)), start=10),
                      Fault(kind=FaultKind.NIC, device=pick.nic(), slow=float(rng.uniform(3.0, 6.0)), start=25))
        elif what == "last_stage":
            faults = (Fault(kind=FaultKind.LAST_STAGE, device=None, slow=slow),)
        elif what == "seqlen":
            faults = (Fault(kind=FaultKind.SEQLEN, device=None, alpha=float(rng.uniform(0.2, 0.6))),)
        elif what in ("leaf", "spine"):
            faults = (Fault(kind=FaultKind(what), device=getattr(pick, what)(), slow=slow, start=start),)
        elif what != "none":
            faults = (Fault(kind=FaultKind(what), device=getattr(pick, what)(), slow=slow, profile=profile, start=start,
                            ramp=ramp),)
        routing = Routing.STATIC if rng.random() < 0.5 else Routing.ECMP
        out.append(_scenario(f"random-{k}-{what}-tp{tp}-pp{pp}-dp{layout.dp}", layout, seed, faults, topology=topology,
                             iterations=40, routing=routing))
    return out


def _random_noisy(seed: int) -> list[Scenario]:
    # Real clusters are noisier than the emulator's defaults: each scenario's machine is drawn too,
    # from its own stream, so that the random suite's scenarios stay as they are.
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1700]))
    out = []
    for scenario in _random(seed):
        timing = Timing(compute_jitter=float(rng.uniform(0.01, 0.06)), comm_jitter=float(rng.uniform(0.03, 0.20)),
                        hiccup_rate=float(rng.choice((0.0, 0.05, 0.2, 1.0))), hiccup_ms=float(rng.uniform(5.0, 100.0)))
        out.append(replace(scenario, name=scenario.name.replace("random-", "noisy-", 1), job=scenario.job + "-noisy",
                           timing=timing, drift=float(rng.uniform(0.0, 0.05))))
    return out


SUITES: dict[str, Callable[[int], list[Scenario]]] = {
    "scale": _scale,
    "scale-nic": _scale_nic,
    "dims": _dims,
    "types": _types,
    "network": _network,
    "concurrent": _concurrent,
    "ecmp": _ecmp,
    "nonhw": _nonhw,
    "clean": _clean,
    "from-start": _from_start,
    "moderate": _moderate,
    "two-moderate": _two_moderate,
    "hiccups": _hiccups,
    "ramp": _ramp,
    "layouts": _layouts,
    "clocks": _clocks,
    "drift": _drift,
    "random": _random,
    "random-noisy": _random_noisy,
}


def suite(name: str, *, seed: int = 0, iterations: int | None = None, timing: Timing | None = None) -> list[Scenario]:
    """The scenarios of suite ``name`` for ``seed``; ``iterations`` overrides every scenario's count."""
    try:
        build = SUITES[name]
    except KeyError:
        raise ConfigError(f"unknown suite {name!r} (known: {', '.join(SUITES)})") from None
    scenarios = build(seed)
    if iterations is not None or timing is not None:
        changes = {}
        if iterations is not None:
            changes["iterations"] = iterations
        if timing is not None:
            changes["timing"] = timing  # type: ignore[assignment]  # changes are Scenario fields of either type
        scenarios = [replace(sc, **changes) for sc in scenarios]  # type: ignore[arg-type]  # changes are Scenario fields
    return scenarios

"""Named regression scenarios: each rule of the localizer that a benchmark seed once showed was
needed, reproduced on an emulated job small enough for every run (128 GPUs, 30 iterations).

Each scenario is one slow NIC whose step of a few percent never trips δ, and one GPU hiccup that
is the only δ-irregular iteration: the hiccup alone must not be the answer."""

from __future__ import annotations

from sleuth.layout import ParallelLayout
from sleuth.localizer import localize
from sleuth.sim import Emulation, Fault, FaultKind, Scenario, Timing
from sleuth.topology import generate

_NIC = "nic:h0011/6"


def _nic_step_and_hiccup(*, slow: float, hiccup_at: int) -> Emulation:
    """128 GPUs (tp 4, pp 2, dp 16): the NIC slows by ``slow`` from iteration 10, and every random
    hiccup is off but one of 80 ms at ``hiccup_at``."""
    scenario = Scenario(
        topology=generate("fattree:hosts=16,gpus=8,pod=4,spines=4"),
        layout=ParallelLayout(128, 4, 2, 16),
        faults=(Fault(kind=FaultKind.NIC, device=_NIC, slow=slow, start=10),),
        iterations=30,
        timing=Timing(hiccup_rate=0.0, hiccup_ms=80.0, hiccups_at=(hiccup_at,)),
        seed=101,
    )
    return Emulation(scenario)


def _incident(emulation: Emulation):
    irregular = [t.iteration for t in emulation.truth().iterations if t.irregular]
    [incident] = localize(
        emulation, irregular_iterations=irregular, topology=emulation.scenario.topology, window=30, routing="static"
    )
    return irregular, incident


def test_a_nic_step_before_the_only_irregular_iteration_a_hiccup_is_searched_regression_seed_357():
    """The step before the onset is a persistent slowdown in the window: its iterations are
    searched and count toward the support rule, so the hiccup's GPU lacks support."""
    irregular, incident = _incident(_nic_step_and_hiccup(slow=2.0, hiccup_at=27))
    assert irregular == [27]  # the NIC's step never trips δ
    assert str(incident.cause) == "network"
    assert incident.suspects[0].device == _NIC


def test_a_nic_step_after_a_lone_early_hiccup_is_measured_from_the_level_before_it_regression_seed_371():
    """The hiccup at 4 is the only irregular iteration and its level comes back; the NIC's step at
    10 is segmented from the start of the window, not from the hiccup, so that the level it rises
    from has enough columns."""
    irregular, incident = _incident(_nic_step_and_hiccup(slow=2.5, hiccup_at=4))
    assert irregular == [4]
    assert _NIC in {s.device for s in incident.suspects[:2]}

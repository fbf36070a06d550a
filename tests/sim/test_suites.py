"""Named suites are seeded: the same seed gives the same scenarios, another a held-out set."""

from __future__ import annotations

import pytest

from sleuth.sim import SUITES, FaultKind, suite
from sleuth.topology import Routing


def _devices(name: str, seed: int) -> list:
    return [tuple(f.device for f in sc.faults) for sc in suite(name, seed=seed)]


@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_suite_builds(name: str) -> None:
    scenarios = suite(name, seed=0, iterations=2)
    assert scenarios and all(sc.iterations == 2 for sc in scenarios)
    assert len({sc.name for sc in scenarios}) == len(scenarios)


def test_seeds_pick_the_devices() -> None:
    assert _devices("network", 0) == _devices("network", 0)
    assert _devices("network", 0) != _devices("network", 1)


def test_suites_cover_what_they_promise() -> None:
    assert [sc.layout.world for sc in suite("scale")] == [1024, 2048, 4096, 8192, 16384]
    assert [(sc.layout.world, sc.faults[0].kind) for sc in suite("scale-nic")] == [
        (w, FaultKind.NIC) for w in (1024, 2048, 4096, 8192, 16384)]
    assert [sc.faults[0].kind for sc in suite("network")] == [
        FaultKind.NIC, FaultKind.LINK, FaultKind.LEAF, FaultKind.SPINE, FaultKind.HOST]
    assert all(len(sc.faults) == 2 for sc in suite("concurrent"))
    assert [(sc.faults[0].kind, sc.routing) for sc in suite("ecmp")] == [
        (FaultKind.SPINE, Routing.ECMP), (FaultKind.LEAF, Routing.ECMP)]
    assert all(sc.routing is Routing.STATIC for sc in suite("network"))
    assert all(not sc.faults for sc in suite("clean"))
    assert all(sc.drift == 0.07 for sc in suite("drift"))
    assert all(sc.faults[0].start == 0 for sc in suite("from-start"))
    assert all(1 < sc.faults[0].slow <= 2 for sc in suite("moderate")) and len(suite("two-moderate")[0].faults) == 2
    assert [len(sc.timing.hiccups_at) for sc in suite("hiccups")] == [1, 3]
    assert all(not sc.faults and sc.timing.hiccup_rate == 0 for sc in suite("hiccups"))
    assert suite("ramp")[0].faults[0].ramp == 20
    layouts = suite("layouts")
    assert {(sc.layout.tp, sc.layout.pp, sc.layout.ep, sc.model.zero) for sc in layouts} == {
        (2, 4, 1, False), (4, 1, 1, True), (2, 1, 4, False)}
    assert [sc.faults[0].kind for sc in layouts[:3]] == [FaultKind.NIC, FaultKind.GPU, FaultKind.HOST]
    dims = suite("dims")
    assert [(sc.layout.cp, sc.layout.ep, sc.model.sequence_parallel) for sc in dims] == [
        (1, 1, False), (2, 1, False), (2, 2, False), (2, 2, True)]


def test_the_random_suite_draws_shapes_faults_and_routings_from_the_seed() -> None:
    drawn = suite("random", seed=3)
    assert len(drawn) == 24 and [sc.name for sc in drawn] == [sc.name for sc in suite("random", seed=3)]
    assert [sc.name for sc in drawn] != [sc.name for sc in suite("random", seed=4)]
    assert len({(sc.layout.tp, sc.layout.pp) for sc in drawn}) > 4 and {sc.layout.world for sc in drawn} <= {64, 128, 256}
    assert {f.kind for sc in drawn for f in sc.faults} > {FaultKind.GPU, FaultKind.NIC}
    assert {sc.routing for sc in drawn} == {Routing.STATIC, Routing.ECMP}
    for sc in drawn:  # every device drawn is on the scenario's own fabric, a last stage only where there are stages
        for fault in sc.faults:
            fault.check(sc.topology)
            assert fault.kind is not FaultKind.LAST_STAGE or sc.layout.pp > 1


def test_the_noisy_random_suite_keeps_the_random_suites_scenarios_on_machines_drawn_from_the_seed() -> None:
    plain, noisy = suite("random", seed=3), suite("random-noisy", seed=3)
    assert [(sc.layout, sc.faults, sc.routing) for sc in noisy] == [(sc.layout, sc.faults, sc.routing) for sc in plain]
    assert all(sc.name == p.name.replace("random-", "noisy-") and sc.job != p.job for sc, p in zip(noisy, plain))
    assert len({sc.timing for sc in noisy}) == len(noisy) and all(0.0 <= sc.drift <= 0.05 for sc in noisy)
    assert [sc.timing for sc in noisy] == [sc.timing for sc in suite("random-noisy", seed=3)]
    assert [sc.timing for sc in noisy] != [sc.timing for sc in suite("random-noisy", seed=4)]


@pytest.mark.parametrize("world", [1024, 4096])  # pp4 and pp8, the two shapes of the suite
def test_the_scale_suites_slow_gpu_makes_iterations_irregular(world: int) -> None:
    from sleuth.sim import Emulation

    [scenario] = [sc for sc in suite("scale", seed=7) if sc.layout.world == world]
    emulation = Emulation(scenario)
    onset = int(emulation.iteration_ids()[scenario.faults[0].start])
    irregular = emulation.irregular_iterations()
    assert not any(i < onset for i in irregular)
    assert sum(i >= onset for i in irregular) >= 2


def test_the_faults_and_irregular_iterations_read_without_the_twins_are_the_truths() -> None:
    from sleuth.sim import Emulation

    [scenario] = [sc for sc in suite("scale", seed=7) if sc.layout.world == 1024]
    emulation = Emulation(scenario)
    truth = emulation.truth()
    assert emulation.fault_truths() == truth.faults and truth.faults
    assert emulation.irregular_iterations() == tuple(t.iteration for t in truth.iterations if t.irregular)
    assert emulation.irregular_iterations()

"""localize() end to end on seeded emulator scenarios; bad input; the incident's JSON and rows;
decay, impact and non-hardware rules on hand-made inputs."""

from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pytest

from sleuth.errors import ConfigError, TopologyError
from sleuth.jobspec import JobSpec
from sleuth.layout import ParallelLayout
from sleuth.localizer import Priors, build_graph, localize
from sleuth.localizer.impact import estimate
from sleuth.localizer.nonhardware import Straggler, classify
from sleuth.localizer.operators import make_window
from sleuth.localizer.scoring import decay
from sleuth.sim import Emulation, Fault, FaultKind, Scenario
from sleuth.storage.tables import incident_rows
from sleuth.topology import generate


@lru_cache(maxsize=None)
def _emulation(device: str, slow: float, kind: FaultKind = FaultKind.GPU) -> Emulation:
    topology = generate("fattree:hosts=8,gpus=8,pod=4,spines=2")
    scenario = Scenario(
        topology=topology, layout=ParallelLayout(64, 4, 2, 8), iterations=30, microbatches=4, seed=7,
        faults=(Fault(kind=kind, device=device, slow=slow, start=15),),
    )
    return Emulation(scenario)


def _irregular(emulation: Emulation) -> list[int]:
    return list(emulation.irregular_iterations())


def test_a_slow_gpu_is_the_top_suspect_with_compute_cause_and_its_impact():
    emulation = _emulation("gpu:h0006/1", 1.5)
    irregular = _irregular(emulation)
    [incident] = localize(emulation, irregular_iterations=irregular, topology=emulation.scenario.topology, window=30)
    assert incident.suspects[0].device == "gpu:h0006/1"
    assert str(incident.cause) == "compute"
    assert incident.iterations == tuple(irregular)
    assert incident.ranks_fetched < 64
    assert incident.impact.slowdown > 1.1
    times = emulation.iteration_times()
    expected = np.mean(times[15:]) / np.median(times[:15])
    assert incident.impact.slowdown == pytest.approx(expected, rel=0.05)  # pivot's view of the job-level time


def test_a_contended_host_cpu_names_the_host_not_one_of_its_gpus():
    emulation = _emulation("host:h0006", 1.5, FaultKind.HOST)  # every GPU of h0006 computes (and launches) x1.5
    [incident] = localize(emulation, irregular_iterations=_irregular(emulation), topology=emulation.scenario.topology, window=30)
    assert incident.suspects[0].device == "host:h0006"
    assert not any(s.device.startswith("gpu:h0006/") for s in incident.suspects)
    assert str(incident.cause) == "compute"


def test_a_slow_gpu_stays_a_gpu_its_host_is_not_a_suspect():
    emulation = _emulation("gpu:h0006/1", 1.5)
    [incident] = localize(emulation, irregular_iterations=_irregular(emulation), topology=emulation.scenario.topology, window=30)
    assert incident.suspects[0].device == "gpu:h0006/1"
    assert "host:h0006" not in [s.device for s in incident.suspects]


def test_a_slow_nic_is_among_the_top_two_with_network_cause():
    emulation = _emulation("nic:h0005/2", 4.0, FaultKind.NIC)
    [incident] = localize(emulation, irregular_iterations=_irregular(emulation), topology=emulation.scenario.topology, window=30)
    assert "nic:h0005/2" in [s.device for s in incident.suspects]
    assert str(incident.cause) == "network"


def test_detector_results_with_an_iteration_attribute_are_accepted():
    class Irregularity:
        def __init__(self, iteration):
            self.job, self.iteration, self.kind = "sim", iteration, "delta"

    emulation = _emulation("gpu:h0006/1", 1.5)
    plain = localize(emulation, irregular_iterations=_irregular(emulation), topology=emulation.scenario.topology, window=30)
    wrapped = localize(
        emulation, irregular_iterations=[Irregularity(i) for i in _irregular(emulation)], topology=emulation.scenario.topology, window=30
    )
    assert [s.device for s in plain[0].suspects] == [s.device for s in wrapped[0].suspects]


def test_ground_truth_abnormal_labels_can_drive_the_search():
    emulation = _emulation("gpu:h0006/1", 1.5)

    def labels(records, iterations):
        ranks = np.unique(records["rank"]).tolist()
        return emulation.abnormal(ranks, iterations=np.unique(records["iteration"]).tolist())[0]

    [incident] = localize(
        emulation, irregular_iterations=_irregular(emulation), topology=emulation.scenario.topology, window=30, abnormal=labels
    )
    assert incident.suspects[0].device == "gpu:h0006/1"


def test_no_irregular_iterations_no_incident():
    emulation = _emulation("gpu:h0006/1", 1.5)
    assert localize(emulation, irregular_iterations=[], topology=emulation.scenario.topology) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"top_k": 0}, "top_k must be an integer >= 1"),
        ({"window": 2}, "window must be an integer >= 3"),
        ({"pivots": (64,)}, "pivot rank 64 is outside the world of 64"),
        ({"irregular_iterations": [999]}, "irregular iteration 999 is not among the source's iterations"),
        ({"irregular_iterations": ["x"]}, "neither an iteration number"),
    ],
)
def test_bad_arguments_fail_naming_what_is_wrong(options, message):
    emulation = _emulation("gpu:h0006/1", 1.5)
    arguments = {"irregular_iterations": [16], "topology": emulation.scenario.topology, **options}
    with pytest.raises(ConfigError, match=message):
        localize(emulation, **arguments)


def test_a_topology_without_the_jobs_gpus_is_refused_before_any_fetch():
    emulation = _emulation("gpu:h0006/1", 1.5)
    with pytest.raises(TopologyError, match="gpu:h0004/0 is not in the topology"):
        localize(emulation, irregular_iterations=[16], topology=generate("fattree:hosts=4,gpus=8,pod=4,spines=2"))


def test_incident_json_and_clickhouse_rows():
    emulation = _emulation("gpu:h0006/1", 1.5)
    [incident] = localize(emulation, irregular_iterations=_irregular(emulation), topology=emulation.scenario.topology, window=30)
    document = json.loads(incident.to_json())
    assert document["suspects"][0] == {"device": "gpu:h0006/1", "kind": "gpu", "score": round(incident.suspects[0].score, 6)}
    assert document["cause"] == "compute" and document["ranks_fetched"] == incident.ranks_fetched
    assert set(document["impact"]) == {"slowdown", "baseline_ns", "actual_ns", "gpu_hours_lost", "iterations"}
    rows = incident_rows(incident, created_ns=5)
    assert rows["incidents"][0][:2] == ("sim", incident.incident)
    assert rows["incidents"][0][7] == list(incident.traversal)
    assert [r[2] for r in rows["suspects"]] == [s.device for s in incident.suspects]
    assert len(rows["traversals"]) == len(incident.steps)
    assert json.loads(rows["incident_details"][0][7]) == document


def test_decay_rule_floors_holmes_formula():
    assert decay(1) == 1.0  # ln(ε)/1 would be -13.8
    assert decay(2) == 0.5  # ln(1+ε)/2 would be ~0
    assert decay(8) == pytest.approx(math.log(7) / 8, rel=1e-6)
    assert decay(1024) == pytest.approx(math.log(1023) / 1024, rel=1e-6)
    with pytest.raises(ConfigError):
        Priors(decay_power=2.0)
    with pytest.raises(ConfigError, match="unknown device kind 'cpu'"):
        Priors.from_mapping({"cpu": 0.1})


def test_the_reference_is_the_regular_iterations_before_the_fault_not_after_an_early_hiccup():
    # A hiccup at 2, a persistent fault from 10 that stops being δ-irregular at 17.
    window = make_window(np.arange(30), [2, *range(10, 17)], size=30)
    assert np.flatnonzero(window.reference).tolist() == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    # Too few regular iterations before any irregular one: every regular iteration.
    early = make_window(np.arange(12), [1, 3], size=12)
    assert np.flatnonzero(early.reference).tolist() == [0, 2, *range(4, 12)]


def test_impact_is_slowdown_against_the_healthy_reference_and_gpu_hours():
    window = make_window(np.arange(10), [5, 6], size=10)
    times = np.array([100.0] * 5 + [150.0] * 5) * 1e9  # 100 s healthy, then 150 s
    impact = estimate(times, window, world=8)
    assert impact.slowdown == pytest.approx(1.5)
    assert impact.gpu_hours_lost == pytest.approx(5 * 50 * 8 / 3600)


def test_evidence_on_the_whole_last_stage_is_stage_imbalance_and_moving_over_replicas_is_seqlen():
    graph = build_graph(JobSpec.from_layout("j", ParallelLayout(64, 4, 2, 8)))
    last = {r: 1.0 for r in range(32, 64, 3)}
    diagnosis = classify(last, graph=graph)
    assert diagnosis.kind is Straggler.STAGE_IMBALANCE and "fewer transformer layers" in diagnosis.advice
    moving = {r: 1.0 for r in (1, 9, 17, 25, 40, 48)}
    assert classify(moving, graph=graph).kind is Straggler.SEQLEN_IMBALANCE
    assert classify({5: 3.0, 6: 0.1}, graph=graph).kind is Straggler.HARDWARE  # one GPU
    assert classify({r: 1.0 for r in range(8, 16)}, graph=graph).kind is Straggler.HARDWARE  # one host

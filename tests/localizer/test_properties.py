"""Property tests: the search ends and fetches each rank once; scores are a distribution;
more evidence on a device never lowers its rank; a compute root's rate is split, whole, between
its GPU and its host."""

from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.layout import ParallelLayout
from sleuth.localizer import Thresholds, build_graph
from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.operators import make_window
from sleuth.localizer.scoring import Evidence, Priors, accumulate, map_scores, root_devices
from sleuth.localizer.search import Cause, Root, search
from sleuth.sim import Emulation, Fault, FaultKind, Scenario
from sleuth.topology import DeviceKind, Routing, generate
from sleuth.topology.ids import host_id


@lru_cache(maxsize=1)
def _topology():
    return generate("fattree:hosts=4,gpus=8,pod=2,spines=2")


class CountingSource:
    """A RecordSource that counts how often each rank's records are asked for: whole
    (``asked``), or one communicator's (``asked_on``, per (rank, comm))."""

    def __init__(self, inner):
        self.inner = inner
        self.asked: dict[int, int] = {}
        self.asked_on: dict[tuple[int, str], int] = {}
        self.read_after_whole: list[tuple[int, str]] = []  # one communicator's, of a rank already read whole

    def job_spec(self):
        return self.inner.job_spec()

    def iteration_ids(self):
        return self.inner.iteration_ids()

    def ranks_records(self, ranks, *, iterations=None, comms=None):
        ranks = list(ranks)
        batch = self.inner.ranks_records(ranks, iterations=iterations, comms=comms)
        if comms is None:
            for rank in ranks:
                self.asked[rank] = self.asked.get(rank, 0) + 1
        else:
            for rank, comm in set(zip(batch["rank"].tolist(), batch.decoded("comm").tolist())):
                self.asked_on[(rank, comm)] = self.asked_on.get((rank, comm), 0) + 1
                if rank in self.asked:
                    self.read_after_whole.append((rank, comm))
        return batch

    def iterations(self, *, ranks=None, iterations=None):
        return self.inner.iterations(ranks=ranks, iterations=iterations)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpu=st.integers(0, 31),
    kind=st.sampled_from([FaultKind.GPU, FaultKind.NIC]),
    slow=st.floats(1.3, 4.0),
    seed=st.integers(0, 1000),
    pivot=st.integers(0, 31),
)
def test_the_search_ends_and_fetches_every_rank_at_most_once(gpu, kind, slow, seed, pivot):
    topology = _topology()
    gpu_id = topology.devices(DeviceKind.GPU)[gpu]
    device = gpu_id if kind is FaultKind.GPU else topology.nic_of(gpu_id)
    scenario = Scenario(
        topology=topology, layout=ParallelLayout(32, 2, 2, 8), iterations=16, microbatches=4, seed=seed,
        faults=(Fault(kind=kind, device=device, slow=slow, start=8),),
    )
    source = CountingSource(Emulation(scenario))
    graph = build_graph(source.job_spec())
    window = make_window(source.iteration_ids(), [8, 9, 10], size=16)
    fetcher = Fetcher(source, graph, window, thresholds=Thresholds())
    for iteration in (8, 9, 10):
        result = search(fetcher, graph, iteration=iteration, pivots=(pivot,), thresholds=Thresholds())
        assert len(result.traversal) == len(set(result.traversal)) <= graph.world
        # A rank's send and recv on one comm may share a seq: the op tells them apart.
        visits = [(s.rank, s.comm, s.seq, s.op, s.action) for s in result.steps]
        assert len(visits) == len(set(visits))
    assert all(count == 1 for count in source.asked.values())
    assert all(count == 1 for count in source.asked_on.values())
    assert source.read_after_whole == []  # what is held whole is never read again
    touched = set(source.asked) | {rank for rank, _ in source.asked_on}
    assert fetcher.ranks_whole == len(source.asked) <= fetcher.ranks_fetched == len(touched) <= graph.world


_DEVICES = st.sampled_from(
    [d for d in generate("fattree:hosts=4,gpus=8,pod=2,spines=2").devices() if not d.startswith("nvswitch")][:80]
)
_EVIDENCE = st.dictionaries(
    _DEVICES,
    # Evidence is delay in nanoseconds: a subnormal float (5e-324) is none, and times a decay it underflows to 0.
    st.tuples(st.floats(0.0, 50.0, allow_subnormal=False), st.frozensets(st.integers(0, 99), min_size=1, max_size=5)),
    min_size=1,
    max_size=12,
)
_PRIORS = st.builds(Priors, alpha=st.floats(0.0, 5.0), decay_power=st.floats(0.0, 1.0))


def _evidence(raw):
    return {device: Evidence(total, iterations) for device, (total, iterations) in raw.items()}


@settings(max_examples=200, deadline=None)
@given(raw=_EVIDENCE, priors=_PRIORS)
def test_scores_form_a_probability_distribution(raw, priors):
    scores = map_scores(_evidence(raw), topology=_topology(), priors=priors)
    if not scores:  # no evidence and no prior mass (alpha times a kind's prior may underflow to 0): nothing to rank
        topology = _topology()
        assert all(total == 0 and priors.alpha * priors.p[topology.kind(d)] == 0 for d, (total, _) in raw.items())
        return
    assert abs(sum(s.score for s in scores) - 1.0) < 1e-9
    assert all(0.0 <= s.score <= 1.0 for s in scores)
    assert [s.score for s in scores] == sorted((s.score for s in scores), reverse=True)


@settings(max_examples=200, deadline=None)
@given(raw=_EVIDENCE, priors=_PRIORS, pick=st.integers(0, 11), extra=st.floats(0.001, 20.0))
def test_more_evidence_never_lowers_a_device_rank(raw, priors, pick, extra):
    evidence = _evidence(raw)
    device = sorted(evidence)[pick % len(evidence)]
    before = [s.device for s in map_scores(evidence, topology=_topology(), priors=priors)]
    more = dict(evidence)
    more[device] = Evidence(evidence[device].total + extra, evidence[device].iterations)
    after = [s.device for s in map_scores(more, topology=_topology(), priors=priors)]
    if device in before:
        assert after.index(device) <= before.index(device)


@settings(max_examples=100, deadline=None)
@given(rank=st.integers(0, 31), share=st.floats(0.0, 1.0), rate=st.floats(0.01, 1.0))
def test_a_compute_root_splits_its_rate_between_its_gpu_and_its_host_by_the_host_share(rank, share, rate):
    topology = _topology()
    gpus = topology.devices(DeviceKind.GPU)
    root = Root(5, Cause.COMPUTE, rank, "dp.0", 1, "all_reduce", (rank,), (rank, (rank + 8) % 32), (0, 0), ran=5)
    evidence = accumulate([(root, rate)], topology=topology, gpus=gpus, host_share={rank: share})
    host = host_id(topology.host_of(gpus[rank]))
    assert set(evidence) <= {gpus[rank], host}
    assert abs(sum(e.total for e in evidence.values()) - rate) < 1e-9  # nothing lost, nothing counted twice
    assert (gpus[rank] in evidence) is (share < 1)
    assert (host in evidence) is (share > 0)


@pytest.mark.parametrize("routing", [Routing.ECMP, Routing.STATIC])
def test_a_cross_spine_root_puts_its_whole_rate_on_the_spine_layer_only_under_ecmp(routing):
    topology = _topology()  # 2 pods, 2 spines: h0000 and h0002 sit under different leaves
    gpus = topology.devices(DeviceKind.GPU)
    a, b = gpus.index("gpu:h0000/0"), gpus.index("gpu:h0002/0")
    root = Root(5, Cause.NETWORK, a, "pp.0", 1, "send", (a, b), (a, b), (0, 0), ran=5)
    weights = root_devices(root, topology=topology, gpus=gpus, routing=routing)
    spines = {d: w for d, w in weights.items() if d.startswith("spine:")}
    if routing is Routing.ECMP:
        assert weights["spines:s0,s1"] == 1.0 and spines == {"spine:s0": 0.5, "spine:s1": 0.5}
    else:
        assert not any(d.startswith("spines:") for d in weights) and list(spines.values()) == [1.0]
    scores = map_scores(accumulate([(root, 1.0)], topology=topology, gpus=gpus, routing=routing), topology=topology)
    assert all(s.kind is DeviceKind.SPINE for s in scores if s.device.startswith("spine"))  # the set too

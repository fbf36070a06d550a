"""Holmes's worked cases: figure 12, appendix C (figure 19a DFS, 19b BFS), the §5.3 case study."""

from __future__ import annotations

import pytest

from sleuth.layout import ParallelLayout
from sleuth.localizer import Thresholds, build_graph, localize
from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.operators import make_window
from sleuth.localizer.search import Action, Cause, search
from sleuth.sim import Emulation, Fault, FaultKind, Scenario
from sleuth.topology import generate

from tests.localizer.synthetic import one_leaf, run_job

IRREGULAR = (12, 15, 18)
US = 1000


def _slow(rank: int, step: int, factor: float = 6.0):
    return lambda r, it, s: factor if (r, s) == (rank, step) and it in IRREGULAR else 1.0


def _search(source, iteration: int, pivots=(0,)):
    graph = build_graph(source.job_spec())
    window = make_window(source.iteration_ids(), IRREGULAR, size=20)
    fetcher = Fetcher(source, graph, window, thresholds=Thresholds())
    return search(fetcher, graph, iteration=iteration, pivots=pivots, thresholds=Thresholds()), fetcher


@pytest.fixture(scope="module")
def figure_12():
    """4 GPUs in one group; GPU3 computes slowly before operator 3 in the irregular iterations."""
    program = [("compute", 100 * US), ("coll", "tp.0", 20 * US)] * 3
    return run_job({r: list(program) for r in range(4)}, {"tp.0": (0, 1, 2, 3)}, iterations=20, slow=_slow(3, 4))


def test_figure_12_slow_compute_on_gpu3_is_seen_as_long_operator3_on_the_others(figure_12):
    result, fetcher = _search(figure_12, 12)
    [root] = result.roots
    assert (root.cause, root.rank, root.comm, root.seq) == (Cause.COMPUTE, 3, "tp.0", 12 * 3 + 2)
    assert result.traversal == (0, 3)
    assert fetcher.ranks_fetched == 4  # the whole group, breadth first
    [incident] = localize(figure_12, irregular_iterations=IRREGULAR, topology=one_leaf(4), window=20)
    assert incident.suspects[0].device == "gpu:h0001/1"  # rank 3
    assert str(incident.cause) == "compute"


def test_appendix_c_dfs_across_pipeline_stages_then_bfs_into_the_expert_group():
    """Figure 19a: the monitored stage 0 waits on stage 1, which waits on stage 2, whose EP
    all-to-all waits for rank 3 computing slowly."""
    c, t = 100 * US, 20 * US
    programs = {
        0: [("compute", c), ("send", "pp.0", 1, t), ("recv", "pp.0", 1, t), ("compute", c)],
        1: [("recv", "pp.0", 0, t), ("compute", c), ("send", "pp.0", 2, t), ("recv", "pp.0", 2, t), ("compute", c), ("send", "pp.0", 0, t)],
        2: [("recv", "pp.0", 1, t), ("compute", c), ("coll", "ep.0", t), ("compute", c), ("send", "pp.0", 1, t)],
        3: [("compute", c), ("compute", c), ("coll", "ep.0", t), ("compute", c)],
    }
    source = run_job(programs, {"pp.0": (0, 1, 2), "ep.0": (2, 3)}, iterations=20, slow=_slow(3, 1, 20.0))
    result, fetcher = _search(source, 15)
    [root] = result.roots
    assert (root.cause, root.rank, root.comm) == (Cause.COMPUTE, 3, "ep.0")
    assert result.traversal == (0, 1, 2, 3)
    assert [s.action for s in result.steps if s.rank in (1, 2)][:2] == [Action.DFS, Action.BACK]
    assert fetcher.ranks_fetched == 4


def test_appendix_c_bfs_across_expert_then_tensor_groups():
    """Figure 19b: GPU 0 and 1 share TP, 1 and 2 share EP; monitoring GPU 2's EP operator leads
    through GPU 1's normal EP and abnormal TP operators to GPU 0 computing slowly."""
    c, t = 100 * US, 20 * US
    programs = {
        0: [("compute", c), ("coll", "tp.0", t), ("compute", c)],
        1: [("compute", c), ("coll", "tp.0", t), ("compute", c), ("coll", "ep.0", t)],
        2: [("compute", c), ("compute", c), ("compute", c), ("coll", "ep.0", t)],
    }
    source = run_job(programs, {"tp.0": (0, 1), "ep.0": (1, 2)}, iterations=20, slow=_slow(0, 0, 20.0))
    result, _ = _search(source, 18, pivots=(2,))
    [root] = result.roots
    assert (root.cause, root.rank, root.comm) == (Cause.COMPUTE, 0, "tp.0")
    assert result.traversal == (2, 1, 0)


def test_a_slow_transfer_on_every_member_is_a_network_root():
    program = [("compute", 100 * US), ("coll", "dp.0", 50 * US)]
    source = run_job(
        {r: list(program) for r in range(4)}, {"dp.0": (0, 1, 2, 3)}, iterations=20,
        net=lambda comm, it: 5.0 if it in IRREGULAR else 1.0,
    )
    result, _ = _search(source, 12)
    [root] = result.roots
    assert root.cause is Cause.NETWORK and root.ranks == (0, 1, 2, 3)


def test_a_transfer_under_the_least_excess_asked_for_is_no_root():
    """A probe of a level step passes the least transfer excess that could make the step
    (``min_transfer``): a ring 25 us over its 50 us level passes the thresholds, not 100 us."""
    program = [("compute", 100 * US), ("coll", "dp.0", 50 * US)]
    source = run_job(
        {r: list(program) for r in range(4)}, {"dp.0": (0, 1, 2, 3)}, iterations=20,
        net=lambda comm, it: 1.5 if it in IRREGULAR else 1.0,
    )
    graph = build_graph(source.job_spec())
    window = make_window(source.iteration_ids(), IRREGULAR, size=20)
    found = {}
    for least in (0.0, 100 * US):
        fetcher = Fetcher(source, graph, window, thresholds=Thresholds())
        result = search(fetcher, graph, iteration=12, pivots=(0,), thresholds=Thresholds(), min_transfer=least)
        found[least] = [(root.cause, root.comm) for root in result.roots]
    assert found == {0.0: [(Cause.NETWORK, "dp.0")], 100 * US: []}


def test_a_large_group_is_read_until_its_late_member_is_found_and_no_further():
    """32 members, rank 20 computing slowly: members are read a batch at a time (8, then 16),
    and once the late one is among those read, the other 8 are left unread."""
    program = [("compute", 100 * US), ("coll", "dp.0", 50 * US)]
    source = run_job({r: list(program) for r in range(32)}, {"dp.0": tuple(range(32))}, iterations=20, slow=_slow(20, 0))
    result, fetcher = _search(source, 12)
    [root] = result.roots
    assert (root.cause, root.rank) == (Cause.COMPUTE, 20)
    assert fetcher.ranks_fetched == 24
    assert set(fetcher.order) == set(range(24))


def test_the_next_ring_is_read_first_where_the_late_replica_is():
    """32 replicas of two ranks (r, r + 32) in tensor pairs, one data-parallel ring per half;
    rank 20 computes slowly, so its tensor mate 52 reaches ring dp.1 late too. Once dp.0's late
    member 20 is found (24 ranks read), dp.1 is read from 52, the member beside it: its first
    batch of 8 (the pivot 32 among them) holds the late member, where spreading the reads over
    the ring would have read 24 of it."""
    programs = {
        r: [("compute", 100 * US), ("coll", f"tp.{r % 32}", 20 * US), ("coll", f"dp.{r // 32}", 50 * US)] for r in range(64)
    }
    groups = {f"tp.{i}": (i, i + 32) for i in range(32)} | {"dp.0": tuple(range(32)), "dp.1": tuple(range(32, 64))}
    source = run_job(programs, groups, iterations=20, slow=_slow(20, 0))
    result, fetcher = _search(source, 12, pivots=(0, 32))
    assert {(root.cause, root.rank) for root in result.roots} == {(Cause.COMPUTE, 20)}
    assert 52 in result.traversal
    assert fetcher.ranks_fetched == 24 + 8


def test_a_large_group_with_a_slow_transfer_is_read_whole():
    """Every member's operator is long when the transfer is slow, so no member read shows who
    launched last: the whole group is read and the network root names all of it."""
    program = [("compute", 100 * US), ("coll", "dp.0", 50 * US)]
    source = run_job(
        {r: list(program) for r in range(32)}, {"dp.0": tuple(range(32))}, iterations=20,
        net=lambda comm, it: 5.0 if it in IRREGULAR else 1.0,
    )
    result, fetcher = _search(source, 12)
    [root] = result.roots
    assert root.cause is Cause.NETWORK and root.ranks == tuple(range(32))
    assert fetcher.ranks_fetched == 32


def test_a_slow_rings_members_are_judged_elsewhere_only_where_they_stand_out():
    """A ring of 8 ranks, each on its own host and then sending to a peer beyond it; rank 3's
    NIC is slow, so the ring and rank 3's send are slow transfers. The other members' sends wait
    for late receivers (x2 of their usual length, against rank 3's x5): judging them would read
    their peers for nothing. Read: the ring, then rank 3's peer alone."""
    c, t = 100 * US, 40 * US
    programs = {m: [("compute", c), ("coll", "dp.0", t), ("send", f"pp.{m}", 8 + m, t)] for m in range(8)}
    programs |= {8 + m: [("compute", c), ("recv", f"pp.{m}", m, t)] for m in range(8)}
    groups = {"dp.0": tuple(range(8))} | {f"pp.{m}": (m, 8 + m) for m in range(8)}
    late_receivers = {9, 10, 12, 13, 14, 15}
    source = run_job(
        programs, groups, iterations=20, gpus_per_host=1,
        slow=lambda r, it, s: 3.4 if r in late_receivers and it in IRREGULAR else 1.0,
        net=lambda comm, it: 5.0 if comm in ("dp.0", "pp.3") and it in IRREGULAR else 1.0,
    )
    result, fetcher = _search(source, 12)
    assert {(root.cause, root.comm) for root in result.roots} == {(Cause.NETWORK, "dp.0"), (Cause.NETWORK, "pp.3")}
    assert [s.rank for s in result.steps if s.action is Action.MEMBER] == [3]
    assert set(fetcher.order) == set(range(8)) | {11}


def test_case_study_shape_dp96_pp8_tp4():
    """§5.3: DFS through the pipeline from GPU 0, BFS through one DP group, then a TP group:
    the slow GPU in stage 6 is the top suspect after fetching ~106 of 3,072 ranks."""
    topology = generate("fattree:hosts=384,gpus=8,pod=32,spines=16")
    slow_gpu = "gpu:h0321/2"  # rank 2570: stage 6, tp 2
    scenario = Scenario(
        topology=topology, layout=ParallelLayout(3072, 4, 8, 96), iterations=12, microbatches=4, seed=1,
        faults=(Fault(kind=FaultKind.GPU, device=slow_gpu, slow=3.0, start=6),),
    )
    emulation = Emulation(scenario)
    irregular = list(emulation.irregular_iterations())
    assert irregular == [6, 7, 8, 9, 10, 11]
    [incident] = localize(emulation, irregular_iterations=irregular, topology=topology, window=12)
    assert incident.suspects[0].device == slow_gpu
    stages = [emulation.plan.stage_of[r] for r in incident.traversal]
    assert stages[:8] == [0, 0, 1, 2, 3, 4, 5, 6]  # the DP group of stage 0, then DFS stage by stage
    assert incident.traversal[-1] == 2570
    steps = incident.steps
    assert {s.comm.split(".")[0] for s in steps} >= {"dp", "pp", "tp"}
    # Holmes: 6 + 96 + 4 = 106. Here the DP group is read only until its late member is among the
    # ranks read (search._read_collective), which more than pays for the 4 data-parallel peers
    # the late rank is compared with and the 4 GPUs of its host outside its TP group (peers.py).
    assert incident.ranks_fetched < 106

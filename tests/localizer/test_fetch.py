"""The fetcher's two depths of reading: a rank whole, or one communicator's records of it (a view)."""

from __future__ import annotations

import numpy as np
import pytest

from sleuth.errors import ConfigError
from sleuth.layout import ParallelLayout
from sleuth.localizer import Thresholds, build_graph
from sleuth.localizer.fetch import Fetcher
from sleuth.localizer.operators import make_window
from sleuth.sim import Emulation, Fault, FaultKind, Scenario
from sleuth.sources import MemorySource
from sleuth.topology import generate


@pytest.fixture(scope="module")
def emulation() -> Emulation:
    topology = generate("fattree:hosts=4,gpus=8,pod=2,spines=2")
    gpu = "gpu:h0002/3"
    return Emulation(Scenario(
        topology=topology, layout=ParallelLayout(32, 2, 2, 8), iterations=16, microbatches=4, seed=5,
        faults=(Fault(kind=FaultKind.NIC, device=topology.nic_of(gpu), slow=3.0, start=8),),
    ))


def _fetcher(source) -> Fetcher:
    graph = build_graph(source.job_spec())
    return Fetcher(source, graph, make_window(source.iteration_ids(), [8, 9], size=16), thresholds=Thresholds())


def _same(a, b) -> None:
    for name in ("slot_comm", "slot_class", "slot_peer", "slot_op", "start", "end", "seq", "present", "base", "spread"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert {k: v.tolist() for k, v in a.channels.items()} == {k: v.tolist() for k, v in b.channels.items()}


def test_a_view_read_alone_has_the_rows_of_one_cut_from_the_whole_rank(emulation) -> None:
    """A root operator names its slot by row in a view: both ways of making one must agree."""
    alone, whole = _fetcher(emulation), _fetcher(emulation)
    graph = alone.graph
    for rank in (0, 13, 31):
        for comm in graph.groups_of(rank).tolist():
            read = alone.view(rank, comm)
            cut = whole.one(rank).restricted(comm)
            assert read.n_slots > 0 and set(read.slot_comm.tolist()) == {comm}
            _same(read, cut)
            # Gaps between one communicator's operators are not compute: unknown in both.
            assert np.isnan(read.gap).all() and np.isnan(cut.gap).all()


def test_views_are_read_once_and_counted_apart_from_whole_reads(emulation) -> None:
    fetcher = _fetcher(MemorySource(emulation.job_spec(), emulation.records(), emulation.iterations()))
    graph = fetcher.graph
    dp = next(g for g in range(graph.n_groups) if graph.kinds[g] == "dp")
    members = graph.group(dp).tolist()
    first = fetcher.views(members, dp)
    records = fetcher.records
    whole = len(emulation.ranks_records(members, iterations=fetcher.window.iterations.tolist()))
    expected = len(emulation.ranks_records(members, iterations=fetcher.window.iterations.tolist(), comms=[graph.comms[dp]]))
    assert 0 < records == expected < whole / 4  # the all-reduces of the ring alone, not whole programs
    assert fetcher.views(members, dp)[members[0]] is first[members[0]]  # kept: its rows stay valid
    assert fetcher.records == records
    assert (fetcher.ranks_fetched, fetcher.ranks_whole) == (len(members), 0)
    fetcher.one(members[0])
    assert (fetcher.ranks_fetched, fetcher.ranks_whole) == (len(members), 1)
    assert fetcher.view(members[0], dp) is first[members[0]]
    other = next(g for g in graph.groups_of(members[0]).tolist() if g != dp)
    before = fetcher.records
    fetcher.view(members[0], other)  # cut from the whole rank held: nothing read
    assert fetcher.records == before
    assert fetcher.order[0] in members


def test_a_view_outside_the_job_is_refused_by_name(emulation) -> None:
    fetcher = _fetcher(emulation)
    with pytest.raises(ConfigError, match="communicator index 9999"):
        fetcher.view(0, 9999)
    with pytest.raises(ConfigError, match="rank 99 is outside"):
        fetcher.views([99], 0)

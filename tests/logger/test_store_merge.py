"""The ranks' groups gathered through the torch.distributed store (``Pump._share_groups``) on a
dictionary store that counts reads: rank 0 reads only the entries that changed since its last merge."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sleuth.errors import ConfigError
from sleuth.layout import ParallelLayout
from sleuth.logger.groups import GroupInfo, merge_spec, rank_entry
from sleuth.logger.identity import Identity
from sleuth.logger.pump import Pump

from tests.logger.store import DictStore


class Specs:
    def __init__(self) -> None:
        self.sent = []

    def spec(self, spec) -> None:
        self.sent.append(spec)


WORLD = 32
LAYOUT = ParallelLayout(WORLD, 4, 2, 4)


def rank_pumps(store: DictStore, sink: Specs) -> list[Pump]:
    pumps = []
    for rank in range(WORLD):
        session = SimpleNamespace(identity=Identity("j", rank, WORLD, f"h{rank // 8}", rank % 8), groups=[],
                                  groups_version=0)
        pump = Pump(session, lambda identity: sink, store=lambda: store)
        pump.sink = sink
        pumps.append(pump)
    return pumps


def see(pump: Pump, group) -> None:
    session = pump.session
    session.groups.append(GroupInfo(len(session.groups), group.comm, group.kind, tuple(group.ranks)))
    session.groups_version += 1


def test_rank_0_merges_once_every_rank_published_and_then_reads_only_the_changed_entries() -> None:
    store, sink = DictStore(), Specs()
    pumps = rank_pumps(store, sink)
    groups = [g for g in LAYOUT.groups() if g.kind in ("tp", "dp")]
    for pump in pumps:
        for group in groups:
            if pump.session.identity.rank in group.ranks:
                see(pump, group)
    for pump in pumps[1:]:
        pump._share_groups(final=False)
    assert sink.sent == [] and store.reads == 0  # rank 0 shares and merges in the same round
    pumps[0]._share_groups(final=False)
    [spec] = sink.sent
    assert {c.comm: c.ranks for c in spec.communicators} == {g.comm: tuple(g.ranks) for g in groups}
    assert store.reads == 2 * WORLD  # each change log entry once, each rank's entry once

    pumps[0]._share_groups(final=False)
    assert len(sink.sent) == 1 and store.reads == 2 * WORLD  # nothing changed: nothing read

    pp = [g for g in LAYOUT.groups() if g.kind == "pp"][-1]  # rank 0 is not in it
    before = store.reads
    for rank in pp.ranks:
        see(pumps[rank], pp)
        pumps[rank]._share_groups(final=False)
    pumps[0]._share_groups(final=False)
    assert 0 not in pp.ranks and store.reads - before == 2 * len(pp.ranks)
    assert sink.sent[-1].communicator(pp.comm).ranks == tuple(pp.ranks)


def test_a_change_counted_but_not_logged_yet_is_read_in_a_later_round() -> None:
    store, sink = DictStore(), Specs()
    pumps = rank_pumps(store, sink)
    for pump in pumps[:-1]:
        pump._share_groups(final=False)
    store.hold_changes = True
    pumps[-1]._share_groups(final=False)  # the last rank counted its change, its log entry is late
    pumps[0]._share_groups(final=False)
    assert sink.sent == []  # one entry is missing still
    store.hold_changes = False
    store.set("sleuth/logger/j/change/32", b"31")
    pumps[0]._share_groups(final=False)
    assert len(sink.sent) == 1 and sink.sent[0].world == WORLD
    assert [p.host for p in sink.sent[0].placements] == [f"h{r // 8}" for r in range(WORLD)]


def test_an_entry_holds_member_lists_as_runs() -> None:
    world = GroupInfo(0, "world", "world", tuple(range(16384)))
    dp = GroupInfo(1, "dp.0", "dp", tuple(range(0, 16384, 64)))
    entry = rank_entry("h00000", 0, [world, dp])
    assert len(entry) < 120
    assert json.loads(entry)["groups"] == [["world", "world", [[0, 16384, 1]]], ["dp.0", "dp", [[0, 256, 64]]]]
    spec = merge_spec("j", 16384, [entry] + [rank_entry(f"h{r // 8:05d}", r % 8, []) for r in range(1, 16384)])
    assert spec.communicator("dp.0").ranks == dp.ranks and spec.communicator("world").ranks == world.ranks


@pytest.mark.parametrize("members, problem", [([[0, 5, 0]], "step"), ([[30, 4, 1]], "outside the world of 32"),
                                              ([[0, 2]], "start, count, step")])
def test_a_bad_member_run_fails_naming_the_group(members, problem) -> None:
    entries = [json.dumps({"host": "h", "gpu": r, "groups": [["tp.0", "tp", members]] if r == 0 else []}).encode()
               for r in range(WORLD)]
    with pytest.raises(ConfigError, match=rf"group tp.0\[0\].*{problem}"):
        merge_spec("j", WORLD, entries)

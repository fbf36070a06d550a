"""Progressive fetching (Holmes §5.2): a rank's records are read only when the search reaches it.

The fetcher asks its :class:`~sleuth.sources.RecordSource` for the window's iterations of the
ranks the search needs and not yet held, all of a group in one call (one query to ClickHouse,
one pass of the emulator), and keeps what it read for the rest of the localization: each rank
is read at most once. It counts the ranks, records and seconds spent, for the incident.

Two depths of reading. Judging one operator instance (is it a slow transfer, or who came late
to it?) needs each member's start and end of that operator only: ``views`` reads the group's
records of that one communicator (a data-parallel ring of 128 ranks at 8,192 GPUs is 128
ranks' all-reduces, not their whole programs). Following a late rank back through what it did
before needs all of its operators: ``get`` reads the rank whole. A view of a rank already read
whole is cut from what is held (``RankOperators.restricted``); a view, once made, is kept, so
that the slot rows a root operator names stay valid. ``ranks_fetched`` counts every rank any
record was read of; ``ranks_whole`` those read whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable

import numpy as np

from sleuth.errors import ConfigError
from sleuth.records import IterationBatch, RecordBatch
from sleuth.sources import RecordSource

from sleuth.localizer.graph import OperatorGraph
from sleuth.localizer.operators import RankOperators, Thresholds, Window, rank_operators

__all__ = ["AbnormalFn", "Fetcher"]

#: A detector's abnormal-operator mask: ``(records, iterations) -> bool array`` aligned with
#: ``records`` (the shape of ``sleuth.stream.detection.abnormal_mask``).
AbnormalFn = Callable[[RecordBatch, IterationBatch], np.ndarray]


class Fetcher:
    """Reads and lays out ranks on demand; see the module docstring."""

    def __init__(
        self,
        source: RecordSource,
        graph: OperatorGraph,
        window: Window,
        *,
        thresholds: Thresholds,
        abnormal: AbnormalFn | None = None,
        read_elsewhere: Collection[int] = frozenset(),
    ) -> None:
        self.source = source
        # Ranks another fetcher of the same localization read (another window's baselines): a
        # search prefers them (``has_read``), as the ranks touched are counted over all of them.
        self._read_elsewhere = read_elsewhere
        self.graph = graph
        self.window = window
        self.thresholds = thresholds
        self.abnormal = abnormal
        self._held: dict[int, RankOperators] = {}
        self._views: dict[tuple[int, int], RankOperators] = {}
        self._touched: dict[int, None] = {}  # every rank any record was read of, in first-read order
        self.records = 0
        self.seconds = 0.0

    @property
    def order(self) -> list[int]:
        """The ranks any record was read of, in the order they were first read."""
        return list(self._touched)

    @property
    def ranks_fetched(self) -> int:
        return len(self._touched)

    def has_read(self, rank: int) -> bool:
        """Whether any record of ``rank`` was read already, here or by another fetcher of the same
        localization (``read_elsewhere``): reading more of it touches no new rank."""
        return rank in self._touched or rank in self._read_elsewhere

    @property
    def ranks_whole(self) -> int:
        """Ranks whose every record was read (``get``)."""
        return len(self._held)

    @property
    def whole(self) -> list[int]:
        """The ranks whose every record was read (``get``): the pivots and the late ranks a
        search followed back."""
        return list(self._held)

    def get(self, ranks: Iterable[int]) -> dict[int, RankOperators]:
        """The operators of ``ranks``, reading the ones not held yet in one source call."""
        wanted = self._checked(ranks)
        new = sorted(set(wanted) - set(self._held))
        if new:
            self._read(new)
        return {rank: self._held[rank] for rank in wanted}

    def one(self, rank: int) -> RankOperators:
        return self.get((rank,))[rank]

    def views(self, ranks: Iterable[int], comm: int) -> dict[int, RankOperators]:
        """The operators of ``ranks`` on communicator ``comm`` (a group index) alone."""
        wanted = self._checked(ranks)
        found = self.views_of([(rank, comm) for rank in wanted])
        return {rank: found[(rank, comm)] for rank in wanted}

    def view(self, rank: int, comm: int) -> RankOperators:
        return self.views((rank,), comm)[rank]

    def views_of(self, pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], RankOperators]:
        """The operators of each ``(rank, comm)`` pair, reading the missing ones in one source call."""
        wanted = [(int(rank), int(comm)) for rank, comm in pairs]
        self._checked(rank for rank, _ in wanted)
        for rank, comm in wanted:
            if not 0 <= comm < self.graph.n_groups:
                raise ConfigError(f"communicator index {comm} is outside the job's {self.graph.n_groups} groups")
        unread = []
        for pair in dict.fromkeys(wanted):
            if pair in self._views:
                continue
            rank, comm = pair
            if rank in self._held:
                self._views[pair] = self._held[rank].restricted(comm)
            else:
                unread.append(pair)
        if unread:
            self._read_views(unread)
        return {pair: self._views[pair] for pair in wanted}

    def _checked(self, ranks: Iterable[int]) -> list[int]:
        wanted = [int(r) for r in ranks]
        for rank in wanted:
            if not 0 <= rank < self.graph.world:
                raise ConfigError(f"rank {rank} is outside the world of {self.graph.world}")
        return wanted

    def _read(self, ranks: list[int]) -> None:
        began = time.perf_counter()
        iterations = self.window.iterations.tolist()
        batch = self.source.ranks_records(ranks, iterations=iterations)
        flags = None
        if self.abnormal is not None:
            its = self.source.iterations(ranks=ranks, iterations=iterations)
            flags = np.asarray(self.abnormal(batch, its), dtype=bool)
            if flags.shape != (len(batch),):
                raise ConfigError(
                    f"the abnormal-operator mask has shape {flags.shape}, expected ({len(batch)},) for the records fetched"
                )
        for rank, picked in _by_rank(batch, ranks):
            self._held[rank] = rank_operators(
                self.graph,
                rank,
                batch.take(picked),
                self.window,
                thresholds=self.thresholds,
                abnormal=None if flags is None else flags[picked],
            )
            self._touched.setdefault(rank)
        self.records += len(batch)
        self.seconds += time.perf_counter() - began

    def _read_views(self, pairs: list[tuple[int, int]]) -> None:
        """Views read from the source, all in one call: the ranks' records on the communicators
        asked. Judged by the thresholds, not the detector: its features describe a rank's whole
        program, which a view does not hold."""
        began = time.perf_counter()
        ranks = sorted({rank for rank, _ in pairs})
        names = sorted({self.graph.comms[comm] for _, comm in pairs})
        batch = self.source.ranks_records(ranks, iterations=self.window.iterations.tolist(), comms=names)
        comms = self.graph.record_groups(batch)
        per_rank = dict(_by_rank(batch, ranks))
        for rank, comm in pairs:
            picked = per_rank[rank]
            mine = picked[comms[picked] == comm]
            self._views[(rank, comm)] = rank_operators(
                self.graph, rank, batch.take(mine), self.window, thresholds=self.thresholds, complete=False
            )
            self._touched.setdefault(rank)
        self.records += len(batch)
        self.seconds += time.perf_counter() - began


def _by_rank(batch: RecordBatch, ranks: list[int]) -> list[tuple[int, np.ndarray]]:
    """Each of ``ranks`` with the indices of its records in ``batch``."""
    order = np.argsort(batch["rank"], kind="stable")
    sorted_ranks = batch["rank"][order]
    out = []
    for rank in ranks:
        lo, hi = np.searchsorted(sorted_ranks, [rank, rank + 1])
        out.append((rank, order[lo:hi]))
    return out

"""Progressive fetching (Holmes §5.2): a rank's records are read only when the search reaches it.

The fetcher asks its :class:`~sleuth.sources.RecordSource` for the window's iterations of the
ranks the search needs and not yet held, all of a group in one call (one query to ClickHouse,
one pass of the emulator), and keeps what it read for the rest of the localization: each rank
is fetched at most once. It counts the ranks, records and seconds spent, for the incident.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

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
    ) -> None:
        self.source = source
        self.graph = graph
        self.window = window
        self.thresholds = thresholds
        self.abnormal = abnormal
        self._held: dict[int, RankOperators] = {}
        self.order: list[int] = []
        self.records = 0
        self.seconds = 0.0

    @property
    def ranks_fetched(self) -> int:
        return len(self._held)

    def get(self, ranks: Iterable[int]) -> dict[int, RankOperators]:
        """The operators of ``ranks``, reading the ones not held yet in one source call."""
        wanted = [int(r) for r in ranks]
        for rank in wanted:
            if not 0 <= rank < self.graph.world:
                raise ConfigError(f"rank {rank} is outside the world of {self.graph.world}")
        new = sorted(set(wanted) - set(self._held))
        if new:
            self._read(new)
        return {rank: self._held[rank] for rank in wanted}

    def one(self, rank: int) -> RankOperators:
        return self.get((rank,))[rank]

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
        order = np.argsort(batch["rank"], kind="stable")
        sorted_ranks = batch["rank"][order]
        for rank in ranks:
            lo, hi = np.searchsorted(sorted_ranks, [rank, rank + 1])
            picked = order[lo:hi]
            mine = batch.take(picked)
            self._held[rank] = rank_operators(
                self.graph,
                rank,
                mine,
                self.window,
                thresholds=self.thresholds,
                abnormal=None if flags is None else flags[picked],
            )
            self.order.append(rank)
        self.records += len(batch)
        self.seconds += time.perf_counter() - began

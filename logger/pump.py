"""The drainer: a background thread that moves records from the recorder to a sink.

Every ``flush_s`` seconds it drains the ring, turns the records into a ``RecordBatch``, fills in
iteration numbers from the operator period when the job marks no steps, hands the batch and
the finished iterations to the sink, publishes this rank's groups in the torch.distributed
store and, on rank 0, merges every rank's entry into the job spec.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sleuth.logger.groups import change_key, get_many, merge_spec, rank_entry, rank_key, version_key
from sleuth.logger.period import PeriodicSteps, signatures
from sleuth.logger.session import Session, to_iteration_batch, to_record_batch
from sleuth.logger.sinks import Sink

log = logging.getLogger("sleuth.logger")

# A CUDA-timed operator holds one of the recorder's slots (4,096 by default) until a poll sees
# its end event complete. Polled only at each flush (0.5 s), a job issuing more than ~8,000
# operators a second loses records; polled every 10 ms, ~400,000. A poll that finds the oldest
# operator still running costs one cudaEventQuery.
DEVICE_POLL_S = 0.01


class Pump:
    """Drains ``session`` into ``sink`` on a daemon thread; ``finish()`` flushes and stops it."""

    def __init__(
        self,
        session: Session,
        sink_factory: Callable[[Any], Sink],
        *,
        flush_s: float = 0.5,
        store: Callable[[], Any] | None = None,
        period_window: int = 4096,
        final_wait_s: float = 30.0,
    ) -> None:
        self.session = session
        self._sink_factory = sink_factory
        self.sink: Sink | None = None
        self.flush_s = flush_s
        self.device_poll_s: float | None = None  # set when operators are timed with CUDA events
        self._store = store
        self._period_window = period_window
        self._final_wait_s = final_wait_s
        self._held: list[np.ndarray] = []
        self._steps: PeriodicSteps | None = None  # the iterations of a job that marks no step
        self._no_period = False
        self._codes: dict[tuple[int, ...], int] = {}  # operator signatures seen on this rank
        self._dropped_reported = 0
        self._published = -1
        self._merged = 0  # the change log's entries read (rank 0)
        self._entries: dict[int, bytes] = {}  # rank -> its latest entry (rank 0)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._finished = False
        self._errors: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="sleuth-logger-pump", daemon=True)

    def start(self) -> Pump:
        self._thread.start()
        return self

    def _run(self) -> None:
        due = time.monotonic() + self.flush_s
        while True:
            wait = due - time.monotonic()
            if self.device_poll_s is not None:
                wait = min(wait, self.device_poll_s)
            if self._stop.wait(max(wait, 0.0)):
                return
            if time.monotonic() >= due:
                self.flush()
                due = time.monotonic() + self.flush_s
            else:
                self._poll_device()

    def _poll_device(self) -> None:
        """Free the slots of finished CUDA operators; their records wait in the ring for a flush."""
        try:
            self.session.recorder.poll()
        except Exception as error:
            self._once("polling CUDA events", error)

    def _once(self, what: str, error: BaseException) -> None:
        if what not in self._errors:
            self._errors.add(what)
            log.warning("sleuth logger: %s failed: %r", what, error)

    # -- one round ---------------------------------------------------------------------------

    def flush(self, *, final: bool = False) -> None:
        with self._lock:
            try:
                self._flush(final)
            except Exception as error:  # never let the thread die: the next round retries
                self._once("draining", error)

    def _flush(self, final: bool) -> None:
        session = self.session
        if self.device_poll_s is not None:
            # cudaEventElapsedTime is float milliseconds: its resolution coarsens with the
            # distance from the clock reference (4 ms after 10 h), so the reference moves along.
            try:
                session.recorder.recalibrate()
            except Exception as error:
                self._once("recalibrating the CUDA clock", error)
        records, dropped_total = session.drain(final=final)
        identity = session.identity
        if identity is None:
            return  # no operator yet: nothing to send and no rank to send it as
        if self.sink is None:
            self.sink = self._sink_factory(identity)
        ready = self._with_iterations(records, final)
        dropped = dropped_total - self._dropped_reported
        if len(ready) or dropped:
            self.sink.records(to_record_batch(ready, identity, session.comm_names()), dropped=dropped)
            self._dropped_reported = dropped_total
        steps = session.drain_iterations()
        if steps:
            self.sink.iterations(to_iteration_batch(steps, identity))
        self._share_groups(final)

    def _with_iterations(self, records: np.ndarray, final: bool) -> np.ndarray:
        """Records ready to go. While the job has marked no step, records are held (at most
        ``period_window``); then, if still no step, their iterations come from the operator
        period (-1 when there is none)."""
        if self.session.advanced or self._no_period:
            return self._release(records)
        if self._steps is None:
            self._held.append(records)
            held = np.concatenate(self._held) if len(self._held) > 1 else self._held[0]
            self._held = [held]
            if len(held) < self._period_window and not final:
                return held[:0]
            self._held = []
            # Issue order, not the order operators ended in: async collectives (DDP's buckets
            # on gloo's threads) finish out of order.
            held = held[np.argsort(held["t_issue_ns"], kind="stable")]
            self._steps = PeriodicSteps.find(signatures(held, self._codes)) if len(held) else None
            if self._steps is None:
                self._no_period = True
                return self._release(held)
            records = held
        out = records[np.argsort(records["t_issue_ns"], kind="stable")]
        out["iteration"] = self._steps.number(signatures(out, self._codes))
        return out

    def _release(self, records: np.ndarray) -> np.ndarray:
        if self._held:
            records = np.concatenate([*self._held, records])
            self._held = []
        if self._no_period and not self.session.advanced:
            records = records.copy()
            records["iteration"] = -1
        return records

    # -- job spec ----------------------------------------------------------------------------

    def _entry(self) -> bytes:
        identity = self.session.identity
        return rank_entry(identity.host, identity.gpu, list(self.session.groups))

    def _share_groups(self, final: bool) -> None:
        identity = self.session.identity
        store = None
        if self._store is not None and identity.world > 1:
            try:
                store = self._store()
            except Exception as error:
                self._once("finding the torch.distributed store", error)
        if store is None:
            if self.session.groups_version == self._published:
                return
            self._published = self.session.groups_version
            if identity.world == 1:
                self.sink.spec(merge_spec(identity.job, 1, [self._entry()]))
            else:
                self._once("writing the job spec", RuntimeError("no torch.distributed store to gather the ranks through"))
            return
        try:
            if self.session.groups_version != self._published:
                store.set(rank_key(identity.job, identity.rank), self._entry())
                number = store.add(version_key(identity.job), 1)
                store.set(change_key(identity.job, number), str(identity.rank).encode())
                self._published = self.session.groups_version
            if final:
                store.set(rank_key(identity.job, identity.rank) + "/final", b"1")
            if identity.rank == 0:
                self._merge(store, final)
        except Exception as error:
            self._once("sharing the job spec through the torch.distributed store", error)

    def _merge(self, store: Any, final: bool) -> None:
        """Read the entries that changed since the last merge (the change log); once every rank's
        is in, send the merged spec whenever one changed."""
        identity = self.session.identity
        if final:
            from datetime import timedelta

            keys = [rank_key(identity.job, r) + "/final" for r in range(identity.world)]
            store.wait(keys, timedelta(seconds=self._final_wait_s))
        version = store.add(version_key(identity.job), 0)
        if version == self._merged:
            return
        changes = [change_key(identity.job, n) for n in range(self._merged + 1, version + 1)]
        if not store.check(changes):  # a rank counted its change and has not logged it yet
            changes = changes[: next(i for i, key in enumerate(changes) if not store.check([key]))]
        changed = sorted({int(rank) for rank in get_many(store, changes)})
        for rank, entry in zip(changed, get_many(store, [rank_key(identity.job, r) for r in changed])):
            self._entries[rank] = entry
        self._merged += len(changes)
        if len(changes) and len(self._entries) == identity.world:
            self.sink.spec(merge_spec(identity.job, identity.world, [self._entries[r] for r in range(identity.world)]))

    # -- the end -----------------------------------------------------------------------------

    def abandon(self) -> None:
        """Never flush or close again: this is a forked copy of another process's pump."""
        self._finished = True
        self._stop.set()

    def finish(self, timeout: float = 30.0) -> None:
        """Stop the thread, flush everything and close the sink (at most ``timeout`` seconds)."""
        if self._finished:
            return
        self._finished = True
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.flush(final=True)
        if self.sink is not None:
            try:
                self.sink.close(timeout)
            except Exception as error:
                self._once("closing the sink", error)


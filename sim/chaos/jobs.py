"""Emulated training jobs streaming through the logger's real sender, and the ledger of what the gateway confirmed.

Each job is an emulation (a slow GPU from ``FAULT_START``, so the stack has something to find) whose ranks
are spread over a few ``GrpcSink`` loggers, paced to ``iteration_s`` a step. The ledger keeps every message
a sink reports confirmed (``GrpcSink(on_confirmed=...)``: the gateway's summary, or its ``sleuth-accepted``
trailer on a failed stream). A restart under the same id stops an attempt as torchelastic does (SIGTERM:
the logger flushes for a few seconds) and starts the next, ``TORCHELASTIC_RESTART_COUNT`` one higher, which
``sleuth.logger.identity`` turns into a job of its own.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from sleuth.layout import ParallelLayout
from sleuth.logger.identity import job_id
from sleuth.logger.sender import GrpcSink
from sleuth.proto import commops_pb2 as pb
from sleuth.proto.codec import iterations_from_proto, records_from_proto
from sleuth.records import IterationBatch, RecordBatch
from sleuth.sim.faults import parse_fault
from sleuth.sim.scenario import Emulation, Scenario
from sleuth.topology import generate

FABRIC = "fattree:hosts=4,gpus=4,pod=2,spines=2"
FAULT = "gpu:h0003/1,slow=1.5,start={start}"
FAULT_START = 12


class Ledger:
    """What the gateway confirmed and what the loggers were handed, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[RecordBatch] = []
        self.iterations: list[IterationBatch] = []
        self.handed_records: list[RecordBatch] = []  # everything the loggers were given, confirmed or not
        self.handed_iterations: list[IterationBatch] = []
        self.jobs: list[str] = []

    def confirmed(self, messages: list[bytes]) -> None:
        decoded = [pb.StreamMessage.FromString(data) for data in messages]
        records = [records_from_proto(m.records) for m in decoded if m.HasField("records")]
        iterations = [iterations_from_proto(m.iterations) for m in decoded if m.HasField("iterations")]
        with self._lock:
            self.records += records
            self.iterations += iterations

    def handed(self, records: RecordBatch, iterations: IterationBatch) -> None:
        with self._lock:
            self.handed_records.append(records)
            self.handed_iterations.append(iterations)

    def started(self, job: str) -> None:
        with self._lock:
            self.jobs.append(job)


def emulation(job: str, *, iterations: int, seed: int) -> Emulation:
    scenario = Scenario(topology=generate(FABRIC), layout=ParallelLayout(16, 4, 2, 2, gpus_per_host=4),
                        microbatches=4, iterations=iterations, faults=(parse_fault(FAULT.format(start=FAULT_START)),),
                        seed=seed, job=job)
    return Emulation(scenario)


class JobAttempt:
    """One attempt of a job: ``loggers`` sinks, each streaming ranks ``k, k + loggers, ...`` from its own thread."""

    def __init__(self, base: str, attempt: int, *, target: str, ledger: Ledger, spill_root: Path, iterations: int,
                 iteration_s: float, seed: int, loggers: int = 4) -> None:
        self.job = job_id({"TORCHELASTIC_RESTART_COUNT": str(attempt)}, configured=base)
        self.base, self.attempt = base, attempt
        self.emulation = emulation(self.job, iterations=iterations, seed=seed)
        self.ledger = ledger
        self.iteration_s = iteration_s
        self._stop = threading.Event()
        self._flush_s = 0.0
        world = self.emulation.scenario.layout.world
        self.sinks = [GrpcSink(target, spill_dir=spill_root / self.job / f"logger-{k}", stream_s=2.0,
                               backoff_s=(0.1, 2.0), on_confirmed=ledger.confirmed) for k in range(loggers)]
        self.sinks[0].spec(self.emulation.job_spec())  # rank 0's logger registers the job
        self._threads = [threading.Thread(target=self._log, args=(sink, np.arange(k, world, loggers)), daemon=True,
                                          name=f"chaos-{self.job}-{k}") for k, sink in enumerate(self.sinks)]
        ledger.started(self.job)
        self.started = time.monotonic()
        for thread in self._threads:
            thread.start()

    def _log(self, sink: GrpcSink, ranks: np.ndarray) -> None:
        for index, iteration in enumerate(self.emulation.iteration_ids()):
            if self._stop.wait(max(0.0, self.started + index * self.iteration_s - time.monotonic())):
                break
            records = self.emulation.ranks_records(ranks, iterations=[int(iteration)]).compact()
            iterations = self.emulation.iterations(ranks=ranks, iterations=[int(iteration)])
            sink.records(records, dropped=0)
            sink.iterations(iterations)
            self.ledger.handed(records, iterations)
        self._stop.wait()  # the process lives on until it is stopped, as a job's ranks do after their loop
        sink.close(self._flush_s)

    def finished_logging(self) -> bool:
        """Every iteration handed to the loggers (they may still be sending)."""
        return time.monotonic() - self.started >= len(self.emulation.iteration_ids()) * self.iteration_s

    def stop(self, flush_s: float) -> None:
        """SIGTERM: stop logging, send what is held for at most ``flush_s`` seconds (the rest stays spilled)."""
        self._flush_s = flush_s
        self._stop.set()
        for thread in self._threads:
            thread.join(flush_s + 5)


class Fleet:
    """Keeps ``concurrent`` jobs streaming; a finished job is followed by a new one; ``restart`` one on demand."""

    def __init__(self, *, target: str, ledger: Ledger, spill_root: Path, concurrent: int = 2, iterations: int = 40,
                 iteration_s: float = 1.0, seed: int = 0, run: str = "chaos") -> None:
        self.options = dict(target=target, ledger=ledger, spill_root=spill_root, iterations=iterations,
                            iteration_s=iteration_s)
        self.run = run
        self.seed = seed
        self._lock = threading.Lock()
        self._next = 0
        self.slots: list[JobAttempt] = [self._new() for _ in range(concurrent)]
        self.retired: list[JobAttempt] = []

    def _new(self) -> JobAttempt:
        self._next += 1
        return JobAttempt(f"{self.run}-{self._next}", 0, seed=self.seed + self._next, **self.options)  # type: ignore[arg-type]  # options are JobAttempt keywords

    def tick(self) -> None:
        """Replace the jobs that finished logging by new ones (their loggers flush in the background)."""
        with self._lock:
            for slot, attempt in enumerate(self.slots):
                if attempt.finished_logging():
                    self._retire(attempt)
                    self.slots[slot] = self._new()

    def restart(self, slot: int) -> str:
        """Restart the job in ``slot`` under its id (the launcher's restart count one higher); the new attempt's job."""
        with self._lock:
            old = self.slots[slot]
            old.stop(flush_s=5.0)  # torchelastic's SIGTERM, then SIGKILL after its grace
            self.retired.append(old)
            seed = self.seed + int(old.base.rsplit("-", 1)[1])
            self.slots[slot] = JobAttempt(old.base, old.attempt + 1, seed=seed, **self.options)  # type: ignore[arg-type]  # options are JobAttempt keywords
            return self.slots[slot].job

    def _retire(self, attempt: JobAttempt) -> None:
        threading.Thread(target=attempt.stop, args=(300.0,), daemon=True).start()
        self.retired.append(attempt)

    def stop(self, flush_s: float) -> None:
        """Stop every job; each logger sends what it holds for at most ``flush_s`` seconds."""
        with self._lock:
            self.retired += self.slots
            self.slots = []
            everyone = list(self.retired)
        threads = [threading.Thread(target=a.stop, args=(flush_s,)) for a in everyone]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

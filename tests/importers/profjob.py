"""A 4-rank gloo job profiled by torch.profiler, one trace per rank (``python -m
tests.importers.profjob OUT PORT [short]``): the real format for ``sleuth import torch-profiler``.

Each of ``STEPS`` steps "computes" (a sleep, so as not to load the shared CPUs, and a small
matmul), then runs an all_reduce, an all_gather, a broadcast and one send/receive pair per rank
around a ring (``isend`` to the next rank, ``irecv`` from the previous). Rank ``SLOW_RANK`` sleeps
``SLOW_S`` more after its all_reduce in ``SLOW_STEPS``, so that its peers wait for it. Steps
``WAIT + WARMUP`` .. ``STEPS - 1`` are profiled (``ProfilerStep#N``); odd ranks write gzipped
traces, as ``tensorboard_trace_handler`` names them. ``short`` profiles as torch's tutorial does
(``schedule(wait=1, warmup=1, active=3)``: steps 2-4 of 5), with ``SLOW_RANK`` a slow device from
the first step: each piece of its work, before each operator, takes ``SHORT_SLOW_S`` longer.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

WORLD = 4  # sleuth judges a rank's compute against at least 4 ranks running its program
STEPS = 22
WAIT, WARMUP = 1, 1
ACTIVE = STEPS - WAIT - WARMUP
SLOW_RANK, SLOW_S = 1, 0.2
SLOW_STEPS = range(13, 19)  # fewer than the clean steps, which set the baseline
NUMEL = 1 << 18
COMPUTE_S = 0.01
SHORT_STEPS, SHORT_ACTIVE = 5, 3  # torch's tutorial schedule: the profiled steps are all early ones
SHORT_SLOW_S = 0.05


def run(rank: int, port: int, out: str, short: bool) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    a = torch.randn(128, 128)
    x = torch.ones(NUMEL)
    gathered = torch.zeros(NUMEL * WORLD)
    message, inbox = torch.ones(16), torch.zeros(16)
    handler = tensorboard_trace_handler(out, worker_name=f"rank{rank}", use_gzip=rank % 2 == 1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=SHORT_ACTIVE if short else ACTIVE),
                 on_trace_ready=handler) as prof:
        # ``short``: a slow device lengthens every piece of its work, each before an operator.
        extra = SHORT_SLOW_S if short and rank == SLOW_RANK else 0.0
        for step in range(SHORT_STEPS if short else STEPS):
            time.sleep(COMPUTE_S + extra)  # the step's compute, without loading the shared CPUs
            a = torch.tanh(a @ a)
            dist.all_reduce(x)
            if rank == SLOW_RANK and not short and step in SLOW_STEPS:
                time.sleep(SLOW_S)
            time.sleep(extra)
            dist.all_gather_into_tensor(gathered, x)
            time.sleep(extra)
            dist.broadcast(x, src=0)
            time.sleep(extra)
            sent = dist.isend(message, (rank + 1) % WORLD)  # a ring: every rank runs one program
            received = dist.irecv(inbox, (rank - 1) % WORLD)
            sent.wait()
            received.wait()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
    mp.spawn(run, args=(int(sys.argv[2]), sys.argv[1], sys.argv[3:] == ["short"]), nprocs=WORLD)

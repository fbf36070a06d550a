"""The 4-rank DDP job whose records this folder holds: an MLP on gloo, each step's compute a sleep
of 50 ms, the rest of the step real. ``--mode late``: rank 3's three times as long from step
``--from``; ``--mode seqlen``: each step, each rank's batch four times as costly with probability
1/4 (the same draws on every rank, seed 1234), so the costly work moves between the replicas;
``--mode gc``: every seventh step (3, 10, ...) one rank, the step's number modulo four, pauses 60 ms;
``--mode ckpt``: after every ``--every``-th step (10: 9, 19, ...) rank 0 alone saves a checkpoint
(``torch.save`` and 250 ms), as a training loop's ``if step % 10 == 9 and rank == 0`` does.

    SLEUTH_LOG_DIR=/tmp/ddp-late SLEUTH_JOB=ddp4-late .venv/bin/python -m torch.distributed.run \\
        --nproc-per-node 4 tests/localizer/gloo_logger/ddp_job.py --mode late --from 20
"""

import argparse
import io
import random
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=("late", "seqlen", "gc", "ckpt"), default="late")
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--from", dest="start", type=int, default=20)
parser.add_argument("--every", type=int, default=10)
args = parser.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
draws = random.Random(1234)
model = DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    costs = [draws.choice([1, 1, 1, 4]) for _ in range(world)]
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    if args.mode == "seqlen":
        compute_s = 0.05 * costs[rank]
    elif args.mode == "gc":
        compute_s = 0.05 + (0.06 if step % 7 == 3 and rank == step % world else 0.0)
    elif args.mode == "late":
        compute_s = 0.15 if rank == 3 and step >= args.start else 0.05
    else:
        compute_s = 0.05
    time.sleep(compute_s)  # the device's compute for this step's batch
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if args.mode == "ckpt" and step % args.every == args.every - 1 and rank == 0:
        torch.save(model.state_dict(), io.BytesIO())
        time.sleep(0.25)  # the checkpoint's write
dist.destroy_process_group()

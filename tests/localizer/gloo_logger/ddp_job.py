"""The 4-rank DDP job whose records ``ddp-late`` and ``ddp-late-streamed`` hold: an MLP on gloo, each step's compute a sleep
of 50 ms (rank 3's three times as long from step ``--from``), the rest of the step real.

    SLEUTH_LOG_DIR=/tmp/ddp-late SLEUTH_JOB=ddp4-late .venv/bin/python -m torch.distributed.run \\
        --nproc-per-node 4 tests/localizer/gloo_logger/ddp_job.py --from 20
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--from", dest="start", type=int, default=20)
args = parser.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    time.sleep(0.15 if rank == 3 and step >= args.start else 0.05)  # the device's compute for this step
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
dist.destroy_process_group()

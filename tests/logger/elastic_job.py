"""A torchelastic worker for ``test_elastic``: each iteration, a small model's gradients
all-reduced over gloo and one optimizer step. A world of one runs until its agent stops it (a
node joined); a larger world runs ``--steps`` iterations and ends."""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"round rank={rank} world={world} restarts={os.environ['TORCHELASTIC_RESTART_COUNT']}", flush=True)
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while world > 1 and step < args.steps or world == 1:
        model(torch.ones(4, 16)).sum().backward()
        for parameter in model.parameters():
            assert parameter.grad is not None
            dist.all_reduce(parameter.grad)
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        time.sleep(0.02)  # two agents and their workers share the test machine's cores
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

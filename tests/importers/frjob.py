"""A 2-rank gloo job that dumps torch's own Flight Recorder (``python -m tests.importers.frjob OUT``
under ``torch.distributed.run``): the real format, to hold the test writer to it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist


def main(out: Path) -> None:
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    tp = dist.new_group([0, 1], group_desc="TENSOR_MODEL_PARALLEL_GROUP")
    x = torch.ones(1024)
    for _ in range(3):
        dist.all_reduce(x)
        dist.all_reduce(x, group=tp)
        dist.all_gather_into_tensor(torch.zeros(2048), torch.ones(1024))
    dist.barrier()
    (out / "pickle").mkdir(parents=True, exist_ok=True)
    (out / "json").mkdir(parents=True, exist_ok=True)
    (out / "pickle" / f"fr_trace_rank_{rank}").write_bytes(c10d._dump_fr_trace(True, False, False))
    text = c10d._dump_fr_trace_json(True, False)
    (out / "json" / f"fr_trace_rank_{rank}").write_bytes(text if isinstance(text, bytes) else text.encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

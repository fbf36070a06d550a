"""SIGTERM (how torchelastic and Slurm stop workers): the logger flushes first, then the signal
takes the course it would have taken without the logger."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from sleuth.jobspec import JobSpec
from sleuth.recordio import read_parquet

pytest.importorskip("torch")

_JOB = textwrap.dedent("""
    import signal, sys, tempfile, time
    if sys.argv[1] == "own-handler":  # the job's handler, set before torch is imported
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + tempfile.mktemp())
    t = torch.ones(4)
    for i in range(10**6):
        dist.all_reduce(t)
        if i == 50:
            print("ready", flush=True)
        time.sleep(0.001)
""")


@pytest.mark.parametrize("handler, status", [("default", -signal.SIGTERM), ("own-handler", 3)])
def test_sigterm_flushes_the_records_then_ends_the_job_as_it_would_have(tmp_path, handler, status):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    # A drain interval longer than the test: only the flush on SIGTERM can write the records.
    env.update(SLEUTH_LOG_DIR=str(tmp_path / "records"), SLEUTH_JOB="term", SLEUTH_FLUSH_S="600")
    with subprocess.Popen([sys.executable, "-c", _JOB, handler], env=env, stdout=subprocess.PIPE, text=True) as job:
        assert job.stdout.readline().strip() == "ready"
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == status
    records = read_parquet(tmp_path / "records")
    assert len(records) >= 51 and set(records["rank"].tolist()) == {0}
    assert JobSpec.read(tmp_path / "records").world == 1

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

from tests.logger import collector

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


_FORKING_JOB = textwrap.dedent("""
    import os, sys, tempfile
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + tempfile.mktemp())
    t = torch.ones(4)
    for _ in range(20):
        dist.all_reduce(t)
    child = os.fork()  # a DataLoader worker or a fork-based helper: its exit runs atexit
    if child == 0:
        sys.exit(0)
    os.waitpid(child, 0)
    folder = os.environ["SLEUTH_LOG_DIR"]
    print(sorted(os.listdir(folder)) if os.path.isdir(folder) else [], flush=True)  # the child's writes
    for _ in range(5):
        dist.all_reduce(t)
    dist.destroy_process_group()
""")


def test_a_forked_child_does_not_write_the_parent_s_records_again(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(SLEUTH_LOG_DIR=str(tmp_path / "records"), SLEUTH_JOB="fork", SLEUTH_FLUSH_S="600")
    done = subprocess.run([sys.executable, "-c", _FORKING_JOB], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"  # the child wrote none of the parent's records or files
    records = read_parquet(tmp_path / "records")
    assert sorted(records["seq"].tolist()) == list(range(25))  # each once, none lost


_FORKING_STREAMING_JOB = textwrap.dedent("""
    import os, sys, tempfile
    from pathlib import Path
    import torch, torch.distributed as dist
    import sleuth.logger
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + tempfile.mktemp())
    t = torch.ones(4)
    for _ in range(20):
        dist.all_reduce(t)
    sleuth.logger.installed().flush()  # the parent's sender, channel and spill folder exist at the fork
    for _ in range(5):
        dist.all_reduce(t)  # still in the ring at the fork: the child's copy of it is the parent's
    child = os.fork()
    if child == 0:
        sys.exit(0)
    os.waitpid(child, 0)
    spill = Path(os.environ["SLEUTH_SPILL_DIR"])
    print(sorted(str(p.relative_to(spill)) for p in spill.rglob("*") if not p.is_dir()), flush=True)
    for _ in range(5):
        dist.all_reduce(t)
    dist.destroy_process_group()
""")


def test_a_forked_child_does_not_send_the_parent_s_records_again_nor_spill_into_its_folder(tmp_path):
    server, collected, port = collector.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
        env.update(SLEUTH_COLLECTOR=f"127.0.0.1:{port}", SLEUTH_SPILL_DIR=str(tmp_path / "spill"),
                   SLEUTH_JOB="fork-grpc", SLEUTH_FLUSH_S="600")
        done = subprocess.run([sys.executable, "-c", _FORKING_STREAMING_JOB], env=env, capture_output=True, text=True,
                              timeout=120)
    finally:
        server.stop(0)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"  # the child left nothing in the parent's spill folder
    assert sorted(collected.all_records()["seq"].tolist()) == list(range(30))  # each once, none lost

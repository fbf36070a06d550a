"""The native process-group hooks (SLEUTH_CAPTURE=native): the Python hooks' records without their
cost, and the Python hooks with a logged reason where the extension cannot build.

The real jobs' comparisons (DDP's autograd threads, FSDP, functional collectives, P2P with works
without a future) are in test_frameworks.py and test_trainjob.py; here a one-rank gloo job covers
what those jobs do not: a group created after the logger started, async works waited on later,
operators issued from threads of the job's own, several at once.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from sleuth.errors import BuildError, ConfigError

from tests.logger.recorded import record_keys

pytest.importorskip("torch")

STEPS = 3
OPS_PER_STEP = 7
THREADS, CONCURRENT_OPS = 4, 200

_JOB = textwrap.dedent(f"""
    import json, tempfile, threading
    import torch, torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + tempfile.mktemp())
    import sleuth.logger
    logger = sleuth.logger.install()
    late = dist.new_group([0])  # created after the logger started
    t, out = torch.ones(16), torch.empty(16)
    for _ in range({STEPS}):
        dist.all_reduce(t)
        dist.all_reduce(t, group=late, async_op=True).wait()
        works = [dist.broadcast(t, 0, group=late, async_op=True) for _ in range(2)]
        for work in works:  # waited on after both were issued
            work.wait()
        funcol.wait_tensor(funcol.all_reduce(t, "sum", late))
        dist.all_gather_into_tensor(out, t, group=late)
        mine = threading.Thread(target=dist.all_reduce, args=(t,), kwargs={{"group": late}})
        mine.start()
        mine.join()
        sleuth.logger.step()
    # Threads issuing at once: the native hooks run without the GIL, side by side.
    def issue(tensor):
        for _ in range({CONCURRENT_OPS}):
            dist.all_reduce(tensor, group=late)
    issuers = [threading.Thread(target=issue, args=(torch.ones(16),)) for _ in range({THREADS})]
    for issuer in issuers:
        issuer.start()
    for issuer in issuers:
        issuer.join()
    print(json.dumps({{"hooks": type(logger.hooks).__name__}}))
    sleuth.logger.uninstall()
    dist.destroy_process_group()
""")


def run_job(folder, capture: str) -> str:
    """The one-rank job logged into ``folder`` with ``SLEUTH_CAPTURE=capture``; the hooks it used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(SLEUTH_LOG_DIR=str(folder), SLEUTH_JOB="native", SLEUTH_CAPTURE=capture)
    done = subprocess.run([sys.executable, "-c", _JOB], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["hooks"]


def test_native_hooks_record_what_the_python_hooks_record(tmp_path):
    assert run_job(tmp_path / "native", "native") == "NativeProcessGroupHooks"
    assert run_job(tmp_path / "python", "process-group") == "ProcessGroupHooks"
    native = record_keys(tmp_path / "native")
    assert native == record_keys(tmp_path / "python")
    assert sum(native.values()) == STEPS * OPS_PER_STEP + THREADS * CONCURRENT_OPS
    assert {iteration for *_, iteration in native} == set(range(STEPS + 1))
    assert max(native.values()) == 1  # each sequence number once, the concurrent threads' too


_ANY_SOURCE_JOB = textwrap.dedent("""
    import sys, tempfile
    import torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank, init):
        dist.init_process_group("gloo", rank=rank, world_size=2, init_method=init)
        import sleuth.logger
        sleuth.logger.install()
        t = torch.ones(8)
        for _ in range(2):
            if rank == 1:
                dist.send(t, dst=0)
            else:
                dist.recv(t)  # from any source: the sender is known when it completes
        dist.barrier()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(rank_main, args=("file://" + tempfile.mktemp(),), nprocs=2)
""")


@pytest.mark.parametrize("capture", ["native", "process-group"])
def test_a_receive_from_any_source_is_recorded_with_its_sender(tmp_path, capture):
    from sleuth.records import OpKind

    script = tmp_path / "any_source.py"
    script.write_text(_ANY_SOURCE_JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(SLEUTH_LOG_DIR=str(tmp_path / "records"), SLEUTH_JOB="any-source", SLEUTH_CAPTURE=capture)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    p2p = sorted(key[1:6] for key in record_keys(tmp_path / "records") if key[3] != OpKind.BARRIER)
    # (rank, seq, op, peer, nbytes): each receive names its sender and pairs with its send.
    assert p2p == [(0, 0, OpKind.RECV, 1, 32), (0, 1, OpKind.RECV, 1, 32),
                   (1, 0, OpKind.SEND, 0, 32), (1, 1, OpKind.SEND, 0, 32)]


@pytest.fixture
def unbuildable(monkeypatch):
    """No ninja on this machine: the extension's build fails as it would there."""
    from torch.utils import cpp_extension

    from sleuth.logger import native

    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: False)
    failure = native._build.__wrapped__()
    monkeypatch.setattr(native, "_build", lambda: failure)
    return failure


def test_a_failed_build_falls_back_to_the_python_hooks_and_says_why(unbuildable, caplog):
    from sleuth.logger import _hooks_class
    from sleuth.logger.capture import ProcessGroupHooks

    assert isinstance(unbuildable, BuildError) and "ninja is not installed" in str(unbuildable)
    with caplog.at_level(logging.WARNING, logger="sleuth.logger"):
        assert _hooks_class("auto") is ProcessGroupHooks
    assert [r.getMessage() for r in caplog.records if "native ones are unavailable" in r.getMessage()] == [
        "sleuth logger: the Python process-group hooks record (about 6 us per operator); "
        f"the native ones are unavailable: {unbuildable}"
    ]


def test_asking_for_native_hooks_that_cannot_build_fails_naming_the_setting(unbuildable):
    from sleuth.logger import _hooks_class

    with pytest.raises(ConfigError, match=r"SLEUTH_CAPTURE=native: ninja is not installed"):
        _hooks_class("native")


def test_cuda_event_timing_keeps_auto_on_the_python_hooks():
    from sleuth.logger import _hooks_class
    from sleuth.logger.capture import ProcessGroupHooks
    from sleuth.logger.capture_native import NativeProcessGroupHooks

    assert _hooks_class("auto", cuda=True) is ProcessGroupHooks
    assert _hooks_class("auto", cuda=False) is NativeProcessGroupHooks


def test_the_ninja_wheel_is_found_when_the_venv_is_not_on_path(monkeypatch):
    import shutil

    import ninja

    from sleuth.logger import native

    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("PATH", "/nowhere")
    native._put_pip_ninja_on_path()
    first = os.environ["PATH"].split(os.pathsep)[0]
    assert first == ninja.BIN_DIR and os.access(os.path.join(first, "ninja"), os.X_OK)


def test_a_build_lock_left_by_a_dead_builder_is_dropped_and_a_live_one_kept(tmp_path):
    import os
    import time
    from types import SimpleNamespace

    from sleuth.logger import native

    torch_like = SimpleNamespace(_get_build_directory=lambda name, verbose: str(tmp_path / name))
    (tmp_path / "x").mkdir()
    lock = tmp_path / "x" / "lock"
    lock.touch()
    native._drop_stale_lock(torch_like, "x")
    assert lock.exists()  # a build may be under way: the others wait for it
    old = time.time() - native.STALE_LOCK_S - 1
    os.utime(lock, (old, old))
    native._drop_stale_lock(torch_like, "x")
    assert not lock.exists()  # torch's lock has no timeout: every later job would hang on it
    native._drop_stale_lock(torch_like, "x")  # no lock: nothing to do


def test_two_checkouts_build_under_their_own_names_so_neither_rebuilds_the_others(monkeypatch, tmp_path):
    """torch's JIT hashes the include folder into a build's version: one name shared by two
    checkouts would make each rebuild the other's module at every job start."""
    from sleuth.logger import native

    here = native.extension_name("2.11.0")
    assert native.extension_name("2.11.0") == here  # the same checkout: the same build
    monkeypatch.setattr(native, "_HERE", tmp_path / "other-checkout" / "logger" / "native")
    assert native.extension_name("2.11.0") != here

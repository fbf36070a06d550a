"""With sleuth's NCCL profiler plugin loaded, the Python logger leaves NCCL's operators to it, so
that no operator is recorded twice; every other group is still recorded."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from sleuth.errors import ConfigError
from sleuth.logger import _leave_nccl_to_the_plugin, nccl_plugin_records
from sleuth.logger.hooks import Hooks
from sleuth.settings import Settings


@pytest.mark.parametrize(("plugin", "log_dir", "streamed", "records"), [
    ("/opt/sleuth/libnccl-profiler-sleuth.so", "/logs", False, True),
    ("sleuth", "/logs", False, True),  # NCCL then looks for libnccl-profiler-sleuth.so itself
    ("/opt/sleuth/libnccl-profiler-sleuth.so", "", False, False),  # no folder, no logger's ring: nowhere to put them
    ("/opt/sleuth/libnccl-profiler-sleuth.so", "", True, True),  # a collector alone: into the logger's ring
    ("/opt/nvidia/libnccl-profiler-inspector.so", "/logs", True, False),  # another plugin
    ("", "/logs", False, False),
])
def test_the_plugin_records_when_nccl_loads_it_and_it_has_somewhere_to_put_them(plugin, log_dir, streamed, records):
    environ = {"NCCL_PROFILER_PLUGIN": plugin, "SLEUTH_LOG_DIR": log_dir}
    assert nccl_plugin_records(environ, Settings.from_env(environ), streamed=streamed) is records


def test_function_wrappers_cannot_leave_nccl_to_the_plugin_so_the_logger_stays_off():
    with pytest.raises(ConfigError, match="no process-group hooks to leave them to it"):
        _leave_nccl_to_the_plugin(Hooks(session=None))


def test_groups_of_other_backends_are_still_recorded_with_the_plugin_on(tmp_path):
    """torch's in-process ``fake`` group stands for a non-NCCL group; its operators are recorded."""
    script = textwrap.dedent(f"""
        import os, torch, torch.distributed as dist
        from torch.testing._internal.distributed.fake_pg import FakeStore
        os.environ.update(SLEUTH_LOG_DIR={str(tmp_path)!r}, SLEUTH_JOB="handover",
                          NCCL_PROFILER_PLUGIN="/x/libnccl-profiler-sleuth.so")
        dist.init_process_group("fake", rank=0, world_size=2, store=FakeStore())
        import sleuth.logger
        from sleuth.logger.capture import backend_names
        logger = sleuth.logger.install()
        assert logger.hooks.defer_nccl and backend_names(dist.group.WORLD) == {{"fake"}}
        for _ in range(5):
            dist.all_reduce(torch.ones(4))
        sleuth.logger.uninstall()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    from sleuth.recordio import read_parquet

    assert len(read_parquet(tmp_path)) == 5

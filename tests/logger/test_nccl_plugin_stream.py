"""sleuth's NCCL profiler plugin inside a process that has the logger: its records go through the
logger's ring and drainer (here to Parquet and job.json), not to files of its own.

Each rank is a real process with the logger installed on a 2-process gloo group; NCCL is played by
``nccl_driver.c``, which calls the plugin's API v5 as NCCL would. No GPU and no NCCL are involved:
the GPU timer is synthetic (on the wall clock, as a GPU's globaltimer usually is).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sleuth.jobspec import JobSpec
from sleuth.logger import _commops_py, nccl_plugin
from sleuth.logger.core import RECORD_DTYPE
from sleuth.logger.identity import Identity
from sleuth.logger.nccl_comms import RING_COMM, NcclComms, PluginComm, position_key
from sleuth.logger.session import Session
from sleuth.records import OpKind
from sleuth.records_folder import read_records

from tests.logger import collector
from sleuth.ports import free_port
from tests.logger.nccl_build import build_plugin, compile_c
from tests.logger.store import DictStore

pytest.importorskip("torch")

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The plugin (its Makefile) and the driver library that plays NCCL."""
    out = tmp_path_factory.mktemp("nccl_stream")
    compile_c(build_plugin(out), out / "libdriver.so", HERE / "nccl_driver.c", "-fPIC", "-shared", "-ldl")
    return out


RANK_SCRIPT = textwrap.dedent("""
    import ctypes, json, os, sys, time
    import torch, torch.distributed as dist

    rank, out, plugin, driver, port = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
    os.environ.update(SLEUTH_LOG_DIR=out, SLEUTH_JOB="streamed", SLEUTH_FLUSH_S="0.1", NCCL_PROFILER_PLUGIN=plugin)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    import sleuth.logger
    from sleuth.logger import nccl_comms
    nccl_comms.WAIT_S = 2.0  # the communicator that never resolves is given up after this
    logger = sleuth.logger.install()
    assert logger.nccl_plugin is not None and logger.hooks.defer_nccl

    drv = ctypes.CDLL(driver)
    drv.drv_init.restype = ctypes.c_void_p
    drv.drv_init.argtypes = [ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    U64s = ctypes.POINTER(ctypes.c_ulonglong)
    drv.drv_op.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_int,
                           ctypes.c_int, U64s, U64s]
    drv.drv_finalize.argtypes = [ctypes.c_void_p]
    assert drv.drv_load(plugin.encode()) == 0

    def op(ctx, func, count, dtype, peer, channels):
        t0 = time.time_ns() + 2_000_000  # the GPU starts 2 ms after the issue, on the wall clock
        starts = [t0 + 1000 * c for c in range(channels)]
        ends = [t0 + 300_000 - 1000 * c for c in range(channels)]
        drv.drv_op(ctx, func, count, dtype, peer, channels, (ctypes.c_ulonglong * channels)(*starts),
                   (ctypes.c_ulonglong * channels)(*ends))
        return [t0, t0 + 300_000]

    world = drv.drv_init(0xA1, b"", 2, rank)          # members in rank order
    ring = drv.drv_init(0xB2, b"pairs", 2, 1 - rank)  # members in reverse order
    ghost = drv.drv_init(0xC3, b"ghost", 3, rank)     # its third member never comes
    driven = []
    for i in range(3):
        driven.append(["all_reduce", i, *op(world, b"AllReduce", 1024, b"ncclFloat32", -1, 2)])
        # the other member's rank in `ring` is this process's rank
        driven.append(["send", i, *op(ring, b"Send", 100, b"ncclBfloat16", rank, 1)])
        driven.append(["recv", i, *op(ring, b"Recv", 100, b"ncclBfloat16", rank, 1)])
        op(ghost, b"AllReduce", 8, b"ncclFloat32", -1, 1)
        dist.all_reduce(torch.ones(4))  # a gloo operator: the logger's own hooks record it
        sleuth.logger.step()
    for ctx in (world, ring, ghost):
        drv.drv_finalize(ctx)
    sleuth.logger.uninstall()
    json.dump({"driven": driven, "dropped": logger.pump.sink.dropped}, open(os.path.join(out, f"driven-{rank}.json"), "w"))
    dist.destroy_process_group()
""")


@pytest.fixture(scope="module")
def streamed(built, tmp_path_factory):
    """Two ranks run the script; returns the folder the logger wrote."""
    out = tmp_path_factory.mktemp("streamed")
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLEUTH_", "NCCL_"))}
    ranks = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, str(rank), str(out), str(built / "libnccl-profiler-sleuth.so"),
                               str(built / "libdriver.so"), port], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for rank in range(2)]
    for process in ranks:
        _, stderr = process.communicate(timeout=180)
        assert process.returncode == 0, stderr[-3000:]
    return out


def test_the_plugins_records_reach_the_loggers_folder_with_global_ranks_and_its_iterations(streamed):
    records, _ = read_records(streamed)
    spec = JobSpec.read(streamed / "job.json")
    members = {c.comm: c.ranks for c in spec.communicators}
    assert members == {"world": (0, 1), "world~nccl": (0, 1), "world~nccl2": (1, 0)}  # the gloo group, then NCCL's
    for rank in range(2):
        driven = json.loads((streamed / f"driven-{rank}.json").read_text())["driven"]
        mine = records.take(records["rank"] == rank)
        comms = [mine.strings[i] for i in mine["comm"].tolist()]
        rows = {(comm, int(op), int(seq)): row for comm, op, seq, row in zip(comms, mine["op"], mine["seq"], mine.rows())}
        assert len(rows) == len(mine) == 4 * 3  # nothing twice: 3 iterations of 3 plugin ops and 1 gloo op
        for kind, i, t0, t1 in driven:
            comm = "world~nccl" if kind == "all_reduce" else "world~nccl2"
            row = rows[(comm, int(OpKind.parse(kind)), i)]
            assert row["iteration"] == i  # the logger's iteration at the issue
            assert row["peer"] == (-1 if kind == "all_reduce" else 1 - rank)  # a global rank, not the plugin's
            assert row["t_end_ns"] - row["t_start_ns"] == t1 - t0  # the GPU duration, kept
            assert abs(row["t_start_ns"] - t0) < 1_000_000  # the GPU's wall clock, through the monotonic ring
            assert row["t_issue_ns"] <= row["t_start_ns"]
        gloo = [row for comm, row in zip(comms, mine.rows()) if comm == "world"]
        assert [row["iteration"] for row in gloo] == [0, 1, 2]


def test_the_plugin_writes_no_files_of_its_own_when_the_logger_took_its_records(streamed):
    assert not list(streamed.glob("nccl-*"))


def test_records_of_a_communicator_whose_member_never_comes_are_dropped_and_counted(streamed):
    for rank in range(2):
        assert json.loads((streamed / f"driven-{rank}.json").read_text())["dropped"] == 3  # one per iteration
    assert "ghost" not in (streamed / "job.json").read_text()


# -- NcclComms alone: a dictionary for the store, two sessions for two ranks ------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _rank(rank: int, table: list[PluginComm], store: DictStore, clock: _Clock, **kwargs) -> tuple[Session, NcclComms]:
    session = Session(ring=64, resolve_identity=lambda: Identity("j", rank, 3, "h", rank), group_ranks=None,
                      impl=_commops_py)
    comms = NcclComms(session, lambda start: table[start:], lambda: store, lambda members: ("group", ""), clock=clock,
                      sleep=clock.sleep, **kwargs)
    session.plugin_comms = comms
    session.pollers.append(comms.poll)
    return session, comms


def _records(comm_index: int, n: int, op: OpKind = OpKind.ALL_REDUCE, peer: int = -1) -> np.ndarray:
    records = np.zeros(n, dtype=RECORD_DTYPE)
    records["comm"] = RING_COMM | comm_index
    records["seq"] = np.arange(n)
    records["op"] = int(op)
    records["peer"] = peer
    return records


def test_a_communicator_one_member_never_publishes_is_given_up_its_records_dropped_and_counted(caplog):
    store, clock = DictStore(), _Clock()
    table = [PluginComm(0, 0xC3, "ghost", 3, 0)]  # ranks 0 and 1 of 3 exist; rank 2 never publishes
    session, comms = _rank(0, table, store, clock, wait_s=5.0)
    _, other = _rank(1, [PluginComm(0, 0xC3, "ghost", 3, 1)], store, clock, wait_s=5.0)
    other.poll()
    assert position_key("j", 0xC3, 1) in store.data
    out = comms.translate(_records(0, 4))
    comms.poll()
    assert len(out) == 0 and comms.dropped == 0  # held while there is time
    clock.now = 6.0
    with caplog.at_level(logging.WARNING, logger="sleuth.logger"):
        comms.poll()
    assert "NCCL communicator 00000000000000c3 (ghost, 3 ranks" in caplog.text
    assert "communicator ranks [2] never published their global rank" in caplog.text
    assert len(comms.translate(_records(0, 2))) == 0
    assert comms.dropped == 4 + 2  # the held ones and the later ones
    assert session.drain()[1] == 6  # in the logger's dropped count
    assert session.groups == []


def test_held_records_are_bounded(caplog):
    store, clock = DictStore(), _Clock()
    _, comms = _rank(0, [PluginComm(0, 0xD4, "", 2, 0)], store, clock, hold_records=5)
    comms.poll()
    assert len(comms.translate(_records(0, 8))) == 0
    assert comms.dropped == 3


def test_members_come_from_every_position_and_peers_become_global_ranks():
    """Three ranks; the communicator holds global ranks 2 and 0 (rank 1 is not in it)."""
    store, clock = DictStore(), _Clock()
    s2, c2 = _rank(2, [PluginComm(0, 0xE5, "", 2, 0)], store, clock)
    s0, c0 = _rank(0, [PluginComm(0, 0xE5, "", 2, 1)], store, clock)
    sent = _records(0, 2, OpKind.SEND, peer=1)  # rank 2 sends to its communicator's rank 1
    received = _records(0, 2, OpKind.RECV, peer=0)
    c2.poll()
    assert len(c2.translate(sent)) == 0  # held: rank 0's position is not in yet
    c0.poll()  # rank 0 publishes its position; the member list is rank 2's to publish
    c2.poll()
    c0.poll()
    out2, out0 = c2.translate(sent[:0]), c0.translate(received)
    assert out2["peer"].tolist() == [0, 0] and out0["peer"].tolist() == [2, 2]
    assert [(g.comm, g.ranks) for g in s2.groups] == [(g.comm, g.ranks) for g in s0.groups]
    assert s2.groups[0].ranks == (2, 0) and s2.groups[0].comm.endswith("~nccl")
    assert out2["comm"].tolist() == [s2.groups[0].code] * 2 and c2.dropped == c0.dropped == 0


def test_the_final_flush_waits_for_members_then_drops_what_is_still_unresolved():
    store, clock = DictStore(), _Clock()
    session, comms = _rank(0, [PluginComm(0, 0xF6, "", 2, 0)], store, clock, wait_s=100.0)
    session.recorder.record(RING_COMM, 0, int(OpKind.ALL_REDUCE), -1, 8, 0, 1, 2, 3)
    records, dropped = session.drain(final=True)
    assert len(records) == 0 and dropped == 1
    assert clock.now >= 10.0  # it waited SETTLE_S for the other member


def test_a_plugin_that_cannot_be_loaded_is_named(tmp_path):
    with pytest.raises(Exception, match=r"NCCL_PROFILER_PLUGIN names .*nope/libnccl-profiler-sleuth.so, which cannot be loaded"):
        nccl_plugin.Plugin(str(tmp_path / "nope" / "libnccl-profiler-sleuth.so"))
    assert nccl_plugin.named({"NCCL_PROFILER_PLUGIN": "sleuth"}) == "libnccl-profiler-sleuth.so"
    assert nccl_plugin.named({"NCCL_PROFILER_PLUGIN": "/opt/libnccl-profiler-inspector.so"}) is None


COLLECTOR_SCRIPT = textwrap.dedent("""
    import ctypes, os, sys, tempfile, time
    import torch, torch.distributed as dist

    collector, plugin, driver, spill = sys.argv[1:5]
    os.environ.update(SLEUTH_COLLECTOR=collector, SLEUTH_SPILL_DIR=spill, SLEUTH_JOB="gateway",
                      SLEUTH_FLUSH_S="0.1", NCCL_PROFILER_PLUGIN=plugin)
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
    import sleuth.logger
    logger = sleuth.logger.install()
    assert logger.nccl_plugin is not None and logger.hooks.defer_nccl
    drv = ctypes.CDLL(driver)
    drv.drv_init.restype = ctypes.c_void_p
    drv.drv_init.argtypes = [ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    drv.drv_op.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_int,
                           ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    drv.drv_finalize.argtypes = [ctypes.c_void_p]
    assert drv.drv_load(plugin.encode()) == 0
    ctx = drv.drv_init(0x51, b"solo", 1, 0)
    for i in range(5):
        t0 = time.time_ns() + 1_000_000
        drv.drv_op(ctx, b"Broadcast", 16, b"ncclInt64", -1, 1, (ctypes.c_ulonglong * 1)(t0),
                   (ctypes.c_ulonglong * 1)(t0 + 50_000))
        sleuth.logger.step()
    drv.drv_finalize(ctx)
    sleuth.logger.uninstall()
""")


def test_with_a_collector_alone_the_plugins_records_stream_to_the_gateway(built, tmp_path):
    """No SLEUTH_LOG_DIR: before, the plugin had nowhere to write; now the logger's sender takes them."""
    server, servicer, port = collector.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLEUTH_", "NCCL_"))}
        done = subprocess.run([sys.executable, "-c", COLLECTOR_SCRIPT, f"127.0.0.1:{port}",
                               str(built / "libnccl-profiler-sleuth.so"), str(built / "libdriver.so"), str(tmp_path / "spill")],
                              env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        records = servicer.all_records()
    finally:
        server.stop(0)
    assert len(records) == 5
    assert set(records.strings[i] for i in records["comm"].tolist()) == {"world~nccl"}
    assert records["op"].tolist() == [int(OpKind.BROADCAST)] * 5 and records["iteration"].tolist() == [0, 1, 2, 3, 4]
    assert (records["t_end_ns"] - records["t_start_ns"]).tolist() == [50_000] * 5
    assert not list(tmp_path.glob("**/nccl-*"))

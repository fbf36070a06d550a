"""Session bookkeeping, group ids and the job spec merge, without torch."""

import json

import pytest

from sleuth.errors import ConfigError
from sleuth.logger import autostart, core, install, installed
from sleuth.logger.groups import GroupInfo, comm_id, merge_spec, rank_entry
from sleuth.logger.identity import (Identity, attempt_id, job_id, job_of_attempt, local_gpu, rendezvous_round,
                                   round_id, split_round)
from sleuth.logger.session import Session, to_record_batch
from sleuth.records import OpKind
from sleuth.settings import Settings

MEMBERS = {
    "tp": ((0, 1), "1", "group", ""), "tp-again": ((0, 1), "7", "group", ""),
    "world": ((0, 1, 2, 3), "0", "world", "world"),
    "dp": ((1, 3), "2", "dp", "dp.1"), "dp-with-cp": ((1, 3), "3", "dp", "dp.1"),
}


def make_session(impl):
    return Session(
        ring=1024, impl=impl,
        resolve_identity=lambda: Identity("job-x", 1, 4, "h0", None),
        group_ranks=lambda group: MEMBERS[group or "world"],
    )


def test_comm_ids_depend_on_members_only_and_same_members_are_told_apart(impl):
    assert comm_id([0, 1]) == comm_id((0, 1)) != comm_id([1, 0])
    session = make_session(impl)
    tp, again, world, none = (session.group(g) for g in ("tp", "tp-again", "world", None))
    assert tp.comm == comm_id([0, 1]) and again.comm == comm_id([0, 1], qualifier="7")
    assert world is none and world.comm == "world"  # the default group under two handles is one
    assert session.identity.rank == 1 and session.groups_version == 3


def test_named_groups_keep_the_job_s_names_and_two_groups_of_one_name_are_told_apart(impl):
    session = make_session(impl)
    dp, again = session.group("dp"), session.group("dp-with-cp")
    assert (dp.comm, dp.kind) == ("dp.1", "dp") and again.comm == "dp.1~3"


def test_sequence_numbers_per_group_and_per_p2p_direction(impl):
    session = make_session(impl)
    tp, world = session.group("tp"), session.group("world")
    for info, op, peer, direction in [
        (tp, OpKind.ALL_REDUCE, -1, 0), (tp, OpKind.ALL_REDUCE, -1, 0), (world, OpKind.BARRIER, -1, 0),
        (world, OpKind.SEND, 2, 0), (world, OpKind.RECV, 2, 1), (world, OpKind.SEND, 2, 0), (world, OpKind.SEND, 3, 0),
    ]:
        session.recorder.end(session.begin(info, int(op), peer, 8, direction))
    records, dropped = session.drain()
    batch = to_record_batch(records, session.identity, session.comm_names())
    assert dropped == 0 and batch.problems() == []
    assert batch["seq"].tolist() == [0, 1, 0, 0, 0, 1, 0]
    assert batch.decoded("comm").tolist() == [tp.comm, tp.comm] + [world.comm] * 5
    assert set(batch["rank"].tolist()) == {1} and set(batch.decoded("job")) == {"job-x"}


def test_steps_number_iterations_and_explicit_steps_take_over(impl):
    session = make_session(impl)
    tp = session.group("tp")
    session.recorder.end(session.begin(tp, 1, -1, 8))
    session.step(explicit=False)
    session.step(explicit=False)  # a second optimizer with no operator between: same iteration
    session.recorder.end(session.begin(tp, 1, -1, 8))
    session.step(explicit=True)
    session.step(explicit=False)  # ignored once step() is used
    session.recorder.end(session.begin(tp, 1, -1, 8))
    assert session.drain()[0]["iteration"].tolist() == [0, 1, 2]
    assert [i for i, _, _ in session.drain_iterations()] == [0, 1]


def test_merge_spec_places_ranks_without_a_gpu_by_position_on_their_host():
    tp = GroupInfo(0, "c2-x", "group", (0, 1))
    entries = [rank_entry("a", None, [tp]), rank_entry("a", None, [tp]), rank_entry("b", 3, []), rank_entry("a", 0, [])]
    spec = merge_spec("j", 4, entries)
    assert [(p.host, p.gpu) for p in spec.placements] == [("a", 1), ("a", 2), ("b", 3), ("a", 0)]
    assert [c.comm for c in spec.communicators] == ["c2-x"]
    assert json.loads(entries[0])["groups"] == [["c2-x", "group", [[0, 2, 1]]]]  # members as runs


def test_merge_spec_places_a_rank_whose_local_index_a_lower_rank_of_its_host_claimed_by_position():
    # Two torchelastic agents on one host each number their workers' LOCAL_RANK from 0.
    entries = [rank_entry("a", 0, []), rank_entry("a", 0, []), rank_entry("a", 1, []), rank_entry("b", 0, [])]
    spec = merge_spec("j", 4, entries)
    assert [(p.host, p.gpu) for p in spec.placements] == [("a", 0), ("a", 2), ("a", 1), ("b", 0)]


def test_identity_from_launcher_variables():
    assert job_id({"TORCHELASTIC_RUN_ID": "r1", "SLURM_JOB_ID": "9"}, "") == "r1"
    assert job_id({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "9"}, "") == "9"
    assert job_id({"SLURM_JOB_ID": "9"}, "mine") == "mine"
    assert job_id({"MASTER_ADDR": "m", "MASTER_PORT": "1"}, "") == "job-m-1"


def test_a_restarted_attempt_is_a_job_of_its_own() -> None:
    # torchelastic restarts the worker group under the same run id; Slurm requeues under the same job id.
    assert job_id({"TORCHELASTIC_RUN_ID": "r1", "TORCHELASTIC_RESTART_COUNT": "0"}, "") == "r1"
    assert job_id({"TORCHELASTIC_RUN_ID": "r1", "TORCHELASTIC_RESTART_COUNT": "2"}, "") == "r1.r2"
    assert job_id({"SLURM_JOB_ID": "9", "SLURM_RESTART_COUNT": "1"}, "") == "9.r1"
    assert job_id({"SLURM_RESTART_COUNT": "3"}, "mine") == "mine.r3"
    assert job_id({"TORCHELASTIC_RESTART_COUNT": "1", "SLURM_RESTART_COUNT": "4"}, "mine") == "mine.r1"
    assert job_id({"TORCHELASTIC_RESTART_COUNT": "", "SLURM_RESTART_COUNT": "x"}, "mine") == "mine"
    assert local_gpu({"LOCAL_RANK": "3"}) == 3 and local_gpu({}) is None


def test_an_attempt_id_reads_back_as_its_job_and_nothing_else_does() -> None:
    for job in ("9", "train", "a.r1-b", "job.r"):
        assert job_of_attempt(job_id({"SLURM_RESTART_COUNT": "3"}, job)) == job
        assert attempt_id(job, 0) == job and job_of_attempt(attempt_id(job, 12)) == job
    for other in ("train.other", "trainr1", "train.r0", "train.r01", "train.r", "train.r1x", "train.r-1"):
        assert job_of_attempt(other) == other
    with pytest.raises(ValueError, match="restart: a restart count is 0 or more, got -1"):
        attempt_id("train", -1)


def test_a_rendezvous_round_is_its_master_and_world_under_torchelastic_and_nothing_elsewhere() -> None:
    elastic = {"TORCHELASTIC_RUN_ID": "r1", "MASTER_ADDR": "node-3", "MASTER_PORT": "29400", "WORLD_SIZE": "16"}
    assert rendezvous_round(elastic) == "node-3:29400/16"
    # The round after a node joined: the world grew, under the same master when the agents share a store.
    assert rendezvous_round(elastic | {"WORLD_SIZE": "24"}) == "node-3:29400/24"
    assert rendezvous_round({"TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "2"}) == ":/2"
    assert rendezvous_round({"SLURM_JOB_ID": "9", "MASTER_ADDR": "m", "MASTER_PORT": "1", "WORLD_SIZE": "8"}) == ""


def test_a_rounds_id_reads_back_as_its_attempt_and_index_and_as_its_job() -> None:
    for job in ("9", "train", "a.r1-b", "job.m", "x.m0"):
        for restart in (0, 2):
            attempt = attempt_id(job, restart)
            assert round_id(attempt, 0) == attempt and split_round(attempt) == (attempt, 0)
            assert split_round(round_id(attempt, 12)) == (attempt, 12)
            assert job_of_attempt(round_id(attempt, 3)) == job
    for other in ("train.m01", "train.m", "train.m1.r2", "train.m-1"):
        assert split_round(other) == (other, 0)
    assert job_of_attempt("train.m1.r2") == "train.m1"
    with pytest.raises(ValueError, match="index: a round's index is 0 or more, got -1"):
        round_id("train", -1)


def test_the_startup_hook_does_nothing_when_both_variables_are_unset(monkeypatch):
    monkeypatch.delenv("SLEUTH_COLLECTOR", raising=False)
    monkeypatch.delenv("SLEUTH_LOG_DIR", raising=False)
    autostart.on_torch_import()
    assert installed() is None


def test_install_without_a_destination_names_the_settings():
    with pytest.raises(ConfigError, match="SLEUTH_COLLECTOR.*SLEUTH_LOG_DIR"):
        install(Settings())


def test_the_implementation_can_be_forced():
    with pytest.raises(ValueError, match="SLEUTH_LOGGER_IMPL"):
        core.load("fortran")


def test_drained_records_are_on_the_wall_clock_and_a_clock_step_never_bends_a_duration(impl, monkeypatch):
    import time

    session = make_session(impl)
    tp = session.group("tp")
    handle = session.begin(tp, 1, -1, 8)
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 3600 * 10**9)  # NTP steps the clock back 1 h
    session.recorder.end(handle)
    records, _ = session.drain()
    (record,) = records
    assert 0 <= record["t_end_ns"] - record["t_start_ns"] < 10**9
    assert abs(record["t_end_ns"] - time.time_ns()) < 10**9  # on the (stepped) wall clock


class _Clocks:
    """A monotonic and a wall clock on one true time, with the reading thread switched out for
    ``pauses`` (one per wall read, in turn) right after the wall read."""

    def __init__(self, real_impl, wall_minus_monotonic: int, pauses: list[int]):
        self.true_ns, self.offset, self.pauses = 10**12, wall_minus_monotonic, list(pauses)
        self.Recorder = real_impl.Recorder

    def now_ns(self) -> int:
        self.true_ns += 300  # a read costs a little
        return self.true_ns

    def time_ns(self) -> int:
        wall = self.true_ns + self.offset
        self.true_ns += self.pauses.pop(0) if self.pauses else 0
        return wall


def test_a_thread_switched_out_between_the_clock_reads_is_not_taken_for_a_clock_step_regression_ci_10ms(impl, monkeypatch):
    import time

    switched_out = 10_500_000  # two of CPython's 5 ms GIL hand-overs
    clocks = _Clocks(impl, 7 * 10**15, pauses=[0, switched_out, 0, *[switched_out] * 5])
    monkeypatch.setattr(time, "time_ns", clocks.time_ns)
    session = make_session(clocks)
    first = session.wall_offset_ns()
    assert abs(first - clocks.offset) < 1_000
    assert session.wall_offset_ns() == first  # the switched-out read was read again
    assert session.wall_offset_ns() == first  # every read switched out: too unsure to move
    clocks.offset += 50_000_000  # NTP steps the wall clock 50 ms on
    assert abs(session.wall_offset_ns() - clocks.offset) < 1_000

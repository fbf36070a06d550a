"""sleuth.jobspec: the job spec contract, its JSON form and its validation."""

from __future__ import annotations

import json

import pytest

from sleuth.errors import ConfigError
from sleuth.jobspec import JOB_SPEC_FILE, Communicator, JobSpec, RankPlacement
from sleuth.layout import CommGroup, ParallelLayout


@pytest.fixture
def spec() -> JobSpec:
    return JobSpec.from_layout("llama", ParallelLayout(16, 2, 2, 4))


def spec_dict(**changes) -> dict:
    """A valid 4-rank job.json object without a layout, with top-level fields replaced."""
    data = {
        "job": "tiny",
        "world": 4,
        "layout": None,
        "ranks": [
            {"rank": 0, "host": "node-a", "gpu": 0},
            {"rank": 1, "host": "node-a", "gpu": 1},
            {"rank": 2, "host": "node-b", "gpu": 0},
            {"rank": 3, "host": "node-b", "gpu": 1},
        ],
        "communicators": [
            {"comm": "tp.0", "kind": "tp", "ranks": [0, 1]},
            {"comm": "tp.1", "kind": "tp", "ranks": [2, 3]},
            {"comm": "dp.0", "kind": "dp", "ranks": [0, 2]},
            {"comm": "dp.1", "kind": "dp", "ranks": [1, 3]},
        ],
    }
    data.update(changes)
    return data


def test_communicator_is_the_layout_group_type():
    assert Communicator is CommGroup


def test_from_layout(spec):
    assert spec.world == 16
    assert spec.placement(11) == RankPlacement(11, "h0001", 3)
    assert [c.comm for c in spec.communicators][:3] == ["tp.0", "tp.1", "tp.2"]
    assert spec.communicator("dp.3") == Communicator("dp.3", "dp", (9, 11, 13, 15))
    assert [c.comm for c in spec.communicators_of(9)] == ["tp.4", "dp.3", "pp.1", "embd.1"]


def test_json_shape(spec):
    data = json.loads(spec.to_json())
    assert list(data) == ["job", "world", "layout", "ranks", "communicators"]
    assert data["layout"] == {
        "tp": 2, "pp": 2, "dp": 4, "ep": 1, "cp": 1, "order": "tp-cp-ep-dp-pp", "gpus_per_host": 8
    }
    assert data["ranks"][0] == {"rank": 0, "host": "h0000", "gpu": 0}
    assert data["communicators"][0] == {"comm": "tp.0", "kind": "tp", "ranks": [0, 1]}


def test_json_round_trip_is_lossless(spec):
    again = JobSpec.from_json(spec.to_json())
    assert again == spec
    assert again.to_json() == spec.to_json()
    bare = JobSpec.from_dict(spec_dict())
    assert bare.layout is None
    assert bare.to_dict() == spec_dict()


def test_write_and_read_a_records_folder(spec, tmp_path):
    written = spec.write(tmp_path)
    assert written == tmp_path / JOB_SPEC_FILE
    assert JobSpec.read(tmp_path) == spec
    assert JobSpec.read(written) == spec


def test_placements_are_stored_in_rank_order():
    data = spec_dict()
    data["ranks"] = list(reversed(data["ranks"]))
    spec = JobSpec.from_dict(data)
    assert [p.rank for p in spec.placements] == [0, 1, 2, 3]
    assert spec.placement(2).host == "node-b"


def test_lookups_miss_with_key_error(spec):
    with pytest.raises(KeyError, match="no communicator 'cp.0'"):
        spec.communicator("cp.0")
    with pytest.raises(KeyError, match="rank 16 is outside the world of 16"):
        spec.placement(16)


def test_a_time_resolution_round_trips_and_is_absent_when_zero(spec):
    coarse = JobSpec.from_dict(spec_dict(time_resolution_ns=100_000_000))
    assert coarse.time_resolution_ns == 100_000_000
    assert JobSpec.from_json(coarse.to_json()) == coarse
    assert "time_resolution_ns" not in spec.to_dict() and spec.time_resolution_ns == 0


def with_comm(index: int, **changes) -> dict:
    data = spec_dict()
    data["communicators"][index] = {**data["communicators"][index], **changes}
    return data


def with_rank(index: int, **changes) -> dict:
    data = spec_dict()
    data["ranks"][index] = {**data["ranks"][index], **changes}
    return data


def without(key: str) -> dict:
    data = spec_dict()
    del data[key]
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (with_comm(3, ranks=[1, 99]), "job.json: communicators[3].ranks[1]: rank 99 is outside the world of 4"),
        (with_comm(2, comm="tp.0"), "job.json: communicators[2].comm: id 'tp.0' is used twice (also communicators[0])"),
        (with_comm(1, kind=""), "job.json: communicators[1].kind: must be a non-empty string"),
        (with_comm(1, kind=7), "job.json: communicators[1].kind: must be a string, got an integer 7"),
        (with_comm(0, ranks=[]), "job.json: communicators[0].ranks: has no ranks"),
        (with_comm(0, ranks=[1, 1]), "job.json: communicators[0].ranks[1]: rank 1 is listed twice (also ranks[0])"),
        (with_comm(0, ranks=[0, "1"]), "job.json: communicators[0].ranks[1]: must be an integer, got '1'"),
        (with_comm(0, ranks="0,1"), "job.json: communicators[0].ranks: must be an array, got a string"),
        (with_rank(2, rank=1), "job.json: ranks[2]: rank 1 is placed twice (also ranks[1])"),
        (with_rank(3, rank=4), "job.json: ranks[3]: rank 4 is outside the world of 4"),
        (with_rank(3, gpu=0), "job.json: ranks[3]: rank 3 is on host 'node-b' gpu 0, like rank 2"),
        (with_rank(0, host=None), "job.json: ranks[0].host: must be a string, got null"),
        (with_rank(0, gpu=True), "job.json: ranks[0].gpu: must be an integer, got a boolean True"),
        (spec_dict(ranks=spec_dict()["ranks"][:3]), "job.json: ranks: 1 of the world's 4 ranks are not placed (3)"),
        (without("world"), "job.json: world: missing"),
        (without("layout"), "job.json: layout: missing"),
        (spec_dict(world="4"), "job.json: world: must be an integer, got a string '4'"),
        (spec_dict(job=""), "job.json: job: must be a non-empty string, got ''"),
        (spec_dict(communicators={}), "job.json: communicators: must be an array, got an object"),
        (
            spec_dict(layout={"tp": 2, "pp": 1, "dp": 4}),
            "job.json: layout: tp=2 × cp=1 × ep=1 × dp=4 × pp=1 = 8, not the world size 4",
        ),
        (spec_dict(layout={"tp": 2, "pp": 1}), "job.json: layout.dp: missing"),
        (spec_dict(layout={"tp": 2, "pp": 1, "dp": 2, "sp": 1}), "job.json: layout.sp: unknown field"),
        (spec_dict(layout={"tp": 2, "pp": 1, "dp": 2, "order": 5}), "job.json: layout.order: must be a string"),
        ([], "job.json: job spec: must be an object, got an array"),
        (spec_dict(time_resolution_ns=1.5), "job.json: time_resolution_ns: must be an integer, got a number 1.5"),
        (spec_dict(time_resolution_ns=-1), "job.json: time_resolution_ns: must be a non-negative integer, got -1"),
    ],
)
def test_bad_json_names_the_field(data, message):
    with pytest.raises(ConfigError) as caught:
        JobSpec.from_dict(data)
    assert str(caught.value).startswith(message)


def test_bad_json_text_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="job.json: not valid JSON"):
        JobSpec.from_json("{")
    with pytest.raises(ConfigError, match="cannot read the job spec"):
        JobSpec.read(tmp_path / "absent.json")
    (tmp_path / JOB_SPEC_FILE).write_text(json.dumps(with_comm(3, ranks=[1, 99])))
    with pytest.raises(ConfigError, match=r"job\.json: communicators\[3\]\.ranks\[1\]: rank 99"):
        JobSpec.read(tmp_path)


def test_direct_construction_is_validated_too():
    placements = tuple(RankPlacement(rank, "h0000", rank) for rank in range(4))
    with pytest.raises(ConfigError, match=r"communicators\[0\]\.ranks\[1\]: rank 4 is outside the world of 4"):
        JobSpec("j", 4, None, placements, (Communicator("x", "tp", (0, 4)),))
    with pytest.raises(ConfigError, match="layout: its world size 16 is not the job's world of 4"):
        JobSpec("j", 4, ParallelLayout(16, 2, 2, 4), placements, ())
    with pytest.raises(ConfigError, match="rank 0: gpu must be a non-negative integer, got -1"):
        RankPlacement(0, "h0000", -1)

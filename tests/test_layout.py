"""sleuth.layout and ``sleuth layout``: groups against hand-written answers, invariants, errors."""

from __future__ import annotations

import json
import math

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.cli import main
from sleuth.errors import LayoutError
from sleuth.topology.generators import spine_leaf
from sleuth.layout import (
    DIMENSIONS,
    CommGroup,
    ParallelLayout,
    RankCoordinates,
    parse_order,
    parse_size,
)


def ranks_by_kind(layout: ParallelLayout) -> dict[str, list[list[int]]]:
    found: dict[str, list[list[int]]] = {}
    for group in layout.groups():
        found.setdefault(group.kind, []).append(list(group.ranks))
    return found


# -- hand-written answers ---------------------------------------------------------------------

# 16 ranks, tp 2 × pp 2 × dp 4, order tp-cp-ep-dp-pp: rank = tp + 2·dp + 8·pp.
EXPECTED_TP2_PP2_DP4 = {
    "tp": [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]],
    "dp": [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]],
    "pp": [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]],
    # pp = 2: the first and last stage are the whole pipeline group.
    "embd": [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13], [6, 14], [7, 15]],
}


def test_default_order_matches_hand_written_groups():
    layout = ParallelLayout(16, 2, 2, 4)
    assert layout.order == "tp-cp-ep-dp-pp"
    assert ranks_by_kind(layout) == EXPECTED_TP2_PP2_DP4
    assert layout.kinds == ("tp", "dp", "pp", "embd")  # cp, ep of size 1 have no groups


def test_comm_ids_count_groups_by_smallest_rank():
    layout = ParallelLayout(16, 2, 2, 4)
    groups = layout.groups()
    assert [g.comm for g in groups if g.kind == "dp"] == ["dp.0", "dp.1", "dp.2", "dp.3"]
    assert CommGroup("pp.3", "pp", (3, 11)) in groups
    assert CommGroup("embd.7", "embd", (7, 15)) in groups
    assert len(groups) == 8 + 4 + 8 + 8


def test_other_order_tp_pp_dp():
    # rank = tp + 2·pp + 4·dp; the size-1 dimensions left out of the order are appended.
    layout = ParallelLayout(16, 2, 2, 4, order="tp-pp-dp")
    assert layout.order == "tp-pp-dp-cp-ep"
    assert ranks_by_kind(layout) == {
        "tp": [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]],
        "dp": [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]],
        "pp": [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]],
        "embd": [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]],
    }
    assert layout.coordinates(6) == RankCoordinates(tp=0, cp=0, ep=0, dp=1, pp=1)
    assert layout.rank_of(tp=1, pp=1, dp=3) == 15


def test_pp_groups_in_stage_order_and_embd_takes_the_ends():
    # rank = tp + 2·pp with pp = 4: pipeline group of tp 1 is 1, 3, 5, 7 (stage 0 first).
    layout = ParallelLayout(8, 2, 4, 1, order="tp-pp-dp")
    assert ranks_by_kind(layout)["pp"] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert ranks_by_kind(layout)["embd"] == [[0, 6], [1, 7]]
    assert [layout.stage_of(rank) for rank in (1, 3, 5, 7)] == [0, 1, 2, 3]
    assert "embd" not in layout.groups_of(3)  # a middle stage holds no embedding
    assert layout.groups_of(7)["embd"].comm == "embd.1"


def test_ep_and_cp_groups():
    # 16 ranks, tp 2 × cp 2 × ep 2 × dp 2: rank = tp + 2·cp + 4·ep + 8·dp.
    layout = ParallelLayout(16, 2, 1, 2, ep=2, cp=2)
    groups = ranks_by_kind(layout)
    assert set(groups) == {"tp", "cp", "ep", "dp", "edp"}  # pp = 1: no pp, no embd
    assert groups["cp"] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]
    assert groups["ep"] == [[0, 4], [1, 5], [2, 6], [3, 7], [8, 12], [9, 13], [10, 14], [11, 15]]
    # dense gradients: every rank with the same tp (and pp) coordinate
    assert groups["dp"] == [[0, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13, 15]]
    # expert gradients: same tp, ep (and pp); differ in cp, dp
    assert groups["edp"] == [[0, 2, 8, 10], [1, 3, 9, 11], [4, 6, 12, 14], [5, 7, 13, 15]]
    sizes = {"tp": 2, "cp": 2, "ep": 2, "dp": 8, "edp": 4}
    for kind, kind_groups in groups.items():
        assert {len(g) for g in kind_groups} == {sizes[kind]}
        members = sorted(rank for g in kind_groups for rank in g)
        assert members == list(range(16)), kind  # every rank in exactly one group of each kind
    for rank in range(16):
        assert set(layout.groups_of(rank)) == set(sizes)
        for group in layout.groups_of(rank).values():
            assert rank in group.ranks


def test_no_groups_of_one_rank():
    layout = ParallelLayout(4, 1, 1, 4, ep=1)
    assert layout.kinds == ("dp",)
    assert ParallelLayout(1, 1, 1, 1).groups() == []
    # ep > 1 but cp·dp = 1: the expert data-parallel group would be one rank
    assert "edp" not in ParallelLayout(4, 2, 1, 1, ep=2).kinds


# -- placement --------------------------------------------------------------------------------


def test_hosts_and_gpu_indices():
    layout = ParallelLayout(12, 2, 2, 3)  # 8 per host: the second host is partial
    assert [layout.host_of(rank) for rank in (0, 7, 8, 11)] == ["h0000", "h0000", "h0001", "h0001"]
    assert [layout.gpu_index_of(rank) for rank in (0, 7, 8, 11)] == [0, 7, 0, 3]
    assert layout.n_hosts == 2


def test_host_names_match_the_topology_generators_past_9999_hosts():
    layout = ParallelLayout(10001, 1, 1, 10001, gpus_per_host=1)
    assert layout.host_of(0) == "h0000"
    assert layout.host_of(9999) == "h9999"
    assert layout.host_of(10000) == "h10000"
    fabric = spine_leaf(hosts=10001, gpus_per_host=1, hosts_per_leaf=100, spines=2)
    assert fabric.hosts[10000] == layout.host_of(10000)


# -- validation -------------------------------------------------------------------------------


def test_product_mismatch_names_the_sizes():
    with pytest.raises(LayoutError) as caught:
        ParallelLayout(16, 2, 2, 3)
    assert str(caught.value) == "tp=2 × cp=1 × ep=1 × dp=3 × pp=2 = 12, not the world size 16"


@pytest.mark.parametrize(
    ("order", "fragment"),
    [
        ("tp-cp-xx-dp-pp", "unknown dimension 'xx'"),
        ("tp-dp-dp-pp", "names 'dp' twice"),
        ("tp-dp", "leaves out 'pp', whose size is 2"),
        ("", "unknown dimension ''"),
    ],
)
def test_bad_order_names_the_token(order, fragment):
    with pytest.raises(LayoutError, match=fragment):
        ParallelLayout(16, 2, 2, 4, order=order)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"world": 0, "tp": 1, "pp": 1, "dp": 1}, "world must be a positive integer, got 0"),
        ({"world": 4, "tp": 4, "pp": 1, "dp": 1, "cp": -1}, "cp must be a positive integer, got -1"),
        ({"world": 4, "tp": 2.0, "pp": 1, "dp": 2}, "tp must be a positive integer, got 2.0"),
        ({"world": 4, "tp": True, "pp": 1, "dp": 4}, "tp must be a positive integer, got True"),
        ({"world": 4, "tp": 4, "pp": 1, "dp": 1, "gpus_per_host": 0}, "gpus_per_host must be a positive integer"),
    ],
)
def test_bad_sizes_are_named(options, fragment):
    with pytest.raises(LayoutError, match=fragment):
        ParallelLayout(**options)


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        ParallelLayout(16, 2, 2, 2, 2)  # type: ignore[misc]


def test_rank_lookups_check_their_arguments():
    layout = ParallelLayout(16, 2, 2, 4)
    with pytest.raises(LayoutError, match="rank 16 is outside the world of 16"):
        layout.coordinates(16)
    with pytest.raises(LayoutError, match="dp coordinate 4 is outside 0..3"):
        layout.rank_of(dp=4)
    with pytest.raises(LayoutError, match="unknown group kind 'xp'"):
        layout.group_array("xp")


def test_parse_helpers():
    assert parse_size(" 8 ", name="tp") == 8
    with pytest.raises(LayoutError, match="tp: 'two' is not a positive integer"):
        parse_size("two", name="tp")
    with pytest.raises(LayoutError, match="'0'"):
        parse_size("0")
    assert parse_order("pp-dp-tp-cp-ep") == ("pp", "dp", "tp", "cp", "ep")
    assert parse_order("tp-dp", {"tp": 2, "dp": 2}) == ("tp", "dp", "cp", "ep", "pp")


# -- invariants over random layouts -----------------------------------------------------------


@st.composite
def layouts(draw):
    sizes = {name: draw(st.integers(1, 4)) for name in DIMENSIONS}
    order = draw(st.permutations(DIMENSIONS))
    return ParallelLayout(
        math.prod(sizes.values()),
        sizes["tp"],
        sizes["pp"],
        sizes["dp"],
        ep=sizes["ep"],
        cp=sizes["cp"],
        order="-".join(order),
        gpus_per_host=draw(st.integers(1, 9)),
    )


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_groups_partition_the_world(layout):
    sizes = layout.sizes
    expected_size = {
        "tp": sizes["tp"],
        "cp": sizes["cp"],
        "ep": sizes["ep"],
        "pp": sizes["pp"],
        "dp": sizes["cp"] * sizes["ep"] * sizes["dp"],
        "edp": sizes["cp"] * sizes["dp"] if sizes["ep"] > 1 else 1,
        "embd": 2 if sizes["pp"] > 1 else 1,
    }
    shared = {  # coordinates every member of a group has in common
        "tp": ("cp", "ep", "dp", "pp"),
        "cp": ("tp", "ep", "dp", "pp"),
        "ep": ("tp", "cp", "dp", "pp"),
        "pp": ("tp", "cp", "ep", "dp"),
        "dp": ("tp", "pp"),
        "edp": ("tp", "ep", "pp"),
        "embd": ("tp", "cp", "ep", "dp"),
    }
    assert set(layout.kinds) == {kind for kind, size in expected_size.items() if size > 1}
    coords = [layout.coordinates(rank).to_dict() for rank in range(layout.world)]
    stage_ends = {r for r in range(layout.world) if coords[r]["pp"] in (0, layout.pp - 1)}
    by_kind = ranks_by_kind(layout)
    for kind, groups in by_kind.items():
        assert all(len(group) == expected_size[kind] for group in groups)
        members = sorted(rank for group in groups for rank in group)
        covered = sorted(stage_ends) if kind == "embd" else list(range(layout.world))
        assert members == covered, kind
        for group in groups:
            assert group == sorted(group)
            assert len({tuple(coords[r][d] for d in shared[kind]) for r in group}) == 1
        assert [group[0] for group in groups] == sorted(group[0] for group in groups)
    for group in layout.groups():
        assert group.comm == f"{group.kind}.{by_kind[group.kind].index(list(group.ranks))}"
    for rank in range(layout.world):
        assert layout.rank_of(**coords[rank]) == rank
        assert layout.stage_of(rank) == coords[rank]["pp"]
        for kind, group in layout.groups_of(rank).items():
            assert rank in group.ranks and group.kind == kind
    assert layout.coordinate_array().tolist() == [[c[d] for d in DIMENSIONS] for c in coords]


def test_large_layout_builds():
    layout = ParallelLayout(16384, 8, 8, 256)
    groups = layout.groups()
    assert len(groups) == 2048 + 64 + 2048 + 2048
    assert layout.group_array("dp").shape == (64, 256)
    last = layout.groups_of(16383)
    assert last["tp"].ranks == tuple(range(16376, 16384))
    assert last["pp"].ranks == tuple(range(2047, 16384, 2048))
    assert layout.host_of(16383) == "h2047"


# -- command line -----------------------------------------------------------------------------


def test_cli_json(capsys):
    code = main(["layout", "--world", "16", "--tp", "2", "--pp", "2", "--dp", "4", "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert {key: document[key] for key in ("world", "tp", "pp", "dp", "ep", "cp", "order", "gpus_per_host")} == {
        "world": 16,
        "tp": 2,
        "pp": 2,
        "dp": 4,
        "ep": 1,
        "cp": 1,
        "order": "tp-cp-ep-dp-pp",
        "gpus_per_host": 8,
    }
    expected_groups = [
        {"comm": f"{kind}.{index}", "kind": kind, "ranks": ranks}
        for kind, groups in EXPECTED_TP2_PP2_DP4.items()
        for index, ranks in enumerate(groups)
    ]
    assert document["groups"] == expected_groups
    assert len(document["ranks"]) == 16
    assert document["ranks"][11] == {
        "rank": 11, "host": "h0001", "gpu": 3, "tp": 1, "cp": 0, "ep": 0, "dp": 1, "pp": 1
    }


def test_cli_text(capsys):
    assert main(["layout", "--world", "16", "--tp", "2", "--pp", "2", "--dp", "4"]) == 0
    out = capsys.readouterr().out
    assert "order tp-cp-ep-dp-pp" in out
    assert "tp    8 groups of 2: [0, 1] [2, 3] [4, 5] ..." in out
    assert "dp    4 groups of 4: [0, 2, 4, 6] [1, 3, 5, 7] [8, 10, 12, 14] ..." in out


def test_cli_error_is_one_line(capsys):
    assert main(["layout", "--world", "16", "--tp", "2", "--pp", "2", "--dp", "3"]) == 2
    err = capsys.readouterr().err
    assert err == "sleuth layout: error: tp=2 × cp=1 × ep=1 × dp=3 × pp=2 = 12, not the world size 16\n"


def test_cli_rejects_a_bad_size(capsys):
    with pytest.raises(SystemExit):
        main(["layout", "--world", "16", "--tp", "zero", "--pp", "2", "--dp", "4"])
    assert "argument --tp: 'zero' is not a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("order", ["tp-cp-ep-dp-pp", "tp-pp-cp-dp-ep", "dp-ep-tp-pp-cp"])
def test_a_replica_holds_whole_tensor_context_and_pipeline_groups(order):
    layout = ParallelLayout(96, 2, 3, 4, cp=2, ep=2, order=order)
    replica = layout.replica_of(np.arange(96))
    assert len(np.unique(replica)) == 4 * 2  # one per (dp, ep) coordinate
    assert all(replica[r] == min(np.flatnonzero(replica == replica[r])) for r in range(96))
    for kind in ("tp", "cp", "pp"):
        assert (replica[layout.group_array(kind)] == replica[layout.group_array(kind)][:, :1]).all(), kind
    # Data-parallel groups (here 16 ranks: dp x cp x ep) span every replica; expert groups two.
    assert all(len(set(row.tolist())) == 8 for row in replica[layout.group_array("dp")])
    assert all(len(set(row.tolist())) == 2 for row in replica[layout.group_array("ep")])


def test_replica_of_refuses_a_rank_outside_the_world():
    with pytest.raises(LayoutError, match="rank 16 is outside the world of 16"):
        ParallelLayout(16, 2, 2, 4).replica_of(np.array([3, 16]))

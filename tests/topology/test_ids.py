from __future__ import annotations

import pytest

from sleuth.errors import TopologyError
from sleuth.topology.ids import DeviceKind, host_name, kind_of, link_id, parse_device, spine_set_id, spine_set_members


def test_host_names_have_four_digits_then_grow() -> None:
    assert [host_name(i) for i in (0, 1, 42, 9999, 10000)] == ["h0000", "h0001", "h0042", "h9999", "h10000"]


def test_link_id_is_canonical_whichever_end_comes_first() -> None:
    assert link_id("nic:h0042/3", "leaf:p0r3") == "link:leaf:p0r3~nic:h0042/3"
    assert link_id("leaf:p0r3", "nic:h0042/3") == "link:leaf:p0r3~nic:h0042/3"
    assert link_id("spine:s1", "leaf:l0") == "link:leaf:l0~spine:s1"


def test_parse_device_reads_every_kind() -> None:
    assert parse_device("gpu:h0001/7").kind is DeviceKind.GPU
    assert parse_device("gpu:h0001/7").name == "h0001"
    assert parse_device("nic:h0001/3").index == 3
    assert parse_device("nvswitch:h0001").name == "h0001"
    assert parse_device("host:h0001").kind is DeviceKind.HOST
    assert parse_device("spine:s3").name == "s3"
    link = parse_device("link:leaf:l0~nic:h0/1")
    assert link.kind is DeviceKind.LINK
    assert [end.kind for end in link.ends] == [DeviceKind.LEAF, DeviceKind.NIC]
    assert kind_of("leaf:p0r1") is DeviceKind.LEAF


@pytest.mark.parametrize(
    ("device", "fragment"),
    [
        ("switch:s0", "'switch'"),
        ("gpu:h0", "gpu:<host>/<index>"),
        ("gpu:h0/01", "gpu:<host>/<index>"),
        ("leaf:bad name", "'leaf:bad name'"),
        ("link:nic:h0/0~leaf:l0", "must be sorted"),
        ("link:leaf:l0", "link:<device>~<device>"),
        ("noprefix", "'noprefix'"),
    ],
)
def test_parse_device_rejects_bad_ids_naming_them(device: str, fragment: str) -> None:
    with pytest.raises(TopologyError, match=None) as info:
        parse_device(device)
    assert fragment in str(info.value)


def test_a_spine_set_id_lists_its_spines_and_reads_back() -> None:
    device = spine_set_id(["spine:s2", "spine:s10"])
    assert device == "spines:s2,s10"
    assert spine_set_members(device) == ("spine:s2", "spine:s10")
    assert spine_set_members("spine:s2") is None
    for bad in (["spine:s0"], ["spine:s0", "leaf:l0"]):
        with pytest.raises(TopologyError, match="two or more spine ids"):
            spine_set_id(bad)

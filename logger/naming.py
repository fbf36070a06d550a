"""Communicators named as users name them (``tp.3``, ``dp.0``, ``pp.5``) and the layout they imply.

A name is ``f"{kind}.{index}"``, the convention of :mod:`sleuth.layout`: the index counts the
kind's groups in order of their smallest rank. The kind comes from what the job says, else from
the shape of the rank's groups:

* **What the job says.** Megatron-core passes ``group_desc`` (``TENSOR_MODEL_PARALLEL_GROUP``);
  a torch ``DeviceMesh`` names its groups ``mesh_<dim name>``. :data:`DESC_KINDS` maps the known
  ones to sleuth's kinds; any other description becomes a kind of its own (lower case).
* **The shape.** In a regular layout every group of one dimension is an arithmetic progression
  of ranks with the same stride and size, and the dimensions tile the world like digits of a
  mixed-radix number. The rank's groups without a description that have such shapes are taken,
  by stride, as the dimensions of Megatron's order (``tp-cp-ep-dp-pp``): one is ``dp``, two are
  ``tp, dp``, three ``tp, dp, pp`` (assumption: the innermost group of a job that does not say
  otherwise is tensor parallel, the outermost pipeline).

The index of a progression ``first + stride * k`` (``k < size``) among all the world's groups of
that shape is ``(first // (stride * size)) * stride + first % stride``: the progressions of one
shape start at the ranks whose digit in that position is 0. It needs nothing but the group
itself, so every member names the group alike without talking to the others.

The world group is ``world`` (it is every dimension at once). A group that fits none of this
keeps the member-hash id of :func:`sleuth.logger.groups.comm_id`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sleuth.errors import LayoutError
from sleuth.layout import DIMENSIONS, ParallelLayout

__all__ = ["DESC_KINDS", "GroupShape", "infer_layout", "kind_from_desc", "name_groups", "shape_of"]

#: ``group_desc`` values of Megatron-core and DeviceMesh dimension names → sleuth's kinds.
DESC_KINDS: dict[str, str] = {
    "TENSOR_MODEL_PARALLEL_GROUP": "tp",
    "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
    "DATA_PARALLEL_GROUP_WITH_CP": "dp",
    "DATA_PARALLEL_GROUP": "dp",
    "CONTEXT_PARALLEL_GROUP": "cp",
    "EXPERT_MODEL_PARALLEL_GROUP": "ep",
    "EXPERT_DATA_PARALLEL_GROUP": "edp",
    "EMBEDDING_GROUP": "embd",
    "tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep",
    "tensor": "tp", "pipeline": "pp", "data": "dp", "context": "cp", "expert": "ep",
}

#: Descriptions that say nothing about a group's role: torch's defaults.
_SILENT = {"", "undefined", "default_pg", "split", "unnamed"}

#: Kinds of the shaped groups without a description, by how many there are, innermost first.
_BY_COUNT: dict[int, tuple[str, ...]] = {
    1: ("dp",),
    2: ("tp", "dp"),
    3: ("tp", "dp", "pp"),
    4: ("tp", "cp", "dp", "pp"),
    5: ("tp", "cp", "ep", "dp", "pp"),
}


def kind_from_desc(desc: str | None) -> str | None:
    """The kind a group's description names, or None when it names none."""
    if desc is None:
        return None
    text = desc.strip()
    if text.startswith("mesh_"):  # DeviceMesh: mesh_<dim name>, or mesh_dim_<i> when unnamed
        text = text[len("mesh_"):]
        if text.startswith("dim_"):
            return None
    if text in _SILENT:
        return None
    return DESC_KINDS.get(text, DESC_KINDS.get(text.lower(), text.lower()))


@dataclass(frozen=True)
class GroupShape:
    """A group whose sorted members are ``first + stride * k`` for ``k < size``."""

    first: int
    stride: int
    size: int

    @property
    def index(self) -> int:
        """Its position among the world's groups of this shape, ordered by smallest rank."""
        span = self.stride * self.size
        return (self.first // span) * self.stride + self.first % self.stride


def shape_of(ranks: Sequence[int], world: int) -> GroupShape | None:
    """The group's progression, or None when its members are not one that tiles the world."""
    members = sorted(ranks)
    if len(members) < 2 or len(set(members)) != len(members):
        return None
    stride = members[1] - members[0]
    if any(b - a != stride for a, b in zip(members, members[1:])):
        return None
    shape = GroupShape(members[0], stride, len(members))
    # Its shape's groups tile the world only when a span of stride*size ranks divides it.
    return shape if world % (stride * len(members)) == 0 else None


def name_groups(
    groups: Iterable[tuple[Sequence[int], str | None]], world: int
) -> list[tuple[str, str] | None]:
    """``(name, kind)`` for each ``(members, description)``, or None where no name fits.

    ``groups`` are the groups one rank belongs to. Only the description and the shapes of these
    groups are used, so the members of a group agree on its name.
    """
    groups = list(groups)
    named: list[tuple[str, str] | None] = [None] * len(groups)
    silent: dict[tuple[int, int], list[int]] = {}  # (stride, size) → positions
    for position, (ranks, desc) in enumerate(groups):
        if len(ranks) == world:
            named[position] = ("world", "world")
            continue
        shape = shape_of(ranks, world)
        kind = kind_from_desc(desc)
        if kind is not None:
            if shape is not None:
                named[position] = (f"{kind}.{shape.index}", kind)
        elif shape is not None:
            silent.setdefault((shape.stride, shape.size), []).append(position)
    kinds = _BY_COUNT.get(len(silent)) if _is_mixed_radix(sorted(silent), world) else None
    if kinds is not None:
        for kind, key in zip(kinds, sorted(silent)):
            for position in silent[key]:
                shape = shape_of(groups[position][0], world)
                assert shape is not None
                named[position] = (f"{kind}.{shape.index}", kind)
    return named


def _is_mixed_radix(shapes: list[tuple[int, int]], world: int) -> bool:
    """Whether (stride, size) pairs, by stride, are digits of one mixed-radix rank numbering."""
    reach = 1
    for stride, size in shapes:
        if stride % reach != 0:
            return False
        reach = stride * size
    return world % reach == 0


def infer_layout(communicators: Iterable[tuple[str, Sequence[int]]], world: int, gpus_per_host: int) -> ParallelLayout | None:
    """The Megatron-style layout the named groups ``(kind, members)`` imply, or None.

    Each dimension's size and stride come from its groups' shape; a dimension the job has no
    group of has size 1, and what the named ones leave of the world is data parallel (a pure
    DDP or FSDP job has dp = world). None where the shapes contradict each other or the world.
    """
    communicators = list(communicators)
    found: dict[str, tuple[int, int]] = {}
    for kind, ranks in communicators:
        if kind not in DIMENSIONS:
            continue
        shape = shape_of(ranks, world)
        if shape is None:
            return None
        seen = found.setdefault(kind, (shape.stride, shape.size))
        if seen != (shape.stride, shape.size):
            return None
    if not _is_mixed_radix(sorted(found.values()), world):
        return None
    sizes = {kind: size for kind, (_, size) in found.items()}
    covered = math.prod(sizes.values())
    if "dp" not in sizes:
        sizes["dp"] = world // covered
        # The implicit dp digit sits where the named digits leave room for it.
        found["dp"] = (_gap_stride(sorted(found.values()), world), sizes["dp"])
    elif covered != world:
        return None
    order = "-".join(kind for kind, _ in sorted(found.items(), key=lambda item: item[1][0]))
    try:
        layout = ParallelLayout(
            world=world, tp=sizes.get("tp", 1), pp=sizes.get("pp", 1), dp=sizes["dp"],
            ep=sizes.get("ep", 1), cp=sizes.get("cp", 1), order=order, gpus_per_host=gpus_per_host,
        )
    except LayoutError:
        return None
    # The layout stands only if it rebuilds every group the job named, member for member.
    for kind, ranks in communicators:
        if kind in DIMENSIONS and kind in layout.kinds:
            shape = shape_of(ranks, world)
            table = layout.group_array(kind)
            if shape is None or shape.index >= len(table) or sorted(ranks) != table[shape.index].tolist():
                return None
    return layout


def _gap_stride(shapes: list[tuple[int, int]], world: int) -> int:
    """The stride of the first position the mixed-radix digits leave free."""
    reach = 1
    for stride, size in shapes:
        if stride != reach:
            return reach
        reach = stride * size
    return reach

"""Hybrid parallel layout (Megatron-style): which ranks form which communicator groups.

A job of ``world`` ranks is split along five dimensions: tensor (``tp``), context (``cp``),
expert (``ep``), data (``dp``) and pipeline (``pp``) parallelism. Each rank has one coordinate
per dimension; the rank order says how coordinates map to global ranks. The default,
``"tp-cp-ep-dp-pp"``, is Megatron-core's: the first named dimension varies fastest, so

    rank = tp + tp_size * (cp + cp_size * (ep + ep_size * (dp + dp_size * pp)))

Assumption: expert parallelism is its own dimension, so ``tp * cp * ep * dp * pp == world``.
(Megatron-core can also fold ``ep`` into the data-parallel ranks with a second rank generator;
that layout is not modelled here.)

Group kinds (:data:`KINDS`), each a partition of the ranks it covers:

- ``tp``, ``cp``, ``ep``, ``pp``: ranks that differ only in that coordinate.
- ``dp``: the gradient all-reduce group of dense (non-expert) parameters: ranks that share the
  tp and pp coordinates, i.e. differ in any of cp, ep, dp. Megatron reduces dense gradients over
  data x context parallel ranks, and expert-parallel ranks are data parallel for dense weights.
  Its size is ``cp * ep * dp``.
- ``edp`` (only when ``ep > 1``): expert data parallel, the gradient group of expert parameters:
  ranks that share the tp, ep and pp coordinates (differ in cp, dp). Size ``cp * dp``.
- ``embd`` (only when ``pp > 1``): the embedding / tied-weights group: for each (tp, cp, ep, dp)
  position, the ranks of the first and the last pipeline stage (2 ranks). It covers only those
  two stages.

Groups of one rank are omitted (a collective over one rank does no communication), so with
``cp == 1`` there are no ``cp`` groups. A kind is therefore either absent or complete.

Communicator ids are ``f"{kind}.{index}"``, the index counting the kind's groups in order of
their smallest rank. Member ranks are listed in ascending order, except ``pp`` and ``embd``
groups, which are listed in stage order (stage 0 first); since a rank grows with its pipeline
coordinate, stage order is ascending too, so every group's ranks are sorted.

Placement: rank ``r`` runs on host ``host_of(r)`` (``"h0000"``, ``"h0001"``, ...; ``gpus_per_host``
consecutive ranks per host, the last host may be partial) at GPU index ``r % gpus_per_host``.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass
from functools import cached_property

import numpy as np

from sleuth.errors import LayoutError
from sleuth.validation import first_duplicate, is_int, non_negative_int, positive_int
from sleuth.topology.ids import host_name

__all__ = [
    "DEFAULT_ORDER",
    "DIMENSIONS",
    "KINDS",
    "CommGroup",
    "ParallelLayout",
    "RankCoordinates",
    "parse_order",
    "parse_size",
]

#: The five parallel dimensions, in the canonical order used for coordinate columns.
DIMENSIONS: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")

#: Megatron-core's default rank order: the first named dimension varies fastest.
DEFAULT_ORDER = "tp-cp-ep-dp-pp"

#: Group kinds in the order :meth:`ParallelLayout.groups` lists them.
KINDS: tuple[str, ...] = ("tp", "cp", "ep", "dp", "edp", "pp", "embd")

# Which coordinates vary inside one group of each kind (``embd`` is special-cased).
_VARYING: dict[str, tuple[str, ...]] = {
    "tp": ("tp",),
    "cp": ("cp",),
    "ep": ("ep",),
    "dp": ("cp", "ep", "dp"),
    "edp": ("cp", "dp"),
    "pp": ("pp",),
}


@dataclass(frozen=True)
class CommGroup:
    """One communicator (process group): its id, its kind and its member ranks.

    This is the communicator type of the job spec too (``sleuth.jobspec.Communicator`` is this
    class). ``ranks`` keeps the order it is given in: a member's group rank is its position.
    """

    comm: str
    kind: str
    ranks: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.comm, str) or not self.comm:
            raise LayoutError(f"communicator id must be a non-empty string, got {self.comm!r}")
        if not isinstance(self.kind, str) or not self.kind:
            raise LayoutError(f"communicator {self.comm}: kind must be a non-empty string, got {self.kind!r}")
        ranks = tuple(self.ranks)
        if not ranks:
            raise LayoutError(f"communicator {self.comm}: has no ranks")
        ranks = tuple(non_negative_int(f"communicator {self.comm}: ranks[{position}]", rank, error=LayoutError)
                      for position, rank in enumerate(ranks))
        twice = first_duplicate(ranks)
        if twice is not None:
            raise LayoutError(f"communicator {self.comm}: rank {twice} is listed twice")
        object.__setattr__(self, "ranks", ranks)

    @property
    def size(self) -> int:
        return len(self.ranks)

    def to_dict(self) -> dict:
        return {"comm": self.comm, "kind": self.kind, "ranks": list(self.ranks)}


@dataclass(frozen=True)
class RankCoordinates:
    """A rank's coordinate along each parallel dimension."""

    tp: int
    cp: int
    ep: int
    dp: int
    pp: int

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in DIMENSIONS}


def parse_size(text: str | int, *, name: str = "size") -> int:
    """A positive integer from command-line text; ``LayoutError`` naming ``name`` otherwise."""
    if is_int(text):
        value = int(text)
    else:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise LayoutError(f"{name}: {text!r} is not a positive integer") from None
    if value < 1:
        raise LayoutError(f"{name}: {text!r} is not a positive integer")
    return value


def parse_order(order: str, sizes: dict[str, int] | None = None) -> tuple[str, ...]:
    """The five dimension names in rank order (fastest first), from text like ``"tp-cp-ep-dp-pp"``.

    As in Megatron-core, dimensions of size 1 may be left out (when ``sizes`` is given); they are
    appended in canonical order. Unknown or repeated names, and left-out dimensions larger than 1,
    raise ``LayoutError`` naming the token.
    """
    if not isinstance(order, str):
        raise LayoutError(f"order must be a string like {DEFAULT_ORDER!r}, got {order!r}")
    tokens = [token.strip() for token in order.split("-")]
    names: list[str] = []
    for token in tokens:
        if token not in DIMENSIONS:
            raise LayoutError(
                f"order {order!r}: unknown dimension {token!r} (expected names from {', '.join(DIMENSIONS)})"
            )
        if token in names:
            raise LayoutError(f"order {order!r}: names {token!r} twice")
        names.append(token)
    for name in DIMENSIONS:
        if name in names:
            continue
        size = 1 if sizes is None else sizes.get(name, 1)
        if sizes is None or size != 1:
            detail = "" if sizes is None else f", whose size is {size}"
            raise LayoutError(f"order {order!r}: leaves out {name!r}{detail}")
        names.append(name)
    return tuple(names)


@dataclass(frozen=True)
class ParallelLayout:
    """The parallel layout of a job: dimension sizes, rank order and GPUs per host.

    Everything is validated at construction: sizes are positive integers whose product is
    ``world``; ``order`` names each dimension once (size-1 dimensions may be left out and are
    appended; the stored ``order`` is the full five-name form); ``gpus_per_host >= 1``.
    """

    world: int
    tp: int
    pp: int
    dp: int
    _: KW_ONLY
    ep: int = 1
    cp: int = 1
    order: str = DEFAULT_ORDER
    gpus_per_host: int = 8

    def __post_init__(self) -> None:
        for name in ("world", *DIMENSIONS, "gpus_per_host"):
            object.__setattr__(self, name, positive_int(name, getattr(self, name), error=LayoutError))
        sizes = self.sizes
        names = parse_order(self.order, sizes)
        object.__setattr__(self, "order", "-".join(names))
        product = math.prod(sizes.values())
        if product != self.world:
            terms = " × ".join(f"{name}={sizes[name]}" for name in DIMENSIONS)
            raise LayoutError(f"{terms} = {product}, not the world size {self.world}")

    # -- sizes and order ---------------------------------------------------------------------

    @property
    def sizes(self) -> dict[str, int]:
        """Dimension name → size, in canonical order (tp, cp, ep, dp, pp)."""
        return {name: getattr(self, name) for name in DIMENSIONS}

    @property
    def order_names(self) -> tuple[str, ...]:
        """The dimension names in rank order, fastest-varying first."""
        return tuple(self.order.split("-"))

    @cached_property
    def strides(self) -> dict[str, int]:
        """Dimension name → how much the global rank grows per unit of that coordinate."""
        strides: dict[str, int] = {}
        stride = 1
        for name in self.order_names:
            strides[name] = stride
            stride *= getattr(self, name)
        return strides

    @property
    def n_hosts(self) -> int:
        return -(-self.world // self.gpus_per_host)

    # -- single ranks ------------------------------------------------------------------------

    def _check_rank(self, rank: int) -> int:
        if not is_int(rank) or not 0 <= rank < self.world:
            raise LayoutError(f"rank {rank!r} is outside the world of {self.world}")
        return int(rank)

    def coordinates(self, rank: int) -> RankCoordinates:
        """The rank's coordinate along each dimension."""
        rank = self._check_rank(rank)
        strides = self.strides
        return RankCoordinates(
            **{name: (rank // strides[name]) % getattr(self, name) for name in DIMENSIONS}
        )

    def rank_of(self, *, tp: int = 0, cp: int = 0, ep: int = 0, dp: int = 0, pp: int = 0) -> int:
        """The global rank at these coordinates (omitted coordinates are 0)."""
        coords = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}
        rank = 0
        for name, value in coords.items():
            size = getattr(self, name)
            if not is_int(value) or not 0 <= value < size:
                raise LayoutError(f"{name} coordinate {value!r} is outside 0..{size - 1}")
            rank += int(value) * self.strides[name]
        return rank

    def stage_of(self, rank: int) -> int:
        """The rank's pipeline stage (its pp coordinate)."""
        rank = self._check_rank(rank)
        return (rank // self.strides["pp"]) % self.pp

    def host_of(self, rank: int) -> str:
        """The host the rank runs on: ``f"h{rank // gpus_per_host:04d}"`` (as topology generators name them)."""
        rank = self._check_rank(rank)
        return host_name(rank // self.gpus_per_host)

    def gpu_index_of(self, rank: int) -> int:
        """The rank's GPU index on its host."""
        return self._check_rank(rank) % self.gpus_per_host

    # -- vectorized views --------------------------------------------------------------------

    def coordinate_array(self) -> np.ndarray:
        """Coordinates of every rank: int64 array of shape (world, 5), columns in :data:`DIMENSIONS` order."""
        ranks = np.arange(self.world, dtype=np.int64)
        columns = [(ranks // self.strides[name]) % getattr(self, name) for name in DIMENSIONS]
        return np.stack(columns, axis=1)

    def replica_of(self, ranks: np.ndarray) -> np.ndarray:
        """Each rank's model replica, as the smallest rank in it (int64, vectorized).

        A replica is every rank that shares the rank's data- and expert-parallel coordinates:
        its tensor, context and pipeline groups whole. Records kept together by replica keep each
        of those groups together (the detector's blocking, transfer and mate features need the
        members' records side by side); only data-parallel groups span replicas.
        """
        ranks = np.asarray(ranks, dtype=np.int64)
        if ranks.size and (int(ranks.min()) < 0 or int(ranks.max()) >= self.world):
            bad = ranks[(ranks < 0) | (ranks >= self.world)][0]
            raise LayoutError(f"rank {int(bad)} is outside the world of {self.world}")
        within = ("tp", "cp", "pp")
        return ranks - sum(((ranks // self.strides[n]) % getattr(self, n)) * self.strides[n] for n in within)

    def _grid(self) -> tuple[np.ndarray, dict[str, int]]:
        """Ranks as an array with one axis per dimension (slowest-varying axis first)."""
        slow_first = self.order_names[::-1]
        grid = np.arange(self.world, dtype=np.int64).reshape([getattr(self, n) for n in slow_first])
        return grid, {name: axis for axis, name in enumerate(slow_first)}

    @cached_property
    def _tables(self) -> dict[str, np.ndarray]:
        """Kind → int64 array (n_groups, group size), rows ordered by smallest rank."""
        grid, axis_of = self._grid()
        tables: dict[str, np.ndarray] = {}
        for kind in KINDS:
            if kind == "embd":
                if self.pp < 2:
                    continue
                ends = np.take(grid, [0, self.pp - 1], axis=axis_of["pp"])
                varying: tuple[str, ...] = ("pp",)
                source = ends
            else:
                if kind == "edp" and self.ep < 2:
                    continue
                varying = _VARYING[kind]
                source = grid
            size = math.prod(source.shape[axis_of[name]] for name in varying)
            if size < 2:
                continue
            var_axes = sorted(axis_of[name] for name in varying)
            fixed_axes = [axis for axis in range(source.ndim) if axis not in var_axes]
            table = source.transpose(fixed_axes + var_axes).reshape(-1, size)
            if kind not in ("pp", "embd"):  # pp and embd stay in stage order (ascending too)
                table = np.sort(table, axis=1)
            table = table[np.argsort(table[:, 0], kind="stable")]
            tables[kind] = np.ascontiguousarray(table)
        return tables

    @cached_property
    def _owners(self) -> dict[str, np.ndarray]:
        """Kind → int64 array (world,): index of the rank's group of that kind, -1 when none."""
        owners: dict[str, np.ndarray] = {}
        for kind, table in self._tables.items():
            owner = np.full(self.world, -1, dtype=np.int64)
            owner[table] = np.arange(len(table), dtype=np.int64)[:, None]
            owners[kind] = owner
        return owners

    @property
    def kinds(self) -> tuple[str, ...]:
        """The group kinds this layout has (those with groups of more than one rank)."""
        return tuple(self._tables)

    def group_array(self, kind: str) -> np.ndarray:
        """The kind's groups as an int64 array (n_groups, group size); row i is ``f"{kind}.{i}"``.

        A kind this layout lacks (see :attr:`kinds`) gives an empty (0, 0) array; an unknown
        kind raises ``LayoutError``.
        """
        if kind not in KINDS:
            raise LayoutError(f"unknown group kind {kind!r} (expected one of {', '.join(KINDS)})")
        table = self._tables.get(kind)
        if table is None:
            return np.empty((0, 0), dtype=np.int64)
        view = table.view()
        view.flags.writeable = False
        return view

    # -- groups ------------------------------------------------------------------------------

    @cached_property
    def _groups(self) -> dict[str, tuple[CommGroup, ...]]:
        return {
            kind: tuple(
                CommGroup(f"{kind}.{index}", kind, tuple(ranks))
                for index, ranks in enumerate(table.tolist())
            )
            for kind, table in self._tables.items()
        }

    def groups(self) -> list[CommGroup]:
        """Every communicator group: by kind in :data:`KINDS` order, then by index."""
        return [group for groups in self._groups.values() for group in groups]

    def groups_of(self, rank: int) -> dict[str, CommGroup]:
        """Kind → the group of that kind the rank belongs to (kinds it is in no group of are absent)."""
        rank = self._check_rank(rank)
        found: dict[str, CommGroup] = {}
        for kind, owner in self._owners.items():
            index = int(owner[rank])
            if index >= 0:
                found[kind] = self._groups[kind][index]
        return found

    # -- serialization -----------------------------------------------------------------------

    def to_dict(self) -> dict:
        """``{"world", "tp", "pp", "dp", "ep", "cp", "order", "gpus_per_host"}``."""
        return {
            "world": self.world,
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "ep": self.ep,
            "cp": self.cp,
            "order": self.order,
            "gpus_per_host": self.gpus_per_host,
        }

"""The job spec: what sleuth knows about a job besides its records (docs/design.md, "Contracts").

A job spec names the job and its world size, optionally its parallel layout, where every rank
runs (rank → host, GPU index) and its communicators (id → kind, member ranks). A records folder
holds it as ``job.json``:

.. code-block:: json

    {"job": "llama-70b", "world": 16,
     "layout": {"tp": 2, "pp": 2, "dp": 4, "ep": 1, "cp": 1,
                "order": "tp-cp-ep-dp-pp", "gpus_per_host": 8},
     "ranks": [{"rank": 0, "host": "h0000", "gpu": 0}, ...],
     "communicators": [{"comm": "tp.0", "kind": "tp", "ranks": [0, 1]}, ...]}

``layout`` is ``null`` when the job's communicators are not a Megatron-style layout; then the
communicators are whatever the job created. Nothing ties ``ranks`` or ``communicators`` to the
layout: a real job names its hosts and may create more groups than the layout implies.
``time_resolution_ns`` (absent: 0, times exact to their clock) is how far a record's times may lie
from when its operator ran: an import that has only a watchdog's discovery times sets it to the
watchdog's period, and no cost under it is reported (``localizer.offline.resolvable``).

The communicator type is :class:`sleuth.layout.CommGroup`; ``Communicator`` here is the same class.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from sleuth.errors import ConfigError, LayoutError
from sleuth.json_fields import json_type
from sleuth.validation import is_int, non_negative_int, positive_int
from sleuth.layout import CommGroup, ParallelLayout
from sleuth.topology.ids import host_name

__all__ = ["JOB_SPEC_FILE", "Communicator", "JobSpec", "RankPlacement"]

#: The job spec's file name inside a records folder.
JOB_SPEC_FILE = "job.json"

#: A communicator (process group): ``comm`` id, ``kind``, member ``ranks``. Owned by sleuth.layout.
Communicator = CommGroup

_LAYOUT_KEYS = ("tp", "pp", "dp", "ep", "cp", "order", "gpus_per_host")


@dataclass(frozen=True)
class RankPlacement:
    """Where one rank runs: its host and the GPU index on that host."""

    rank: int
    host: str
    gpu: int

    def __post_init__(self) -> None:
        non_negative_int("rank", self.rank)
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError(f"rank {self.rank}: host must be a non-empty string, got {self.host!r}")
        non_negative_int(f"rank {self.rank}: gpu", self.gpu)
        object.__setattr__(self, "rank", int(self.rank))
        object.__setattr__(self, "gpu", int(self.gpu))

    def to_dict(self) -> dict:
        return {"rank": self.rank, "host": self.host, "gpu": self.gpu}


@dataclass(frozen=True)
class JobSpec:
    """A job: id, world size, optional layout, rank placements and communicators.

    Validated at construction (``ConfigError`` naming the field in the JSON's terms): every
    rank in ``0..world-1`` is placed exactly once and no two ranks share a (host, gpu); ids
    are unique; every communicator's ranks lie inside the world; a layout's world matches.
    ``placements`` is stored in rank order, so ``placements[r].rank == r``.
    """

    job: str
    world: int
    layout: ParallelLayout | None
    placements: tuple[RankPlacement, ...]
    communicators: tuple[Communicator, ...]
    time_resolution_ns: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.job, str) or not self.job:
            raise ConfigError(f"job: must be a non-empty string, got {self.job!r}")
        world = positive_int("world:", self.world)
        object.__setattr__(self, "world", world)
        object.__setattr__(self, "time_resolution_ns", non_negative_int("time_resolution_ns:", self.time_resolution_ns))
        if self.layout is not None:
            if not isinstance(self.layout, ParallelLayout):
                raise ConfigError(f"layout: must be a ParallelLayout or None, got {type(self.layout).__name__}")
            if self.layout.world != world:
                raise ConfigError(f"layout: its world size {self.layout.world} is not the job's world of {world}")

        placements = tuple(self.placements)
        by_rank: list[RankPlacement | None] = [None] * world
        position_of: dict[int, int] = {}
        devices: dict[tuple[str, int], int] = {}
        for position, placement in enumerate(placements):
            if not isinstance(placement, RankPlacement):
                raise ConfigError(f"ranks[{position}]: must be a RankPlacement, got {type(placement).__name__}")
            rank = placement.rank
            if rank >= world:
                raise ConfigError(f"ranks[{position}]: rank {rank} is outside the world of {world}")
            if by_rank[rank] is not None:
                raise ConfigError(f"ranks[{position}]: rank {rank} is placed twice (also ranks[{position_of[rank]}])")
            device = (placement.host, placement.gpu)
            if device in devices:
                raise ConfigError(
                    f"ranks[{position}]: rank {rank} is on host {placement.host!r} gpu {placement.gpu}, "
                    f"like rank {devices[device]}"
                )
            by_rank[rank] = placement
            position_of[rank] = position
            devices[device] = rank
        missing = [rank for rank, placement in enumerate(by_rank) if placement is None]
        if missing:
            shown = ", ".join(str(rank) for rank in missing[:5]) + (", ..." if len(missing) > 5 else "")
            raise ConfigError(f"ranks: {len(missing)} of the world's {world} ranks are not placed ({shown})")
        object.__setattr__(self, "placements", tuple(by_rank))

        communicators = tuple(self.communicators)
        ids: dict[str, int] = {}
        for position, communicator in enumerate(communicators):
            if not isinstance(communicator, CommGroup):
                raise ConfigError(
                    f"communicators[{position}]: must be a Communicator, got {type(communicator).__name__}"
                )
            if communicator.comm in ids:
                raise ConfigError(
                    f"communicators[{position}].comm: id {communicator.comm!r} is used twice "
                    f"(also communicators[{ids[communicator.comm]}])"
                )
            ids[communicator.comm] = position
            if max(communicator.ranks) >= world:
                index = next(i for i, rank in enumerate(communicator.ranks) if rank >= world)
                raise ConfigError(
                    f"communicators[{position}].ranks[{index}]: rank {communicator.ranks[index]} "
                    f"is outside the world of {world}"
                )
        object.__setattr__(self, "communicators", communicators)

    @classmethod
    def from_layout(cls, job: str, layout: ParallelLayout) -> JobSpec:
        """The spec of a job laid out by ``layout``: its hosts, GPU indices and groups."""
        placements = tuple(
            RankPlacement(rank, host_name(rank // layout.gpus_per_host), rank % layout.gpus_per_host)
            for rank in range(layout.world)
        )
        return cls(job, layout.world, layout, placements, tuple(layout.groups()))

    # -- lookups -----------------------------------------------------------------------------

    @cached_property
    def _by_id(self) -> dict[str, Communicator]:
        return {communicator.comm: communicator for communicator in self.communicators}

    @cached_property
    def _by_rank(self) -> list[list[Communicator]]:
        members: list[list[Communicator]] = [[] for _ in range(self.world)]
        for communicator in self.communicators:
            for rank in communicator.ranks:
                members[rank].append(communicator)
        return members

    def communicator(self, comm: str) -> Communicator:
        """The communicator with this id; ``KeyError`` when there is none."""
        try:
            return self._by_id[comm]
        except KeyError:
            raise KeyError(f"job {self.job}: no communicator {comm!r}") from None

    def communicators_of(self, rank: int) -> tuple[Communicator, ...]:
        """The communicators the rank is a member of, in spec order."""
        return tuple(self._by_rank[self._rank_index(rank)])

    def placement(self, rank: int) -> RankPlacement:
        """Where the rank runs."""
        return self.placements[self._rank_index(rank)]

    def _rank_index(self, rank: int) -> int:
        if not is_int(rank) or not 0 <= rank < self.world:
            raise KeyError(f"job {self.job}: rank {rank!r} is outside the world of {self.world}")
        return int(rank)

    # -- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The JSON object (see the module docstring); ``from_dict`` inverts it exactly."""
        layout = None
        if self.layout is not None:
            layout = {key: value for key, value in self.layout.to_dict().items() if key != "world"}
        return {
            "job": self.job,
            "world": self.world,
            "layout": layout,
            "ranks": [placement.to_dict() for placement in self.placements],
            "communicators": [communicator.to_dict() for communicator in self.communicators],
        } | ({"time_resolution_ns": self.time_resolution_ns} if self.time_resolution_ns else {})

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = JOB_SPEC_FILE) -> JobSpec:
        """A spec from its JSON object; ``ConfigError`` ``"<source>: <field>: <problem>"`` when invalid."""
        try:
            return cls._parse(data)
        except (ConfigError, LayoutError) as error:
            raise ConfigError(f"{source}: {error}") from error

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = JOB_SPEC_FILE) -> JobSpec:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ConfigError(f"{source}: not valid JSON: {error}") from None
        return cls.from_dict(data, source=source)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> JobSpec:
        """Read a spec file, or ``job.json`` inside a records folder."""
        path = Path(path)
        if path.is_dir():
            path = path / JOB_SPEC_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"{path}: cannot read the job spec: {error.strerror or error}") from None
        return cls.from_json(text, source=str(path))

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the spec to a file, or as ``job.json`` inside an existing folder; returns the file."""
        path = Path(path)
        if path.is_dir():
            path = path / JOB_SPEC_FILE
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path

    @classmethod
    def _parse(cls, data: Any) -> JobSpec:
        top = _mapping(data, "job spec")
        job = _field(top, "job", str, "job")
        world = positive_int("world:", _field(top, "world", int, "world"))

        layout = None
        raw_layout = _require(top, "layout", "layout")
        if raw_layout is not None:
            fields = _mapping(raw_layout, "layout")
            options: dict[str, Any] = {}
            for key in _LAYOUT_KEYS:
                expected = str if key == "order" else int
                if key in fields:
                    options[key] = _field(fields, key, expected, f"layout.{key}")
                elif key in ("tp", "pp", "dp"):
                    raise ConfigError(f"layout.{key}: missing")
            unknown = sorted(set(fields) - set(_LAYOUT_KEYS))
            if unknown:
                raise ConfigError(f"layout.{unknown[0]}: unknown field")
            try:
                layout = ParallelLayout(world=world, **options)
            except LayoutError as error:
                raise ConfigError(f"layout: {error}") from None

        placements = []
        for position, item in enumerate(_sequence(_require(top, "ranks", "ranks"), "ranks")):
            where = f"ranks[{position}]"
            entry = _mapping(item, where)
            rank = _field(entry, "rank", int, f"{where}.rank")
            host = _field(entry, "host", str, f"{where}.host")
            gpu = _field(entry, "gpu", int, f"{where}.gpu")
            if rank < 0:
                raise ConfigError(f"{where}.rank: rank {rank} is outside the world of {world}")
            if not host:
                raise ConfigError(f"{where}.host: must be a non-empty string")
            non_negative_int(f"{where}.gpu:", gpu)
            placements.append(RankPlacement(rank, host, gpu))

        communicators = []
        raw_comms = _sequence(_require(top, "communicators", "communicators"), "communicators")
        for position, item in enumerate(raw_comms):
            where = f"communicators[{position}]"
            entry = _mapping(item, where)
            comm = _field(entry, "comm", str, f"{where}.comm")
            kind = _field(entry, "kind", str, f"{where}.kind")
            if not comm:
                raise ConfigError(f"{where}.comm: must be a non-empty string")
            if not kind:
                raise ConfigError(f"{where}.kind: must be a non-empty string")
            ranks = _sequence(_require(entry, "ranks", f"{where}.ranks"), f"{where}.ranks")
            if not ranks:
                raise ConfigError(f"{where}.ranks: has no ranks")
            seen: dict[int, int] = {}
            for index, rank in enumerate(ranks):
                if not is_int(rank):
                    raise ConfigError(f"{where}.ranks[{index}]: must be an integer, got {rank!r}")
                if not 0 <= rank < world:
                    raise ConfigError(f"{where}.ranks[{index}]: rank {rank} is outside the world of {world}")
                if rank in seen:
                    raise ConfigError(f"{where}.ranks[{index}]: rank {rank} is listed twice (also ranks[{seen[rank]}])")
                seen[rank] = index
            communicators.append(CommGroup(comm, kind, tuple(ranks)))

        resolution = _field(top, "time_resolution_ns", int, "time_resolution_ns") if "time_resolution_ns" in top else 0
        return cls(job, world, layout, tuple(placements), tuple(communicators), resolution)


# -- JSON field helpers ----------------------------------------------------------------------


_TYPE_NAMES = {str: "a string", int: "an integer"}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be an object, got {json_type(value)}")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{where}: must be an array, got {json_type(value)}")
    return list(value)


def _require(entry: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in entry:
        raise ConfigError(f"{where}: missing")
    return entry[key]


def _field(entry: Mapping[str, Any], key: str, expected: type, where: str) -> Any:
    value = _require(entry, key, where)
    ok = is_int(value) if expected is int else isinstance(value, expected)
    if not ok:
        shown = "" if value is None else f" {value!r}"
        raise ConfigError(f"{where}: must be {_TYPE_NAMES[expected]}, got {json_type(value)}{shown}")
    return int(value) if expected is int else value

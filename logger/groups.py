"""Communicator ids that every member derives alike, and the job spec assembled from all ranks.

A communicator's id is a hash of its member list in group-rank order (``c2-1a2b3c4d``), so every
member names it the same without talking to the others. Two groups with the same members (a job
may create a gloo and an NCCL group over one set of ranks) are told apart by torch's group name,
which ``new_group`` assigns identically on every rank.

The job spec needs every rank's host and every rank's groups. Each rank publishes its own
placement and the groups it has seen in the torch.distributed store; rank 0 merges them. An entry
is small (member lists as runs, ``sleuth.rank_runs``: the world group of 16,384 ranks is one run),
and each publication appends the rank to a change log (``change_key(job, n)`` for the n-th, n from
the counter ``version_key``), so that rank 0 reads only the entries that changed since its last
merge: a new group costs rank 0 a read per rank that saw it, not one per rank of the job.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sleuth.jobspec import Communicator, JobSpec, RankPlacement
from sleuth.logger.naming import infer_layout
from sleuth.rank_runs import expand, runs

#: Store keys: one per rank, a counter bumped whenever any rank publishes, and the change log.
KEY_PREFIX = "sleuth/logger"


def comm_id(ranks: Sequence[int], *, qualifier: str = "") -> str:
    """The id of the communicator over ``ranks`` (group-rank order), the same on every member."""
    digest = hashlib.blake2b(",".join(map(str, ranks)).encode(), digest_size=4).hexdigest()
    return qualified(f"c{len(ranks)}-{digest}", qualifier)


def qualified(comm: str, qualifier: str) -> str:
    """``comm`` told apart from another communicator of the same id by ``qualifier``."""
    return f"{comm}~{qualifier}" if qualifier else comm


@dataclass
class GroupInfo:
    """What the hooks keep per process group: its code in the recorder and its counters."""

    code: int
    comm: str
    kind: str
    ranks: tuple[int, ...]
    next_seq: int = 0
    # P2P operators count per (direction, peer): send k from a to b matches recv k on b from a.
    p2p_seq: dict[tuple[int, int], int] = field(default_factory=dict)


def rank_key(job: str, rank: int) -> str:
    return f"{KEY_PREFIX}/{job}/rank/{rank}"


def version_key(job: str) -> str:
    return f"{KEY_PREFIX}/{job}/version"


def change_key(job: str, number: int) -> str:
    """The change log's ``number``-th entry (from 1): the rank that published then."""
    return f"{KEY_PREFIX}/{job}/change/{number}"


def get_many(store: Any, keys: list[str]) -> list[bytes]:
    """The values of ``keys``, in one round trip where the store can (torch >= 2.5)."""
    if not keys:
        return []
    multi_get = getattr(store, "multi_get", None)
    return list(multi_get(keys)) if multi_get is not None else [store.get(key) for key in keys]


def rank_entry(host: str, gpu: int | None, groups: Iterable[GroupInfo]) -> bytes:
    """What one rank publishes: its placement and the communicators it has seen (members as runs)."""
    return json.dumps(
        {"host": host, "gpu": gpu, "groups": [[g.comm, g.kind, runs(g.ranks)] for g in groups]},
        separators=(",", ":"),
    ).encode()


def merge_spec(job: str, world: int, entries: Sequence[bytes]) -> JobSpec:
    """The job spec from every rank's entry (``entries[r]`` is rank r's), with the parallel
    layout its communicators imply (``naming.infer_layout``; None when they imply none).

    A rank without a known GPU index gets its position among the ranks on its host, and so does
    one whose index a lower rank of its host claimed already: several launchers on one host (each
    counting ``LOCAL_RANK`` from 0) give the same index to processes that are not one device.
    """
    decoded = [json.loads(entry) for entry in entries]
    taken: dict[str, set[int]] = {}
    claimed: list[int | None] = []
    for item in decoded:
        used = taken.setdefault(item["host"], set())
        claimed.append(item["gpu"] if item["gpu"] not in used else None)
        if item["gpu"] is not None:
            used.add(item["gpu"])
    placements = []
    for rank, item in enumerate(decoded):
        gpu = claimed[rank]
        if gpu is None:
            used = taken.setdefault(item["host"], set())
            gpu = next(i for i in range(world + len(used) + 1) if i not in used)
            used.add(gpu)
        placements.append(RankPlacement(rank, item["host"], gpu))
    communicators: dict[str, Communicator] = {}
    for item in decoded:
        for comm, kind, members in item["groups"]:
            if comm not in communicators:
                communicators[comm] = Communicator(comm, kind, expand(members, below=world, where=f"group {comm}"))
    per_host = Counter(placement.host for placement in placements)
    layout = infer_layout(
        [(c.kind, c.ranks) for c in communicators.values()], world, max(per_host.values())
    )
    return JobSpec(job, world, layout, tuple(placements), tuple(communicators.values()))

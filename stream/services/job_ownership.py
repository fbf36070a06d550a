"""Which jobs belong to one member of the localizers' consumer group.

The irregularities topic is keyed by job (``detection.publish.job_key``), so kafka-python's default
partitioner sends all of a job's irregularities to one partition: murmur2 of the key, its sign bit
cleared, modulo the topic's partition count (``kafka.partitioner.DefaultPartitioner``). The member
that partition is assigned to owns the job: its irregular iterations and its what-if rounds alike,
so that one job's incidents are raised by one process and no two race to raise the same slowdown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafka.partitioner import murmur2

from sleuth.errors import ConfigError
from sleuth.stream.detection.publish import job_key
from sleuth.validation import positive_int

__all__ = ["Ownership", "partition_of"]


def partition_of(job: str, partitions: int) -> int:
    """The partition of a ``partitions``-partition topic that a message keyed by ``job`` goes to."""
    return (murmur2(job_key(job)) & 0x7FFFFFFF) % positive_int("partitions", partitions)


@dataclass(frozen=True)
class Ownership:
    """The partitions (of ``partitions``) of the irregularities topic assigned to this member."""

    partitions: int
    owned: frozenset[int]

    def __post_init__(self) -> None:
        positive_int("partitions", self.partitions)
        outside = sorted(p for p in self.owned if not 0 <= p < self.partitions)
        if outside:
            raise ConfigError(f"owned partitions {outside} are outside the topic's {self.partitions}")

    @classmethod
    def of(cls, partitions: int, owned: Iterable[int]) -> Ownership:
        return cls(partitions, frozenset(owned))

    def owns(self, job: str) -> bool:
        """Whether ``job``'s irregularities, and so its what-if rounds, are this member's."""
        return partition_of(job, self.partitions) in self.owned

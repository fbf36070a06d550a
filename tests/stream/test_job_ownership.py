"""A localizer owns the jobs whose irregularities land in its partitions: the partition is the one
kafka-python's default partitioner picks for the job's key."""

from __future__ import annotations

import pytest
from kafka.partitioner import DefaultPartitioner

from sleuth.errors import ConfigError
from sleuth.stream.detection.publish import job_key
from sleuth.stream.services.job_ownership import Ownership, partition_of


class Cluster:
    """The cluster metadata the partitioner reads: one topic of ``partitions`` partitions."""

    def __init__(self, partitions: int) -> None:
        self.partitions = set(range(partitions))

    def topics(self):
        return {"irregularities"}

    def partitions_for_topic(self, topic):
        return self.partitions

    def available_partitions_for_topic(self, topic):
        return self.partitions


@pytest.mark.parametrize("partitions", [1, 2, 3, 8, 12])
def test_a_jobs_partition_is_the_one_the_producer_sends_its_irregularities_to(partitions) -> None:
    jobs = ["a", "job-7", "llama-70b.r2", "ü-unicode", "x" * 41]
    producer = DefaultPartitioner()
    sent = [producer.partition("irregularities", None, job_key(job), None, b"", Cluster(partitions)) for job in jobs]
    assert [partition_of(job, partitions) for job in jobs] == sent


def test_a_member_owns_the_jobs_of_its_partitions_only() -> None:
    jobs = [f"job-{i}" for i in range(20)]
    first, second = Ownership.of(3, [0, 2]), Ownership.of(3, [1])
    assert all(first.owns(job) != second.owns(job) for job in jobs)
    assert not any(Ownership.of(3, []).owns(job) for job in jobs)


@pytest.mark.parametrize(("partitions", "owned", "message"), [
    (0, [], "partitions must be a positive integer, got 0"),
    (True, [], "partitions must be a positive integer, got True"),
    (2, [1, 2, -1], r"owned partitions \[-1, 2\] are outside the topic's 2"),
])
def test_a_bad_assignment_fails_naming_what_is_wrong(partitions, owned, message) -> None:
    with pytest.raises(ConfigError, match=message):
        Ownership.of(partitions, owned)
    if not owned:
        with pytest.raises(ConfigError, match=message):
            partition_of("a", partitions)

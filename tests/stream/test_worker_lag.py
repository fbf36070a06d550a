"""The worker's consumer-lag gauge after a batch: reported for the partitions it still holds, and
a partition a rebalance took while its batch was in flight (another worker joined) is skipped,
not asked about: aiokafka asserts on it, which stopped the worker's agent for good."""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

from sleuth import metrics
from sleuth.settings import Settings
from sleuth.stream.services.worker import Worker

TOPIC = "lag-test-records"


class TP(NamedTuple):  # faust's topic-partition
    topic: str
    partition: int


class Consumer:
    """aiokafka's ``highwater``: refuses a partition not assigned to this consumer."""

    def __init__(self, highwater: dict[TP, int]) -> None:
        self._highwater = highwater

    def assignment(self) -> set[TP]:
        return set(self._highwater)

    def highwater(self, tp: TP) -> int:
        assert tp in self._highwater, "Partition is not assigned"
        return self._highwater[tp]


def test_lag_is_reported_for_held_partitions_and_a_revoked_one_is_skipped() -> None:
    held, revoked = TP(TOPIC, 0), TP(TOPIC, 1)
    worker = Worker(Settings.from_env(), client=None)
    worker._app = SimpleNamespace(consumer=Consumer({held: 50}))
    events = [SimpleNamespace(message=SimpleNamespace(tp=tp, offset=offset))
              for tp, offset in [(held, 40), (held, 44), (revoked, 7)]]
    worker._record_lag(events)
    assert metrics.CONSUMER_LAG.labels(topic=TOPIC, partition="0")._value.get() == 50 - 44 - 1

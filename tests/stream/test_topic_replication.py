"""Topic replication as settings: SLEUTH_KAFKA_REPLICATION and SLEUTH_KAFKA_MIN_INSYNC_REPLICAS reach the topics
sleuth creates. One broker holds one replica: a second is refused here, and a cluster is where it takes."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from sleuth.errors import ConfigError
from sleuth.settings import Settings
from sleuth.stream import connect

from ..conftest import Services


def test_a_topic_gets_min_insync_replicas_and_a_minimum_above_the_replicas_is_refused_before_kafka_sees_it() -> None:
    settings = Settings.from_env({"SLEUTH_KAFKA_REPLICATION": "3", "SLEUTH_KAFKA_MIN_INSYNC_REPLICAS": "2"})
    assert connect.topic_configs(settings, compacted=True) == {"min.insync.replicas": "2", "cleanup.policy": "compact"}
    with pytest.raises(ConfigError, match="SLEUTH_KAFKA_MIN_INSYNC_REPLICAS"):
        connect.topic_configs(dataclasses.replace(settings, kafka_min_insync=4), compacted=False)


@pytest.mark.services
def test_the_broker_takes_the_settings_and_one_broker_refuses_a_second_replica(services: Services) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import InvalidReplicationFactorError

    host, port = services.kafka_bootstrap.rsplit(":", 1)
    settings = dataclasses.replace(Settings(), kafka_host=host, kafka_port=int(port))
    topic = f"sleuth-replication-{uuid.uuid4().hex[:10]}"
    connect.ensure_topics(settings, {topic: 1})
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, ["min.insync.replicas"])])
        assert described["topic"][topic]["min.insync.replicas"]["value"] == "1"
        with pytest.raises(InvalidReplicationFactorError):
            connect.ensure_topics(dataclasses.replace(settings, kafka_replication=2, kafka_min_insync=2), {topic + "-2": 1})
        admin.delete_topics([topic])
    finally:
        admin.close()

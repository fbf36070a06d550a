"""``sleuth worker``: consume ``sleuth.records`` into ClickHouse until SIGTERM or Ctrl-C.

The worker runs the stream detector on every batch: abnormal operators go to ``abnormal_ops``,
irregular iterations to the ``SLEUTH_IRREGULARITIES_TOPIC`` Kafka topic.
"""

from __future__ import annotations

import argparse

from sleuth.cli.service import configure_logging, stop_on_signals
from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("worker", help="run a stream worker: Kafka records into ClickHouse, with detection")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth import metrics
    from sleuth.storage import schema
    from sleuth.stream import connect
    from sleuth.stream.detection.deployed import worker_detectors
    from sleuth.stream.detection.publish import IrregularityPublisher
    from sleuth.stream.services.worker import Worker

    configure_logging()
    settings = Settings.from_env()
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)  # idempotent: safe from every worker
    connect.ensure_topics(settings, {settings.records_topic: settings.records_partitions,
                                     settings.irregularities_topic: settings.records_partitions})
    # Load the model before joining the group: a bad model file fails here, naming the setting.
    detectors = worker_detectors(settings)
    publisher = IrregularityPublisher(settings)
    stop = stop_on_signals()
    worker = Worker(settings, client=client, detectors=detectors, publish=publisher)
    port = metrics.serve(settings.worker_metrics_port)
    print(f"worker consuming {settings.records_topic} as {settings.worker_group}"
          + (f"; metrics on :{port}" if port else ""), flush=True)
    worker.run(stop)
    publisher.close()
    client.disconnect()
    return 0

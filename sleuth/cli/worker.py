"""``sleuth worker``: consume ``sleuth.records`` into ClickHouse until SIGTERM or Ctrl-C.

The worker runs the stream detector on every batch: abnormal operators go to ``abnormal_ops``,
irregular iterations to the ``SLEUTH_IRREGULARITIES_TOPIC`` Kafka topic.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("worker", help="run a stream worker: Kafka records into ClickHouse, with detection")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth.stream import connect, schema
    from sleuth.stream.detection import StreamDetector, load, load_default_model
    from sleuth.stream.detection.publish import IrregularityPublisher
    from sleuth.stream.worker import Worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("kafka", "aiokafka", "faust", "mode"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = Settings.from_env()
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)  # idempotent: safe from every worker
    connect.ensure_topics(settings, {settings.records_topic: settings.records_partitions,
                                     settings.irregularities_topic: settings.records_partitions})
    # Load the model before joining the group: a bad model file fails here, naming the setting.
    model = load(settings.detect_model) if settings.detect_model else load_default_model()
    publisher = IrregularityPublisher(settings)
    detector = StreamDetector(model, publish=publisher)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker = Worker(settings, client=client, detectors=[detector])
    print(f"worker consuming {settings.records_topic} as {settings.worker_group}", flush=True)
    worker.run(stop)
    publisher.close()
    client.disconnect()
    return 0

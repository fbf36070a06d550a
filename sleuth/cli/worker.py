"""``sleuth worker``: consume ``sleuth.records`` into ClickHouse until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("worker", help="run a stream worker: Kafka records into ClickHouse")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth.stream import connect, schema
    from sleuth.stream.worker import Worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("kafka", "aiokafka", "faust", "mode"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = Settings.from_env()
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)  # idempotent: safe from every worker
    connect.ensure_topics(settings, {settings.records_topic: settings.records_partitions})
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker = Worker(settings, client=client)
    print(f"worker consuming {settings.records_topic} as {settings.worker_group}", flush=True)
    worker.run(stop)
    client.disconnect()
    return 0

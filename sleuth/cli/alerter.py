"""``sleuth alerter``: incidents from Kafka into alerts (log, Kafka, Alertmanager, webhooks) until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse

from sleuth.cli.service import configure_logging, stop_on_signals
from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("alerter", help="run the alerter: incidents into Alertmanager-format alerts",
                                   description=__doc__)
    parser.add_argument("--check-s", type=float, default=5.0,
                        help="seconds between two checks of the open alerts' jobs for resolution (default 5)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from kafka import KafkaProducer

    from sleuth import metrics
    from sleuth.oncall.service import AlerterService, build_alerter
    from sleuth.storage import schema
    from sleuth.stream import connect

    configure_logging()
    settings = Settings.from_env()
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)
    connect.ensure_topics(settings, {settings.incidents_topic: settings.records_partitions,
                                     settings.irregularities_topic: settings.records_partitions,
                                     settings.alerts_topic: 1})
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", retries=5)
    alerter = build_alerter(settings, client=client, producer=producer)
    port = metrics.serve(settings.alerter_metrics_port)
    stop = stop_on_signals()
    print(f"alerter consuming {settings.incidents_topic} as {settings.alerter_group}; "
          f"{len(alerter.open)} open alerts; Alertmanagers: {settings.alertmanager_urls or 'none'}; "
          f"webhooks: {settings.alert_webhook_urls or 'none'}"
          + (f"; metrics on :{port}" if port else ""), flush=True)
    AlerterService(settings, alerter=alerter, client=client, check_s=args.check_s).run(stop)
    producer.close(timeout=10)
    client.disconnect()
    return 0

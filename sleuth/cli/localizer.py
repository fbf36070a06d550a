"""``sleuth localizer``: the streaming localizer, until SIGTERM or Ctrl-C.

It consumes ``SLEUTH_IRREGULARITIES_TOPIC`` (what the workers' detection publishes), localizes
each job's irregular iterations over the records in ClickHouse, and raises incidents to
``SLEUTH_INCIDENTS_TOPIC`` and the ClickHouse ``incidents``, ``incident_details``, ``suspects``
and ``traversals`` tables (see ``sleuth.stream.services.localizer_agent``). ``sleuth localize`` is the
offline twin, on Parquet files.
"""

from __future__ import annotations

import argparse

from sleuth.cli.service import configure_logging, stop_on_signals
from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "localizer", help="run the streaming localizer: irregularities from Kafka into incidents",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth import metrics
    from sleuth.storage import schema
    from sleuth.stream import connect
    from sleuth.stream.services.localizer_agent import LocalizerAgent, cluster_topology

    configure_logging()
    settings = Settings.from_env()
    topology = cluster_topology(settings)  # a bad file fails here, before joining the group
    client = connect.clickhouse_client(settings)
    schema.migrate(client, settings.clickhouse_database)  # idempotent
    connect.ensure_topics(settings, {settings.irregularities_topic: settings.records_partitions,
                                     settings.incidents_topic: 1})
    stop = stop_on_signals()
    agent = LocalizerAgent(settings, client=client, topology=topology,
                           on_incident=lambda _incident, seconds: metrics.LOCALIZATION_SECONDS.observe(seconds))
    port = metrics.serve(settings.localizer_metrics_port)
    print(f"localizer consuming {settings.irregularities_topic} as {settings.localizer_group}, "
          f"incidents to {settings.incidents_topic}" + (f"; metrics on :{port}" if port else ""), flush=True)
    agent.run(stop)
    client.disconnect()
    return 0

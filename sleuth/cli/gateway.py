"""``sleuth gateway``: run the Collector gRPC service until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse

from sleuth.cli.service import configure_logging, stop_on_signals
from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("gateway", help="run the gRPC gateway (Collector) into Kafka")
    parser.add_argument("--port", type=int, help="listen port (default: SLEUTH_GATEWAY_PORT)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import dataclasses

    from sleuth import metrics
    from sleuth.stream import connect
    from sleuth.stream.ingest import gateway

    configure_logging()
    settings = Settings.from_env()
    if args.port:
        settings = dataclasses.replace(settings, gateway_port=args.port)
    connect.ensure_gateway_topics(settings)
    server, port, collector = gateway.create(settings)
    stop = stop_on_signals()
    server.start()
    metrics_port = metrics.serve(settings.gateway_metrics_port)
    print(f"gateway listening on {settings.gateway_host}:{port}"
          + (f"; metrics on :{metrics_port}" if metrics_port else ""), flush=True)
    stop.wait()
    # Let running streams finish their acknowledgements, then flush what Kafka still holds.
    server.stop(grace=10)
    return 0

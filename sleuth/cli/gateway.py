"""``sleuth gateway``: run the Collector gRPC service until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("gateway", help="run the gRPC gateway (Collector) into Kafka")
    parser.add_argument("--port", type=int, help="listen port (default: SLEUTH_GATEWAY_PORT)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import dataclasses

    from sleuth.stream import connect, gateway

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = Settings.from_env()
    if args.port:
        settings = dataclasses.replace(settings, gateway_port=args.port)
    connect.ensure_gateway_topics(settings)
    server, port, collector = gateway.create(settings)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    print(f"gateway listening on {settings.gateway_host}:{port}", flush=True)
    stop.wait()
    # Let running streams finish their acknowledgements, then flush what Kafka still holds.
    server.stop(grace=10).wait()
    collector.publisher.close()
    return 0

"""What the long-running service commands (gateway, worker, localizer, alerter) share: logging and a stop on SIGTERM or Ctrl-C."""

from __future__ import annotations

import logging
import signal
import threading


def configure_logging() -> None:
    """Ours at INFO; the Kafka and faust clients only at WARNING (they log every rebalance step)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("kafka", "aiokafka", "faust", "mode"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, for a service's ``run(stop)``."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop

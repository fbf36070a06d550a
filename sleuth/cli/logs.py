"""Logging of the long-running service commands (gateway, worker, alerter), set up the same way."""

from __future__ import annotations

import logging


def configure_service_logging() -> None:
    """INFO lines with time and logger name; the Kafka and faust libraries only from WARNING on."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("kafka", "aiokafka", "faust", "mode"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

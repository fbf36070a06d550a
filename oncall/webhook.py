"""POSTing alerts as JSON (webhooks, Alertmanager's API), with retries and exponential backoff (urllib3's ``Retry``)."""

from __future__ import annotations

import json
import logging
from typing import Any

_log = logging.getLogger(__name__)

__all__ = ["RETRIED_STATUS", "WebhookSender"]

RETRIED_STATUS = frozenset({408, 429, *range(500, 600)})


class WebhookSender:
    """Sends one JSON body to every configured URL; ``send`` returns the URLs that never took it.

    Retried: connection errors, timeouts, 5xx answers (the receiver or a proxy in front of it is
    down or overloaded), 408 (request timeout) and 429 (too many requests), ``retries`` times,
    waiting ``backoff_s``, 2 x ``backoff_s``, ... (a ``Retry-After`` header is not obeyed: it could
    hold the alerter for hours). Any other 4xx is not retried: the receiver refuses the payload
    (Alertmanager: 400 for a malformed alert, 404 or 410 for an API it does not serve) and will
    refuse it again.
    """

    def __init__(self, urls: list[str], *, retries: int = 5, backoff_s: float = 0.5, timeout_s: float = 10.0) -> None:
        from urllib3 import PoolManager
        from urllib3.util.retry import Retry

        self.urls = list(urls)
        self.retry = Retry(total=retries, connect=retries, read=retries, status=retries, backoff_factor=backoff_s,
                           status_forcelist=RETRIED_STATUS, allowed_methods=None, raise_on_status=False,
                           respect_retry_after_header=False)
        self._pool = PoolManager(timeout=timeout_s, headers={"Content-Type": "application/json"})

    def send(self, payload: Any) -> list[str]:
        from urllib3.exceptions import HTTPError

        body = json.dumps(payload, separators=(",", ":")).encode()
        failed = []
        for url in self.urls:
            try:
                response = self._pool.request("POST", url, body=body, retries=self.retry)
            except HTTPError as error:  # retries exhausted on connection errors
                _log.error("webhook %s unreachable after retries: %s", url, error)
                failed.append(url)
                continue
            if response.status >= 300:
                _log.error("webhook %s answered %d: %s", url, response.status, response.data[:200])
                failed.append(url)
        return failed

    def close(self) -> None:
        self._pool.clear()

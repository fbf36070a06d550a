"""Retries of alert POSTs against a real HTTP receiver on 127.0.0.1: which answers are retried (no services)."""

from __future__ import annotations

import pytest

from sleuth.oncall.webhook import WebhookSender

RETRIES = 3


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_server_trouble_is_retried_until_it_passes(receiver, status) -> None:
    receiver.fail_first, receiver.fail_status = RETRIES, status
    assert WebhookSender([receiver.url], retries=RETRIES, backoff_s=0.01).send([{"a": 1}]) == []
    assert receiver.attempts == RETRIES + 1 and receiver.bodies == [[{"a": 1}]]


@pytest.mark.parametrize("status", [503, 429])
def test_server_trouble_that_lasts_fails_after_the_retries(receiver, status) -> None:
    receiver.fail_first, receiver.fail_status = RETRIES + 5, status
    assert WebhookSender([receiver.url], retries=RETRIES, backoff_s=0.01).send({"a": 1}) == [receiver.url]
    assert receiver.attempts == RETRIES + 1 and receiver.bodies == []


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
def test_a_refusal_is_not_retried(receiver, status) -> None:
    receiver.fail_first, receiver.fail_status = 1, status
    assert WebhookSender([receiver.url], retries=RETRIES, backoff_s=0.01).send({"a": 1}) == [receiver.url]
    assert receiver.attempts == 1  # the same payload would be refused again


def test_an_unreachable_receiver_fails_after_the_retries(receiver) -> None:
    url = "http://127.0.0.1:9/alerts"  # discard port: nothing listens
    sender = WebhookSender([url, receiver.url], retries=1, backoff_s=0.01)
    assert sender.send({"a": 1}) == [url]
    assert receiver.bodies == [{"a": 1}]  # the other receiver still got it

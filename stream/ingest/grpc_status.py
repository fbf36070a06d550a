"""The one place where sleuth's errors become gRPC status codes.

Servicers run their body inside ``async with status_from_errors(context)``; nothing else calls
``context.abort`` with a status of its own choosing, so a client sees the same code for the same
kind of failure from every RPC. The client's side of the same contract is here too: which codes
are worth a retry (``RETRYABLE``) and how much of a failed stream was confirmed (``accepted_of``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from sleuth.errors import (
    BatchRejected,
    ConfigError,
    Forbidden,
    NotRegistered,
    Overloaded,
    RecordError,
    ServiceError,
    SleuthError,
    Unauthenticated,
)

_log = logging.getLogger(__name__)

# Most specific first: the first matching class decides.
_CODES: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (Forbidden, grpc.StatusCode.PERMISSION_DENIED),
    (NotRegistered, grpc.StatusCode.FAILED_PRECONDITION),
    (BatchRejected, grpc.StatusCode.INVALID_ARGUMENT),
    (RecordError, grpc.StatusCode.INVALID_ARGUMENT),
    (ConfigError, grpc.StatusCode.INVALID_ARGUMENT),
    (Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (ServiceError, grpc.StatusCode.UNAVAILABLE),
    (SleuthError, grpc.StatusCode.INTERNAL),
)


def status_of(error: BaseException) -> grpc.StatusCode:
    """The status code for ``error``; INTERNAL for anything unexpected."""
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.INTERNAL


@contextlib.asynccontextmanager
async def status_from_errors(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
    """Abort the RPC with the status of any error raised inside, its message as the details."""
    try:
        yield
    except SleuthError as error:
        await context.abort(status_of(error), str(error))
    except Exception as error:  # a bug: keep serving others, tell this caller it was ours
        _log.exception("unexpected error in RPC")
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}")


#: The codes a client retries, because the same request can succeed later: the gRPC library's
#: transient ones (connection lost, deadline, flow control, cancelled) and the retryable ones of the
#: OpenTelemetry exporter specification (OTLP, "Failures"), whose client is a telemetry sender like
#: the logger. Every other code (INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND,
#: FAILED_PRECONDITION, UNIMPLEMENTED, INTERNAL, UNKNOWN ...) answers the same request the same way
#: each time: the client drops the request and counts it rather than resending it forever.
RETRYABLE = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.DATA_LOSS,
})

_ACCEPTED = "accepted"


def retryable(error: grpc.RpcError) -> bool:
    """Whether the request that failed with ``error`` may succeed when sent again."""
    code = error.code() if hasattr(error, "code") else None
    return code is None or code in RETRYABLE


def accepted_of(error: grpc.RpcError) -> int | None:
    """How many messages of a failed client stream the server confirmed before the one it refused
    (``trailing(context, accepted=...)``); None when it did not say, e.g. the whole call was refused."""
    metadata = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in metadata or ():
        if key == f"sleuth-{_ACCEPTED}":
            try:
                return max(0, int(value))
            except ValueError:
                return None
    return None


def trailing(context: grpc.ServicerContext, **values: Any) -> None:
    """Trailing metadata ``sleuth-<name>: <value>``, e.g. how much a stream got in before failing."""
    context.set_trailing_metadata(tuple((f"sleuth-{k}", str(v)) for k, v in values.items()))

"""Per-job bearer tokens: a token for job A can write job A, its restarted attempts ``A.r<N>``
(``sleuth.logger.identity``: a restart keeps the launcher's job id and the logger appends the
attempt), and nothing else.

Tokens come from a JSON file ``{"<job>": "<token>", ...}`` (setting ``SLEUTH_GATEWAY_TOKENS``).
Callers send ``authorization: Bearer <token>`` as gRPC metadata. With no tokens file the gateway
runs open, which is meant for a loopback-only development stack. ``sleuth serve`` checks its one
token (``SLEUTH_SERVE_TOKEN``) in the HTTP ``Authorization`` header with the same two functions,
``presented_token`` and ``same_token``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from sleuth.errors import ConfigError, Forbidden, Unauthenticated
from sleuth.logger.identity import job_of_attempt

_HEADER = "authorization"
_SCHEME = "bearer "
#: Shortest token accepted: 16 random characters are beyond guessing through a network service.
MIN_TOKEN_CHARS = 16


def check_token(token: object, *, name: str) -> None:
    """``ConfigError`` naming ``name`` unless ``token`` is a string long enough to be a secret."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{name} needs a token string of at least {MIN_TOKEN_CHARS} characters")


def presented_token(headers: Iterable[tuple[str, str | bytes]]) -> str:
    """The token of an ``authorization: Bearer <token>`` header (gRPC metadata or HTTP headers),
    or ``Unauthenticated``."""
    presented = None
    for key, value in headers:
        if key.lower() == _HEADER:
            presented = value.decode() if isinstance(value, bytes) else value
            break
    if presented is None or not presented.lower().startswith(_SCHEME):
        raise Unauthenticated("authorization: expected metadata 'authorization: Bearer <token>'")
    return presented[len(_SCHEME):].strip()


def same_token(presented: str, known: str) -> bool:
    # Constant-time comparison: response timing must not reveal a token's prefix.
    return hmac.compare_digest(presented.encode(), known.encode())


class TokenBook:
    """Which job each token may write; ``None`` as the book means authentication is off."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        for job, token in tokens.items():
            if not isinstance(job, str) or not job:
                raise ConfigError(f"tokens: job {job!r} is not a job name")
            check_token(token, name=f"tokens: job {job!r}")
        if len(set(tokens.values())) != len(tokens):
            raise ConfigError("tokens: two jobs share one token, so neither could be told apart")
        self._tokens = dict(tokens)

    @classmethod
    def read(cls, path: str | Path) -> TokenBook:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise ConfigError(f"SLEUTH_GATEWAY_TOKENS={str(path)!r}: {error}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"SLEUTH_GATEWAY_TOKENS={str(path)!r}: expected a JSON object job -> token")
        return cls(data)

    def job_of(self, metadata: Iterable[tuple[str, str | bytes]]) -> str:
        """The job whose token the caller presented, or ``Unauthenticated``."""
        token = presented_token(metadata)
        for job, known in self._tokens.items():
            if same_token(token, known):
                return job
        raise Unauthenticated("authorization: unknown token")


def check_jobs(caller: str | None, jobs: Iterable[str]) -> None:
    """``Forbidden`` unless every job is the caller's or an attempt of it (``caller`` None:
    authentication is off)."""
    if caller is None:
        return
    # A restarted attempt is the same training run under the same launcher credentials: it keeps the token.
    others = sorted(job for job in set(jobs) if job != caller and job_of_attempt(job) != caller)
    if others:
        raise Forbidden(f"job: the token is for job {caller!r}, not for {others}")

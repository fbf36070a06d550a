"""Per-job bearer tokens: a token for job A can write job A and nothing else.

Tokens come from a JSON file ``{"<job>": "<token>", ...}`` (setting ``SLEUTH_GATEWAY_TOKENS``).
Callers send ``authorization: Bearer <token>`` as gRPC metadata. With no tokens file the gateway
runs open, which is meant for a loopback-only development stack.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from sleuth.errors import ConfigError, Forbidden, Unauthenticated

_HEADER = "authorization"
_SCHEME = "bearer "


class TokenBook:
    """Which job each token may write; ``None`` as the book means authentication is off."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        for job, token in tokens.items():
            if not isinstance(job, str) or not job or not isinstance(token, str) or len(token) < 16:
                raise ConfigError(f"tokens: job {job!r} needs a token string of at least 16 characters")
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
        presented = None
        for key, value in metadata:
            if key.lower() == _HEADER:
                presented = value.decode() if isinstance(value, bytes) else value
                break
        if presented is None or not presented.lower().startswith(_SCHEME):
            raise Unauthenticated("authorization: expected metadata 'authorization: Bearer <token>'")
        token = presented[len(_SCHEME):].strip()
        for job, known in self._tokens.items():
            # Constant-time comparison: response timing must not reveal a token's prefix.
            if hmac.compare_digest(token.encode(), known.encode()):
                return job
        raise Unauthenticated("authorization: unknown token")


def check_jobs(caller: str | None, jobs: Iterable[str]) -> None:
    """``Forbidden`` unless every job is the caller's (``caller`` None: authentication is off)."""
    if caller is None:
        return
    others = sorted(set(jobs) - {caller})
    if others:
        raise Forbidden(f"job: the token is for job {caller!r}, not for {others}")

"""Free loopback TCP ports for servers and jobs a process starts itself (tests, the emulator's jobs,
the chaos stack)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port", "free_ports"]

#: Linux's range for outgoing connections' ports; a port below it is never handed out meanwhile.
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: Above the services' default ports (18080-19193: ClickHouse, Kafka, Alertmanager, sleuth serve), which a stack may bind later.
_LOWEST = 20_000
_DRAW = random.SystemRandom()


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now, below the kernel's ephemeral range: a server
    started later (a gateway down at first) still finds its port free, where one the kernel handed
    out may go meanwhile to any outgoing connection."""
    low = int(_EPHEMERAL.read_text().split()[0]) if _EPHEMERAL.exists() else 32_768
    found: list[int] = []
    # The OS's randomness: processes whose ``random`` is seeded alike (forked, or under hypothesis) draw apart.
    for port in _DRAW.sample(range(_LOWEST, low), min(low - _LOWEST, 200 + count)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"fewer than {count} free loopback ports between {_LOWEST} and {low}")


def free_port() -> int:
    """A port free on 127.0.0.1 now (``free_ports``)."""
    return free_ports(1)[0]

"""A dictionary in place of torch's ``Store`` for the calls the pump makes; it counts the reads
(and bytes read) so that tests and ``benchmarks/bench_spec_registration.py`` can measure them."""

from __future__ import annotations


class DictStore:
    """``hold_changes``: change-log entries are not stored (a rank counted its change, its log entry is late)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.reads = 0
        self.bytes_read = 0
        self.hold_changes = False

    def set(self, key: str, value: bytes) -> None:
        if self.hold_changes and "/change/" in key:
            return
        self.data[key] = value

    def get(self, key: str) -> bytes:
        value = self.data[key]
        self.reads += 1
        self.bytes_read += len(value)
        return value

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return [self.get(key) for key in keys]

    def add(self, key: str, amount: int) -> int:
        value = int(self.data.get(key, b"0")) + amount
        self.data[key] = str(value).encode()
        return value

    def check(self, keys: list[str]) -> bool:
        return all(key in self.data for key in keys)

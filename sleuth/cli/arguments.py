"""Argument types shared by the command modules."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from sleuth.errors import LayoutError
from sleuth.layout import parse_size


def positive_int(name: str) -> Callable[[str], int]:
    """An argparse ``type`` for a positive integer option; argparse names ``name`` in its error."""

    def parse(text: str) -> int:
        try:
            return parse_size(text, name=name)
        except LayoutError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None

    parse.__name__ = name
    return parse


def non_negative_int(name: str) -> Callable[[str], int]:
    """An argparse ``type`` for an integer option that may be 0."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text!r} is negative")
        return value

    parse.__name__ = name
    return parse


def positive_float(name: str) -> Callable[[str], float]:
    """An argparse ``type`` for a positive finite number (seconds, say)."""
    return _number(name, lambda value: 0 < value < float("inf"), "a positive number")


def non_negative_float(name: str) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number that may be 0 (a delay, say)."""
    return _number(name, lambda value: 0 <= value < float("inf"), "a number of 0 or more")


def above_one(name: str) -> Callable[[str], float]:
    """An argparse ``type`` for a factor above 1 (a slowdown line)."""
    return _number(name, lambda value: value > 1, "a number above 1")


def _number(name: str, accept: Callable[[float], bool], wanted: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")  # accepted by no rule
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
        return value

    parse.__name__ = name
    return parse

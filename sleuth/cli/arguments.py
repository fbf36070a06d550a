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

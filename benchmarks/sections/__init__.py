"""RESULTS.md's generated sections, one module an area: each renders one benchmark's JSON as markdown.

``SECTIONS`` maps a marker's kind to its renderer; ``benchmarks/results.py`` writes the blocks."""

from __future__ import annotations

from collections.abc import Callable

from .ingest import ingest_section
from .loaded import loaded_section
from .localizer import localizer_figure, localizer_section
from .whatif import attribution_section, live_section, streaming_section

__all__ = ["SECTIONS", "attribution_section", "ingest_section", "live_section", "loaded_section", "localizer_figure",
           "localizer_section", "streaming_section"]

#: Each kind of block, and the function that renders it from its JSON.
SECTIONS: dict[str, Callable[[dict], str]] = {"localizer": localizer_section, "attribution": attribution_section,
                                               "streaming": streaming_section, "live": live_section,
                                               "ingest": ingest_section, "loaded": loaded_section}

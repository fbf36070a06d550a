"""RESULTS.md's generated sections, one module an area: each renders one benchmark's JSON as markdown.

``SECTIONS`` maps a marker's kind to the renderer of its one JSON file, ``RUN_SECTIONS`` a kind whose
table has a row or a column a run to the renderer of the runs' files; ``benchmarks/results.py`` writes the blocks."""

from __future__ import annotations

from collections.abc import Callable

from .chaos import chaos_section
from .detection import detection_section, keys_section, throughput_section
from .importers import follow_section, import_section
from .ingest import ingest_section
from .loaded import loaded_section, traces_section
from .localizer import baselines_section, localizer_figure, localizer_section, reach_section
from .logger import (cuda_section, hooks_section, hotpath_section, nccl_gpu_section, nccl_section, outage_section,
                     overhead_section)
from .progress import progress_section
from .ranks import gateway_section, idle_section, spec_section
from .storage import clickhouse_section
from .suite import suite_section
from .whatif import attribution_section, live_section, lost_section, streaming_section

__all__ = ["RUN_SECTIONS", "SECTIONS", "attribution_section", "baselines_section", "chaos_section", "clickhouse_section",
           "cuda_section", "detection_section", "follow_section", "gateway_section", "hooks_section", "hotpath_section",
           "idle_section", "import_section", "ingest_section", "keys_section", "live_section", "loaded_section",
           "localizer_figure", "localizer_section", "lost_section", "nccl_gpu_section", "nccl_section", "outage_section",
           "overhead_section", "progress_section", "reach_section", "spec_section", "streaming_section", "suite_section",
           "throughput_section", "traces_section"]

#: Each kind of block, and the function that renders it from its JSON.
SECTIONS: dict[str, Callable[[dict], str]] = {"localizer": localizer_section, "attribution": attribution_section,
                                               "streaming": streaming_section, "live": live_section,
                                               "ingest": ingest_section, "loaded": loaded_section,
                                               "import": import_section, "follow": follow_section,
                                               "hotpath": hotpath_section, "outage": outage_section, "cuda": cuda_section,
                                               "nccl": nccl_section, "nccl_gpu": nccl_gpu_section,
                                               "detection": detection_section, "keys": keys_section,
                                               "idle": idle_section, "spec": spec_section, "chaos": chaos_section,
                                               "lost": lost_section,
                                               "baselines": baselines_section, "suite": suite_section,
                                               "traces": traces_section}
#: Each kind whose table has a row or a column a run, and the function that renders it from the runs' JSON.
RUN_SECTIONS: dict[str, Callable[[list[dict]], str]] = {"progress": progress_section, "overhead": overhead_section,
                                                        "hooks": hooks_section, "throughput": throughput_section,
                                                        "gateway": gateway_section, "clickhouse": clickhouse_section,
                                                        "reach": reach_section}

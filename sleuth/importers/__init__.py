"""Bring in what users already have: other tools' operator logs as sleuth records folders.

One module per format (:mod:`~sleuth.importers.nccl_inspector`,
:mod:`~sleuth.importers.flight_recorder`, :mod:`~sleuth.importers.torch_profiler`,
:mod:`~sleuth.importers.whatif_trace`) reads its files into plain values
(:mod:`~sleuth.importers.model`); :mod:`~sleuth.importers.assemble` names, numbers and checks
them once for all formats; :mod:`~sleuth.importers.folder` writes the folder, all or nothing.
"""

from sleuth.importers.flight_recorder import read_flight_recorder
from sleuth.importers.folder import write_folder
from sleuth.importers.model import Imported
from sleuth.importers.nccl_inspector import read_inspector
from sleuth.importers.torch_profiler import read_torch_profiler
from sleuth.importers.whatif_trace import read_whatif_trace

__all__ = ["Imported", "read_flight_recorder", "read_inspector", "read_torch_profiler", "read_whatif_trace", "write_folder"]

"""Write an import as a records folder: the logger's own layout, all or nothing.

Each rank's records go through the logger's :class:`sleuth.logger.sinks.ParquetSink`
(``rank-00003-0000.parquet``, ``iterations/``) and the spec to ``job.json``, so that
``sleuth localize --records`` and ``sleuth report`` read it like a logged job. The folder is
built beside ``out`` and renamed into place at the end: a failure leaves nothing half-written.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from sleuth.errors import ConfigError
from sleuth.importers.model import Imported
from sleuth.logger.sinks import ParquetSink
from sleuth.records_folder import iterations_from_records

__all__ = ["write_folder"]


def write_folder(imported: Imported, out: str | Path) -> Path:
    """Write ``imported`` to the new folder ``out`` (refused when ``out`` holds anything)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: exists and is not an empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        records = imported.records
        for rank in range(imported.spec.world):
            mine = records.take(records["rank"] == rank)
            sink = ParquetSink(staging, rank)
            sink.records(mine.compact(), dropped=0)
            its = iterations_from_records(mine) if len(mine) else None
            if its is not None and len(its):
                sink.iterations(its)
            if rank == 0:
                sink.spec(imported.spec)
            sink.close(0.0)
        if not any(staging.glob("*.parquet")):
            raise ConfigError("nothing to write: the files hold no completed operator")
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out

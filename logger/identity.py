"""Who is logging: job id, rank, world size, host name and GPU index."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Identity:
    """One rank of one job. ``gpu`` is None when not known locally (see ``local_gpu``)."""

    job: str
    rank: int
    world: int
    host: str
    gpu: int | None


def job_id(environ: Mapping[str, str], configured: str = "") -> str:
    """``SLEUTH_JOB`` (``configured``), else torchrun's run id, else Slurm's job id.

    torchrun's default run id is the literal ``"none"``, which would merge unrelated jobs: it
    does not count.
    """
    if configured:
        return configured
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        return run_id
    if environ.get("SLURM_JOB_ID"):
        return environ["SLURM_JOB_ID"]
    master = environ.get("MASTER_ADDR", socket.gethostname())
    return f"job-{master}-{environ.get('MASTER_PORT', '0')}"


def local_gpu(environ: Mapping[str, str]) -> int | None:
    """The GPU index from ``LOCAL_RANK`` (torchrun sets it); None when unset.

    On a CUDA job the hooks use ``torch.cuda.current_device()`` instead; when neither is known
    the job spec gives each rank its position among the ranks on its host.
    """
    text = environ.get("LOCAL_RANK", "")
    return int(text) if text.isdigit() else None


def host_name() -> str:
    return socket.gethostname()

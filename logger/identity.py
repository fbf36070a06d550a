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


#: Where a launcher counts the restarts of a job that keeps its id: torchelastic's worker-group
#: restarts (every worker of the group sees the same count), then Slurm's requeues.
RESTART_COUNTS = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")


def job_id(environ: Mapping[str, str], configured: str = "") -> str:
    """``SLEUTH_JOB`` (``configured``), else torchrun's run id, else Slurm's job id, with
    ``.r<N>`` appended for the N-th restart that the launcher counts (``attempt``).

    A restarted attempt numbers its iterations from 0 again: under one id its records would
    replace the first attempt's and look like replays downstream, so each attempt is a job of
    its own, and both are kept. torchrun's default run id is the literal ``"none"``, which would
    merge unrelated jobs: it does not count.
    """
    restart = attempt(environ)
    suffix = f".r{restart}" if restart else ""
    if configured:
        return configured + suffix
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        return run_id + suffix
    if environ.get("SLURM_JOB_ID"):
        return environ["SLURM_JOB_ID"] + suffix
    master = environ.get("MASTER_ADDR", socket.gethostname())
    return f"job-{master}-{environ.get('MASTER_PORT', '0')}{suffix}"


def attempt(environ: Mapping[str, str]) -> int:
    """How many times the launcher restarted this job (0: the first attempt, or no launcher counts)."""
    for name in RESTART_COUNTS:
        text = environ.get(name, "").strip()
        if text.isdigit():
            return int(text)
    return 0


def local_gpu(environ: Mapping[str, str]) -> int | None:
    """The GPU index from ``LOCAL_RANK`` (torchrun sets it); None when unset.

    On a CUDA job the hooks use ``torch.cuda.current_device()`` instead; when neither is known
    the job spec gives each rank its position among the ranks on its host.
    """
    text = environ.get("LOCAL_RANK", "")
    return int(text) if text.isdigit() else None


def host_name() -> str:
    return socket.gethostname()

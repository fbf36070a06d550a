"""Who is logging: job id, rank, world size, host name and GPU index."""

from __future__ import annotations

import re
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
    return attempt_id(_launched_job(environ, configured), attempt(environ))


def _launched_job(environ: Mapping[str, str], configured: str) -> str:
    if configured:
        return configured
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        return run_id
    if environ.get("SLURM_JOB_ID"):
        return environ["SLURM_JOB_ID"]
    master = environ.get("MASTER_ADDR", socket.gethostname())
    return f"job-{master}-{environ.get('MASTER_PORT', '0')}"


#: ``<job>.r<N>``: the N-th restarted attempt of ``<job>``, N a positive integer written without
#: leading zeros (``attempt_id`` writes it so), so that one attempt has exactly one id.
_ATTEMPT = re.compile(r"(?P<job>.+)\.r(?P<restart>[1-9][0-9]*)", re.DOTALL)


def attempt_id(job: str, restart: int) -> str:
    """The id of attempt ``restart`` of ``job``: ``job`` itself for the first (0), ``<job>.r<N>`` after."""
    if restart < 0:
        raise ValueError(f"restart: a restart count is 0 or more, got {restart}")
    return f"{job}.r{restart}" if restart else job


def job_of_attempt(job: str) -> str:
    """The job that ``job`` is a restarted attempt of (``X`` for ``X.r<N>``), else ``job`` itself;
    the inverse of ``attempt_id``, so whoever reads attempt ids (the gateway's tokens) reads them alike."""
    match = _ATTEMPT.fullmatch(job)
    return match["job"] if match else job


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

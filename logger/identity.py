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


#: ``<job>[.r<N>][.m<M>]``: the N-th restarted attempt of ``<job>``, in the M-th rendezvous round
#: after its first; N and M positive integers written without leading zeros (``attempt_id`` and
#: ``round_id`` write them so), so that one attempt's round has exactly one id.
_ATTEMPT = re.compile(r"(?P<job>.+?)(?:\.r(?P<restart>[1-9][0-9]*))?(?:\.m(?P<round>[1-9][0-9]*))?", re.DOTALL)


def attempt_id(job: str, restart: int) -> str:
    """The id of attempt ``restart`` of ``job``: ``job`` itself for the first (0), ``<job>.r<N>`` after."""
    if restart < 0:
        raise ValueError(f"restart: a restart count is 0 or more, got {restart}")
    return f"{job}.r{restart}" if restart else job


def round_id(job: str, index: int) -> str:
    """The id of rendezvous round ``index`` of ``job`` (an attempt's id), numbered by the collector:
    ``job`` itself for the first (0), ``<job>.m<N>`` after."""
    if index < 0:
        raise ValueError(f"index: a round's index is 0 or more, got {index}")
    return f"{job}.m{index}" if index else job


def split_round(job: str) -> tuple[str, int]:
    """``(attempt, index)`` of a round's id: the inverse of ``round_id``."""
    match = _ATTEMPT.fullmatch(job)
    if match is None or match["round"] is None:
        return job, 0
    return job[: match.start("round") - 2], int(match["round"])


def job_of_attempt(job: str) -> str:
    """The job that ``job`` is a restarted attempt or a later round of (``X`` for ``X.r<N>``,
    ``X.m<M>`` and ``X.r<N>.m<M>``), else ``job`` itself; the inverse of ``attempt_id`` and
    ``round_id``, so whoever reads their ids (the gateway's tokens) reads them alike."""
    match = _ATTEMPT.fullmatch(job)
    return match["job"] if match else job


def attempt(environ: Mapping[str, str]) -> int:
    """How many times the launcher restarted this job (0: the first attempt, or no launcher counts)."""
    for name in RESTART_COUNTS:
        text = environ.get(name, "").strip()
        if text.isdigit():
            return int(text)
    return 0


def rendezvous_round(environ: Mapping[str, str]) -> str:
    """The launcher's rendezvous round this process runs in, ``""`` outside torchelastic.

    torchelastic restarts every worker when a node joins (``--nnodes=MIN:MAX``) without counting
    it in ``TORCHELASTIC_RESTART_COUNT``, so the round's id must tell it apart. Within one restart
    count a round only follows a join, which grows the world, so the world size alone parts the
    rounds; the rendezvous master (a fresh port each round when the agents share no store) is
    kept as well, as what a worker sees of the round itself.
    """
    if "TORCHELASTIC_RUN_ID" not in environ:
        return ""
    master = f"{environ.get('MASTER_ADDR', '')}:{environ.get('MASTER_PORT', '')}"
    return f"{master}/{environ.get('WORLD_SIZE', '')}"


def local_gpu(environ: Mapping[str, str]) -> int | None:
    """The GPU index from ``LOCAL_RANK`` (torchrun sets it); None when unset.

    On a CUDA job the hooks use ``torch.cuda.current_device()`` instead; when neither is known
    the job spec gives each rank its position among the ranks on its host.
    """
    text = environ.get("LOCAL_RANK", "")
    return int(text) if text.isdigit() else None


def host_name() -> str:
    return socket.gethostname()

"""The CommOps logger: times every communication operator of a training job.

Switched on by the environment, with no change to the training script: ``SLEUTH_COLLECTOR``
(``host:port``: stream to the gateway) and/or ``SLEUTH_LOG_DIR`` (Parquet per rank plus
``job.json``). torch runs ``sleuth.logger.autostart`` when it is imported; it does nothing when
both variables are unset. ``install()`` switches it on explicitly, ``step()`` marks the end of a
training iteration (else the optimizer's ``step`` does, else the operator period is used).

This module never imports torch at import time: the ``logger`` extra does not depend on it.
"""

from __future__ import annotations

import atexit
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sleuth.errors import ConfigError
from sleuth.settings import Settings

__all__ = ["Logger", "install", "installed", "read_tls_ca", "step", "uninstall"]

log = logging.getLogger("sleuth.logger")


class Logger:
    """An installed logger: its session, drainer and hooks (see ``install``)."""

    def __init__(self, session: Any, pump: Any, hooks: Any, restore_sigterm: Any = None, nccl_plugin: Any = None) -> None:
        self.session = session
        self.pump = pump
        self.hooks = hooks
        self.restore_sigterm = restore_sigterm  # puts the job's SIGTERM handler back
        self.nccl_plugin = nccl_plugin  # sleuth's NCCL profiler plugin, recording into our ring
        self.settings: Settings | None = None  # what it was installed with (a forked child reinstalls)
        self.environ: Mapping[str, str] | None = None

    def flush(self) -> None:
        """Drain the ring now (the drainer does this every ``SLEUTH_FLUSH_S`` seconds)."""
        self.pump.flush()

    def finish(self, timeout: float = 30.0) -> None:
        """Flush everything, write or send the job spec, close the sinks."""
        self.pump.finish(timeout)


_active: Logger | None = None
_lock = threading.Lock()


def installed() -> Logger | None:
    """The installed logger, or None."""
    return _active


def install(settings: Settings | None = None, *, environ: Mapping[str, str] | None = None) -> Logger:
    """Hook torch.distributed and start the drainer; returns the (single) installed logger.

    ``settings`` default to ``Settings.from_env()``; ``environ`` (default ``os.environ``) gives
    the launcher's identity variables (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, LOCAL_RANK).
    ConfigError when neither a collector nor a log folder is set.
    """
    global _active
    environ = os.environ if environ is None else environ
    settings = Settings.from_env(environ) if settings is None else settings
    if not settings.logger_enabled:
        raise ConfigError("the logger needs SLEUTH_COLLECTOR (host:port) or SLEUTH_LOG_DIR (a folder)")
    with _lock:
        if _active is not None:
            return _active
        _active = _build(settings, environ)
        _active.settings, _active.environ = settings, environ
        _watch_forks()
        return _active


_forks_watched = False


def _watch_forks() -> None:
    global _forks_watched
    if not _forks_watched:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _forks_watched = True


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker, a fork-based launcher) starts a logger of its own.

    What it inherits is the parent's: records still in the ring, a drainer thread that did not
    survive the fork, sinks holding the parent's files and channel. Flushing those at the child's
    exit would write the parent's records twice, into the parent's files. So the child forgets
    them and installs afresh: it records what it runs itself, if anything, as its own rank.
    """
    global _active, _lock
    _lock = threading.Lock()  # the parent's may have been held by a thread that is gone
    inherited, _active = _active, None
    if inherited is None:
        return
    inherited.pump.abandon()
    try:
        inherited.hooks.remove()
        install(inherited.settings, environ=inherited.environ)
    except Exception as error:  # the child runs on without a logger rather than not at all
        log.warning("sleuth logger: not restarted in a forked child: %r", error)


def _build(settings: Settings, environ: Mapping[str, str]) -> Logger:
    # torch is imported here, not at module import: the training job brings its own.
    from torch.distributed import distributed_c10d as c10d

    from sleuth.logger import core
    from sleuth.logger.hooks import group_ranks, identity_from_torch
    from sleuth.logger.identity import host_name, job_id, local_gpu, rendezvous_round
    from sleuth.logger.pump import DEVICE_POLL_S, Pump
    from sleuth.logger.session import Session
    from sleuth.logger.sinks import ParquetSink
    from sleuth.logger.termination import flush_on_sigterm

    job = job_id(environ, settings.job)
    session = Session(
        ring=settings.logger_ring,
        resolve_identity=identity_from_torch(job, host_name(), local_gpu(environ)),
        group_ranks=group_ranks,
    )

    tls_ca = read_tls_ca(settings.collector_tls_ca) if settings.collector else None

    def sinks(identity: Any) -> Any:
        chosen = []
        if settings.log_dir:
            chosen.append(ParquetSink(settings.log_dir, identity.rank))
        if settings.collector:
            from sleuth.logger.sender import GrpcSink

            # Per user: the temporary folder is shared, and spilled segments are replayed as ours.
            spill_root = Path(settings.logger_spill_dir or Path(tempfile.gettempdir()) / f"sleuth-spill-{os.getuid()}")
            chosen.append(
                GrpcSink(  # type: ignore[arg-type]  # both sinks follow the Sink protocol
                    settings.collector,
                    spill_dir=spill_root / identity.job / f"rank-{identity.rank:05d}",
                    spill_root=spill_root,
                    buffer_bytes=settings.logger_buffer_bytes,
                    spill_bytes=settings.logger_spill_bytes,
                    token=settings.collector_token,
                    tls_ca=tls_ca,
                    rendezvous=rendezvous_round(environ),
                )
            )
        return chosen[0] if len(chosen) == 1 else _Tee(chosen)

    pump = Pump(session, sinks, flush_s=settings.logger_flush_s, store=c10d._get_default_store)
    cuda = _cuda_timing()
    hooks = _hooks_class(settings.logger_capture, cuda=cuda)(session, on_destroy=pump.finish)
    hooks.cuda = cuda
    if cuda:
        pump.device_poll_s = DEVICE_POLL_S
    plugin = _stream_the_plugin(environ, settings, session, hooks, c10d._get_default_store)
    if nccl_plugin_records(environ, settings, streamed=plugin is not None):
        _leave_nccl_to_the_plugin(hooks, streamed=plugin is not None)
    try:
        hooks.install()
    except BaseException:
        hooks.remove()
        if plugin is not None:
            plugin.detach()
        raise
    atexit.register(pump.finish)
    restore_sigterm = flush_on_sigterm(pump.finish)
    pump.start()
    log.info("sleuth logger: on (job %s, recorder %s, %s)", job, core.impl.IMPLEMENTATION, type(hooks).__name__)
    return Logger(session, pump, hooks, restore_sigterm, plugin)


def _cuda_timing() -> bool:
    """Whether CUDA tensors' operators are timed with CUDA events (else on the host clock)."""
    from sleuth.logger import core

    try:
        import torch

        return torch.cuda.is_available() and core.impl.cuda_available()
    except Exception as error:  # no usable CUDA: the host clock it is
        log.info("sleuth logger: CUDA-event timing is off: %r", error)
        return False


def read_tls_ca(path: str) -> bytes | None:
    """The PEM the gateway's certificate is checked against; None: plaintext."""
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"SLEUTH_COLLECTOR_TLS_CA={path!r}: {error.strerror}") from None


def nccl_plugin_records(environ: Mapping[str, str], settings: Settings, *, streamed: bool = False) -> bool:
    """Whether sleuth's NCCL profiler plugin records this process's NCCL operators: NCCL loads it
    (``NCCL_PROFILER_PLUGIN`` names it, by path or as ``sleuth``) and it has somewhere to put them:
    the logger's ring (``streamed``: attached) or a folder for its own files."""
    from sleuth.logger.nccl_plugin import named

    return named(environ) is not None and (streamed or bool(settings.log_dir))


def _stream_the_plugin(environ: Mapping[str, str], settings: Settings, session: Any, hooks: Any, store: Any) -> Any:
    """Attach sleuth's NCCL plugin, when NCCL_PROFILER_PLUGIN names it, to the session's ring: the
    plugin (``nccl_plugin.Plugin``), or None where it is not named or cannot attach (said in a warning)."""
    from sleuth.logger import capture as process_group
    from sleuth.logger import nccl_plugin
    from sleuth.logger.hooks import members_naming
    from sleuth.logger.nccl_comms import NcclComms

    path = nccl_plugin.named(environ)
    # Function wrappers cannot leave NCCL's operators to the plugin (_leave_nccl_to_the_plugin).
    if path is None or not isinstance(hooks, process_group.ProcessGroupHooks):
        return None
    try:
        plugin = nccl_plugin.Plugin(path)
        plugin.attach(session.recorder)
    except ConfigError as error:
        then = ("the plugin writes its own files (sleuth import nccl-profiler)" if settings.log_dir
                else "the logger records NCCL groups itself")
        log.warning("sleuth logger: %s: %s", error, then)
        return None
    comms = NcclComms(session, plugin.comms, store, members_naming)
    session.plugin_comms = comms
    session.pollers.append(comms.poll)
    return plugin


def _leave_nccl_to_the_plugin(hooks: Any, *, streamed: bool = False) -> None:
    """The plugin records NCCL's operators with GPU times and no Python: the logger keeps the rest
    (other backends' groups, the steps), so that nothing is recorded twice. ``streamed``: the plugin
    records into the logger's ring, else into its own files."""
    from sleuth.logger import capture as process_group

    if not isinstance(hooks, process_group.ProcessGroupHooks):
        # The function wrappers see a call, not the backend that runs it: both would record NCCL's.
        raise ConfigError("sleuth's NCCL profiler plugin records this job's NCCL operators (NCCL_PROFILER_PLUGIN), "
                          "and this torch has no process-group hooks to leave them to it: the Python logger stays off")
    hooks.defer_nccl = True
    where = "records into the logger's ring" if streamed else "writes its own files (sleuth import nccl-profiler)"
    log.info("sleuth logger: NCCL groups are left to the NCCL profiler plugin, which %s", where)


def _hooks_class(capture: str, *, cuda: bool = False) -> type:
    """The hooks ``SLEUTH_CAPTURE`` asks for; ConfigError when this machine cannot give them.
    ``cuda``: CUDA-event timing is on, which only the Python process-group hooks do."""
    from sleuth.logger import capture as process_group
    from sleuth.logger.hooks import Hooks

    if capture == "functions":
        return Hooks
    if not process_group.supported():
        if capture != "auto":
            raise ConfigError(f"SLEUTH_CAPTURE={capture} needs torch >= 2.15 (process-group hooks)")
        log.warning("sleuth logger: this torch has no process-group hooks: only torch.distributed's "
                    "Python calls are recorded (not DDP's, FSDP's or functional collectives)")
        return Hooks
    if capture == "process-group" or (capture == "auto" and cuda):
        return process_group.ProcessGroupHooks
    from sleuth.logger import capture_native

    why = capture_native.unavailable()
    if why is None:
        return capture_native.NativeProcessGroupHooks
    if capture == "native":
        raise ConfigError(f"SLEUTH_CAPTURE=native: {why}")
    log.warning("sleuth logger: the Python process-group hooks record (about 6 us per operator); "
                "the native ones are unavailable: %s", why)
    return process_group.ProcessGroupHooks


class _Tee:
    """Both sinks at once (a collector and a log folder)."""

    def __init__(self, sinks: list[Any]) -> None:
        self.sinks = sinks

    def records(self, batch: Any, *, dropped: int) -> None:
        for sink in self.sinks:
            sink.records(batch, dropped=dropped)

    def iterations(self, batch: Any) -> None:
        for sink in self.sinks:
            sink.iterations(batch)

    def spec(self, spec: Any) -> None:
        for sink in self.sinks:
            sink.spec(spec)

    def close(self, timeout: float) -> None:
        for sink in self.sinks:
            sink.close(timeout)


def step() -> None:
    """Mark the end of a training iteration. Once called, the optimizer hook no longer counts."""
    if _active is not None:
        _active.session.step(explicit=True)


def uninstall(timeout: float = 30.0) -> None:
    """Flush, close and remove the hooks (mostly for tests: a job simply exits)."""
    global _active
    with _lock:
        if _active is None:
            return
        _active.finish(timeout)
        _active.hooks.remove()
        if _active.nccl_plugin is not None:
            _active.nccl_plugin.detach()
        if _active.restore_sigterm is not None:
            _active.restore_sigterm()
        _active = None

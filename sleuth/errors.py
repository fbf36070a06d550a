"""One exception hierarchy for all of sleuth, rooted in ``SleuthError``.

Each error subclasses the builtin a caller would naturally catch (``ValueError`` for bad input,
``ConnectionError`` for services), so code that does not know sleuth still handles it sensibly.
"""

from __future__ import annotations


class SleuthError(Exception):
    """Root of every error sleuth raises on purpose."""


class ConfigError(SleuthError, ValueError):
    """A setting or argument is invalid; the message names the setting."""


class TopologyError(SleuthError, ValueError):
    """A topology file or generator spec is invalid; the message names the field, line or value."""


class LayoutError(SleuthError, ValueError):
    """Parallel layout sizes or rank order are inconsistent; the message names the value."""


class RecordError(SleuthError, ValueError):
    """A record batch is malformed (unequal columns, out-of-range values, unknown op kinds)."""


class ImportFileError(RecordError):
    """A file given to ``sleuth import`` is not what its format says; the message names the file,
    the line (JSON lines) or entry, and the field."""


class ServiceError(SleuthError, ConnectionError):
    """An external service (Kafka, ClickHouse, gateway) cannot be reached or refused the work."""


class BatchRejected(RecordError):
    """The gateway refuses a batch (bad values, sizes, unregistered job); the message names the field."""


class NotRegistered(BatchRejected):
    """A batch of a job the gateway has no spec for (yet): rank 0 registers the job once every rank
    has shared its groups, so other ranks' first batches may come before it; the message names the job."""


class AuthError(SleuthError, PermissionError):
    """A caller may not do what it asked."""


class Unauthenticated(AuthError):
    """No bearer token, or one the gateway does not know."""


class Forbidden(AuthError):
    """A valid token for one job used to write or register another job."""


class Overloaded(ServiceError):
    """A downstream service (Kafka) does not keep up; the caller should retry later."""


class NotFound(SleuthError, LookupError):
    """Something asked for by id (an incident, a job's spec) does not exist; the message names it."""


class UnknownJob(NotFound):
    """A job id that no registered job spec has; the message names the job and where it looked."""


class BuildError(SleuthError, RuntimeError):
    """A native part (the logger's C++ hooks) cannot be compiled or loaded on this machine; the
    message says why (no compiler, no ninja, no torch headers, a compile error)."""

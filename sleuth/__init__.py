"""sleuth: finds the device that slows a large distributed training job.

The shared pieces live here, one home each: ``errors``, ``settings``, ``records``, ``jobspec``,
``layout``, ``topology`` and ``cli``. The parts (``sleuth.logger``, ``sleuth.proto``,
``sleuth.stream``, ``sleuth.localizer``, ``sleuth.sim``) live in top-level folders of the
repository and are mapped under this import root by ``pyproject.toml``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sleuth")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]

"""The startup hook: torch calls ``on_torch_import`` while ``import torch`` runs.

It is registered as a ``torch.backends`` entry point (torch's autoload of out-of-tree
extensions, torch >= 2.5), so a training job that imports torch is logged with no code change
once ``SLEUTH_COLLECTOR`` or ``SLEUTH_LOG_DIR`` is set; with both unset it returns at once.
It must never raise: torch would turn any error into a failed ``import torch``.
"""

from __future__ import annotations

import logging
import os


def on_torch_import() -> None:
    """Install the logger when the environment asks for it; an entry point, so it reads it."""
    if not (os.environ.get("SLEUTH_COLLECTOR") or os.environ.get("SLEUTH_LOG_DIR")):
        return
    try:
        from sleuth.logger import install

        install()
    except Exception as error:
        logging.getLogger("sleuth.logger").warning("sleuth logger: not started: %r", error)

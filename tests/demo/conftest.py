"""The demo's real job runs alone on the machine: the demo's answer is read from its timings."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from sleuth.demo.cases import RealJob


@pytest.fixture(autouse=True)
def real_job_alone(monkeypatch: pytest.MonkeyPatch, machine_alone: Callable[[], AbstractContextManager[None]]) -> None:
    run = RealJob.run

    def alone(case: RealJob, *args, **kwargs) -> None:
        with machine_alone():
            run(case, *args, **kwargs)
    monkeypatch.setattr(RealJob, "run", alone)

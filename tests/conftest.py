"""Shared fixtures. ``services``: the real local Kafka broker, ClickHouse server and Alertmanager.

Tests that use ``services`` are marked ``@pytest.mark.services``; deselect them with
``-m "not services"`` on a machine without Java, clickhouse-server or prometheus-alertmanager
(see deploy/install.sh).
The fixture starts whatever is not running yet with ``deploy/services.sh up`` and, at the end of
the session, stops only what it started, so services a developer started by hand stay up.
Set ``SLEUTH_KEEP_SERVICES=1`` to leave them running after the session as well.
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sleuth import services as local_services
from sleuth.allocator import tune_for_large_arrays
from tests.file_durations import DurationRecorder, FileDurations
from tests.turns import MachineTurns

REPO_ROOT = Path(__file__).resolve().parents[1]

# The tests run sleuth's code with the allocator the sleuth program runs it with (each xdist worker
# imports this file); the jobs and services they start as processes set their own.
tune_for_large_arrays()

_TURNS_FOLDER = pytest.StashKey[str]()
_TURNS = pytest.StashKey[MachineTurns]()


@dataclass(frozen=True)
class Services:
    """Addresses of the running local services."""

    kafka_bootstrap: str
    clickhouse_host: str
    clickhouse_port: int
    clickhouse_http_port: int
    alertmanager_url: str
    repo_root: Path
    state_dir: Path

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Services:
        """The services that ``environ``'s SLEUTH_* variables name (``os.environ`` when None), read
        as the deploy scripts read them."""
        host, port = local_services.clickhouse_address(environ)
        return cls(kafka_bootstrap=local_services.kafka_bootstrap(environ), clickhouse_host=host, clickhouse_port=port,
                   clickhouse_http_port=local_services.clickhouse_http_port(environ),
                   alertmanager_url=local_services.alertmanager_url(environ), repo_root=REPO_ROOT,
                   state_dir=local_services.state_dir(REPO_ROOT, environ))


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    running_before = local_services.services_running(REPO_ROOT)
    local_services.ensure_services(REPO_ROOT)
    try:
        yield Services.from_environ()
    finally:
        started_here = [name for name, was_up in running_before.items() if not was_up]
        if started_here and os.environ.get("SLEUTH_KEEP_SERVICES") != "1":
            local_services.stop_services(REPO_ROOT, started_here)


def clear_caches(namespace: dict, *, keep: Callable[[Any], bool] = lambda cache: False) -> None:
    """Empties the functools caches in ``namespace`` (emulated runs, their localizations, trained models)."""
    for value in list(namespace.values()):
        if callable(getattr(value, "cache_clear", None)) and hasattr(value, "cache_info") and not keep(value):
            value.cache_clear()
    gc.collect()
    _return_freed_memory()


def _return_freed_memory() -> None:
    """Gives the heap's free pages back to the system (glibc keeps them, 1-2 GiB after a module of
    large emulations): the other worker's module then has them, and the suite's resident total falls."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator returns memory its own way
        pass


@pytest.fixture(autouse=True, scope="module")
def module_caches_end_with_their_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """The caches a test module uses are emptied when its tests are done: the suite then holds one
    module's runs at a time, not all. A cache of its package's conftest is shared by the package's
    modules and emptied when the package ends (the conftest's own fixture)."""
    yield
    module = request.module.__name__
    clear_caches(vars(request.module), keep=lambda cache: module.startswith(_package_of_conftest(cache)))


def _package_of_conftest(cache: Any) -> str:
    """``tests.stream.detection.`` for a cache defined in tests/stream/detection/conftest.py, else a name no module has."""
    defined_in = getattr(cache, "__module__", "") or ""
    return defined_in.removesuffix("conftest") if defined_in.endswith(".conftest") else "\0"


def _taking(names: set[str]) -> re.Pattern[str]:
    """A function definition with a parameter among ``names``."""
    return re.compile(r"def (\w+)\([^)]*\b(?:%s)\b" % "|".join(sorted(names)), re.S)


def files_on_the_services() -> frozenset[str]:
    """The test files whose tests use the session's services (the ``services`` fixture, or a conftest
    fixture taking it), as pytest names them; a test that starts a private stack is not among them."""
    tests = REPO_ROOT / "tests"
    fixtures = {"services"} | {name for conftest in tests.rglob("conftest.py")
                               for name in _taking({"services"}).findall(conftest.read_text())}
    uses = _taking(fixtures)
    return frozenset(path.relative_to(REPO_ROOT).as_posix() for path in tests.rglob("test_*.py")
                     if uses.search(path.read_text()))


@pytest.hookimpl(tryfirst=True)  # before xdist's own choice of scheduler
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``pytest -n 2``, pytest-xdist sends each test file whole to one worker, so
    that its module fixtures (a real job, an emulated cluster) run once, and every file using the
    session's services to the same one: a worker's session stops the services it started when it
    ends, which would pull them from under the other worker's tests. A test that stops or restarts a
    service does it on a stack of its own (``PrivateStack``), and runs on either worker. The files
    go out longest first, by ``tests/durations.json`` (``tests/file_durations.py``)."""
    from xdist.scheduler import LoadScopeScheduling

    on_services = files_on_the_services()
    durations = FileDurations()
    seconds = {"services": sum(durations.of(file) for file in on_services)}

    class ServicesOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return "services" if file in on_services else file

        def _assign_work_unit(self, node: Any) -> None:
            # The longest unit first (longest-processing-time order): the run ends on short files.
            longest = max(self.workqueue, key=lambda scope: seconds.get(scope, durations.of(scope)))
            self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return ServicesOnOneWorker(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test using the session's services where ``files_on_the_services`` does not see it would run
    beside them on the other worker: refused, by name."""
    on_services = files_on_the_services()
    for item in items:
        if "services" in getattr(item, "fixturenames", ()) and item.nodeid.split("::", 1)[0] not in on_services:
            raise pytest.UsageError(f"{item.nodeid} uses the services fixture through a fixture "
                                    "files_on_the_services does not know (tests/conftest.py)")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Under ``pytest -n 2``, the workers take turns on the machine through files in one folder of the run."""
    stash = node.config.stash
    if _TURNS_FOLDER not in stash:
        stash[_TURNS_FOLDER] = tempfile.mkdtemp(prefix="sleuth-test-turns-")
    node.workerinput["sleuth_turns"] = stash[_TURNS_FOLDER]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-durations", action="store_true",
                     help="write each test file's seconds to tests/durations.json (the order xdist hands files out in)")


def pytest_configure(config: pytest.Config) -> None:
    """A worker of ``pytest -n 2`` opens the run's turns; the run's controller records the files'
    durations when asked."""
    folder = getattr(config, "workerinput", {}).get("sleuth_turns")
    if folder is not None:
        config.stash[_TURNS] = MachineTurns(Path(folder))
    elif config.getoption("record_durations"):
        config.pluginmanager.register(DurationRecorder(FileDurations()), "sleuth-durations")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _TURNS in config.stash:
        config.stash[_TURNS].close()
    if _TURNS_FOLDER in config.stash:
        shutil.rmtree(config.stash[_TURNS_FOLDER], ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Every test (its fixtures' setup and teardown too) runs in a shared turn on the machine; a
    real job it times takes the machine alone inside it (``machine_alone``, ``tests/turns.py``)."""
    turns = item.config.stash.get(_TURNS, None)
    if turns is None:  # one process: the machine is the test's already
        return (yield)
    with turns.shared():
        return (yield)


@pytest.fixture(scope="session")
def machine_alone(pytestconfig: pytest.Config) -> Callable[[], AbstractContextManager[None]]:
    """``with machine_alone(): run the job``: a real job whose timings the test asserts on runs with
    the other test worker idle."""
    turns = pytestconfig.stash.get(_TURNS, None)
    return turns.alone if turns is not None else nullcontext

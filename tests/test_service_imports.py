"""The deployed service does not depend on the emulator (``sleuth.sim``): the workers, detection,
the localizer agent, the gateway and the alerter import without it, and no module of the service's
packages names it in an import, not even one deferred into a function."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

#: What a deployment runs: ingest workers, detection, the streaming localizer, the gateway, the alerter.
SERVICE_MODULES = (
    "sleuth.stream.services.worker",
    "sleuth.stream.detection",
    "sleuth.stream.detection.training",
    "sleuth.stream.services.localizer_agent",
    "sleuth.stream.ingest.gateway",
    "sleuth.oncall.alerter",
)
#: Packages deployed with the service; the CLI's ``sleuth sim`` and the demo are the emulator's own users.
SERVICE_PACKAGES = ("sleuth", "sleuth.stream", "sleuth.localizer", "sleuth.oncall", "sleuth.report", "sleuth.logger",
                    "sleuth.proto")
EMULATOR_USERS = ("sleuth/cli/sim.py",)


def test_the_service_modules_import_without_the_emulator() -> None:
    code = (f"import importlib, sys\nfor name in {SERVICE_MODULES!r}:\n    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m == 'sleuth.sim' or m.startswith('sleuth.sim.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"importing the service loaded the emulator: {done.stdout.strip()}"


def _names_the_emulator(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name == "sleuth.sim" or alias.name.startswith("sleuth.sim.") for alias in node.names)
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
        return (node.module == "sleuth.sim" or node.module.startswith("sleuth.sim.")
                or (node.module == "sleuth" and any(alias.name == "sim" for alias in node.names)))
    return False


@pytest.mark.parametrize("package", SERVICE_PACKAGES)
def test_no_service_module_imports_the_emulator(package) -> None:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    # Each part maps to a folder of its own (pyproject's package-dir), so sleuth/ holds no other part.
    folder = Path(next(iter(spec.submodule_search_locations)))
    offenders = []
    for path in sorted(folder.rglob("*.py")):
        relative = path.relative_to(folder).as_posix()
        if f"{package.replace('.', '/')}/{relative}" in EMULATOR_USERS:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        offenders += [f"{package}: {relative}:{node.lineno}" for node in ast.walk(tree) if _names_the_emulator(node)]
    assert not offenders, f"service modules import sleuth.sim: {offenders}"

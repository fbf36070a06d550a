"""Dependencies: ranges in pyproject.toml (so the logger installs beside a training job's own
packages), exact pins in constraints.txt (so CI and the demo are reproducible), the two in agreement;
and pip itself, offline, on this project's wheel: the logger extra changes nothing in a torch environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CONSTRAINTS = ROOT / "constraints.txt"
# Where the repository installs itself; each must install through the constraints file.
INSTALLERS = (".ci/run", "deploy/demo.sh", "README.md")


def requirements(group: str) -> list[Requirement]:
    """The requirements of the core (``group='core'``) or of one extra, less references to sleuth's own extras."""
    listed = PROJECT["dependencies"] if group == "core" else PROJECT["optional-dependencies"][group]
    return [r for r in map(Requirement, listed) if canonicalize_name(r.name) != "sleuth"]


def pins() -> dict[str, Requirement]:
    found: dict[str, Requirement] = {}
    for number, line in enumerate(CONSTRAINTS.read_text().splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name not in found, f"constraints.txt:{number}: {requirement.name} is pinned twice"
        found[name] = requirement
    return found


GROUPS = ["core", *PROJECT["optional-dependencies"]]


@pytest.mark.parametrize("group", GROUPS)
def test_pyproject_declares_ranges_not_pins(group) -> None:
    for requirement in requirements(group):
        operators = {spec.operator for spec in requirement.specifier}
        assert not operators & {"==", "==="}, f"[{group}] {requirement} is an exact pin: pin it in constraints.txt"
        assert operators & {">=", ">", "~="}, f"[{group}] {requirement} has no lower bound"


def test_the_logger_extra_and_the_core_keep_a_training_containers_packages() -> None:
    # The packages a training container already holds: each must accept versions other than ours.
    declared = {canonicalize_name(r.name): r.specifier for r in requirements("core") + requirements("logger")}
    assert set(declared) >= {"numpy", "protobuf", "pyarrow", "pyyaml", "grpcio"}
    assert "1.26.4" in declared["numpy"] and "2.0.0" in declared["numpy"]  # both numpy majors of today's containers
    assert "6.0.1" in declared["pyyaml"] and "14.0.2" in declared["pyarrow"] and "1.60.0" in declared["grpcio"]
    assert "6.30.0" in declared["protobuf"] and "7.34.0" in declared["protobuf"]  # both protobuf majors of today's containers


def test_constraints_pin_every_dependency_exactly_within_its_range() -> None:
    pinned = pins()
    for name, requirement in pinned.items():
        [spec] = requirement.specifier  # exactly one specifier ...
        assert spec.operator == "==" and "*" not in spec.version, f"constraints.txt: {requirement} is not an exact pin"
        assert not requirement.extras and requirement.marker is None, f"constraints.txt: {requirement}: a bare pin only"
    for group in GROUPS:
        for requirement in requirements(group):
            name = canonicalize_name(requirement.name)
            assert name in pinned, f"[{group}] {requirement.name} is not pinned in constraints.txt"
            version = next(iter(pinned[name].specifier)).version
            assert requirement.specifier.contains(version, prereleases=True), (
                f"constraints.txt pins {requirement.name}=={version}, outside [{group}] {requirement}")
    declared = {canonicalize_name(r.name) for group in GROUPS for r in requirements(group)}
    assert set(pinned) <= declared, f"constraints.txt pins what pyproject.toml does not use: {set(pinned) - declared}"


@pytest.mark.parametrize("path", INSTALLERS)
def test_every_install_of_the_project_goes_through_the_constraints(path) -> None:
    installs = [line for line in (ROOT / path).read_text().splitlines() if re.search(r"pip install .*'\.\[", line)]
    assert installs, f"{path} no longer installs the project: update INSTALLERS"
    for line in installs:
        if "'.[logger]'" in line:  # into a training job's environment: its own versions stay
            assert "-c constraints.txt" not in line, f"{path}: {line.strip()!r} would pin the training job's packages"
        else:
            assert "-c constraints.txt" in line, f"{path}: {line.strip()!r} installs without -c constraints.txt"


# What training containers already hold, and the logger must leave as it is: the oldest versions
# the ranges keep (protobuf's first 6.x: the committed generated code is protobuf 6.30.0's), and
# the newest majors.
TRAINING_CONTAINERS = {
    "oldest": {"torch": "2.6.0", "numpy": "1.26.4", "protobuf": "6.30.0", "grpcio": "1.60.0",
               "pyarrow": "14.0.2", "PyYAML": "6.0.1", "ninja": "1.11.1.1"},
    "newest": {"torch": "2.15.0", "numpy": "2.3.5", "protobuf": "7.34.0", "grpcio": "1.80.0",
               "pyarrow": "22.0.0", "PyYAML": "6.0.2", "ninja": "1.13.0"},
}


@pytest.fixture(scope="module")
def project_wheel(tmp_path_factory) -> Path:
    """This checkout built as a wheel (no dependencies fetched), from a copy of its tree so the
    build leaves nothing in the checkout."""
    root = tmp_path_factory.mktemp("wheel")
    ignored = [line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.lstrip().startswith("#")]
    shutil.copytree(ROOT, root / "src", ignore=shutil.ignore_patterns(".git", *ignored))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "-w", str(root / "wheels"), str(root / "src")], check=True, env=_offline_pip(), capture_output=True)
    [wheel] = (root / "wheels").glob("sleuth-*.whl")
    return wheel


def _offline_pip() -> dict[str, str]:
    # No pip configuration from files or PIP_* variables (an index, find-links, constraints) and
    # no network: --no-index below, and only the folder of the project's wheel to find things in.
    kept = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    return {**kept, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _container(root: Path, held: dict[str, str]) -> Path:
    """A virtual environment holding only the metadata of ``held`` (all that pip's resolver reads of
    an installed package), standing for a training container; returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True)
    [site] = root.glob("lib/python*/site-packages")
    for name, version in held.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root / "bin" / "python"


def _dry_run(wheel: Path, report: Path, python: Path, *extra: str) -> subprocess.CompletedProcess:
    """``pip install --dry-run --report`` of ``sleuth[logger]`` from ``wheel`` into the environment of
    ``python``, offline: anything pip would need beyond what is installed there cannot be found."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--no-index",
         "--find-links", str(wheel.parent), "--report", str(report), f"sleuth[logger] @ {wheel.as_uri()}", *extra],
        env=_offline_pip(), capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize("container", TRAINING_CONTAINERS)
def test_the_logger_extra_installs_beside_a_torch_environment_without_changing_it(container, project_wheel,
                                                                                   tmp_path) -> None:
    held = TRAINING_CONTAINERS[container]
    report = tmp_path / "report.json"
    done = _dry_run(project_wheel, report, _container(tmp_path / "container", held))
    assert done.returncode == 0, f"pip cannot install sleuth[logger] beside {held}:\n{done.stderr}"
    installs = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
                for item in json.loads(report.read_text())["install"]}
    # sleuth itself, and nothing installed, upgraded or downgraded beside it.
    assert installs == {"sleuth": PROJECT["version"]}, f"pip would also install {installs}, over {held}"


def test_the_offline_dry_run_fails_when_a_pin_fights_an_installed_package(project_wheel, tmp_path) -> None:
    # The check above can fail: pinning grpcio (the logger extra's own dependency) away from the
    # container's version, as an exact pin in the extra would, leaves pip nothing it may install.
    held = TRAINING_CONTAINERS["oldest"]
    other = "1.49.1"
    assert held["grpcio"] != other
    pins = tmp_path / "pins.txt"
    pins.write_text(f"grpcio=={other}\n")
    done = _dry_run(project_wheel, tmp_path / "report.json", _container(tmp_path / "container", held), "-c", str(pins))
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "ResolutionImpossible" in said and f"grpcio=={other}" in said, said

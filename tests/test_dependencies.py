"""Dependencies: ranges in pyproject.toml (so the logger installs beside a training job's own
packages), exact pins in constraints.txt (so CI and the demo are reproducible), the two in agreement."""

from __future__ import annotations

import re
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

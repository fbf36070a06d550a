"""The wheel holds every package: pyproject's explicit package list names each folder with code."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_in_the_package_list():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for package, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]))
    # A folder mapped on its own (sleuth.logger = logger/) is not also a subfolder of sleuth/.
    assert found - listed == set(), "packages missing from pyproject.toml"
    assert listed - found == set(), "listed packages with no folder"

"""Type-check the package the way Python imports it: `sleuth` with every part that pyproject's
package-dir maps from a folder of its own (sleuth.logger = logger/, sleuth.stream = stream/, ...).

mypy finds a module by its folder, and the editable install maps the parts with an import hook that
mypy cannot read, so this lays the import layout out as links under build/typecheck/ and checks
`-p sleuth` there with pyproject's [tool.mypy]. Errors name the files in their own folders.

    python scripts/typecheck.py [more mypy arguments]
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "build" / "typecheck"


def package_folders() -> dict[str, Path]:
    """Each package of pyproject's package-dir -> its folder, outermost package first."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {package: ROOT / mapping[package] for package in sorted(mapping, key=lambda name: name.count("."))}


def lay_out(folders: dict[str, Path], into: Path) -> None:
    """Links that give each package its import path: a package with mapped parts inside it becomes
    a folder of links to its own entries, any other package one link to its folder."""
    for package, folder in folders.items():
        target = into.joinpath(*package.split("."))
        parts_inside = {name.split(".")[package.count(".") + 1] for name in folders if name.startswith(package + ".")}
        if not parts_inside:
            target.symlink_to(folder, target_is_directory=True)
            continue
        target.mkdir(parents=True)
        for entry in folder.iterdir():
            if entry.name not in parts_inside and entry.name != "__pycache__":
                target.joinpath(entry.name).symlink_to(entry)


def to_source_paths(report: str, folders: dict[str, Path]) -> str:
    """Rewrites each laid-out path (sleuth/logger/pump.py) as its file's own path (logger/pump.py)."""
    prefixes = sorted(((package.replace(".", "/") + "/", folder) for package, folder in folders.items()),
                      key=lambda pair: -len(pair[0]))
    pattern = re.compile("^(" + "|".join(re.escape(prefix) for prefix, _ in prefixes) + ")", re.MULTILINE)
    own = {prefix: os.path.relpath(folder, ROOT) + "/" for prefix, folder in prefixes}
    return pattern.sub(lambda match: own[match.group(1)], report)


def main(argv: list[str]) -> int:
    folders = package_folders()
    # rmtree removes the links themselves, never what they point at.
    shutil.rmtree(LAYOUT, ignore_errors=True)
    LAYOUT.mkdir(parents=True)
    lay_out(folders, LAYOUT)
    os.chdir(LAYOUT)
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                      "--cache-dir", str(ROOT / "build" / "mypy_cache"), "-p", "sleuth", *argv])
    sys.stdout.write(to_source_paths(stdout, folders))
    sys.stderr.write(stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

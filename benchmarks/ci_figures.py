"""The test suite's figures from a ``.ci/run`` log taken under GNU time; prints one JSON object.

    git clone /work/main /tmp/ci-check && cd /tmp/ci-check && /usr/bin/time -v bash .ci/run > LOG 2>&1
    .venv/bin/python benchmarks/ci_figures.py /tmp/ci-check/LOG --commit "$(git -C /tmp/ci-check rev-parse --short HEAD)"

From pytest's last summary line: the tests passed and failed, and its seconds; from GNU time's
report: the whole run's wall time (install, services, tests, type check) and its largest process
(``Maximum resident set size``: the largest of the process tree, pytest's workers included); from
mypy: whether the type check passed. There is no baseline: the figures are the goals' own
(issue 34: ``.ci/run`` within 15 minutes, the suite within 6 GiB).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

_SUMMARY = re.compile(r"^=*\s*(?P<counts>(?:\d+ \w+(?:, )?)+) in (?P<seconds>[\d.]+)s\b", re.MULTILINE)
_WALL = re.compile(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?P<clock>[\d:.]+)")
_RSS = re.compile(r"Maximum resident set size \(kbytes\): (?P<kb>\d+)")
_TYPED = re.compile(r"^Success: no issues found in (?P<files>\d+) source files", re.MULTILINE)


def figures(log: str) -> dict:
    """The figures of one ``.ci/run`` log; ``ValueError`` naming what the log lacks."""
    summaries = list(_SUMMARY.finditer(log))
    wall, rss = _WALL.search(log), _RSS.search(log)
    missing = [what for what, found in (("pytest's summary line", summaries), ("GNU time's wall clock", wall),
                                        ("GNU time's maximum resident set size", rss)) if not found]
    if missing:
        raise ValueError(f"not a .ci/run log taken under /usr/bin/time -v: no {' and no '.join(missing)}")
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summaries[-1]["counts"])}
    typed = _TYPED.search(log)
    return {"passed": counts.get("passed", 0), "failed": counts.get("failed", 0) + counts.get("errors", 0) + counts.get("error", 0),
            "pytest_s": float(summaries[-1]["seconds"]), "wall_s": _seconds(wall["clock"]),
            "max_rss_kb": int(rss["kb"]), "typecheck_files": int(typed["files"]) if typed else None}


def _seconds(clock: str) -> float:
    """GNU time's ``h:mm:ss`` or ``m:ss.cc`` in seconds."""
    total = 0.0
    for part in clock.split(":"):
        total = total * 60 + float(part)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log", type=Path, help="the .ci/run log, GNU time's report at its end")
    parser.add_argument("--commit", required=True, help="the commit the clone ran")
    args = parser.parse_args()
    try:
        found = figures(args.log.read_text(errors="replace"))
    except ValueError as error:
        raise SystemExit(f"{args.log}: {error}") from None
    json.dump({"benchmark": "ci_figures", "commit": args.commit, **found}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

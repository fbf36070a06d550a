"""What ``sleuth demo`` wrote into its folder: each incident's JSON and HTML report, and its top suspect."""

from __future__ import annotations

import json
from pathlib import Path


def written_tops(folder: Path) -> list[tuple[str, str, str]]:
    """(job prefix: demo-real or demo-spine, incident id, top suspect) of each incident the demo
    wrote into ``folder`` with suspects; each one's HTML report is checked to be there and self-contained."""
    found = []
    for path in folder.glob("*.json"):
        incident = json.loads(path.read_text())
        prefix = "demo-real" if incident["job"].startswith("demo-real") else "demo-spine"
        if incident["suspects"]:
            found.append((prefix, incident["incident"], incident["suspects"][0]["device"]))
        html = path.with_suffix(".html").read_text()
        assert "<script src=" not in html and incident["incident"] in html
    return found


def top_suspects(folder: Path) -> dict[str, str]:
    """job prefix -> top suspect of its incidents in the demo's folder (the first one read)."""
    found: dict[str, str] = {}
    for prefix, _incident, device in written_tops(folder):
        found.setdefault(prefix, device)
    return found


def slowed_gpu(folder: Path) -> str:
    from sleuth.demo.cases import RealJob, gpu_of_rank
    from sleuth.jobspec import JobSpec

    return gpu_of_rank(JobSpec.read(folder), RealJob().rank)

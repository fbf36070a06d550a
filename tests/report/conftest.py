"""An emulated job with a slow GPU, localized once per test session: the report's input."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from sleuth.cli import main
from sleuth.records_folder import read_records
from sleuth.jobspec import JobSpec
from sleuth.localizer.incident import Incident
from sleuth.sources import MemorySource
from sleuth.topology import Topology, load_topology

FABRIC = "fattree:hosts=8,gpus=8,pod=4,spines=2"
SLOW_GPU = "gpu:h0003/2"


@dataclass(frozen=True)
class Emulated:
    records: Path  # the emulator's folder
    fabric: Path  # topology YAML
    incident_json: Path  # `sleuth localize --json` output (a list of one)
    incident: Incident
    source: MemorySource
    topology: Topology


@pytest.fixture(scope="session")
def emulated(tmp_path_factory) -> Emulated:
    root = tmp_path_factory.mktemp("report-job")
    records, fabric, incident_json = root / "run", root / "fabric.yaml", root / "incidents.json"
    assert main([
        "sim", "--generate", FABRIC, "--tp", "4", "--pp", "2", "--dp", "8", "--iterations", "30",
        "--microbatches", "4", "--fault", f"{SLOW_GPU},slow=1.5,start=15", "--seed", "2", "--out", str(records),
        "--no-labels",
    ]) == 0
    assert main(["topology", "dump", "--generate", FABRIC, "-o", str(fabric)]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["localize", "--records", str(records), "--topology", str(fabric), "--json"]) == 0
    incident_json.write_text(out.getvalue())
    [document] = json.loads(out.getvalue())
    batch, iterations = read_records(records)
    return Emulated(
        records=records,
        fabric=fabric,
        incident_json=incident_json,
        incident=Incident.from_dict(document),
        source=MemorySource(JobSpec.read(records), batch, iterations),
        topology=load_topology(fabric),
    )

"""``sleuth demo``: both jobs, on the stack when it answers and embedded otherwise; what on-call sees.

For each job it prints the incident as ``sleuth incident show`` does, whether the top suspect is
the device really at fault, and writes the incident JSON and its HTML report into the output
folder. It returns whether every job's faulty device was named.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from sleuth.errors import ConfigError
from sleuth.oncall.render import incident_detail
from sleuth.report import build_report, write_report
from sleuth.settings import Settings

from sleuth.demo import MODES, embedded, stack
from sleuth.demo.cases import RealJob, SpineJob
from sleuth.demo.embedded import Outcome

__all__ = ["run_demo"]


def run_demo(out: Path, *, mode: str = "auto", settings: Settings | None = None, emulated: bool = True,
             console: Console | None = None) -> bool:
    """Run the demo into ``out``; True when every job's faulty device is its incident's top suspect."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    settings = settings or Settings.from_env()
    console = console or Console()
    if mode == "auto":
        mode = "stack" if stack.reachable(settings) else "embedded"
    elif mode == "stack" and not stack.reachable(settings):
        raise ConfigError(
            f"no stack answers at gateway {settings.gateway_host}:{settings.gateway_port} and ClickHouse "
            f"{settings.clickhouse_host}:{settings.clickhouse_port}: start it with `sleuth stack up`"
        )
    out.mkdir(parents=True, exist_ok=True)
    console.rule(f"sleuth demo ({mode}: {_explain(mode)})")
    jobs: list[tuple[str, Callable[[], Outcome]]] = [
        ("the real training job: 8 gloo ranks (tp2 pp2 dp2), rank 5 computing 0.4 s longer per micro-batch in iterations 15-31",
         lambda: embedded.real_job(RealJob(), out / "real-records", settings) if mode == "embedded"
         else stack.real_job(RealJob(), settings)),
    ]
    if emulated:
        jobs.append((
            "an emulated 4,096-GPU job (tp8 pp4 dp128, fat tree of 8 spines) with spine:s0 3x slower from iteration 15 (static routes)",
            lambda: embedded.spine_job(SpineJob()) if mode == "embedded" else stack.spine_job(SpineJob(), settings),
        ))
    found_all = True
    for title, run in jobs:
        console.print(f"\n[bold]{title}[/bold]")
        with console.status("running, detecting and localizing..."):
            outcome = run()
        try:
            found_all &= _show(outcome, out, settings, console)
        finally:
            outcome.close()
    return found_all


def _explain(mode: str) -> str:
    if mode == "stack":
        return "logger -> gateway -> Kafka -> worker -> localizer -> ClickHouse"
    return "no stack answered: the logger writes Parquet, sleuth runs in this process"


def _show(outcome: Outcome, out: Path, settings: Settings, console: Console) -> bool:
    console.print(f"job {outcome.job}: {len(outcome.irregular)} irregular iterations, "
                  f"{len(outcome.incidents)} incidents")
    for incident in outcome.incidents:
        (out / f"{incident.incident}.json").write_text(json.dumps(incident.to_dict(), indent=1))
        html = build_report(incident, outcome.source, outcome.topology, database=settings.clickhouse_database)
        report = write_report(html, out / f"{incident.incident}.html")
        console.print(incident_detail(incident, width=console.width, more=f"every one in {report}"))
        console.print(f"report: {report}")
    verdict = "[green]found[/green]" if outcome.found else "[red]missed[/red]"
    console.print(f"the device at fault, {outcome.truth}: {verdict} as the top suspect")
    return outcome.found

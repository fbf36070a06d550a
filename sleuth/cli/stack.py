"""``sleuth stack up|down|status``: Kafka, ClickHouse, Alertmanager, a gateway, a worker, a localizer and an
alerter on this machine. Unless ``SLEUTH_ALERTMANAGERS`` says otherwise, the alerter pushes to the local Alertmanager."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from sleuth.errors import ConfigError
from sleuth.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("stack", help="start, stop or show the local ingest stack")
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--repo", type=Path, help="repository holding deploy/ (default: this checkout)")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from sleuth import services
    from sleuth.stream.services import stack

    repo = args.repo or Path(__file__).resolve().parents[2]
    if not (repo / "deploy" / "services.sh").is_file():
        raise ConfigError(f"--repo: {repo} has no deploy/services.sh")
    if args.action == "up":
        settings = Settings.from_env()
        if not settings.alertmanagers:
            settings = dataclasses.replace(settings, alertmanagers=services.alertmanager_url())
        for name, pid in stack.up(repo, settings).items():
            print(f"{name} {'running (pid %d)' % pid if pid else 'failed to start: see .sleuth/stack/' + name + '.log'}")
        return 0
    if args.action == "down":
        stack.down(repo)
        print("stack stopped")
        return 0
    state = stack.status(repo)
    for name, up in state.items():
        print(f"{name} {'running' if up else 'stopped'}")
    return 0 if all(state.values()) else 3

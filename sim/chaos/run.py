"""One chaos run: a private stack, emulated jobs streaming through it, faults at random times, then the check.

After the faults stop, whatever is down comes back (as its supervisor would bring it), the loggers flush,
and the checker waits for the stack to settle: every confirmed record landed (or ``settle_s`` passed), and
the incidents unchanged for ``quiet_s`` with every one of them cited by an alert (or ``settle_s`` passed).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from sleuth.progress import progress
from sleuth.sim.chaos import check
from sleuth.sim.chaos.faults import DOWN_S, GAP_S, FaultInjector
from sleuth.sim.chaos.jobs import Fleet, Ledger
from sleuth.sim.chaos.receiver import WebhookReceiver
from sleuth.sim.chaos.stack import PROCESSES, SERVICES, PrivateStack
from sleuth.storage.incidents import incident_keys
from sleuth.stream import connect

_log = logging.getLogger(__name__)


def run_chaos(repo_root: Path, state_dir: Path, *, seconds: float, seed: int = 0, concurrent: int = 2,
              iterations: int = 40, iteration_s: float = 1.0, gap_s: tuple[float, float] = GAP_S,
              down_s: tuple[float, float] = DOWN_S, settle_s: float = 240.0, quiet_s: float = 20.0) -> dict[str, Any]:
    receiver = WebhookReceiver()
    stack = PrivateStack.create(repo_root, state_dir, alert_webhooks=receiver.url, alert_resend_s=10.0,
                                alert_backoff_s=0.2)
    started = time.monotonic()
    injector: FaultInjector | None = None
    try:
        # One bar over ``seconds`` (the run's length, stack start included, as the loop counts it); the
        # phases before and after it are named on the same bar.
        with progress("chaos: starting the private stack", total=seconds) as steps:
            stack.up()
            ledger = Ledger()
            fleet = Fleet(target=stack.gateway, ledger=ledger, spill_root=state_dir / "spill", concurrent=concurrent,
                          iterations=iterations, iteration_s=iteration_s, seed=seed)
            injector = FaultInjector(stack, fleet, seed=seed, gap_s=gap_s, down_s=down_s)
            injector.start()
            # Past ``seconds`` until every kind came once (a run that asks for all of them gets all of them), within reason.
            while time.monotonic() - started < seconds or not all(injector.counts.values()) and \
                    time.monotonic() - started < 3 * seconds:
                gone = time.monotonic() - started
                steps.reach(min(gone, seconds), description="chaos: jobs stream, faults come (seconds)" if gone < seconds
                            else "chaos: past --seconds until every fault kind came")
                fleet.tick()
                _supervise(stack, injector)
                time.sleep(0.5)
            steps.reach(seconds, description="chaos: faults stopped; settling (records landed, incidents alerted)")
            injector.stop()
            for name in SERVICES + PROCESSES:  # the supervisor brings back whatever is still down
                stack.restart(name)
            fleet.stop(flush_s=settle_s)
            figures = _settle(stack, ledger, receiver, settle_s=settle_s, quiet_s=quiet_s)
        sinks = [sink for attempt in fleet.retired for sink in attempt.sinks]
        return figures | {
            "faults_injected": dict(injector.counts),
            "fault_log": [f"{kind}: {detail}" for kind, detail in injector.log],
            "fault_errors": injector.errors,
            "jobs": len(ledger.jobs),
            "records_sent": sum(len(b) for b in ledger.handed_records),
            "records_dropped_by_loggers": sum(sink.stats()["dropped"] for sink in sinks),
            "records_held_by_loggers": sum(sink.stats()["held_bytes"] + sink.stats()["spilled_bytes"] for sink in sinks),
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        if injector is not None:
            injector.stop()  # no fault may restart a service after the stack is down
        stack.down()
        receiver.close()


def _supervise(stack: PrivateStack, injector: FaultInjector) -> None:
    """What systemd's Restart=always does: a stack process that exited (one that found Kafka down as it started
    exits) is started again, unless a fault holds it down now."""
    for name in PROCESSES:
        if name not in injector.down and stack.pid(name) is None:
            _log.warning("%s is not running; starting it again", name)
            stack.restart(name)


def _settle(stack: PrivateStack, ledger: Ledger, receiver: WebhookReceiver, *, settle_s: float,
            quiet_s: float) -> dict[str, Any]:
    database = stack.settings.clickhouse_database
    deadline = time.monotonic() + settle_s
    client = connect.clickhouse_client(stack.settings)
    try:
        while True:
            records = check.check(client, f"{database}.records", check.RECORD_KEY, ledger.jobs, ledger.records,
                                  ledger.handed_records)
            if records.lost == 0 or time.monotonic() > deadline:
                break
            time.sleep(3)
        iterations = check.check(client, f"{database}.iterations", check.ITERATION_KEY, ledger.jobs,
                                 ledger.iterations, ledger.handed_iterations)
        raised: set[tuple[str, str]] = set()
        since = time.monotonic()
        while True:
            now_raised = incident_keys(client, database, ledger.jobs)
            if now_raised != raised:
                raised, since = now_raised, time.monotonic()
            alerted = check.incidents_alerted(receiver.alerts())
            if raised <= alerted and time.monotonic() - since >= quiet_s or time.monotonic() > deadline:
                break
            time.sleep(2)
        unannounced = client.execute(f"SELECT count() FROM {database}.alerts FINAL WHERE announced = 0")[0][0]
    finally:
        client.disconnect()
    return {
        "records_confirmed": records.confirmed, "records_lost": records.lost,
        "records_double_counted": records.double_counted,
        "iterations_confirmed": iterations.confirmed, "iterations_lost": iterations.lost,
        "iterations_double_counted": iterations.double_counted,
        "incidents_raised": len(raised), "alerts_lost": len(raised - alerted),
        "alerts_received": len(receiver.alerts()), "alerts_unannounced": unannounced,
    }

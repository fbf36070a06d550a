"""Benchmark of the streaming localizer as deployed: from a slowdown's records landing in ClickHouse
to its incident written; prints one JSON object.

    bash deploy/clickhouse.sh up && bash deploy/kafka.sh up
    .venv/bin/python benchmarks/bench_live_localizer.py [--scales 8192] [--seeds 461] [--pace-s S]

Per scale (the ``scale`` suite's shape: tp8, pp4 or pp8, a slow GPU from iteration 10) and held-out
seed, the emulated job's records are inserted into a ClickHouse database of their own iteration by
iteration, as the workers insert them, one iteration every ``--pace-s`` seconds (default 2, a large
job's step: the emulator's steps are a tenth of that, which would land the whole run in one round;
an insert that takes longer sets the pace). Beside it, a ``LocalizerAgent`` runs
as ``sleuth localizer`` does: a member of its own consumer group on Kafka (which gives it the job),
its what-if rounds every ``SLEUTH_ATTRIBUTION_INTERVAL_S`` reading ClickHouse, its incidents written
to Kafka and ClickHouse. Nothing is irregular-triggered here (no worker publishes irregularities):
the slowdown's rounds alone find the fault, as they must for a job slow without a spike.

* ``sustained_at``: the fault's start + ``SLEUTH_ATTRIBUTION_SUSTAIN`` - 1, the iteration with which
  the slowdown becomes sustained; it has landed once every rank has records of the next one
  (``storage.source.landed_through``), so ``landed_s`` is when that next iteration's insert returned;
* ``latency_s``: from ``landed_s`` to the fault's incident written (its top suspect the fault; the
  agent's callback runs once the incident is on Kafka and in ClickHouse): the goal is 5 s at 8,192
  GPUs. ``round_s`` is the part of it that the opening round took (the agent's own figure, from the
  round's start), the rest is waiting for the round;
* ``opened_at``: the last iteration the incident spans;
* ``incidents_before``: incidents opened before the fault's (a pipeline split the layout makes
  uneven pays from the first step);
* the same-run baseline ``offline_s``: the same window attributed in memory the way ``sleuth
  localize`` does offline (no services), and ``ratio`` = latency_s / offline_s.

The job's records are inserted by a process of their own, as a worker's are: on this 2-core machine
the inserts, ClickHouse and the agent share the cores, where a deployment's workers and ClickHouse
run elsewhere. ``--agent-cpus`` and ``--writer-cpus`` keep the two apart (pin ClickHouse with the
writer: ``taskset -a -cp 1 $(cat .sleuth/clickhouse/pid)``), the localizer then on a machine of its own.
The database and topics are dropped at the end. Times are wall seconds: compare within one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import platform
import queue
import threading
import time
import uuid
from dataclasses import replace

import numpy as np

import allocator_option
from bench_streaming_attribution import window_attribution_s


def _private(settings):
    """``settings`` with a ClickHouse database, topics and a consumer group of this run's own, made."""
    from sleuth.storage import schema
    from sleuth.stream import connect

    tag = uuid.uuid4().hex[:10]
    private = dataclasses.replace(
        settings, clickhouse_database=f"bench_live_{tag}", irregularities_topic=f"sleuth-irregularities-{tag}",
        incidents_topic=f"sleuth-incidents-{tag}", localizer_group=f"sleuth-localizers-{tag}",
    )
    client = connect.clickhouse_client(private)
    schema.migrate(client, private.clickhouse_database)
    client.disconnect()
    connect.ensure_topics(private, {private.irregularities_topic: 1, private.incidents_topic: 1})
    return private


def _drop(settings) -> None:
    from kafka import KafkaAdminClient

    from sleuth.stream import connect

    client = connect.clickhouse_client(settings)
    client.execute(f"DROP DATABASE IF EXISTS {settings.clickhouse_database}")
    client.disconnect()
    tag = settings.localizer_group.rsplit("-", 1)[1]
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:  # the run's topics and those faust made for its group
        admin.delete_topics([topic for topic in admin.list_topics() if tag in topic])
    finally:
        admin.close()


def _insert_at_pace(settings, records, rows, spec, pace_s: float, go, stop, written, cpus: set[int] | None) -> None:
    """The workers' part, in a process of its own (on ``cpus`` where given): each iteration inserted
    in turn, one every ``pace_s`` from ``go``, until ``stop``; puts (iteration, monotonic time its
    insert returned, seconds it took) on ``written``, then None."""
    from sleuth.storage.sink import ClickHouseSink
    from sleuth.stream import connect

    if cpus:
        os.sched_setaffinity(0, cpus)

    sink = ClickHouseSink(connect.clickhouse_client(settings), settings.clickhouse_database)
    go.wait()
    started = time.monotonic()
    for it in np.unique(rows["iteration"]).tolist():
        time.sleep(max(0.0, started + it * pace_s - time.monotonic()))
        if stop.is_set():
            break
        began = time.monotonic()
        sink.write(records.take(records["iteration"] == it), rows.take(rows["iteration"] == it), [spec])
        written.put((it, time.monotonic(), time.monotonic() - began))
    written.put(None)


def _next_insert(written, writer) -> tuple | None:
    """The writer's next (iteration, when its insert returned, seconds it took); None once it is done."""
    while True:
        try:
            return written.get(timeout=1.0)
        except queue.Empty:
            if writer.exitcode is not None:  # it died without its None: its insert failed
                raise RuntimeError(f"the records' writer exited with {writer.exitcode}") from None


def _wait_for_partitions(agent, timeout_s: float = 120.0) -> None:
    """Until the group gave the agent its partition: a round before owns no job."""
    deadline = time.monotonic() + timeout_s
    while not (agent.ownership and agent.ownership.owned):
        if time.monotonic() > deadline:
            raise TimeoutError("the localizer was not assigned the irregularities topic's partition")
        time.sleep(0.2)


def run(world: int, seed: int, iterations: int, pace_s: float, settle_s: float,
        agent_cpus: set[int] | None = None, writer_cpus: set[int] | None = None) -> dict:
    from sleuth.settings import Settings
    from sleuth.sim import Emulation, suite
    from sleuth.stream import connect
    from sleuth.stream.services.localizer_agent import LocalizerAgent

    [scenario] = [sc for sc in suite("scale", seed=seed) if sc.layout.world == world]
    emulation = Emulation(replace(scenario, iterations=iterations))
    records, rows = emulation.records(), emulation.iterations()
    spec, fault = emulation.job_spec(), emulation.truth().faults[0]
    settings = _private(Settings.from_env())
    sustained_at = int(fault["start"]) + settings.attribution_sustain - 1
    if sustained_at + 1 >= iterations:
        raise SystemExit(f"--iterations {iterations}: the slowdown is sustained at {sustained_at} and lands with the next")
    # Forked before any thread starts; the child reads the records the parent made (copy on write).
    forked = multiprocessing.get_context("fork")
    go, stop, written = forked.Event(), forked.Event(), forked.Queue()
    writer = forked.Process(target=_insert_at_pace, args=(settings, records, rows, spec, pace_s, go, stop, written,
                                                          writer_cpus))
    writer.start()
    before = os.sched_getaffinity(0)
    if agent_cpus:  # this thread's, inherited by the agent's threads started after it
        os.sched_setaffinity(0, agent_cpus)
    opened: list[tuple] = []  # (incident, seconds from its round's start, monotonic time written)
    agent = LocalizerAgent(settings, client=connect.clickhouse_client(settings), topology=scenario.topology,
                           on_incident=lambda incident, latency: opened.append((incident, latency, time.monotonic())))
    halt = threading.Event()
    thread = threading.Thread(target=agent.run, args=(halt,), daemon=True)
    thread.start()
    landed_at: dict[int, float] = {}
    inserts: list[float] = []
    try:
        _wait_for_partitions(agent)
        go.set()
        while (done := _next_insert(written, writer)) is not None:
            it, landed_at[it], seconds = done
            inserts.append(seconds)
            if _fault_incident(opened, fault["device"]) is not None:
                stop.set()
        deadline = time.monotonic() + settle_s
        while _fault_incident(opened, fault["device"]) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        found = _fault_incident(opened, fault["device"])
    finally:
        stop.set()
        writer.join(timeout=60)
        halt.set()
        thread.join(timeout=60)
        os.sched_setaffinity(0, before)
        _drop(settings)
    landed = landed_at.get(sustained_at + 1)
    row = {
        "world": world, "seed": seed, "records_per_iteration": len(records) // iterations,
        "pace_s": pace_s, "job_iteration_s": round(float(np.median(rows["t_end_ns"] - rows["t_start_ns"])) / 1e9, 3),
        "insert_s": {"median": round(float(np.median(inserts)), 2), "max": round(max(inserts), 2)},
        "interval_s": settings.attribution_interval_s, "sustained_at": sustained_at, "rounds": agent.rounds,
        "agent_cpus": sorted(agent_cpus or ()), "writer_cpus": sorted(writer_cpus or ()),
        "incidents_before": [
            {"cause": i.cause.value, "top": i.suspects[0].device if i.suspects else None,
             "iterations": [int(i.iterations[0]), int(i.iterations[-1])]}
            for i, _, _ in opened if found is None or i is not found[0]
        ],
    }
    if found is None or landed is None:
        return row | {"opened_at": None, "latency_s": None}
    incident, round_s, at = found
    offline_s = window_attribution_s(records, rows, spec, sustained_at, settings.attribution_window)
    latency = at - landed
    return row | {
        "opened_at": int(incident.iterations[-1]), "trigger": incident.attribution.trigger if incident.attribution else "irregular",
        "top": incident.suspects[0].device, "latency_s": round(latency, 2), "round_s": round(round_s, 2),
        "offline_s": round(offline_s, 2), "ratio": round(latency / offline_s, 3),
    }


def _fault_incident(opened: list[tuple], device: str) -> tuple | None:
    """The first incident whose top suspect is ``device``, with its round's seconds and when it was written."""
    return next(((i, s, at) for i, s, at in opened if i.suspects and i.suspects[0].device == device), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[8192])
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[461])
    parser.add_argument("--pace-s", type=float, default=2.0, help="seconds between two iterations' inserts")
    parser.add_argument("--settle-s", type=float, default=60.0,
                        help="how long to wait for the fault's incident after the last insert")
    parser.add_argument("--agent-cpus", type=int, nargs="+", metavar="CPU",
                        help="the CPUs the localizer runs on (default: any), as its own machine's would be")
    parser.add_argument("--writer-cpus", type=int, nargs="+", metavar="CPU",
                        help="the CPUs the records' writer runs on (default: any)")
    allocator_option.add(parser)
    args = parser.parse_args()
    from sleuth.progress import track

    tuned = allocator_option.apply(args)
    runs = [(world, seed) for world in args.scales for seed in args.seeds]
    cpus = {"agent_cpus": set(args.agent_cpus or ()), "writer_cpus": set(args.writer_cpus or ())}
    rows = [run(world, seed, args.iterations, args.pace_s, args.settle_s, **cpus)
            for world, seed in track(runs, "live localizer runs")]
    print(json.dumps({"benchmark": "live_localizer", "machine": platform.machine(), "allocator": tuned, "rows": rows},
                     indent=2))


if __name__ == "__main__":
    main()

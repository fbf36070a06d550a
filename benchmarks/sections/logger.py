"""The logger's sections: ``bench_logger_hotpath.py`` (ns per operator), ``bench_logger_overhead.py``
(the job's step, a row per capture), ``bench_logger_outage.py`` (memory while the collector is away),
``bench_logger_hooks.py`` (the hooks' own CPU, a row per capture), ``bench_logger_cuda.py`` (the
CUDA-event path on a GPU), ``bench_nccl_profiler.py`` (the NCCL profiler plugin's CPU) and
``bench_nccl_gpu.py`` (the plugin under real NCCL on a GPU)."""

from __future__ import annotations

from statistics import median

from .cells import require, table

__all__ = ["cuda_section", "hooks_section", "hotpath_section", "nccl_gpu_section", "nccl_section", "outage_section",
           "overhead_section"]


def hotpath_section(document: dict) -> str:
    """``bench_logger_hotpath.py``'s medians, the C recorder and its Python twin, alone and through
    ``Session``, with the no-op baseline, as markdown."""
    require(document, "bench_logger_hotpath.py", "ns_per_op_median", benchmark="logger_hotpath")
    ns = document["ns_per_op_median"]
    lines = ["| ns per operator, `begin` + `end` | C | Python twin | Python / C |", "|---|---|---|---|"]
    for key, what in (("recorder", "the recorder"), ("session", "through `Session` (sequence numbers and iteration added)")):
        lines.append(f"| {what} | {ns[f'{key}_c']:,.0f} | {ns[f'{key}_python']:,.0f} "
                     f"| {document[f'ratio_python_over_c_{key}']:.2f} |")
    return "\n".join(lines) + "\n" + (
        f"\nMedian of {document['repeats']} runs of {document['ops_per_run']:,} operators; goal for C: "
        f"≤ {document['goal_c_ns']} ns. Baseline (a no-op method called twice an operator): "
        f"{ns['baseline_noop_calls']:,.0f} ns, the C recorder {document['ratio_c_recorder_over_noop_baseline']:.2f} times it.\n")


def overhead_section(documents: list[dict]) -> str:
    """A row per ``bench_logger_overhead.py`` run: the logger on against off (the same-run baseline),
    CPU per step and wall step time, the median ratio over rounds and its range, as markdown."""
    require(documents, "bench_logger_overhead.py", "capture", benchmark="logger_step_overhead")
    lines = ["| capture | rounds × iterations | CPU per step, on / off (per round) | wall step, on / off (per round) "
             "| CPU ms per step, off → on (median round) |", "|---|---|---|---|---|"]
    for d in documents:
        cpu = d["cpu"]["step_ms"]
        lines.append(f"| {d['capture']} | {d['rounds']} × {d['iters']}{', together' if d.get('together') else ''} "
                     f"| {_ratio(d['cpu'])} | {_ratio(d['wall'])} | {median(cpu['off']):.1f} → {median(cpu['on']):.1f} |")
    return "\n".join(lines) + "\n"


def _ratio(figures: dict) -> str:
    rounds = figures["ratio_on_over_off_per_round"]
    return f"{figures['ratio_on_over_off_median']:.3f} ({min(rounds):.3f}-{max(rounds):.3f})"


def outage_section(document: dict) -> str:
    """``bench_logger_outage.py``'s memory held, resident-set growth over the same-run baseline,
    spill and drops while no collector listens, as markdown."""
    require(document, "bench_logger_outage.py", "peak_held_mib", benchmark="logger_outage_memory")
    d = document
    return table(["fed (records)", "held in memory at most (bound)", "resident set over the baseline", "spilled (bound)",
                  "records dropped and counted"],
                 [[f"{d['fed_mib']:,.0f} MiB ({d['records']:,})", f"{d['peak_held_mib']:.1f} MiB ({d['buffer_bound_mib']})",
                   f"+{d['rss_growth_over_baseline_mib']:.0f} MiB", f"{d['spilled_mib']:.0f} MiB ({d['spill_bound_mib']})",
                   f"{d['dropped_records_counted']:,}"]])


def hooks_section(documents: list[dict]) -> str:
    """A row per ``bench_logger_hooks.py`` run (a capture each): ns per operator without the hooks
    (the same-run baseline) and with, the hooks' own, their ratio and torch's hook floor, as markdown."""
    require(documents, "bench_logger_hooks.py", "hooks_ns_per_op_median_paired", benchmark="logger_hooks_per_operator")
    lines = ["| capture (hooks) | ns per operator without hooks | with | hooks' own (median paired) | interquartile, paired "
             "| ratio | torch's hook floor |", "|---|---|---|---|---|---|---|"]
    for d in documents:
        low, high = d["hooks_ns_per_op_iqr_paired"]
        floor = d.get("torch_hook_floor_ns_per_op")
        lines.append(f"| {d['capture']} (`{d['hooks']}`) | {d['baseline_ns_per_op_without_hooks']:,} | {d['ns_per_op_with_hooks']:,} "
                     f"| {d['hooks_ns_per_op_median_paired']:,} | {low:,}-{high:,} | {d['ratio_with_over_without']:.2f} "
                     f"| {'—' if floor is None else f'{floor:,}'} |")
    return "\n".join(lines) + "\n"


def cuda_section(document: dict) -> str:
    """``bench_logger_cuda.py``'s CUDA-event path on a GPU: the recorder against two
    ``cudaEventRecord`` calls, operators behind a busy kernel, the hooks on NCCL against the bare
    all-reduce, and the launch queue, as markdown."""
    require(document, "bench_logger_cuda.py", "hot_path", benchmark="logger_cuda_path")
    hot, busy, queue, hooks = document["hot_path"], document["never_synchronizes"], document["launch_queue"], document["hooks"]
    written = hooks["behind_a_kernel"]
    return "\n".join([
        f"| on one {document['gpu']} (torch {document['torch']}) | figure | same-run baseline |", "|---|---|---|",
        f"| `begin_cuda` + `end_cuda`, ns per operator (median of {hot['repeats']} × {hot['ops_per_run']:,}) "
        f"| {hot['cuda_ns_per_op_median']:,.0f} | two `cudaEventRecord` calls at {hot['cuda_event_record_ns']:,.0f} each "
        f"(ratio {hot['ratio_cuda_over_two_event_records']:.2f}); host-clock `begin` + `end` {hot['host_ns_per_op_median']:,.0f} |",
        f"| {busy['ops']:,} operators behind a {busy['kernel_s']:g} s kernel | stream busy after issuing: "
        f"{'yes' if busy['stream_busy_after_issuing'] else 'no'}; completed by a poll while busy: {busy['completed_by_a_poll_while_busy']:,} | - |",
        f"| hooks on NCCL, ns per all-reduce (median paired) | +{hooks['hooks_ns_per_op_median_paired']:,} "
        f"(ratio {hooks['ratio_with_over_without']:.2f}) | {hooks['baseline_ns_per_all_reduce_without_hooks']:,} without the hooks |",
        f"| all-reduces through the hooks, records written | {written['records_written']:,} of {written['records_expected']:,}, "
        f"{written['dropped']:,} dropped | - |",
        f"| calls queued behind a busy kernel before one waits | {queue['logged_operators_queued_before_a_call_waits']:,} logged "
        f"operators | {queue['kernel_launches_queued_before_a_call_waits']:,} plain kernel launches |",
    ]) + "\n"


def nccl_section(document: dict) -> str:
    """``bench_nccl_profiler.py``'s wall ns per operator on NCCL's calling threads with sleuth's
    plugin against the counting plugin (the same-run baseline), as markdown."""
    require(document, "bench_nccl_profiler.py", "ns_per_op_baseline_plugin", benchmark="nccl_profiler")
    d = document
    return table(["ns per operator (median of runs)", "sleuth's plugin", "a plugin that only mallocs and frees (baseline)",
                  "added", "ratio", "records written a run"],
                 [[f"{d['repeats']} × {d['iters']:,} iterations", f"{d['ns_per_op_sleuth']:,.0f}",
                   f"{d['ns_per_op_baseline_plugin']:,.0f}", f"+{d['ns_per_op_added']:,.0f}", f"{d['ratio']:.2f}",
                   f"{d['records_written_per_run']:,}"]])


def nccl_gpu_section(document: dict) -> str:
    """``bench_nccl_gpu.py``'s plugin under real NCCL: a small all-reduce and a DDP step with the
    plugin against without it (the same-run baselines), and each job's records per rank against
    torch's own count of the c10d operators it ran, as markdown."""
    require(document, "bench_nccl_gpu.py", "environment", "op_loop", "ddp_steps")
    env, loop, steps = document["environment"], document["op_loop"], document["ddp_steps"]
    lines = [f"| on one {env['gpu']} (NCCL {env['nccl']}, torch {env['torch']}) | with the plugin | same-run baseline |",
             "|---|---|---|",
             f"| {loop['bytes']:,}-byte all-reduce, wall ns per operator ({loop['world']} ranks; each round the median "
             f"over {loop['blocks']} blocks of {loop['ops_per_block']:,}, off and on alternately in "
             f"{len(loop['ns_per_op_on'])} rounds) | {loop['median_on']:,.0f} | {loop['median_off']:,.0f} without it "
             f"(ratio {loop['ratio']:.2f}) |",
             f"| DDP step, ms ({steps['world']} ranks, {len(steps['step_ms_on'])} rounds of {steps['iters']} steps) "
             f"| {steps['median_on']:.2f} | {steps['median_off']:.2f} without it (ratio {steps['ratio']:.3f}) |"]
    jobs = [(name.replace("_", " "), document[name]) for name in ("ddp_fault", "ddp_fault_from_start") if name in document]
    jobs += [(name, job) for name, job in (document.get("coverage") or {}).items() if isinstance(job, dict)]
    for name, job in jobs:
        counted = {rank: sum(ops.values()) if isinstance(ops, dict) else ops for rank, ops in job["c10d_ops_counted"].items()}
        recorded = job["records_per_rank"]
        same = all(recorded.get(rank) == count for rank, count in counted.items())
        lines.append(f"| {name}: records per rank | {', '.join(f'{recorded[r]:,}' for r in sorted(recorded))} "
                     f"| torch's c10d operators counted: {', '.join(f'{counted[r]:,}' for r in sorted(counted))}"
                     f"{'' if same else ' (differ)'} |")
    return "\n".join(lines) + "\n"

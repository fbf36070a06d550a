"""sleuth's NCCL profiler plugin under real NCCL on a GPU machine; prints one JSON object.

    python benchmarks/bench_nccl_gpu.py --out FOLDER [--world 4] [--ops 3000] [--iters 150]

Needs torch with CUDA, NCCL 2.26 or later (profiler API v4/v5) and gcc (the plugin is built
first). Ranks are separate processes, started as a launcher would (``RANK``, ``WORLD_SIZE``,
``MASTER_PORT``). When the machine has fewer GPUs than ranks, the ranks share GPU 0 and each
plays a host of its own: its own UTS namespace and host name (``unshare --uts``, as root) and
its own ``NCCL_HOSTID``, so NCCL connects them over its socket transport on loopback as it would
across nodes, and the plugin and importer see one GPU per host. The parts:

* ``op_loop``: two ranks all-reduce a small tensor ``ops`` times per block; wall ns per operator,
  the median over blocks, plugin off and on alternately in two rounds; the plugin's records are
  counted against the operators issued.
* ``ddp_steps``: the DDP job of ``sleuth.sim.frameworkjob --device cuda`` (several buckets from
  DDP's C++ reducer), ``iters`` steps, off and on alternately in two rounds; the median step time.
* ``ddp_fault``: the same job with the plugin and rank ``slow-rank`` computing ``slow-factor``
  times longer on its GPU from a third of the run on; every rank counts the c10d operators
  torch's profiler sees it run (``--count-ops``). Its records, results and ground truth are left
  in ``FOLDER/fault`` for ``sleuth import nccl-profiler`` and ``sleuth localize``.
* ``ddp_fault_from_start``: the same, slow from the first step on (``FOLDER/fault-from-start``).
* ``ddp_ramp``: the same, the factor growing from 1 at a third of the run to ``slow-factor`` at its
  end (``FOLDER/ramp``); ``ddp_moderate``: a step of ``MODERATE_FACTOR`` (``FOLDER/moderate``).
* ``ddp_seqlen``: the same job without a fault but with uneven batches: each step one rank
  computes ``slow-factor`` times its base work and the others 1 to that on a long tail, the
  costly rank moving per step (``--seqlen-jitter``; ``FOLDER/seqlen``).
* ``coverage``: the FSDP2 and functional-collective (DTensor) jobs with the plugin, each rank's
  records against the c10d operators torch's profiler counts (``FOLDER/fsdp``, ``FOLDER/functional``).
* ``jax_fault``: the JAX data-parallel job of ``sleuth.sim.jaxjob`` (XLA's all-reduces over NCCL),
  rank ``slow-rank`` slowed from a third of the run on (``FOLDER/jax-fault``); ``jax_clean``: the
  same without a fault (``FOLDER/jax-clean``). Needs jax with CUDA.
* ``ddp_killed``: the DDP fault job, slowed from step 200 and killed (SIGKILL) ``kill-after``
  seconds in, before NCCL finalizes: what the plugin wrote on its own (``FOLDER/killed``).

``--parts`` picks some of them (``--parts ddp_fault,coverage``). ``--mps`` runs the ranks under a
private CUDA MPS server (started and stopped by the benchmark): without it, ranks sharing one GPU
take turns in time slices of a few milliseconds, which sets every collective's length (an
all-reduce of 4 KiB took 4.5 ms) and lets its members end apart, as no job with a GPU per rank does.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sleuth.importers.nccl_profiler import read_dumps
from sleuth.ports import free_port
from sleuth.progress import track

ROOT = Path(__file__).resolve().parent.parent
JOB_TIMEOUT_S = 180
#: ``ddp_moderate``'s factor on the slow rank's compute: a step of 10-15% in what the job pays.
MODERATE_FACTOR = 1.15


def build_plugin(out: Path) -> Path:
    subprocess.run(["make", "-s", "-C", str(ROOT / "logger" / "nccl_profiler"), f"OUT={out}"], check=True)
    return out / "libnccl-profiler-sleuth.so"


def _own_hosts() -> bool:
    """Whether each rank can get a host name of its own (a UTS namespace needs root)."""
    return subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode == 0


def launch(world: int, argv: list[str], env: dict[str, str], *, shared_gpu: bool, own_hosts: bool, logs: Path) -> None:
    """Run ``argv`` as ``world`` ranks, each one's output in ``logs/rank-<r>.log``. Raises on any failure."""
    procs = start_ranks(world, argv, env, shared_gpu=shared_gpu, own_hosts=own_hosts, logs=logs)
    deadline, failed = time.monotonic() + JOB_TIMEOUT_S, []
    for rank, proc in enumerate(procs):
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            proc.wait()
            failed.append(f"rank {rank}: timed out after {JOB_TIMEOUT_S} s")
        if proc.returncode:
            failed.append(f"rank {rank}: exit {proc.returncode}: {(logs / f'rank-{rank}.log').read_text()[-1500:]}")
    if failed:
        raise RuntimeError("; ".join(failed))


def start_ranks(world: int, argv: list[str], env: dict[str, str], *, shared_gpu: bool, own_hosts: bool,
                logs: Path) -> list[subprocess.Popen]:
    """Start ``argv`` as ``world`` ranks (see ``launch``); returns their processes."""
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    procs = []
    for rank in range(world):
        rank_env = dict(os.environ, **env, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=str(port), LOCAL_RANK="0" if shared_gpu else str(rank))
        command = [sys.executable, *argv]
        if shared_gpu:
            # NCCL refuses two ranks of one host on one GPU; as separate hosts they talk over sockets.
            rank_env.update(NCCL_HOSTID=f"sleuth-node{rank}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
            if own_hosts:
                command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', f"node{rank}", *command]
        with open(logs / f"rank-{rank}.log", "w") as log:
            procs.append(subprocess.Popen(command, env=rank_env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
    return procs


def _records_per_rank(folder: Path) -> dict[int | None, int]:
    """The plugin's records in ``folder``, per global rank (read as the importer reads them)."""
    written: dict[int | None, int] = {}
    for dump in read_dumps(folder):
        written[dump.global_rank] = written.get(dump.global_rank, 0) + len(dump.records)
    return written


def _plugin_env(plugin: Path | None, log_dir: Path, job: str) -> dict[str, str]:
    if plugin is None:
        return {}
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    return {"NCCL_PROFILER_PLUGIN": str(plugin), "SLEUTH_LOG_DIR": str(log_dir), "SLEUTH_JOB": job}


# -- one rank of the operator loop -------------------------------------------------------------


def op_loop_rank(ops: int, blocks: int, nbytes: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    tensor = torch.ones(nbytes // 4, device="cuda")
    for _ in range(100):  # connections and NCCL's first-use costs out of the timed blocks
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    per_op = []
    for _ in range(blocks):
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        for _ in range(ops):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        per_op.append((time.perf_counter_ns() - start) / ops)
    dist.barrier()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps({"ns_per_op": per_op, "issued": 100 + blocks * (ops + 1) + 1}))


# -- the parts ---------------------------------------------------------------------------------


def op_loop(plugin: Path, work: Path, args: argparse.Namespace, hosts: dict) -> dict:
    runs: dict[str, list[float]] = {"off": [], "on": []}
    written = issued = 0
    for _ in range(2):
        for mode in ("off", "on"):
            result = work / f"loop-{mode}.json"
            env = _plugin_env(plugin if mode == "on" else None, work / "loop-records", "gpu-op-loop")
            argv = [__file__, "--op-loop-rank", str(args.ops), str(args.blocks), str(args.bytes), str(result)]
            launch(2, argv, env, **hosts, logs=work / "logs" / f"loop-{mode}")
            data = json.loads(result.read_text())
            runs[mode].append(statistics.median(data["ns_per_op"]))
            if mode == "on":
                written, issued = sum(_records_per_rank(work / "loop-records").values()), 2 * data["issued"]
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    return {"world": 2, "bytes": args.bytes, "ops_per_block": args.ops, "blocks": args.blocks,
            "ns_per_op_off": runs["off"], "ns_per_op_on": runs["on"], "median_off": off, "median_on": on,
            "ratio": on / off, "records_written_last_run": written, "operators_issued_last_run": issued}


def _job(work: Path, name: str, extra: list[str], env: dict[str, str], args: argparse.Namespace, hosts: dict,
         *, mode: str = "ddp", iters: int | None = None) -> list[dict]:
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    argv = ["-m", "sleuth.sim.frameworkjob", "--mode", mode, "--device", "cuda", "--world", str(args.world),
            "--iters", str(iters or args.iters), "--out", str(out), *extra]
    launch(args.world, argv, env, **hosts, logs=work / "logs" / name.replace("/", "-"))
    return [json.loads((out / f"result-{rank}.json").read_text()) for rank in range(args.world)]


def ddp_steps(plugin: Path, work: Path, args: argparse.Namespace, hosts: dict) -> dict:
    runs: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(2):
        for mode in ("off", "on"):
            env = _plugin_env(plugin if mode == "on" else None, work / "steps-records", "gpu-ddp-steps")
            results = _job(work, f"steps-{mode}", [], env, args, hosts)
            warm = args.iters // 5  # NCCL's connections and the allocator settle in the first steps
            runs[mode].append(statistics.median(t for r in results for t in r["step_times"][warm:]) * 1e3)
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    return {"world": args.world, "iters": args.iters, "step_ms_off": runs["off"], "step_ms_on": runs["on"],
            "median_off": off, "median_on": on, "ratio": on / off}


def ddp_fault(plugin: Path, work: Path, args: argparse.Namespace, hosts: dict, *, name: str = "fault",
              from_start: bool = False, ramp: bool = False, factor: float | None = None) -> dict:
    records = work / name / "records"
    env = _plugin_env(plugin, records, f"gpu-ddp-{name}")
    start, factor = 0 if from_start else args.iters // 3, factor or args.slow_factor
    extra = ["--count-ops", "--slow-rank", str(args.slow_rank), "--slow-factor", str(factor),
             "--slow-iters", f"{start}:{args.iters}", *(["--ramp"] if ramp else [])]
    results = _job(work, f"{name}/out", extra, env, args, hosts)
    counted = {r["rank"]: sum(r["c10d_ops"].values()) for r in results}
    return {"world": args.world, "iters": args.iters, "slow_rank": args.slow_rank, "slow_factor": factor,
            "slow_from": start, "ramp": ramp, "c10d_ops_counted": counted, "records_per_rank": _records_per_rank(records),
            "step_ms_median_per_rank": _median_steps_ms(results), "folder": str(work / name)}


def _median_steps_ms(results: list[dict]) -> dict[int, float]:
    return {r["rank"]: round(statistics.median(r["step_times"]) * 1e3, 3) for r in results}


def jax_fault(plugin: Path, work: Path, args: argparse.Namespace, hosts: dict, *, name: str = "jax-fault",
              slowed: bool = True) -> dict:
    """The JAX data-parallel job of ``sleuth.sim.jaxjob`` (XLA's own all-reduces over NCCL) with the
    plugin; rank ``slow-rank`` computes ``slow-factor`` times longer on its GPU from a third of the
    run on (``slowed``), else no fault. Records and ground truth in ``FOLDER/<name>``."""
    records = work / name / "records"
    env = dict(_plugin_env(plugin, records, f"gpu-{name}"), XLA_PYTHON_CLIENT_PREALLOCATE="false",
               JAX_PLATFORMS="cuda")  # no CPU backend: its gloo cannot resolve a rank's own host name
    out = work / name / "out"
    shutil.rmtree(out, ignore_errors=True)
    fault = ["--slow-rank", str(args.slow_rank), "--slow-factor", str(args.slow_factor),
             "--slow-iters", f"{args.iters // 3}:{args.iters}"] if slowed else []
    launch(args.world, ["-m", "sleuth.sim.jaxjob", "--iters", str(args.iters), "--out", str(out), *fault], env,
           **hosts, logs=work / "logs" / name)
    results = [json.loads((out / f"result-{rank}.json").read_text()) for rank in range(args.world)]
    return {"world": args.world, "iters": args.iters, "slow_rank": args.slow_rank if slowed else None,
            "slow_factor": args.slow_factor if slowed else 1.0, "slow_from": args.iters // 3 if slowed else None,
            "records_per_rank": _records_per_rank(records), "step_ms_median_per_rank": _median_steps_ms(results),
            "folder": str(work / name)}


def ddp_seqlen(plugin: Path, work: Path, args: argparse.Namespace, hosts: dict) -> dict:
    """The DDP job with uneven batches (``--seqlen-jitter``: one rank's compute up to ``slow-factor``
    times its base each step, on a rank that moves) and no fault, for ``sleuth localize``."""
    records = work / "seqlen" / "records"
    env = _plugin_env(plugin, records, "gpu-ddp-seqlen")
    _job(work, "seqlen/out", ["--seqlen-jitter", str(args.slow_factor), "--seed", "1"], env, args, hosts)
    return {"world": args.world, "iters": args.iters, "seqlen_jitter": args.slow_factor,
            "records_per_rank": _records_per_rank(records), "folder": str(work / "seqlen")}


def ddp_killed(plugin: Path, work: Path, args: argparse.Namespace, hosts: dict) -> dict:
    """The DDP job with rank ``slow-rank`` slowed from step 200, every rank killed (SIGKILL) ``kill-after``
    seconds after its start, long before its last step: NCCL never finalizes, and the records are
    what the plugin wrote on its own (``FOLDER/killed``)."""
    records = work / "killed" / "records"
    env = _plugin_env(plugin, records, "gpu-ddp-killed")
    out = work / "killed" / "out"
    shutil.rmtree(out, ignore_errors=True)
    argv = ["-m", "sleuth.sim.frameworkjob", "--mode", "ddp", "--device", "cuda", "--world", str(args.world),
            "--iters", "1000000", "--out", str(out), "--slow-rank", str(args.slow_rank), "--slow-factor",
            str(args.slow_factor), "--slow-iters", "200:1000000"]
    procs = start_ranks(args.world, argv, env, **hosts, logs=work / "logs" / "killed")
    time.sleep(args.kill_after)
    running = [proc.poll() is None for proc in procs]
    for proc in procs:
        proc.kill()
        proc.wait()
    return {"world": args.world, "slow_rank": args.slow_rank, "slow_factor": args.slow_factor, "slow_from": 200,
            "killed_after_s": args.kill_after, "running_when_killed": running,
            "records_per_rank": _records_per_rank(records), "folder": str(work / "killed")}


def coverage(plugin: Path, work: Path, args: argparse.Namespace, hosts: dict) -> dict:
    """FSDP2 and functional collectives / DTensor under the plugin: records against torch's count."""
    found = {}
    for mode in ("fsdp", "functional"):
        records = work / mode / "records"
        results = _job(work, f"{mode}/out", ["--count-ops"], _plugin_env(plugin, records, f"gpu-{mode}"), args, hosts,
                       mode=mode, iters=args.coverage_iters)
        found[mode] = {"c10d_ops_counted": {r["rank"]: r["c10d_ops"] for r in results},
                       "records_per_rank": _records_per_rank(records), "folder": str(work / mode)}
    return found


PARTS = {"op_loop": op_loop, "ddp_steps": ddp_steps, "ddp_fault": ddp_fault,
         "ddp_fault_from_start": functools.partial(ddp_fault, name="fault-from-start", from_start=True),
         "ddp_ramp": functools.partial(ddp_fault, name="ramp", ramp=True),
         "ddp_moderate": functools.partial(ddp_fault, name="moderate", factor=MODERATE_FACTOR),
         "ddp_seqlen": ddp_seqlen, "coverage": coverage,
         "jax_fault": jax_fault, "jax_clean": functools.partial(jax_fault, name="jax-clean", slowed=False),
         "ddp_killed": ddp_killed}


@contextlib.contextmanager
def mps_server(folder: Path):
    """A private CUDA MPS server (its pipe and log folders under ``folder``) for the ranks started inside."""
    pipe, logs = folder / "mps-pipe", folder / "mps-log"
    pipe.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logs)}
    subprocess.run(["nvidia-cuda-mps-control", "-d"], env=dict(os.environ, **env), check=True)
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, env=dict(os.environ), check=False)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def environment() -> dict:
    import torch

    return {"gpu": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "python": platform.python_version(), "host_cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="folder for the records and results (kept); required")
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--ops", type=int, default=3000, help="all-reduces per block of the operator loop")
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--bytes", type=int, default=4096, help="the operator loop's tensor")
    parser.add_argument("--iters", type=int, default=150, help="steps of each DDP run")
    parser.add_argument("--slow-rank", type=int, default=2)
    parser.add_argument("--slow-factor", type=float, default=4.0)
    parser.add_argument("--coverage-iters", type=int, default=20, help="steps of each FSDP / functional run")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--mps", action="store_true", help="run the ranks under a private CUDA MPS server")
    parser.add_argument("--kill-after", type=float, default=30.0, help="ddp_killed: seconds before every rank is killed")
    parser.add_argument("--op-loop-rank", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.op_loop_rank:
        ops, blocks, nbytes, out = args.op_loop_rank
        op_loop_rank(int(ops), int(blocks), int(nbytes), out)
        return
    if not args.out:
        parser.error("--out FOLDER is required")
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        parser.error(f"--parts: unknown {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench_nccl_gpu: torch sees no CUDA GPU")
    work = Path(args.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict = {"environment": environment()}
    shared = torch.cuda.device_count() < args.world
    hosts = {"shared_gpu": shared, "own_hosts": shared and _own_hosts()}
    report["ranks"] = dict(hosts, mps=args.mps)
    with tempfile.TemporaryDirectory() as build, mps_server(Path(build)) if args.mps else contextlib.nullcontext():
        plugin = build_plugin(Path(build))
        for name in track(args.parts.split(","), "bench_nccl_gpu parts"):
            part = PARTS[name]
            started = time.monotonic()
            try:
                report[name] = part(plugin, work, args, hosts)
            except Exception as error:  # one part's failure must not lose the others' figures
                report[name] = {"error": f"{type(error).__name__}: {error}"[:4000]}
            report[name]["seconds"] = round(time.monotonic() - started, 1)
            print(json.dumps({name: report[name]}), file=sys.stderr, flush=True)
    (work / "bench.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))


if __name__ == "__main__":
    main()

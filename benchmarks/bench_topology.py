"""Benchmark of sleuth.topology at 16,384 GPUs; prints one JSON object.

    python benchmarks/bench_topology.py [--pairs 10000] [--seed 0]

Figures:
* seconds to generate the 16,384-GPU rail-optimized fat tree (2048 hosts x 8 GPUs, pods of
  32 hosts, 16 spines), without and with materialising every device id;
* seconds to compute C(d) for every device (arrays, and a dict over all ids);
* microseconds per path query, averaged over random GPU pairs on different hosts;
* a baseline measured in the same run (the machines are shared, so compare ratios, not
  absolute numbers): networkx on the 1,024-GPU fabric of the same design — building the graph
  (devices as nodes, links as nodes between their ends) and ``all_shortest_paths`` between
  random GPU pairs on different hosts, next to sleuth's structural path on that same fabric.
  The benchmark also checks both give the same device sets.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import time

import networkx as nx
import numpy as np

from sleuth.progress import progress
from sleuth.topology import DeviceKind, Topology, nics_below_all, nics_below_by_kind, path, rail_optimized

SPEC_16K = {"hosts": 2048, "gpus_per_host": 8, "hosts_per_pod": 32, "spines": 16}
SPEC_1K = {"hosts": 128, "gpus_per_host": 8, "hosts_per_pod": 32, "spines": 16}


class _NoGC:
    """Timed sections run with the cyclic GC off, as ``timeit`` does: otherwise a collection
    triggered by whatever else is alive (the networkx graph) lands in a random measurement."""

    def __enter__(self) -> None:
        gc.collect()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        gc.enable()


def _best(fn, repeat: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        with _NoGC():
            start = time.perf_counter()
            result = fn()
            best = min(best, time.perf_counter() - start)
    return best, result


def _pairs(topology: Topology, n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """``n`` random GPU pairs on different hosts (global indices)."""
    a = rng.integers(0, topology.num_gpus, size=4 * n)
    b = rng.integers(0, topology.num_gpus, size=4 * n)
    keep = topology.gpu_host[a] != topology.gpu_host[b]
    return list(zip(a[keep][:n].tolist(), b[keep][:n].tolist()))


def _networkx_graph(topology: Topology) -> nx.Graph:
    """The fabric as a graph: every device a node, each link a node between its two ends.

    NVSwitches are left out: sleuth never routes between hosts through NVLink, and with them
    a shortest path could hop to another rail's NIC inside a host.
    """
    graph = nx.Graph()
    for gpu in topology.devices(DeviceKind.GPU):
        nic = topology.nic_of(gpu)
        if nic is not None:
            graph.add_edge(gpu, nic)
    for link in topology.devices(DeviceKind.LINK):
        a, b = topology.link_ends(link)
        graph.add_edge(a, link)
        graph.add_edge(link, b)
    return graph


def _time_paths(topology: Topology, pairs: list[tuple[int, int]], *, weighted: bool) -> float:
    with _NoGC():
        start = time.perf_counter()
        if weighted:
            for a, b in pairs:
                path(topology, a, b).weighted()
        else:
            for a, b in pairs:
                path(topology, a, b)
        return (time.perf_counter() - start) / len(pairs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000, help="path queries to average over")
    parser.add_argument("--baseline-pairs", type=int, default=1_000, help="networkx queries to average over")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)

    # The bar is drawn only as it advances, between the timed phases: never while one is timed.
    with progress("topology: generating the 16k fabric", total=5, redraw_on_timer=False) as steps:
        # 16k: generation (cold every time: a new object), ids, C(d).
        generate_s, big = _best(lambda: rail_optimized(**SPEC_16K))

        def with_ids() -> Topology:
            t = rail_optimized(**SPEC_16K)
            t.devices()
            "gpu:h0000/0" in t  # builds the id → device index
            return t

        generate_ids_s, _ = _best(with_ids)
        steps.advance(description="topology: C(d) of every device")
        fresh = [rail_optimized(**SPEC_16K) for _ in range(3)]
        c_arrays_s = min(_best(lambda t=t: nics_below_by_kind(t), repeat=1)[0] for t in fresh)
        c_dict_s, c_all = _best(lambda: nics_below_all(big))

        # 16k: path queries (the first call builds the per-topology lookup tables; time it apart).
        steps.advance(description=f"topology: {args.pairs} path queries at 16k")
        pairs_16k = _pairs(big, args.pairs, rng)
        start = time.perf_counter()
        path(big, *pairs_16k[0])
        first_query_s = time.perf_counter() - start
        path_us = _time_paths(big, pairs_16k, weighted=False)
        path_weighted_us = _time_paths(big, pairs_16k, weighted=True)

        # Baseline: networkx on the 1,024-GPU fabric, and sleuth on the same fabric.
        steps.advance(description="topology: baseline, networkx's graph of the 1k fabric")
        small = rail_optimized(**SPEC_1K)
        nx_build_s, graph = _best(lambda: _networkx_graph(small), repeat=1)
        ours_1k_build_s, _ = _best(lambda: rail_optimized(**SPEC_1K))
        steps.advance(description=f"topology: baseline, {args.baseline_pairs} networkx and sleuth paths at 1k")
        gpus = small.devices(DeviceKind.GPU)
        pairs_1k = _pairs(small, args.baseline_pairs, rng)
        nx_sets = []
        with _NoGC():
            start = time.perf_counter()
            for a, b in pairs_1k:
                nx_sets.append({device for route in nx.all_shortest_paths(graph, gpus[a], gpus[b]) for device in route})
            nx_path_us = (time.perf_counter() - start) / len(pairs_1k) * 1e6
        path(small, *pairs_1k[0])  # lookup tables
        ours_1k_path_us = _time_paths(small, pairs_1k, weighted=True)
        agree = all(set(path(small, a, b).devices()) == s for (a, b), s in zip(pairs_1k, nx_sets))
        steps.advance()

    report = {
        "fabric": "rail-optimized fat tree: 2048 hosts x 8 GPUs, pods of 32 hosts, 16 spines",
        "devices": {str(kind): n for kind, n in big.counts().items()},
        "generate_16k_s": round(generate_s, 4),
        "generate_16k_with_ids_s": round(generate_ids_s, 4),
        "nics_below_all_devices_arrays_s": round(c_arrays_s, 5),
        "nics_below_all_devices_dict_s": round(c_dict_s, 4),
        "nics_below_devices": len(c_all),
        "path_query_us": round(path_us, 2),
        "path_query_with_weights_us": round(path_weighted_us, 2),
        "path_queries": len(pairs_16k),
        "path_first_query_s": round(first_query_s, 4),
        "baseline": {
            "what": "networkx 3 on the 1,024-GPU fabric of the same design (128 hosts, 16 spines): graph build "
            "(devices and links as nodes) and all_shortest_paths per GPU pair on different hosts; "
            "sleuth measured on the same fabric and pairs",
            "networkx_build_1k_s": round(nx_build_s, 4),
            "networkx_path_1k_us": round(nx_path_us, 1),
            "sleuth_build_1k_s": round(ours_1k_build_s, 5),
            "sleuth_path_with_weights_1k_us": round(ours_1k_path_us, 2),
            "pairs": len(pairs_1k),
            "same_device_sets": agree,
            "path_speedup_vs_networkx": round(nx_path_us / ours_1k_path_us, 1),
            "sleuth_16k_generate_vs_networkx_1k_build": round(generate_ids_s / nx_build_s, 3),
        },
        "python": platform.python_version(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

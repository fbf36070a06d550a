"""A hand-computable job: tp2 pp2 dp2, 2 micro-batches, no jitter. Every record's times must
equal the critical-path arithmetic written out below, step by step, for the 1F1B schedule."""

from __future__ import annotations

import numpy as np

import pytest

from sleuth.errors import ConfigError
from sleuth.records import OpKind
from sleuth.sim import ModelSpec
from sleuth.sim.model import stage_costs

from tests.sim.conftest import emulate

MODEL = ModelSpec(layers=2, hidden=1024, seq_len=1024, vocab=1024, gpu_tflops=100.0)
L = 5000  # launch overhead, ns (Timing.exact default: 5 µs)

# Fabric fattree:hosts=4,gpus=2,pod=2,spines=1 and rank = tp + 2*(dp + 2*pp):
# ranks 0-3 are stage 0 on hosts h0000/h0001 (pod 0), ranks 4-7 stage 1 on h0002/h0003 (pod 1).
# tp pairs share a host: NVLink 450 GB/s, latency gpu + nvswitch + gpu = 3 µs.
# dp pairs are same-rail hosts of one pod: one leaf; 50 GB/s; latency
#   gpu 1 + nic 2 + link 0.05 + leaf 0.5 + link 0.05 + nic 2 + gpu 1 = 6.6 µs.
# pp and embd pairs cross pods: via the spine; 50 GB/s; 6.6 + link 0.05 + spine 0.5 + link 0.05 = 7.7 µs.
TP_BW, TP_LAT = 450.0, 3000.0
DP_BW, DP_LAT = 50.0, 6600.0
PP_BW, PP_LAT = 50.0, 7700.0


def r(x: float) -> int:
    return int(np.rint(x))


def all_reduce(nbytes: int, bw: float, lat: float) -> int:  # ring of 2: 2(n-1)/n B/W + 2(n-1) L
    return r(nbytes / bw + 2 * lat)


def p2p(nbytes: int) -> int:
    return r(nbytes / PP_BW + PP_LAT)


def expected() -> dict[int, list[tuple[int, int]]]:
    """(t_start, t_end) of every record of a stage-0 rank and a stage-1 rank, in program order."""
    c0 = stage_costs(MODEL, stage=0, pp=2, tp=2, cp=1, ep=1)
    c1 = stage_costs(MODEL, stage=1, pp=2, tp=2, cp=1, ep=1)
    tp = all_reduce(c0.tp_bytes, TP_BW, TP_LAT)
    pp = p2p(c0.pp_bytes)
    rec: dict[int, list[tuple[int, int]]] = {0: [], 1: []}

    def compute(t: int, ns: float) -> int:
        return t + L + r(ns)

    def coll(stage: int, t: int, cost: int) -> int:
        start = t + L
        rec[stage].append((start, start + cost))
        return start + cost

    def layer_fwd(stage: int, t: int, c) -> int:
        t = compute(t, c.attn_ns)
        t = coll(stage, t, tp)
        t = compute(t, c.mlp_ns)
        return coll(stage, t, tp)

    def layer_bwd(stage: int, t: int, c) -> int:
        t = compute(t, 2 * c.mlp_ns)
        t = coll(stage, t, tp)
        t = compute(t, 2 * c.attn_ns)
        return coll(stage, t, tp)

    # Stage 0 runs F0 F1 B0 B1, stage 1 runs F0 B0 F1 B1 (1F1B with 2 stages).
    # Stage 0, F0 and F1: its sends do not wait (isend); their ends are filled in by the receives.
    t0 = layer_fwd(0, 0, c0)
    send_f0 = t0 + L
    rec[0].append((send_f0, None))
    t0 = layer_fwd(0, send_f0, c0)
    send_f1 = t0 + L
    rec[0].append((send_f1, None))
    t0 = send_f1
    # Stage 1, F0: receive, layer, head.
    recv = L
    end = max(recv, send_f0) + pp
    rec[1].append((recv, end))
    rec[0][2] = (send_f0, end)
    t1 = layer_fwd(1, end, c1)
    t1 = compute(t1, c1.head_ns)
    # Stage 1, B0: head backward, layer backward, send the gradient.
    t1 = compute(t1, 2 * c1.head_ns)
    t1 = layer_bwd(1, t1, c1)
    send_b0 = t1 + L
    rec[1].append((send_b0, None))
    t1 = send_b0
    # Stage 1, F1.
    recv = t1 + L
    end = max(recv, send_f1) + pp
    rec[1].append((recv, end))
    rec[0][5] = (send_f1, end)
    t1 = layer_fwd(1, end, c1)
    t1 = compute(t1, c1.head_ns)
    # Stage 0, B0: receive the gradient, layer backward.
    recv = t0 + L
    end = max(recv, send_b0) + pp
    rec[0].append((recv, end))
    rec[1][5] = (send_b0, end)
    t0 = layer_bwd(0, end, c0)
    # Stage 1, B1.
    t1 = compute(t1, 2 * c1.head_ns)
    t1 = layer_bwd(1, t1, c1)
    send_b1 = t1 + L
    rec[1].append((send_b1, None))
    t1 = send_b1
    # Stage 0, B1.
    recv = t0 + L
    end = max(recv, send_b1) + pp
    rec[0].append((recv, end))
    rec[1][-1] = (send_b1, end)
    t0 = layer_bwd(0, end, c0)
    # Gradient all-reduce over dp (within each stage), then the embedding all-reduce (stage 0 with 1).
    t0 = coll(0, t0, all_reduce(c0.dp_bytes, DP_BW, DP_LAT))
    t1 = coll(1, t1, all_reduce(c1.dp_bytes, DP_BW, DP_LAT))
    start0, start1 = t0 + L, t1 + L
    end = max(start0, start1) + all_reduce(c0.embd_bytes, PP_BW, PP_LAT)
    rec[0].append((start0, end))
    rec[1].append((start1, end))
    return rec


def test_every_record_follows_the_critical_path() -> None:
    emulation = emulate(tp=2, pp=2, dp=2, fabric="fattree:hosts=4,gpus=2,pod=2,spines=1", model=MODEL,
                        microbatches=2, iterations=1)
    want = expected()
    records = emulation.records()
    assert len(records) == 4 * len(want[0]) + 4 * len(want[1])
    for rank in range(8):
        mine = records.take(records["rank"] == rank)
        stage = rank // 4
        got = list(zip(mine["t_start_ns"].tolist(), mine["t_end_ns"].tolist()))
        assert got == want[stage], f"rank {rank}"
        assert (mine["t_start_ns"] - mine["t_issue_ns"] == L).all()


def test_the_program_records_the_megatron_operators() -> None:
    emulation = emulate(tp=2, pp=2, dp=2, fabric="fattree:hosts=4,gpus=2,pod=2,spines=1", model=MODEL,
                        microbatches=2, iterations=2)
    records = emulation.ranks_records([0], iterations=[1])
    ops = [OpKind(op).label for op in records["op"].tolist()]
    comms = records.decoded("comm").tolist()
    assert ops == ["all_reduce"] * 2 + ["send"] + ["all_reduce"] * 2 + ["send", "recv"] + ["all_reduce"] * 2 + ["recv"] + ["all_reduce"] * 4
    assert comms[:3] == ["tp.0", "tp.0", "pp.0"] and comms[-2:] == ["dp.0", "embd.0"]
    assert records["peer"].tolist() == [-1, -1, 4, -1, -1, 4, 4, -1, -1, 4, -1, -1, -1, -1]
    # Iteration 1: the tp counter goes on from iteration 0's 8 all-reduces; P2P counts per direction.
    assert records["seq"].tolist() == [8, 9, 2, 10, 11, 3, 2, 12, 13, 3, 14, 15, 1, 1]


def test_a_hiccup_asked_for_pauses_that_iteration_alone() -> None:
    from dataclasses import replace as _replace

    from sleuth.sim import Emulation, Timing
    from sleuth.sim.suites import suite as _suite

    scenario = _replace(_suite("clean", seed=1, iterations=6)[0], timing=Timing(hiccup_rate=0.0, hiccups_at=(3,)))
    calm = Emulation(_replace(scenario, timing=Timing(hiccup_rate=0.0)))
    paused = Emulation(scenario)
    slower = [a.time_ns > b.time_ns for a, b in zip(paused.truth().iterations, calm.truth().iterations)]
    assert slower[3] and not any(slower[:3])
    with pytest.raises(ConfigError, match="hiccups_at"):
        Timing(hiccups_at=(-1,))


def test_the_pause_free_twin_drops_the_pause_and_keeps_every_other_iteration_to_the_nanosecond() -> None:
    from dataclasses import replace as _replace

    from sleuth.sim import Emulation, Timing
    from sleuth.sim.suites import suite as _suite

    scenario = _replace(_suite("clean", seed=1, iterations=6)[0], timing=Timing(hiccup_rate=0.0, hiccups_at=(3,)))
    paused = Emulation(scenario)
    twin = [t.counterfactual_ns for t in paused.truth().iterations]
    free = paused.pause_free_times().tolist()
    assert free[3] < twin[3]
    assert [f for i, f in enumerate(free) if i != 3] == [t for i, t in enumerate(twin) if i != 3]


def test_the_pause_free_balanced_twin_drops_the_pause_and_keeps_the_even_split() -> None:
    from dataclasses import replace as _replace

    from sleuth.sim import Emulation, Timing
    from sleuth.sim.suites import suite as _suite

    uneven = next(s for s in _suite("nonhw", seed=1) if s.name == "nonhw-last-stage")
    # The last stage heavier from iteration 2, a pause asked for in iteration 3.
    scenario = _replace(uneven, iterations=6, faults=(_replace(uneven.faults[0], start=2),),
                        timing=Timing(hiccup_rate=0.0, hiccups_at=(3,)))
    paused = Emulation(scenario)
    truth = paused.truth().iterations
    balanced = [t.balanced_ns for t in truth]
    free = paused.pause_free_times(balanced=True).tolist()
    assert free[3] < balanced[3]
    assert [f for i, f in enumerate(free) if i != 3] == [t for i, t in enumerate(balanced) if i != 3]
    # The same work split evenly: faster than the run whose last stage is heavier, slower than the fault-free twin.
    fault_free = paused.pause_free_times().tolist()
    assert all(fault_free[i] < free[i] < truth[i].time_ns for i in (2, 4, 5))


@pytest.mark.parametrize(("options", "message"), [
    ({"layers": 16.0}, r"^model.layers must be a positive integer, got 16.0$"),
    ({"ffn_hidden": 0}, r"^model.ffn_hidden must be a positive integer, got 0$"),
    ({"zero": 1}, r"^model.zero must be true or false, got 1$"),
    ({"gpu_tflops": True}, r"^model.gpu_tflops must be a positive number, got True$"),
])
def test_a_bad_model_fails_naming_the_field(options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelSpec(**options)


def test_a_bad_hiccup_iteration_is_named_by_its_place() -> None:
    from sleuth.sim import Timing

    with pytest.raises(ConfigError, match=r"^timing.hiccups_at\[1\] must be a non-negative integer, got 2.5$"):
        Timing(hiccups_at=(3, 2.5))

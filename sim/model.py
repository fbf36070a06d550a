"""The emulated model: its shape, and what each operator costs in FLOPs and bytes.

Costs follow Megatron-LM's GPT layer (Narayanan et al., SC'21, eq. 3): a transformer layer's
forward pass on ``b`` sequences of ``s`` tokens with hidden size ``h`` and FFN size ``f`` does
``2bs(4h² + 2hf)`` FLOPs in its matrix multiplies and ``4bs²h`` in attention scores; backward
does twice the forward. Tensor parallelism divides both by ``tp``; context parallelism divides
the local tokens by ``cp`` (each rank's queries still attend all ``s`` keys).

Default size, and why: 16 layers of hidden 4096 at sequence 4096. The emulator's record count
is ``2 x layers/pp`` TP collectives per micro-batch and pass on every rank, so the layer count
sets the emulator's cost at scale. 16 layers keep the 8,192-GPU benchmark (tp8 pp8 dp128, 8
micro-batches, 100 iterations: ~80 M records) inside its 60 s / 8 GiB goal while every stage
still runs two layers (two TP collectives per layer and pass), so compute, TP, PP and DP
operators all keep their real proportions. Deeper models are one ``layers=`` away.
"""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.errors import ConfigError
from sleuth.validation import boolean, checked, positive_int, positive_number

__all__ = ["ModelSpec", "StageCosts", "stage_costs"]


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A Megatron-style GPT model and the throughput of the GPUs that train it.

    ``sequence_parallel`` replaces each layer's TP all-reduces by an all-gather and a
    reduce-scatter; ``zero`` (distributed optimizer) replaces the DP gradient all-reduce by a
    reduce-scatter before and an all-gather after the optimizer step. With ``ep > 1`` every
    layer's MLP is a mixture of experts routing each token to ``topk`` experts.
    """

    layers: int = 16
    hidden: int = 4096
    ffn_hidden: int | None = None  # 4 x hidden when None
    seq_len: int = 4096
    micro_batch: int = 1
    dtype_bytes: int = 2  # bf16 activations and gradients
    vocab: int = 32000
    topk: int = 2
    sequence_parallel: bool = False
    zero: bool = False
    gpu_tflops: float = 400.0  # achieved dense bf16 throughput of one GPU
    hbm_gbps: float = 2000.0  # for the memory-bound optimizer step

    def __post_init__(self) -> None:
        checked(self, prefix="model.", layers=positive_int, hidden=positive_int, seq_len=positive_int,
                micro_batch=positive_int, dtype_bytes=positive_int, vocab=positive_int, topk=positive_int,
                sequence_parallel=boolean, zero=boolean, gpu_tflops=positive_number, hbm_gbps=positive_number)
        if self.ffn_hidden is not None:
            positive_int("model.ffn_hidden", self.ffn_hidden)

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden


@dataclass(frozen=True)
class StageCosts:
    """Per-GPU costs of one pipeline stage: compute in ns, payloads in bytes.

    ``attn_ns`` / ``mlp_ns``: forward compute of one layer for one micro-batch, split into the
    attention block (of which ``score_ns`` is the s² part that sequence-length imbalance
    scales) and the MLP block. Backward costs twice each. ``head_ns``: the output layer and
    loss (last stage only, forward; backward twice).
    """

    layers: int
    attn_ns: float
    score_ns: float
    mlp_ns: float
    head_ns: float
    optimizer_ns: float
    tp_bytes: int  # one TP all-reduce (or all-gather / reduce-scatter) of a layer's activations
    pp_bytes: int  # activations (or their gradient) sent to the next stage
    a2a_bytes: int  # one MoE all-to-all (dispatch or combine)
    cp_bytes: int  # a layer's KV ring exchange, the cp-1 rounds of one pass aggregated
    dp_bytes: int  # dense gradients of this stage on one GPU
    edp_bytes: int  # expert gradients of this stage on one GPU
    embd_bytes: int  # the tied embedding's gradient (first and last stage)


def stage_costs(model: ModelSpec, *, stage: int, pp: int, tp: int, cp: int, ep: int) -> StageCosts:
    """The costs of ``stage`` of ``pp`` for a GPU in a tp x cp x ep group; ``layers % pp == 0``."""
    if model.layers % pp:
        raise ConfigError(f"model.layers={model.layers} does not split into pp={pp} equal stages")
    if model.seq_len % cp:
        raise ConfigError(f"model.seq_len={model.seq_len} does not split into cp={cp} chunks")
    b, s, h, f, d = model.micro_batch, model.seq_len, model.hidden, model.ffn, model.dtype_bytes
    local = s // cp  # tokens whose queries this rank holds
    flops_per_ns = model.gpu_tflops * 1e3  # 1 TFLOP/s = 1e3 FLOP/ns
    moe = ep > 1
    attn_linear = 2 * b * local * 4 * h * h / tp
    scores = 4 * b * local * s * h / tp
    mlp = 2 * b * local * 2 * h * f / tp * (model.topk if moe else 1)
    last = stage == pp - 1
    head = 2 * b * local * h * model.vocab / tp if last else 0.0
    layers = model.layers // pp
    dense_params = layers * (4 * h * h + (0 if moe else 2 * h * f)) / tp
    expert_params = layers * 2 * h * f / tp if moe else 0.0  # one expert per ep rank and layer
    embd_params = model.vocab * h / tp if stage in (0, pp - 1) else 0.0
    params = dense_params + expert_params + embd_params
    tokens = b * local
    return StageCosts(
        layers=layers,
        attn_ns=(attn_linear + scores) / flops_per_ns,
        score_ns=scores / flops_per_ns,
        mlp_ns=mlp / flops_per_ns,
        head_ns=head / flops_per_ns,
        # Adam reads and writes ~20 bytes per parameter (fp32 master, two moments, grad).
        optimizer_ns=params * 20 / model.hbm_gbps,
        tp_bytes=int(tokens * h * d),
        # Megatron sends 1/tp of the activations and gathers after (scatter-gather in pipeline).
        pp_bytes=int(tokens * h * d // tp),
        a2a_bytes=int(tokens * h * d * model.topk),
        cp_bytes=int(2 * tokens * h * d // tp * (cp - 1)),
        dp_bytes=int((dense_params + embd_params) * d),
        edp_bytes=int(expert_params * d),
        embd_bytes=int(model.vocab * h * d // tp),
    )

"""Tensor parallelism (Megatron-LM; Shoeybi et al. 2019): two all-reduces per layer in the forward (after the
attention projection and after the MLP), two in the backward, of one microbatch's activation each.

With sequence parallelism each all-reduce becomes an all-gather plus a reduce-scatter (same volume), and the
backward all-gathers the scattered layer input once more per linear pair for the weight gradients: 3 all-reduce
equivalents in the backward instead of 2 (Korthikanti et al. 2022, section 4.2.2). Full recompute repeats the
forward's. Time and cross-building bytes both come from these counts.

Multi-head latent attention under sequence parallelism (Megatron-Core MLASelfAttention): the duplicated down
projections run on each rank's s/t tokens and what is all-gathered is the compressed latent [c_Q, c_KV, k_rope]
(1536 + 512 + 64 = 2112 wide for DeepSeek-V3, not h = 7168); the output projection still reduce-scatters h. Of the
layer's two all-reduce equivalents (attention: AG + RS, MLP: AG + RS) the attention all-gather shrinks to r =
latent/h of its size, so every TP message is (3 + r)/4 of the activation on average. Without sequence
parallelism the full input is already on every rank and the counts are unchanged.
"""
import jax.numpy as jnp

from ..space import Overlap, full_recompute_share
from . import collectives as coll
from .overlap import exposed_s
from .terms import Term

FWD_ALLREDUCES = 2.0
BWD_ALLREDUCES = 2.0


def tp_term(ctx, d, train, gpu, model):
    """(Term, exposed forward seconds per layer): the forward share is what the pipeline's forward waits for."""
    k = ctx.tp.participants
    mla_sp = (model.mla > 0) & (train.seq_parallel > 0)
    # one all-reduce equivalent per sub-layer (a transformer layer has two; a hybrid block, Mamba-2 mixers
    # included, one: Megatron-Core's MambaMixer is column-parallel in, row-parallel out like attention)
    sublayers = (model.attn_fraction + model.mlp_fraction + model.mamba_fraction) / 2.0
    act_bytes = ctx.act_bytes * jnp.where(mla_sp, (3.0 + model.mla_latent / model.hidden) / 4.0, 1.0)
    allreduce_s = coll.ring_allreduce_s(k, act_bytes, ctx.tp_net.alpha_s, ctx.tp_net.bw_Bps)
    sp_allreduces = jnp.where(train.seq_parallel > 0, 1.0, 0.0)
    # NCCL calls: an all-reduce is one, under sequence parallelism an all-gather plus a reduce-scatter, and the
    # backward's re-gather is one all-gather per linear pair
    fwd_calls = FWD_ALLREDUCES * (1.0 + sp_allreduces)
    bwd_calls = BWD_ALLREDUCES * (1.0 + sp_allreduces) + 2.0 * sp_allreduces
    fwd_volume_s = (FWD_ALLREDUCES * allreduce_s + coll.launch_s(k, fwd_calls)) * sublayers
    bwd_volume_s = (BWD_ALLREDUCES * allreduce_s + jnp.where(train.seq_parallel > 0, allreduce_s, 0.0)
                    + coll.launch_s(k, bwd_calls)) * sublayers
    # --tp-comm-overlap hides the collectives under the neighbouring GEMMs (forward: one pass of them,
    # backward: two). Its mechanism (Transformer Engine's userbuffers: GEMM chunks that read and write peer
    # memory over NVLink, Megatron-Core docs "Communication overlap") needs the TP group inside one NVLink
    # domain; a TP group across nodes runs plain NCCL collectives between the GEMMs, fully exposed.
    in_nvlink = jnp.all(jnp.where(ctx.is_network, k, 1.0) <= 1.0 + 1e-6)
    overlapped = (d.overlap == Overlap.DP_TP) & in_nvlink
    slowdown = gpu.overlap_slowdown
    fwd_layer_s = exposed_s(fwd_volume_s, ctx.layer.linear_fwd_s, overlapped, slowdown=slowdown)
    bwd_layer_s = exposed_s(bwd_volume_s, 2.0 * ctx.layer.linear_fwd_s, overlapped, slowdown=slowdown)
    full = full_recompute_share(d.recompute)  # layers whose forward runs twice
    stage_s = ctx.layers_stage * (fwd_layer_s + bwd_layer_s + full * fwd_layer_s)

    allreduces = FWD_ALLREDUCES * (1.0 + full) + BWD_ALLREDUCES + sp_allreduces
    per_gpu = allreduces * sublayers * jnp.sum(ctx.xb * coll.bytes_per_level_allreduce(k, act_bytes))
    cross = ctx.microbatches * ctx.layers_stage * per_gpu * train.n_gpus
    return Term(stage_s=stage_s, cross_bytes=cross), fwd_layer_s

"""Context parallelism as ring attention (Liu et al. 2023; Megatron-Core's load-balanced causal CP): each of
the cp GPUs holds s/cp tokens and passes its K and V chunk around the ring, cp - 1 steps per attention, under
the attention core. The backward runs the ring twice (K/V forward, their gradients back); full recompute runs
the forward's ring again.
"""
import jax.numpy as jnp

from . import collectives as coll
from .overlap import exposed_s, p2p_price
from .placement import spans
from .terms import Term

FWD_RINGS = 1.0
BWD_RINGS = 2.0
RING_PEERS = 2.0


def cp_term(ctx, d, model, train, gpu):
    """(Term, exposed forward seconds per layer)."""
    cp, tp = d.cp, d.tp
    # K and V, 16-bit; MLA rings the up-projected per-head K (d_qk) and V (d_v) (Megatron-Core MLA with CP)
    # (a shared key/value vector, DeepSeek-V4: one d_qk per token, whole on every TP rank)
    mla_kv = jnp.where(model.kv_shared > 0, model.qk_head_dim * tp,
                       model.heads * (model.qk_head_dim + model.v_head_dim))
    kv_chunk_bytes = jnp.where(model.mla > 0, 2.0 * d.mbs * (ctx.seq / cp) * mla_kv / tp,
                               2.0 * d.mbs * (ctx.seq / cp) * 2.0 * model.kv_heads * model.head_dim / tp)
    alpha_s, bw_Bps = coll.bottleneck(ctx.cp.participants, ctx.cp_net.alpha_s, ctx.cp_net.bw_Bps)
    ring_s = (cp - 1.0) * (alpha_s + kv_chunk_bytes / bw_Bps)
    # each ring step sends to the next rank and receives from the previous one: two peers' channels
    price = p2p_price(gpu, RING_PEERS)
    fwd_layer_s = exposed_s(ring_s, ctx.layer.attn_fwd_s, True, slowdown=price)
    bwd_layer_s = exposed_s(BWD_RINGS * ring_s, BWD_RINGS * ctx.layer.attn_fwd_s, True, slowdown=price)
    full = ctx.recompute_share  # layers whose forward runs twice
    stage_s = ctx.layers_stage * (fwd_layer_s + bwd_layer_s + full * fwd_layer_s)

    rings = FWD_RINGS * (1.0 + full) + BWD_RINGS
    per_gpu = rings * (cp - 1.0) * kv_chunk_bytes * jnp.max(ctx.xb * spans(ctx.cp.participants))
    cross = ctx.microbatches * ctx.layers_stage * per_gpu * train.n_gpus
    return Term(stage_s=stage_s, cross_bytes=cross), fwd_layer_s

"""FLOPs and kernel time per layer per microbatch on one GPU.

Forward FLOPs per layer (b = mbs, s = seq, h = hidden, a heads, g kv heads, d = head_dim, f = ffn):
QKV 2bsh(ad + 2gd), output projection 2bs(ad)h, MLP 2bshf x (3 gated | 2), attention core 4bs^2(ad)
(Narayanan et al. 2021, appendix; GQA per Ainslie et al. 2023). TP divides all of them, CP divides the
sequence of the linear parts and the query side of attention. Backward = 2x forward for GEMMs; a
flash-attention backward recomputes QK^T and does four more matmuls: 2.5x its forward (Dao 2023).
GEMM time = FLOPs / (peak x eta(W)) with eta(W) = eta_max W / (W + W_half), i.e. (W + W_half)/(peak eta_max):
small GEMMs pay a fixed cost equal to W_half of work.
"""
import jax.numpy as jnp

FLASH_BWD_RATIO = 2.5
# Elementwise traffic per token per layer (forward), bytes per hidden element: two norms (read + write 16-bit),
# two residual adds, bias/dropout; the MLP activation adds 2 reads + 1 write of 16-bit per ffn element
# (gated: one more read). Ratios from counting Megatron's fused kernels; calibrated through memory_bound.
ELEMENTWISE_BYTES_PER_H = 24.0
ELEMENTWISE_BYTES_PER_F = 6.0
# Unfused attention (no flash): scale+mask+softmax+dropout over b a s^2 scores, ~10 bytes per score forward.
SOFTMAX_BYTES_PER_SCORE = 10.0
# Logits: fused cross-entropy reads and writes fp32 logits (~12 bytes per element forward).
LOGIT_BYTES_PER_ELEMENT = 12.0


def gemm_time_s(flops, peak_flops, eff_max, half_flops):
    return jnp.where(flops > 0, (flops + half_flops) / (peak_flops * eff_max), 0.0)


def layer_flops(mb, seq, m, moe_layer_weight):
    """Forward FLOPs of one layer on one full (unsplit) microbatch: dict of gemm groups."""
    bs = mb * seq
    h, d = m.hidden, m.head_dim
    qkv = 2.0 * bs * h * (m.heads * d + 2.0 * m.kv_heads * d)
    proj = 2.0 * bs * (m.heads * d) * h
    dense_mlp = 2.0 * bs * h * m.ffn * m.mlp_mats
    expert_mlp = 2.0 * bs * h * m.expert_ffn * m.mlp_mats * (m.top_k * m.imbalance + m.shared_experts)
    mlp = (1.0 - moe_layer_weight) * dense_mlp + moe_layer_weight * expert_mlp
    attn = 4.0 * mb * seq * seq * m.heads * d
    return qkv, proj, mlp, attn


def model_flops_per_sequence(seq, m):
    """Training FLOPs of one sequence (3x forward, no recompute, full attention as Megatron counts)."""
    qkv, proj, mlp, attn = layer_flops(1.0, seq, m, m.moe_fraction)
    logits = 2.0 * seq * m.hidden * m.vocab
    return 3.0 * (m.layers * (qkv + proj + mlp + attn) + logits)


def layer_times(design_tp, design_cp, mbs, seq, m, g, train):
    """Seconds for one layer on one GPU: forward GEMMs, attention core (fwd), elementwise (fwd), bwd ratios.

    Returns dict with fwd, bwd, recompute_full, recompute_selective and the weight-gradient part of bwd.
    """
    t, c = design_tp, design_cp
    split = t * c
    qkv, proj, mlp, attn = layer_flops(mbs, seq, m, m.moe_fraction)
    gt = lambda fl: gemm_time_s(fl / split, g.peak_flops, g.gemm_max, g.gemm_half_flops)  # noqa: E731
    linear_f = gt(qkv) + gt(proj) + gt(mlp)
    flash = train.flash > 0
    # Causal flash kernels skip the masked half of the score matrix.
    attn_flash_f = 0.5 * attn / split / (g.peak_flops * g.attention_max)
    attn_plain_f = gt(attn)
    tokens = mbs * seq / c
    sp_split = jnp.where(train.seq_parallel > 0, t, 1.0)
    elem_bytes = tokens * (ELEMENTWISE_BYTES_PER_H * m.hidden / sp_split
                           + ELEMENTWISE_BYTES_PER_F * m.ffn * m.mlp_mats / 2.0 / t)
    softmax_bytes = SOFTMAX_BYTES_PER_SCORE * mbs * m.heads * seq * seq / split
    mem_bw = g.hbm_Bps * g.memory_bound
    elem_f = elem_bytes / mem_bw
    attn_f = jnp.where(flash, attn_flash_f, attn_plain_f + softmax_bytes / mem_bw)
    attn_b = jnp.where(flash, FLASH_BWD_RATIO * attn_flash_f, 2.0 * attn_f)
    fwd = linear_f + attn_f + elem_f + g.layer_overhead_s
    bwd = 2.0 * linear_f + attn_b + 2.0 * elem_f + g.layer_overhead_s
    return dict(fwd=fwd, bwd=bwd, linear_fwd=linear_f, attn_fwd=attn_f, weight_grad=linear_f,
                recompute_full=fwd, recompute_selective=attn_f)


def logits_times(tp, cp, mbs, seq, m, g):
    """Output layer + cross-entropy on the last stage: (fwd, bwd) seconds."""
    flops = 2.0 * mbs * seq * m.hidden * m.vocab / (tp * cp)
    f = gemm_time_s(flops, g.peak_flops, g.gemm_max, g.gemm_half_flops)
    ce = LOGIT_BYTES_PER_ELEMENT * mbs * seq * m.vocab / (tp * cp) / (g.hbm_Bps * g.memory_bound)
    return f + ce, 2.0 * f + ce

"""FLOPs and kernel time per layer per microbatch on one GPU.

Forward FLOPs per layer (b = mbs, s = seq, h = hidden, a heads, g kv heads, d = head_dim, f = ffn):
QKV 2bsh(ad + 2gd), output projection 2bs(ad)h, MLP 2bshf x (3 gated | 2), attention core 4bs^2(ad)
(Narayanan et al. 2021, appendix; GQA per Ainslie et al. 2023). TP divides all of them, CP divides the
sequence of the linear parts and the query side of attention. Backward = 2x forward for GEMMs; a
flash-attention backward recomputes QK^T and does four more matmuls: 2.5x its forward (Dao 2023).
GEMM time = FLOPs / (peak x eta(W)) with eta(W) = eta_max W / (W + W_half), i.e. (W + W_half)/(peak eta_max):
small GEMMs pay a fixed cost equal to W_half of work. peak x eta_max never exceeds the part's measured maximum
achievable matmul rate of that precision (gemm_rate; GpuSpec.mamf_tflops).

Fused (flash) attention: time = causal-half FLOPs / (peak16 x eta_attn(s_kv)),
eta_attn(s_kv) = attention_max s_kv / (s_kv + attention_half_seq) (attention_efficiency below). A flash kernel
tiles the queries and sweeps the keys block by block; each query tile pays a fixed cost (load Q, online-softmax
rescale, write O and the log-sum-exp; on the causal diagonal a partly masked block) amortized over the key
blocks it sweeps, so its efficiency saturates in the key length: FlashAttention-2 (Dao 2023, fig. "attention
forward + backward speed", A100, head dim 64/128) and FlashAttention-3 (Shah et al. 2024, H100 BF16, head dim
128: forward up to ~740 TFLOP/s non-causal, lower causal and backward) both rise steeply up to ~2k keys and are
flat from ~8k. s_kv is the keys one kernel call sweeps: the sequence, or one ring chunk s/cp under context
parallelism (ring attention calls the kernel once per chunk). A call with a causal diagonal saturates later than one
without (attention_half_seq vs attention_half_seq_full; attention_call_efficiency below). peak16 is the 16-bit
rate: FP8 training recipes quantize only the linear layers, so attention and the output layer run at the BF16 peak
(GpuSpec.peak_flops_16bit); memory-bound work never depends on a FLOP peak.
"""
from typing import NamedTuple

import jax.numpy as jnp

from ..space import Recompute
from .lora import adapter_params_per_layer
from .quantize import quantize_times
from .terms import Term

FLASH_BWD_RATIO = 2.5
# Elementwise traffic per token per layer (forward), bytes per hidden element: two norms (read + write 16-bit),
# two residual adds, bias/dropout; the MLP activation adds 2 reads + 1 write of 16-bit per ffn element
# (gated: one more read). Ratios from counting Megatron's fused kernels; calibrated through memory_bound.
ELEMENTWISE_BYTES_PER_H = 24.0
ELEMENTWISE_BYTES_PER_F = 6.0
# Hyper-connections with n residual streams (Xie et al. 2025, "mHC", arXiv 2512.24880: the widened residual
# multiplies the memory traffic, which their fused kernels bring to a 6.7% step-time overhead at n = 4),
# per sub-layer and token in 16-bit, counting fused kernels: the pre-mix reads the n streams (its weights come from
# the same read) and writes the sub-layer's input, the post-mix reads the sub-layer's output and the n streams and
# writes n streams: (3n + 2) h elements where a plain residual add moves 3 h (read 2, write 1). Extra bytes per h
# per layer (two sub-layers x 2 bytes): 4 (3n + 2 - 3) = 12 n - 4, so 44 at n = 4 against the 24 of
# ELEMENTWISE_BYTES_PER_H.
HC_BYTES_PER_H_PER_STREAM = 12.0
HC_BYTES_SAVED = 4.0
# Unfused attention (no flash): scale+mask+softmax+dropout over b a s^2 scores, ~10 bytes per score forward.
SOFTMAX_BYTES_PER_SCORE = 10.0
# Backward of the memory-bound kernels moves about as many bytes as their forward (validation change; it was
# 2x): counting Megatron's fused kernels per element, forward -> backward bytes: layernorm 4 -> 6 (read x, dy;
# write dx), bias-dropout-add 7 -> 5 (read dy, mask; the residual gradient passes through), bias-GeLU 4 -> 6,
# scale-mask-softmax + dropout 9 -> 11: ~1.2x. Korthikanti et al. 2022, Table 4 (22B layer: sequence
# parallelism cuts the forward by 0.5 ms but the backward by only 0.1 ms) shows the backward's memory-bound
# share is no larger than the forward's; with 2x the 22B full-recompute layer came out 2 ms (18%) slow.
MEMORY_BWD_RATIO = 1.2
# Unfused attention GEMMs (QK^T, AV) are batched over b x a heads with an inner dimension of only d: QK^T
# writes and AV reads one 16-bit score each, 2 d FLOPs per 2 bytes, which on A100 (d = 96-160) is below the
# ridge point (~150-200 FLOP/B): each GEMM takes max(FLOPs / GEMM rate, score bytes / HBM rate) (roofline,
# Williams et al. 2009). As large GEMMs the small-h Narayanan runs (h = 2304, 24 heads, mbs 16) came out
# too fast and the fit bent memory_bound to 0.5 to compensate, which slowed every other memory-bound kernel.
SCORE_GEMM_BYTES = 2.0
# Eager rotary embedding (Megatron-Core rope_utils._apply_rotary_pos_emb_bshd, taken when the cos/sin carry a YaRN
# attention factor its fused kernel cannot apply: Framework.fused_scaled_rope), per 16-bit query/key element,
# forward: t * cos (read + write: 4 bytes), rotate_half's negation of one half and the concatenation (2 + 4),
# * sin (4), the sum (6), the concatenation with the unrotated rest (4) = 24 bytes, where the fused kernel reads
# and writes once (4, part of ELEMENTWISE_BYTES_PER_H's count). Its autograd backward moves about as many (two
# products, the negation, the gather of the halves, the sum of the two branches and the slice's zero fill: ~26),
# charged with MEMORY_BWD_RATIO like every elementwise kernel. The cos/sin tables ([s, d], computed per call) are
# b x heads times smaller.
ROPE_EAGER_BYTES_PER_ELEMENT = 24.0
# Logits: fused cross-entropy reads and writes fp32 logits (~12 bytes per element forward).
LOGIT_BYTES_PER_ELEMENT = 12.0
# Grouped GEMMs of an MoE layer's local experts: Transformer Engine's GroupedLinear (Megatron-Core TEGroupedMLP)
# runs one cuBLAS GEMM per expert, spread over 4 CUDA streams (TE common/gemm/cublaslt_gemm.cu,
# nvte_multi_stream_cublas_gemm; include/transformer_engine/multi_stream.h: num_streams = 4), and quantizes each
# expert's slice of an FP8 recipe apart. Each expert's GEMM pays its own launch, cuBLASLt setup and partly filled
# last wave, so a layer with E/ep local experts pays E/ep fixed costs per pass, which the one-call efficiency
# curve (gemm_time_s) does not see: at EP 8, DeepSeek-V3 holds 32 experts per GPU with 1,024 rows each, at EP 64
# 4 experts with 8,192 rows. Passes: fc1 (gate and up fused) and fc2 forward, each one's dgrad and wgrad backward.
# Most of that fixed cost is the host's: a full-iteration CUDA graph (Training.cuda_graphs "full", experts padded to
# fixed shapes) replays them without launches, and the model charges it only without one. Separately, an MoE layer
# whose router and token preprocessing run eagerly (no CUDA graph over those scopes) waits on the host once per
# forward: the dispatcher copies the per-expert token counts to the host (a device-to-host sync) to size its
# all-to-all, the GPU runs dry, and the next kernels start only as the host launches them (GpuP.moe_host_s).
# Megatron-Bridge's recipes without graphs err -12% on MoE runs, with Transformer Engine's router/preprocess graphs
# -2%, with full-iteration graphs +12% before these two terms (sax validate, grouped by recipes.csv cuda_graph).
EXPERT_GEMMS_FWD = 2.0


def gemm_time_s(flops, rate_flops, half_flops):
    """(W + W_half) / rate: rate the large-GEMM FLOP/s (gemm_rate)."""
    return jnp.where(flops > 0, (flops + half_flops) / rate_flops, 0.0)


def gemm_rate(peak_flops, gemm_max, ceiling):
    """FLOP/s of a large GEMM: the fitted fraction gemm_max of the peak, capped at the part's measured maximum
    achievable matmul rate (ceiling, a fraction of the same peak: GpuSpec.gemm_ceiling). A fit that only sees whole
    training steps can put gemm_max above what any matmul reaches (the die-tied Blackwell Ultra fit did, 8% above
    B300's measured FP8 rate; Hopper's, fitted on BF16 runs, 4% above H100's FP8 one): the cap keeps the GEMMs, the
    largest term a search trades against everything else, at or below a kernel measurement."""
    return peak_flops * jnp.minimum(gemm_max, ceiling)


def gemm_half_for(g, train):
    """The GEMM half-work the layers see: gemm_half_flops, or where one CUDA graph replays the whole iteration
    (train.graph_full) the graphed value (GpuSpec efficiency gemm_half_flops_graphed, never above the eager one). A
    replayed graph issues no launch from the host: the per-GEMM fixed time fitted on eagerly launched runs keeps only
    the kernel's own part."""
    graphed = jnp.where(g.gemm_half_graphed > 0, jnp.minimum(g.gemm_half_graphed, g.gemm_half_flops), g.gemm_half_flops)
    return jnp.where(train.graph_full > 0, graphed, g.gemm_half_flops)


def attention_efficiency(s_kv, eff_max, half_seq):
    """Fused-attention efficiency for a kernel call sweeping s_kv keys per query: eff_max s_kv/(s_kv + half)."""
    return eff_max * s_kv / (s_kv + half_seq)


# A causal call saturates later than one without a diagonal: each query tile's diagonal block is partly masked, and
# that loss is amortized over the keys the tile sweeps (cuDNN's SDPA training benchmark, NVIDIA/cudnn-frontend
# benchmark/sdpa_benchmark_training: the two halves differ 2-3x on GB200, GB300 and H200; the values and their fits
# are in the hardware YAMLs). Under context parallelism a ring of c ranks does the causal work in c diagonal calls
# (1/c of it) and c(c-1)/2 full blocks ((c-1)/c of it), each call over s/c keys (Liu et al. 2023, ring attention;
# Megatron-Core's load-balanced CP keeps the same shares).
def attention_call_efficiency(s_kv, c, eff_max, half_causal, half_full):
    """Efficiency of a causal sequence's attention split into c ring steps of s_kv keys: the harmonic mix of one
    diagonal (causal) call and c - 1 full ones by their shares of the causal work."""
    diag = attention_efficiency(s_kv, eff_max, half_causal)
    full = attention_efficiency(s_kv, eff_max, half_full)
    return 1.0 / (1.0 / (c * diag) + (1.0 - 1.0 / c) / full)


# Fused attention by head width. attention_max is fitted on 128-wide heads (every flash-attention run of the
# calibration sets). A narrower head does fewer matmul FLOPs per score while the softmax work per score (row max,
# exponential on the special-function units, rescale) stays, so a query tile spends a larger share of its time
# off the tensor cores: speed ~ d / (d + d_half), relative to d = 128 and capped at 1 (wider heads gain nothing
# measurable: cuDNN's d = 256 forward is 0.94x of d = 128, FA3's 1.04x). That is a time per score of
# 4d / F_mma + c / F_exp (MMA FLOPs per clock, exponentials per clock of an SM; c the exponential's share left
# unhidden), so d_half = c F_mma / (4 F_exp) scales with the SM's MMA FLOPs per exponential. d_half is the GPU's
# attention_head_dim_half (hardware YAML, with its source); 0 leaves attention flat in d.
ATTN_HEAD_DIM_REF = 128.0


def head_dim_factor(qk_head_dim, head_dim_half):
    """Fused-attention speed at a QK^T head width relative to 128-wide heads (ATTN_HEAD_DIM_REF above)."""
    d = jnp.maximum(qk_head_dim, 1.0)
    rel = d / (d + head_dim_half) * (ATTN_HEAD_DIM_REF + head_dim_half) / ATTN_HEAD_DIM_REF
    return jnp.minimum(rel, 1.0)


def layer_flops(mb, seq, model, moe_layer_weight, imbalance=None):
    """Forward FLOPs of one layer on one full (unsplit) microbatch: (qkv, proj, mlp, attention core).

    imbalance (max/mean expert load, default the model's) scales the expert work of the busiest GPU;
    model FLOPs pass 1.0 because the extra waiting is not useful work.
    """
    imbalance = model.imbalance if imbalance is None else imbalance
    bs = mb * seq
    h, d = model.hidden, model.head_dim
    mla = model.mla > 0
    # MLA (DeepSeek-V3, arXiv 2412.19437, eqs. 1-11): the QKV GEMMs are the down projections W_DQ, W_DKV and the
    # up projections W_UQ, W_UKV (params.ModelP.mla_down / mla_up, MACs per token); the output projection maps
    # a v_head_dim back to h
    qkv = jnp.where(mla, 2.0 * bs * (model.mla_down + model.mla_up),
                    2.0 * bs * h * (model.heads * d + 2.0 * model.kv_heads * d))
    proj = jnp.where(mla, 2.0 * bs * model.mla_out, 2.0 * bs * (model.heads * d) * h)
    mlp = sum(mlp_flops_parts(bs, model, moe_layer_weight, imbalance))
    attn_full = full_attention_flops(mb, seq, model)
    # sliding-window layers: fraction window_fraction of the layers do window_keys_ratio of the full work
    wf = model.window_fraction
    attn = jnp.where(model.window > 0, attn_full * (1.0 - wf + wf * window_keys_ratio(seq, model)), attn_full)
    attn = jnp.where(model.compressed > 0, attn_full * compressed_keys_ratio(seq, model), attn)
    af = model.attn_fraction  # hybrid models: the share of blocks that are attention blocks
    return af * qkv, af * proj, mlp, af * attn


def mlp_flops_parts(bs, model, moe_layer_weight, imbalance):
    """Forward FLOPs of the MLPs of one layer (averaged over the layers) on bs tokens: (dense MLP layers, routed
    experts, shared experts). A transformer layer always has an MLP (mlp_fraction 1), hybrid blocks have one in
    mlp_fraction of them; moe_layer_weight of the layers are MoE layers."""
    h = model.hidden
    dense_mlp = 2.0 * bs * h * model.ffn * model.mlp_mats
    # routed experts work in the LatentMoE width when there is one (+ its down and up projections h <-> latent),
    # shared experts at hidden width with their own ffn (both ratios exactly 1 for a plain MoE)
    has_e = model.expert_ffn > 0
    routed_w = jnp.where(model.moe_latent > 0, model.moe_latent / h, 1.0)
    shared_w = jnp.where(has_e, model.shared_ffn / jnp.where(has_e, model.expert_ffn, 1.0), 1.0)
    expert_one = 2.0 * bs * h * model.expert_ffn * model.mlp_mats
    routed = expert_one * model.top_k * imbalance * routed_w + 2.0 * bs * 2.0 * h * model.moe_latent
    shared = expert_one * model.shared_experts * shared_w
    return ((model.mlp_fraction - moe_layer_weight) * dense_mlp, moe_layer_weight * routed,
            moe_layer_weight * shared)


def mamba_flops(mb, seq, model):
    """(GEMM, SSD scan) forward FLOPs of the Mamba-2 mixers, per layer averaged over the blocks (0 without them).
    GEMMs: in_proj h -> 2 d_in + 2 G N + heads and out_proj d_in -> h (Dao & Gu 2024, Mamba-2 block, fig. 6).
    SSD, chunked (Dao & Gu 2024, section 6, "SSD algorithm" with chunk length Q): per token, the intra-chunk
    C B^T scores Q x N per group, the scores times X Q x P per head, and the chunk states in and out N x P per
    head twice: 2 (Q G N + Q d_in + 2 d_in N) FLOPs; the inter-chunk recurrence over s/Q states is negligible."""
    bs = mb * seq
    d_in, gn = model.mamba_inner, model.mamba_gn
    gemm = 2.0 * bs * model.hidden * (2.0 * d_in + 2.0 * gn + model.mamba_heads) + 2.0 * bs * d_in * model.hidden
    q = model.mamba_chunk
    scan = 2.0 * bs * (q * gn + q * d_in + 2.0 * d_in * model.mamba_state)
    return model.mamba_fraction * gemm, model.mamba_fraction * scan


def full_attention_flops(mb, seq, model):
    """Attention core of one full-attention layer, counted over the whole s x s score matrix (the causal kernel
    does half): QK^T 2bs^2 a d_qk + PV 2bs^2 a d_v (MLA: d_qk = nope + rope = 192, d_v = 128; GQA: both d)."""
    return jnp.where(model.mla > 0, 2.0 * mb * seq * seq * model.heads * (model.qk_head_dim + model.v_head_dim),
                     4.0 * mb * seq * seq * model.heads * model.head_dim)


def window_keys_ratio(seq, model):
    """Work of a sliding-window layer / a full causal layer's s^2 count, both as full_attention_flops counts.
    Query i sees min(i + 1, W) keys: sum_i = s W - W (W - 1)/2 for W <= s, taken as s W - W^2/2 (continuous, like
    the causal s^2/2; off by W/2 keys per sequence), i.e. (2 s W - W^2)/(2 s^2) of s^2 and, doubled to the
    non-causal count the causal kernel halves, (2 s W - W^2)/s^2. W >= s is full causal attention (ratio 1).
    GPT-OSS at s = 4096, W = 128: 0.0615, so a window layer costs ~6% of a full one."""
    s = 1.0 * seq  # a Python int seq (host-side FLOP counts) would overflow int32 in s * s
    w = jnp.minimum(jnp.maximum(model.window, 1.0), s)
    return (2.0 * s * w - w * w) / (s * s)


def compressed_keys_ratio(seq, model, indexer=True):
    """DeepSeek-V4's attention work (specs.CompressedAttentionSpec), averaged over the layers, as a share of
    full_attention_flops' s^2 count (doubled like window_keys_ratio: the causal kernel does half of s^2).
    Every layer: the window band (window_keys_ratio). A CSA layer's query at position t also attends to
    min(t/r, k) compressed keys (r = csa_ratio, k = index_topk): sum_t = t0^2/(2r) + (s - t0) k with t0 = min(s, r k);
    its indexer scores all t/r of them with index_width-wide queries and keys (QK^T only, no PV): sum_t t/r =
    s^2/(2r) at index_width / (heads (d_qk + d_v)) of the main kernel's FLOPs per key. An HCA layer's query attends
    to all t/r_h compressed keys: s^2/(2 r_h). DeepSeek-V4-Flash at s = 4096: 0.0615 (window) + 21/43 x (0.1875 +
    0.03125) + 20/43 x 0.0078 = 0.172. indexer=False: the main kernel's keys only."""
    s = 1.0 * seq
    r, k = model.csa_ratio, model.index_topk
    t0 = jnp.minimum(s, r * k)
    csa = 2.0 * (t0 * t0 / (2.0 * r) + (s - t0) * k) / (s * s)
    index = model.index_width / (model.heads * (model.qk_head_dim + model.v_head_dim) * r)
    hca = 1.0 / model.hca_ratio
    csa = csa + index if indexer else csa
    return window_keys_ratio(seq, model) + model.csa_fraction * csa + model.hca_fraction * hca


def replicated_qkv_flops(mb, seq, model):
    """The part of `qkv` (layer_flops) that tensor parallelism does not split: MLA's down projections, which
    Megatron-Core duplicates on every TP rank (MLASelfAttention: linear_q_down_proj / linear_kv_down_proj are
    not column-parallel). 0 for GQA."""
    return jnp.where(model.mla > 0, 2.0 * mb * seq * model.mla_down, 0.0)


def model_flops_per_sequence(seq, model):
    """Training FLOPs of one sequence (3x forward, no recompute, full attention as Megatron counts)."""
    qkv, proj, mlp, attn = layer_flops(1.0, seq, model, model.moe_fraction, imbalance=1.0)
    m_gemm, m_scan = mamba_flops(1.0, seq, model)
    logits = 2.0 * seq * model.hidden * model.vocab
    return 3.0 * (model.layers * (qkv + proj + mlp + attn + m_gemm + m_scan) + logits)


class TpGemms(NamedTuple):
    """Forward seconds of the GEMMs a sub-layer's tensor-parallel collectives overlap with, for one instance of the
    sub-layer (not averaged over the layers), one microbatch, one GPU: ``*_in`` is the column-parallel GEMM its
    input all-gather feeds (QKV, FC1, Mamba in_proj), ``*_out`` the row-parallel GEMM its reduce-scatter follows
    (attention projection, FC2, out_proj). 0 where the model has no such sub-layer."""
    attn_in: jnp.ndarray
    attn_out: jnp.ndarray
    mlp_in: jnp.ndarray
    mlp_out: jnp.ndarray
    mamba_in: jnp.ndarray
    mamba_out: jnp.ndarray


class LayerTimes(NamedTuple):
    """Seconds of one layer for one microbatch on one GPU."""
    fwd_s: jnp.ndarray
    bwd_s: jnp.ndarray
    linear_fwd_s: jnp.ndarray  # the GEMMs of the forward
    tp_gemms: TpGemms  # the same GEMMs one by one: what each TP collective can hide under (cost/tensor_parallel.py)
    attn_fwd_s: jnp.ndarray  # the attention core of the forward (the window of ring attention)
    weight_grad_s: jnp.ndarray  # the weight-gradient GEMMs of the backward (what zero-bubble defers)
    recompute_selective_s: jnp.ndarray  # what selective recompute adds (the attention core again)


def bf16_layer_share(model, train, pp, vpp):
    """Share of one GPU's layers whose GEMMs a low-precision recipe keeps in BF16 (Training.bf16_layers_start /
    _end), on the GPU that holds most of them: with pipeline stages the first (last) layers sit on the first (last)
    stage, in its first (last) chunk of layers/(pp vpp); with one stage all of them are on every GPU."""
    layers = model.layers
    chunk = layers / (pp * vpp)
    staged = jnp.maximum(jnp.minimum(train.bf16_start, chunk), jnp.minimum(train.bf16_end, chunk)) / (layers / pp)
    return jnp.where(pp > 1.0, staged, jnp.minimum(train.bf16_start + train.bf16_end, layers) / layers)


def layer_times(design_tp, design_cp, mbs, seq, model, g, train, pp=1.0, vpp=1.0, ep=1.0) -> LayerTimes:
    """Seconds for one layer on one GPU: forward GEMMs, attention core (fwd), elementwise (fwd), bwd ratios.
    ep: the expert-parallel size (E/ep local experts per MoE layer)."""
    t, c = design_tp, design_cp
    split = t * c
    qkv, proj, mlp, attn = layer_flops(mbs, seq, model, model.moe_fraction)
    # layers a low-precision recipe keeps in BF16 run their GEMMs at the 16-bit rate: over the GPU's layers the
    # GEMMs see the harmonic blend of the two rates (no BF16 layers: exactly the low-precision rate)
    share16 = bf16_layer_share(model, train, pp, vpp)
    rate = gemm_rate(g.peak_flops, g.gemm_max, g.gemm_cap)
    rate16 = gemm_rate(g.peak_flops_16bit, g.gemm_max, g.gemm_cap_16bit)
    rate = jnp.where(share16 > 0, 1.0 / ((1.0 - share16) / rate + share16 / rate16), rate)
    half = gemm_half_for(g, train)
    gt = lambda fl: gemm_time_s(fl / split, rate, half)  # noqa: E731
    # MLA's duplicated down projections: with sequence parallelism each TP rank runs them on its own s/t tokens
    # (the compressed latents are gathered afterwards), without it on the whole sequence
    rep = replicated_qkv_flops(mbs, seq, model)
    rep_split = jnp.where(train.seq_parallel > 0, split, c)
    rep_f = gemm_time_s(rep / rep_split, rate, half)
    linear_f = gt(qkv - rep) + gt(proj) + gt(mlp) + rep_f
    flash = train.flash > 0
    # Causal flash kernels skip the masked half of the score matrix; the attention core stays 16-bit in FP8
    # training and its efficiency saturates in the keys one kernel call sweeps (s/cp per ring step).
    attn_max = g.attention_max * head_dim_factor(model.qk_head_dim, g.attention_head_dim_half)
    # Packed sequences (Training.packed_doc_tokens): the varlen kernel attends within each example, so of the
    # whole-sequence causal work S^2/2 it does sum(L_i^2)/2 = L S/2 (L the length-weighted mean example), a share
    # L/S, in calls of L keys (split over the CP ranks like a whole sequence); unpacked, L = S
    span = jnp.where(train.doc_tokens > 0, jnp.minimum(train.doc_tokens, seq), seq)
    attn_eff = attention_call_efficiency(span / c, c, attn_max, g.attention_half_seq, g.attention_half_seq_full)
    attn_full = full_attention_flops(mbs, seq, model)
    # Sliding-window layers: the kernel sweeps only ~W keys per query tile (FlashAttention's local/window mode skips
    # the key blocks outside the band), so its efficiency is that of a W-key call without a causal diagonal's
    # saturation (cuDNN's 128-key window on GB200 runs at the unmasked curve's speed); full layers as before. The
    # learned sinks add one logit per head to each softmax denominator: no FLOPs worth counting.
    wf = model.window_fraction
    # DeepSeek-V4's compressed layers: the kernel's efficiency at the keys a query sweeps on average (the window
    # plus the compressed keys, compressed_keys_ratio's s^2 share x s/2), all layers alike
    win_keys = jnp.where(model.compressed > 0, 0.5 * seq * compressed_keys_ratio(seq, model, indexer=False),
                         jnp.minimum(jnp.maximum(model.window, 1.0), seq / c))
    win_eff = attention_efficiency(win_keys, attn_max, g.attention_half_seq_full)
    # time of the windowed mix / time of the same FLOPs at the full layers' efficiency (1 without windows)
    r = window_keys_ratio(seq, model)
    window_slowdown = jnp.where(model.window > 0,
                                attn_eff * ((1.0 - wf) / attn_eff + wf * r / win_eff) / (1.0 - wf + wf * r), 1.0)
    # seconds per attention FLOP of the causal kernel on one GPU (the half it computes, the packed share, the split)
    flash_s_per_flop = 0.5 * (span / seq) / split / (g.peak_flops_16bit * attn_eff)
    attn_flash_f = attn * window_slowdown * flash_s_per_flop
    # FP8 attention's backward (cuDNN's FP8 SDPA, Training.fp8_attention) sweeps every key block of the causal
    # triangle even in a sliding-window layer: NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/gpt_oss
    # (GB200, GB300; 128-key window, d 64) time the FP8 and MXFP8 window backward at 1.7-2.1 ms at 4k keys, 6.2-7.4
    # at 8k, 23-28 at 16k, 90-108 at 32k (x3.6-3.9 per doubling: the s^2 of full causal work), the BF16 one at
    # 0.47, 0.91, 1.8, 3.7 ms (x2: the window's s W). Its window layers' backward is then a full causal layer's, at
    # the full layers' efficiency; the forward skips the blocks as the 16-bit kernel does (161-179 TFLOP/s either way)
    # (without a window both are the same time, so the flag needs no window test)
    attn_flash_b = FLASH_BWD_RATIO * jnp.where(train.fp8_attn > 0, model.attn_fraction * attn_full * flash_s_per_flop,
                                               attn_flash_f)
    scores = mbs * model.heads * seq * seq / split
    mem_bw = g.hbm_Bps * g.memory_bound
    gt16 = lambda fl: gemm_time_s(fl / split, rate16, half)  # noqa: E731
    # unfused attention computes the whole score matrix and masks it: neither a window nor packing saves work there
    attn_plain_f = 2.0 * jnp.maximum(gt16(0.5 * attn_full), SCORE_GEMM_BYTES * scores / mem_bw)  # QK^T and AV
    tokens = mbs * seq / c
    sp_split = jnp.where(train.seq_parallel > 0, t, 1.0)
    # the norms and residual adds are per sub-layer: two in a transformer layer, one in a hybrid block
    sublayers = (model.attn_fraction + model.mlp_fraction + model.mamba_fraction) / 2.0
    dense_ffn, expert_ffn = activated_ffn_parts(model)
    act_bytes_per_ffn = g.elementwise_factor * tokens * ELEMENTWISE_BYTES_PER_F * model.mlp_mats / 2.0 / t
    # the alltoall dispatcher sorts the received rows by local expert and back (alltoall_sort_bytes_per_token); the
    # flex dispatchers (Training.ep_dedup) do not, and with one local expert there is nothing to sort
    sort_bytes = jnp.where((train.ep_dedup > 0) | (model.experts <= jnp.maximum(ep, 1.0)), 0.0,
                           alltoall_sort_bytes_per_token(model))
    hc_bytes = jnp.where(model.hc_streams > 1.0, HC_BYTES_PER_H_PER_STREAM * model.hc_streams - HC_BYTES_SAVED, 0.0)
    per_h = ELEMENTWISE_BYTES_PER_H + hc_bytes  # the residual's and norms' bytes per hidden element, streams included
    elem_bytes = g.elementwise_factor * tokens * (per_h * model.hidden * sublayers / sp_split
                           + ELEMENTWISE_BYTES_PER_F * (dense_ffn + expert_ffn) * model.mlp_mats / 2.0 / t
                           + (moe_permute_bytes_per_token(model) + sort_bytes) / sp_split)
    # eager RoPE on this GPU's query heads and key heads (a GQA key head shared by more TP ranks than there are key
    # heads is replicated on each); zero unless the model's RoPE is YaRN-scaled and the framework cannot fuse that
    rotated = (model.heads / t + jnp.maximum(model.kv_heads / t, 1.0)) * model.head_dim * model.attn_fraction
    elem_bytes = elem_bytes + model.rope_scaled * g.rope_eager_bytes * tokens * rotated
    # eager frameworks (no torch.compile): the composite RMSNorm's extra passes (two norms per transformer layer) and
    # a RoPE that always runs unfused (GpuP.norm_eager_bytes / rope_always_bytes; 0 for fused kernels)
    norm_eager = g.norm_eager_bytes * tokens * 2.0 * sublayers * model.hidden / sp_split
    elem_bytes = elem_bytes + norm_eager + g.rope_always_bytes * tokens * rotated
    # Mamba-2 mixers: GEMMs like any linear layer; the SSD scan is a fused, chunked kernel like flash attention
    # (tensor-core matmuls within a chunk of Q tokens, Dao & Gu 2024 section 6: its diagonal blocks are causally
    # masked quadratic attention), so it runs at the efficiency of a causal kernel call sweeping Q keys, at the
    # 16-bit rate (the mamba_ssm kernels are not FP8), and its backward does 2.5x the forward like flash attention's;
    # plus the memory-bound conv1d and gated norm
    m_gemm, m_scan = mamba_flops(mbs, seq, model)
    mamba_f = gt(m_gemm) + jnp.where(m_scan > 0, m_scan / split / (g.peak_flops_16bit * attention_efficiency(
        model.mamba_chunk, g.attention_max, g.attention_half_seq)), 0.0)
    mamba_bytes = model.mamba_fraction * tokens * mamba_bytes_per_token(model) / t
    mamba_elem_f = mamba_bytes / mem_bw
    softmax_bytes = SOFTMAX_BYTES_PER_SCORE * scores
    elem_f = elem_bytes / mem_bw
    softmax_f = softmax_bytes / mem_bw
    attn_f = jnp.where(flash, attn_flash_f, attn_plain_f + softmax_f)
    attn_b = jnp.where(flash, attn_flash_b, 2.0 * attn_plain_f + MEMORY_BWD_RATIO * softmax_f)
    # LoRA (cost/lora.py): frozen GEMMs run only their input-gradient GEMM backward (1x forward), the rank-r
    # adapters (16-bit, like the attention core in FP8 recipes) forward 1x and backward 2x; without LoRA
    # adapter_f = 0 and frozen = 0
    adapter_f = gemm_time_s(2.0 * mbs * seq * adapter_params_per_layer(model, train) / split, rate16, half)
    # (written as factors of 1.0 and added zeros so that without LoRA XLA compiles the same arithmetic)
    trained = 1.0 - train.lora  # weight gradients of the base weights: 1 (all trained) or 0 (frozen)
    # host-launched MoE work (EXPERT_GEMMS_FWD above): the experts' GEMM passes, and the host wait, which only the
    # forward (and its recompute) has
    moe_share = jnp.where(model.experts > 0, model.moe_fraction, 0.0)
    expert_gemms_f = moe_share * model.experts / jnp.maximum(ep, 1.0) * EXPERT_GEMMS_FWD * g.expert_gemm_s * (
        1.0 - train.graph_full)
    moe_host_f = moe_share * g.moe_host_s * (1.0 - train.graph_moe)
    # FP8/FP4 recipes cast each linear's input (forward) and output gradient (backward) first (cost/quantize.py)
    quant_f, quant_b = quantize_times(model, tokens, t, sp_split, g, 1.0 - share16)
    fwd = linear_f + attn_f + elem_f + g.layer_overhead_s + adapter_f + mamba_f + mamba_elem_f + expert_gemms_f \
        + moe_host_f + quant_f
    m_gemm_f = gt(m_gemm)
    mamba_b = 2.0 * m_gemm_f + FLASH_BWD_RATIO * (mamba_f - m_gemm_f) + MEMORY_BWD_RATIO * mamba_elem_f
    bwd = 2.0 * (linear_f * (1.0 - 0.5 * train.lora)) + attn_b + MEMORY_BWD_RATIO * elem_f + g.layer_overhead_s \
        + 2.0 * adapter_f + mamba_b + (1.0 + trained) * expert_gemms_f + quant_b
    # Selective recompute runs the forward of the modules Training.recompute_modules names once more: the attention
    # core (Megatron-Core's default), the dense MLPs, the MoE experts, their activation, the shared experts, the
    # norms (2 norms x read + write 16-bit = 8 of ELEMENTWISE_BYTES_PER_H) or MLA's up projections. Recomputing the
    # MoE layer re-runs its router and experts (and waits on the host again); its all-to-alls run again in ep_term.
    dense_fl, routed_fl, shared_fl = mlp_flops_parts(mbs * seq, model, model.moe_fraction, model.imbalance)
    moe_act_f = act_bytes_per_ffn * expert_ffn / mem_bw
    dense_mlp_f = gt(dense_fl) + act_bytes_per_ffn * dense_ffn / mem_bw
    shared_f = gt(shared_fl)
    moe_f = gt(routed_fl) + shared_f + moe_act_f + expert_gemms_f + moe_host_f
    norm_f = (g.elementwise_factor * tokens * NORM_BYTES_PER_H * model.hidden * sublayers / sp_split
              + norm_eager) / mem_bw
    mla_up_f = gt(2.0 * mbs * seq * model.mla_up * model.attn_fraction)
    # Op-level policies (torchtitan's selective op SAC: Training.recompute_modules elementwise and linear) rerun
    # every elementwise kernel and a share of the linear layers' GEMMs with their input casts; what they save (the
    # other GEMMs' outputs, the attention core's) is not run again.
    recompute_s = (train.rc_core_attn * attn_f + train.rc_mlp * dense_mlp_f + train.rc_moe * moe_f
                   + (1.0 - train.rc_moe) * (train.rc_moe_act * moe_act_f + train.rc_shared * shared_f)
                   + train.rc_norm * norm_f + train.rc_mla_up * mla_up_f
                   + train.rc_elementwise * elem_f + train.rc_linear * (linear_f + quant_f))
    return LayerTimes(fwd_s=fwd, bwd_s=bwd, linear_fwd_s=linear_f + m_gemm_f, tp_gemms=tp_gemms(qkv, proj, mlp, m_gemm,
                                                           rep, model, gt), attn_fwd_s=attn_f,
                      weight_grad_s=(linear_f + m_gemm_f) * trained + adapter_f, recompute_selective_s=recompute_s)


NORM_BYTES_PER_H = 8.0  # the two norms' share of ELEMENTWISE_BYTES_PER_H


def tp_gemms(qkv, proj, mlp, m_gemm, rep, model, gt) -> TpGemms:
    """Per-instance forward GEMM seconds of each sub-layer's input and output linear (TpGemms). The FLOP arguments
    are layer averages (layer_flops, mamba_flops: weighted by the share of layers that have the sub-layer), so
    each is divided by that share first; ``gt`` times FLOPs on one GPU (tp x cp split)."""
    def per(x, share):
        return jnp.where(share > 0, x / jnp.where(share > 0, share, 1.0), 0.0)

    def time(fl):
        return jnp.where(fl > 0, gt(fl), 0.0)

    af, mf, bf = model.attn_fraction, model.mlp_fraction, model.mamba_fraction
    # MLA: the gather of the latent feeds the up projections only; the replicated down projections run before it
    # and cannot hide it (qkv is weighted by af, rep is not: MLA models have no hybrid blocks)
    attn_in = time(per(qkv, af) - rep)
    # FC1 holds (mats - 1) of the MLP's mats (gate and up for SwiGLU), FC2 one
    mlp_i = per(mlp, mf)
    # Mamba-2: in_proj h -> 2 d_in + 2 G N + heads, out_proj d_in -> h (mamba_flops)
    widths = 3.0 * model.mamba_inner + 2.0 * model.mamba_gn + model.mamba_heads
    out_share = jnp.where(widths > 0, model.mamba_inner / jnp.where(widths > 0, widths, 1.0), 0.0)
    m_i = per(m_gemm, bf)
    return TpGemms(attn_in=attn_in, attn_out=time(per(proj, af)),
                   mlp_in=time(mlp_i * (model.mlp_mats - 1.0) / model.mlp_mats), mlp_out=time(mlp_i / model.mlp_mats),
                   mamba_in=time(m_i * (1.0 - out_share)), mamba_out=time(m_i * out_share))


# MoE token permutation (Megatron-Core moe_utils.permute / unpermute, fused or not): before the dispatch each token
# is read once and written as top_k copies grouped by expert; after the combine the top_k expert outputs are read
# and summed into one row: 2 (1 + top_k) rows of the dispatched width (LatentMoE: the latent), 16-bit, per token
# and MoE layer in the forward (the backward moves the gradients the same way: MEMORY_BWD_RATIO like every
# elementwise kernel)
PERMUTE_BYTES_PER_ELEMENT = 2.0


def dispatched_width(model):
    """Width of the rows an MoE layer dispatches: the hidden size, or LatentMoE's latent."""
    return jnp.where(model.moe_latent > 0, model.moe_latent, model.hidden)


def moe_permute_bytes_per_token(model):
    """0 for a dense model (moe_fraction 0)."""
    return model.moe_fraction * 2.0 * (1.0 + model.top_k) * dispatched_width(model) * PERMUTE_BYTES_PER_ELEMENT


# Megatron-Core's alltoall dispatcher (MoEAlltoAllTokenDispatcher, megatron/core/transformer/moe/token_dispatcher.py,
# NVIDIA/Megatron-LM at d98e8a64dd) receives its rows grouped by source rank; with more than one local expert it sorts
# them by local expert before the grouped GEMM (dispatch_postprocess, "Permutation 2": sort_chunks_by_idxs) and back
# by source rank before the combine (combine_preprocess, "Unpermutation 2"; with experts padded to capacity a
# transpose and copy instead): two more read-and-write passes over the ~top_k rows each token sent, 4 top_k rows per
# token and MoE layer in the forward, on top of moe_permute_bytes_per_token. The flex dispatcher (DeepEP, HybridEP;
# Training.ep_dedup) permutes what it receives once, by local expert (get_permuted_hidden_states_by_experts), and
# has no second sort.
def alltoall_sort_bytes_per_token(model):
    """Bytes per token and layer (averaged over the layers) of the alltoall dispatcher's sort by local expert and
    back, forward; 0 for a dense model."""
    return model.moe_fraction * 2.0 * 2.0 * model.top_k * dispatched_width(model) * PERMUTE_BYTES_PER_ELEMENT


def activated_ffn_parts(model, imbalance=None):
    """MLP hidden width one token activates per layer (averaged over the layers), as (dense layers, MoE layers):
    the dense ffn in dense layers, top_k routed experts (x the busiest GPU's imbalance) plus the shared ones in MoE
    layers. The MoE model files used to set ffn to expert_ffn, which counted one expert's activation for top_k."""
    imbalance = model.imbalance if imbalance is None else imbalance
    moe_w = model.moe_fraction
    return ((model.mlp_fraction - moe_w) * model.ffn,
            moe_w * (model.top_k * imbalance * model.expert_ffn + model.shared_experts * model.shared_ffn))


def activated_ffn(model, imbalance=None):
    dense, moe = activated_ffn_parts(model, imbalance)
    return dense + moe


# Mamba-2 memory-bound traffic per token, in units of the widths (mamba_ssm / Megatron-Core MambaMixer): the
# causal conv1d reads and writes [x, B, C] (16-bit: 4 bytes per element), the gated RMSNorm reads y and z and
# writes its output (6 bytes per d_in element), and the SSD kernels write and read the fp32 chunk states, heads
# x P x N per chunk of Q tokens (8 d_in N / Q bytes per token)
MAMBA_CONV_BYTES = 4.0
MAMBA_NORM_BYTES = 6.0
MAMBA_STATE_BYTES = 8.0


def mamba_bytes_per_token(model):
    d_in = model.mamba_inner
    return (MAMBA_CONV_BYTES * (d_in + 2.0 * model.mamba_gn) + MAMBA_NORM_BYTES * d_in
            + MAMBA_STATE_BYTES * d_in * model.mamba_state / model.mamba_chunk)


def logits_times(tp, cp, mbs, seq, model, g, train=None):
    """Output layer + cross-entropy on the last stage: (fwd, bwd) seconds. The output layer is 16-bit even in
    FP8 training (outside Megatron's per-layer fp8 region; skipped by torchtitan's Float8 converter). ``train``:
    the Training parameters, for the GEMM half-work under CUDA graphs (gemm_half_for; None: launched eagerly)."""
    flops = 2.0 * mbs * seq * model.hidden * model.vocab / (tp * cp)
    half = g.gemm_half_flops if train is None else gemm_half_for(g, train)
    f = gemm_time_s(flops, gemm_rate(g.peak_flops_16bit, g.gemm_max, g.gemm_cap_16bit), half)
    ce = LOGIT_BYTES_PER_ELEMENT * mbs * seq * model.vocab / (tp * cp) / (g.hbm_Bps * g.memory_bound)
    return f + ce, 2.0 * f + ce


def layer_recompute_s(ctx, d):
    """Seconds one layer's backward spends recomputing its forward, averaged over the stage's layers: the modules
    selective recompute names, or the recomputed share of the whole forward (full, half, block)."""
    lt = ctx.layer
    return jnp.where(d.recompute == Recompute.SELECTIVE, lt.recompute_selective_s, ctx.recompute_share * lt.fwd_s)


def compute_term(ctx, d, model) -> Term:
    """Kernels of the slowest stage: its layers forward, backward and recomputed, plus the output layer.
    Memory: fp32 logits of the whole microbatch when one stage holds both ends (pp = 1)."""
    lt = ctx.layer
    recompute_s = layer_recompute_s(ctx, d)
    stage_s = ctx.layers_stage * (lt.fwd_s + lt.bwd_s + recompute_s) + ctx.logits_fwd_s + ctx.logits_bwd_s + ctx.mtp_s
    logits_bytes = jnp.where(d.pp <= 1.0, 4.0 * d.mbs * ctx.seq * model.vocab / (d.tp * d.cp), 0.0)
    return Term(stage_s=stage_s, memory_bytes=logits_bytes)

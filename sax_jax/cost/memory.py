"""Memory per GPU: weights, gradients, optimizer state, activations; feasibility.

Activations per layer per microbatch in 16-bit (Korthikanti et al. 2022, section 4), generalized to GQA and
any ffn/gating. For MHA with f = 4h they reduce to the paper's sbh(34 + 5as/h) (no recompute),
sbh(10 + 24/t + 5as/(ht)) (TP without sequence parallelism), 34sbh/t (selective, SP) and 2sbh (full):
  * split by TP only with sequence parallelism: norm inputs 4sbh, QKV and MLP inputs 2sbh each,
    two dropout masks sbh each -> 10 sbh;
  * always split by TP: Q, K, V 2sb(ad + 2gd), projection input 2sb(ad), MLP hidden 2sbf x (2 | 3 gated);
  * attention scores 5 a s^2 b (softmax out, dropout mask, dropout out): gone with flash attention or
    selective recompute.
  * a model without dropout (ModelSpec.dropout false: Llama, Qwen, Mixtral, MPT) stores no masks: 2 sbh less
    in the sequence-parallel part, 2 a s^2 b instead of 5 for the scores.
CP divides s (scores: s/c queries x s keys). Model state per parameter: 16-bit weights, fp32 grads,
Adam 12 bytes, sharded per ZeRO stage over dp x cp (Megatron's distributed optimizer).

FP8 GEMMs (gemm_input_bytes = 1): Transformer Engine's Linear/LayerNormLinear save the FP8-quantized input
for the weight-gradient GEMM instead of the 16-bit one (TE Linear forward: the quantized input, columnwise
usage only, is what is saved for backward; MXFP8 adds one 1-byte scale per 32 elements, left out). What
changes: the QKV and fc1 inputs (norm outputs) and the fc2 input take 1 byte per element; the attention output
stays 16-bit for the fused-attention backward and the projection keeps its own FP8 copy (+1 byte); norm
inputs, Q/K/V, the fc1 output (the activation function's backward input) and the dropout masks are unchanged.
MHA, f = 4h, SP: 34 sbh/t -> 29 sbh/t.
"""
import jax.numpy as jnp

from ..space import Recompute, Schedule, Sharding, full_recompute_share
from .compute import activated_ffn, activated_ffn_parts


def activation_bytes_per_layer(mbs, seq, tp, cp, recompute, model, train, gemm_input_bytes=2.0, full_share=None):
    """Stored activation bytes of one layer for one microbatch on one GPU (recompute: space.Recompute), averaged
    over the stage's layers; full_share: the fraction recomputed from their input (Context.recompute_share; None:
    that of the recompute code alone).
    gemm_input_bytes: bytes per element of the inputs the linear layers save for their weight gradients
    (2: 16-bit; 1: FP8 GEMMs, Transformer Engine)."""
    s, b, h = seq / cp, mbs, model.hidden
    gin = gemm_input_bytes
    sbh = s * b * h
    sp_div = jnp.where(train.seq_parallel > 0, tp, 1.0)
    # norm inputs 4 sbh (16-bit), QKV and fc1 inputs gin sbh each, two dropout masks sbh each (none without dropout)
    # hyper-connections keep the n residual streams each sub-layer's mix read, 16-bit, for its backward (mHC,
    # arXiv 2512.24880): n h per sub-layer where a plain residual's norm input (counted above) is one h
    sp_part = (4.0 + 2.0 * gin + 2.0 * model.dropout + 4.0 * (model.hc_streams - 1.0)) * sbh / sp_div
    # Q, K, V (16-bit, for the attention backward); MLA: a heads of d_qk for Q and K, d_v for V
    mla = model.mla > 0
    # a shared key/value vector (DeepSeek-V4) is one d_qk per token, not a key and a value per head
    qkv = jnp.where(mla, jnp.where(model.kv_shared > 0, 2.0 * s * b * (model.heads + 1.0) * model.qk_head_dim,
                                   2.0 * s * b * model.heads * (2.0 * model.qk_head_dim + model.v_head_dim)),
                    2.0 * s * b * (model.heads * model.head_dim + 2.0 * model.kv_heads * model.head_dim))
    # attention output: 16-bit for the attention backward, plus the projection's own copy when it is FP8
    proj_in = (2.0 + jnp.where(gin < 2.0, gin, 0.0)) * s * b * model.heads * jnp.where(mla, model.v_head_dim,
                                                                                          model.head_dim)
    # fc1 output ((mats - 1) f wide, 16-bit, the activation's backward input) and fc2 input (f wide, gin bytes),
    # f the width a token activates (MoE: its top_k experts and the shared ones)
    mlp_hidden = s * b * activated_ffn(model) * (2.0 * (model.mlp_mats - 1.0) + gin)
    af = model.attn_fraction  # hybrid models: attention in this share of the blocks
    tp_part = (af * (qkv + proj_in) + mlp_hidden) / tp
    # MLA's compressed latents [c_Q, c_KV, k_rope]: the latent norms' 16-bit inputs and the up projections'
    # gin-byte inputs, on every TP rank (Megatron-Core gathers them over the sequence before the up projections)
    tp_part = tp_part + jnp.where(mla, (2.0 + gin) * s * b * model.mla_latent, 0.0)
    # softmax output 2 bytes per score, plus the dropout mask (1) and output (2) when the model has dropout
    scores = (2.0 + 3.0 * model.dropout) * model.heads * s * seq * b / tp
    # selective recompute of the attention core drops the scores; with half the layers are stored whole, scores
    # included
    sel = recompute == Recompute.SELECTIVE
    scores = jnp.where((train.flash > 0) | (sel & (train.rc_core_attn > 0)) | (recompute == Recompute.FULL), 0.0,
                       scores)
    # hybrid blocks: one norm input and one linear input per block instead of two per transformer layer, and the
    # Mamba-2 mixers' own activations
    sublayers = (af + model.mlp_fraction + model.mamba_fraction) / 2.0
    none_or_sel = sp_part * sublayers + tp_part + af * scores + mamba_activation_bytes(s, b, tp, model, gin)
    # the other selectively recomputed modules keep only their inputs: the dense MLPs and the MoE experts drop
    # their hidden activations, moe_act the activation's output (the fc2 input), layernorm the norm outputs (the
    # QKV and fc1 inputs), mla_up_proj the up projections' outputs (Q, K, V)
    dense_f, expert_f = activated_ffn_parts(model)
    per_ffn = s * b * (2.0 * (model.mlp_mats - 1.0) + gin) / tp
    dropped = (train.rc_mlp * dense_f * per_ffn + train.rc_moe * expert_f * per_ffn
               + (1.0 - train.rc_moe) * train.rc_moe_act * expert_f * s * b * gin / tp
               + (1.0 - train.rc_moe) * train.rc_shared * model.moe_fraction * model.shared_experts
               * model.shared_ffn * per_ffn
               + train.rc_norm * 2.0 * gin * sbh * sublayers / sp_div
               + train.rc_mla_up * jnp.where(mla, af * qkv / tp, 0.0)
               # op-level policies: the elementwise kernels' outputs (the norm outputs the QKV and fc1 GEMMs read,
               # the activation's output fc2 reads) and the recomputed share of the GEMMs' outputs (Q, K, V; fc1)
               + train.rc_elementwise * (2.0 * gin * sbh * sublayers / sp_div
                                         + s * b * activated_ffn(model) * gin / tp)
               + train.rc_linear * (af * qkv + s * b * activated_ffn(model) * 2.0 * (model.mlp_mats - 1.0)) / tp)
    full = 2.0 * sbh / sp_div
    # a selective policy keeps at least what full recompute keeps (the layer's input), however its modules overlap
    none_or_sel = jnp.where(sel, jnp.maximum(none_or_sel - dropped, full), none_or_sel)
    share = full_recompute_share(recompute) if full_share is None else full_share  # the mean over the stage's layers
    return share * full + (1.0 - share) * none_or_sel


def mamba_activation_bytes(s, b, tp, model, gin):
    """Stored activations of the Mamba-2 mixers per layer (averaged over the blocks; Megatron-Core MambaMixer with
    the mamba_ssm kernels): in_proj output [z, x, B, C, dt] and conv1d output [x, B, C] 16-bit, the scan output y
    16-bit, out_proj input gin bytes, and the fp32 chunk states (d_in N / Q per token); all split over TP (heads)."""
    d_in, gn = model.mamba_inner, model.mamba_gn
    per_token = (2.0 * (2.0 * d_in + 2.0 * gn + model.mamba_heads) + 2.0 * (d_in + 2.0 * gn) + 2.0 * d_in
                 + gin * d_in + 4.0 * d_in * model.mamba_state / model.mamba_chunk)
    return model.mamba_fraction * s * b * per_token / tp


def in_flight_microbatches(schedule, p, m_micro, v, extra_warmup):
    """Microbatches whose activations the first stage holds at once: GPipe m; 1F1B min(p, m); interleaved
    p(1 + (p-1)/(pv)); ZB-H1 min(p, m); ZB-H2 min(2p-1, m); latency-aware 1F1B p plus its extra warm-up."""
    gpipe = m_micro
    onef = jnp.minimum(p, m_micro)
    inter = jnp.minimum(p * (1.0 + (p - 1.0) / (p * v)), m_micro)
    zb2 = jnp.minimum(2.0 * p - 1.0, m_micro)
    la = jnp.minimum(p + extra_warmup, m_micro)
    return jnp.select([schedule == Schedule.GPIPE, schedule == Schedule.ONE_F_ONE_B,
                       schedule == Schedule.INTERLEAVED, schedule == Schedule.ZB_H1, schedule == Schedule.ZB_H2],
                      [gpipe, onef, inter, onef, zb2], la)


def params_per_gpu(tp, pp, ep, model, layers_stage, etp=None):
    """(dense params, expert params) held by one GPU of the first (fullest) pipeline stage; etp: the ranks one
    expert is split over (default tp; MoE parallel folding sets its own)."""
    etp = tp if etp is None else etp
    h, d = model.hidden, model.head_dim
    # MLA: up/output projections split over TP, the down projections duplicated on every rank (x tp here, / tp
    # below)
    attn = jnp.where(model.mla > 0,
                     model.mla_up + model.mla_out + model.mla_rep_params * tp + 2.0 * h,
                     h * (model.heads * d + 2.0 * model.kv_heads * d) + model.heads * d * h + 2.0 * h)
    dense_mlp = model.mlp_mats * h * model.ffn
    # routed experts in the LatentMoE width (exactly h without one), shared experts at h with their own width
    routed_w = jnp.where(model.moe_latent > 0, model.moe_latent, h)
    expert_mlp = model.mlp_mats * routed_w * model.expert_ffn
    shared_mlp = model.mlp_mats * h * model.shared_ffn
    # hybrid blocks (specs.HybridSpec): attention in attn_fraction of them, Mamba-2 mixers in mamba_fraction
    d_in, gn = model.mamba_inner, model.mamba_gn
    mamba = (h * (2.0 * d_in + 2.0 * gn + model.mamba_heads) + (d_in + 2.0 * gn) * (model.mamba_conv + 1.0)
             + 3.0 * model.mamba_heads + d_in + d_in * h + h)
    dense = layers_stage * (model.attn_fraction * attn + (model.mlp_fraction - model.moe_fraction) * dense_mlp
                            + model.moe_fraction * (model.shared_experts * shared_mlp + 2.0 * h * model.moe_latent)
                            + model.mamba_fraction * mamba) / tp
    # mHC's mixing weights, whole on every TP rank (0 for one stream)
    dense = dense + layers_stage * model.hc_params
    experts = layers_stage * model.moe_fraction * model.experts * expert_mlp / (etp * ep)
    experts = experts * model.expert_slots  # redundant expert replicas (EPLB; cost/expert_placement.py), 1 without
    # input embedding on the first stage; with one stage the output layer too unless tied
    emb = model.vocab * h / tp * jnp.where(pp > 1.0, 1.0, 2.0 - model.tied)
    return dense + emb, experts


def model_state_bytes(params, shard, sharding, train, opt_shard=None):
    """Weights + grads + optimizer for `params` sharded over `shard` GPUs (sharding: space.Sharding); opt_shard: the
    GPUs the ZeRO-3 family's optimizer state is sharded over, if not `shard` (hsdp with hsdp_outer optim)."""
    w, gr, op = train.param_bytes, train.grad_bytes, train.opt_bytes
    full = (w + gr + op) * params
    zero3 = (w + gr) * params / shard + op * params / (shard if opt_shard is None else opt_shard)
    return jnp.select(
        [sharding == Sharding.ZERO0, sharding == Sharding.ZERO1, sharding == Sharding.ZERO2],
        [full, (w + gr) * params + op * params / shard, w * params + (gr + op) * params / shard],
        zero3)  # fsdp / hsdp (hsdp passes its shard group)

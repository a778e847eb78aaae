"""HBM traffic of quantizing the linear layers' operands in FP8/FP4 training, per layer and microbatch on one GPU.

A low-precision GEMM reads its operands in FP8 (or NVFP4), but the activations and gradients arrive in 16 bits:
something must scale and cast them first. Transformer Engine does it per linear layer, in the forward for its
input and in the backward for the gradient of its output; Hopper's FP8 GEMMs take only the TN layout, and
Blackwell's block-scaled formats scale along the reduction dimension, so each tensor is written twice, once per
orientation (TE `Float8Quantizer` / `MXFP8Quantizer` with rowwise and columnwise usage; `cast_transpose`).
Blackwell's FP8 GEMMs take every layout, so there a per-tensor scale (delayed, current) writes one copy that
both orientations read (TE creates no transpose where `nvte_is_non_tn_fp8_gemm_supported`; GpuSpec.fp8_any_layout).
Weights are cast once per step and kept across the microbatches (Megatron-Core passes `is_first_microbatch`), so
their cast is left out. Per quantized element of a 16-bit tensor (2 bytes read per pass, `q` bytes per written
element, GEMM_INPUT_BYTES: 1 for FP8, 0.5625 for NVFP4 with its block scales):

    delayed  (TE DelayedScaling: the scale comes from the amax history, found during the cast)  2 + 2q
    current  (TE Float8CurrentScaling; torchao tensorwise; NVFP4's global amax): an amax pass first  4 + 2q
             (a norm-fed input where the norm computes the amax, TE >= 2.7: 2 + 2q; Framework.norm_amax)
    block    (MXFP8, DeepSeek-V3 1x128 / 128x128 blockwise: each block's scale inside the one pass)  2 + 2q
    rowwise  (torchao rowwise: each operand scaled along its reduction dimension, so the rowwise and the
              columnwise copy each need their own amax and cast pass)  8 + 2q

A linear layer fed by a norm (QKV, FC1, Mamba's in_proj) gets its input from the norm kernel: with delayed scaling
TE's fused norm writes the low-precision copies instead of the 16-bit output (LayerNormLinear, `normalization` with an
FP8 output quantizer), which moves max(2q - 2, 0) = 0 bytes more; so does cuDNN's norm with an MXFP8 quantizer, which
TE runs only when NVTE_NORM_FWD_USE_CUDNN is set (Training.cudnn_norm; TE's own norm writes the 16-bit output and an
MXFP8 or FP8-block cast follows). A current or rowwise scale needs the whole tensor's amax before the cast, so those
inputs pay the full pass, except where the norm kernel computes that amax itself (Transformer Engine >= 2.7's own
norm for FP8 current scaling, not cuDNN's: it writes the 16-bit output and its amax, then one cast pass reads it;
Framework.norm_amax).

Elements (the layer's widths, as compute.layer_flops counts its GEMMs): the forward quantizes every linear's
input, the backward every linear's output gradient. Sequence-parallel tensors of hidden width are split over TP
(s/t tokens each), the column-parallel outputs and row-parallel inputs over TP by width.

Where the casts run on a sequence-parallel tensor decides how many elements each GPU casts. Transformer Engine and
torchao's tensorwise TP styles (Float8ColwiseParallel, PrepareFloat8ModuleInput) cast the GPU's s/t-token shard
and all-gather it in FP8. torchao's rowwise recipes have no FP8 all-gather: torchtitan then applies plain
ColwiseParallel/RowwiseParallel, "all-gather happens in high precision" (torchtitan models/llama3/
parallelize_llama.py at 820504e, June 2025), so every TP rank casts the whole gathered s-token tensor, and the
backward's output gradients of the row-parallel linears arrive the same way (the reduce-scatter's backward is an
all-gather). The amax of a gathered tensor cannot fuse into its producer (the collective), so those casts pay every
read pass (GATHERED_16BIT, GpuP.quant_gathered_bytes).
"""
import jax.numpy as jnp

READ_PASSES = {"delayed": 1.0, "current": 2.0, "block": 1.0, "rowwise": 4.0}


PER_TENSOR = ("delayed", "current")
# recipes whose sequence-parallel inputs are all-gathered in 16 bits and cast after the gather (docstring above)
GATHERED_16BIT = ("rowwise",)


def bytes_per_element(scaling: str, q_bytes: float, fused_amax: bool = False, frozen_weights: bool = False,
                      any_layout: bool = False, norm_amax: bool = False, cudnn_norm: bool = False) -> tuple:
    """(standalone, norm-fed) HBM bytes per quantized element beyond the 16-bit path (table above).
    fused_amax: the framework computes each amax inside the kernel that produces the tensor (torch.compile's
    Inductor fuses the reduction into its pointwise producer), so a current or rowwise scale costs one read fewer.
    frozen_weights (LoRA): no weight-gradient GEMM, so only the orientation the forward and the input-gradient
    GEMMs read is written: one low-precision copy instead of two.
    any_layout (GpuSpec.fp8_any_layout): the GEMMs read a per-tensor-scaled copy in either orientation, so one
    copy is written for delayed and current scaling.
    norm_amax (Framework.norm_amax): the norm computes its 16-bit output's amax, so a current-scaled norm-fed input
    is read once, by the cast (2 + 2q instead of 4 + 2q; the norm's own write is the 16-bit path's).
    cudnn_norm (Training.cudnn_norm): cuDNN's norm runs instead of TE's: it writes MXFP8 copies itself but computes
    no amax. Which cast fuses into which norm: TE pytorch/csrc/extensions/normalization.cpp, v2.2 to v2.17 (TE's own
    kernel writes only delayed-scaled FP8; MXFP8 quantizers take the unfused path unless NVTE_NORM_FWD_USE_CUDNN is
    set; FP8 block (DeepSeek-style) quantizers always do)."""
    reads = READ_PASSES[scaling] - (1.0 if fused_amax and READ_PASSES[scaling] > 1.0 else 0.0)
    one_copy = frozen_weights or (any_layout and scaling in PER_TENSOR)
    written = (1.0 if one_copy else 2.0) * q_bytes
    standalone = 2.0 * reads + written
    # a fused norm writes the low-precision copies instead of its 16-bit output (2 bytes); NVFP4's smaller
    # copies would save bytes there, counted as none (its norm output is also kept for the backward)
    if scaling == "delayed" or (scaling == "block" and cudnn_norm):
        return standalone, max(written - 2.0, 0.0)
    if scaling == "current" and norm_amax and not cudnn_norm:
        return standalone, 2.0 * max(reads - 1.0, 1.0) + written
    return standalone, standalone


def quantized_elements(model, tokens, t, sp_split):
    """Per-GPU elements one layer (averaged over the layers) quantizes for ``tokens`` tokens of a microbatch:
    (forward, norm-fed inputs), (forward, other inputs), (backward, output gradients)."""
    h, af, bf = model.hidden, model.attn_fraction, model.mamba_fraction
    moe = jnp.where(model.experts > 0, model.moe_fraction, 0.0)
    dense = model.mlp_fraction - moe
    mla = model.mla > 0
    # attention: QKV output width (MLA: the down projections' latents and the up projections' heads), projection in
    # (a shared key/value vector has no up projection: the heads' queries only)
    qkv_out = jnp.where(mla, model.mla_latent + model.heads * jnp.where(model.kv_shared > 0, model.qk_head_dim,
                                                                         model.qk_head_dim + model.v_head_dim),
                        (model.heads + 2.0 * model.kv_heads) * model.head_dim)
    proj_in = model.heads * jnp.where(mla, model.v_head_dim, model.head_dim)
    # MoE: each routed copy (top_k x the busiest GPU's imbalance) and each shared expert has its own FC1 input and
    # FC2 output at the dispatched width (LatentMoE: the latent); FC2 inputs and FC1 outputs are the activated ffn
    width = jnp.where(model.moe_latent > 0, model.moe_latent, h)
    copies = moe * (model.top_k * model.imbalance * width + model.shared_experts * h) / h
    ffn_act = (dense * model.ffn + moe * (model.top_k * model.imbalance * model.expert_ffn
                                          + model.shared_experts * model.shared_ffn))
    m_in_out = 2.0 * model.mamba_inner + 2.0 * model.mamba_gn + model.mamba_heads
    norm_fed = tokens * h * (af + dense + bf) / sp_split
    other_in = tokens * (h * copies / sp_split + (af * proj_in + ffn_act + bf * model.mamba_inner) / t)
    grads = tokens * (h * (af + dense + copies + bf) / sp_split
                      + (af * qkv_out + (model.mlp_mats - 1.0) * ffn_act + bf * m_in_out) / t)
    return norm_fed, other_in, grads


def gathered_bytes(scaling: str, q_bytes: float, frozen_weights: bool = False) -> float:
    """Bytes per element of a cast that follows a 16-bit all-gather (GATHERED_16BIT recipes; no amax fused into the
    producer); 0 for recipes that cast the shard before gathering it."""
    if scaling not in GATHERED_16BIT:
        return 0.0
    return bytes_per_element(scaling, q_bytes, fused_amax=False, frozen_weights=frozen_weights)[0]


def quantize_times(model, tokens, t, sp_split, g, low_precision_share):
    """(forward, backward) seconds of the casts on one GPU; 0 without low-precision GEMMs (GpuP.quant_bytes 0).
    low_precision_share: the share of the GPU's layers whose GEMMs run in low precision (the rest stay BF16)."""
    norm_fed, other_in, grads = quantized_elements(model, tokens, t, sp_split)
    # a recipe that gathers in 16 bits casts the whole gathered tensor in place of its shard (sequence parallel
    # only): the norm-fed inputs and, as many, the hidden-wide output gradients of the row-parallel linears
    gathered = jnp.where(sp_split > 1.0, g.quant_gathered_bytes, 0.0)
    shard = jnp.where(gathered > 0.0, norm_fed, 0.0)
    seq = shard * sp_split
    mem_bw = g.hbm_Bps * g.memory_bound
    fwd = ((norm_fed - shard) * g.quant_norm_bytes + other_in * g.quant_bytes + seq * gathered) / mem_bw
    bwd = ((grads - shard) * g.quant_bytes + seq * gathered) / mem_bw
    return low_precision_share * fwd, low_precision_share * bwd

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

from ..space import Overlap, Recompute
from . import collectives as coll
from .overlap import exposed_s
from .terms import Term

FWD_ALLREDUCES = 2.0
BWD_ALLREDUCES = 2.0


# Transformer Engine's userbuffers overlap (transformer_engine/pytorch/module/base.py initialize_ub, default
# methods), which Megatron-Core's --tp-comm-overlap runs:
# - ring_exchange (qkv/fc1 forward, proj/fc2 dgrad): the all-gather moves one shard per step over copy engines
#   while the GEMM runs on the shard already there, tp steps; the last GEMM chunk has nothing left to hide, so
#   (tp - 1)/tp of the GEMM is the window. 1 SM for the communication.
# - pipeline (proj/fc2 forward): the GEMM in UB_PIPELINE_SPLITS chunks, each chunk's reduce-scatter under the next
#   chunk's GEMM; the last chunk's is exposed: max(c - (n-1)/n w, c/n). 16 SMs.
# - bulk (qkv/fc1 dgrad and wgrad): the all-gather of the saved input runs beside the dgrad GEMM, the reduce-scatter
#   of the input gradient beside the wgrad GEMM. 16 SMs.
UB_PIPELINE_SPLITS = 4.0
UB_RING_SMS = 1.0
UB_SMS = 16.0

# PyTorch's async TP (Framework.tp_overlap "micro_pipeline"; torchtitan's enable_async_tensor_parallel), which the
# Inductor pass torch/_inductor/fx_passes/micro_pipeline_tp.py applies to the compiled graphs:
# - an all-gather fuses with the matmuls that take its result as their left operand (fused_all_gather_matmul):
#   tp - 1 peer copies, each under the matmul of the shard already there, as the ring above;
# - a reduce-scatter fuses only with the single matmul that produces its input (_find_producer_matmul: mm or
#   _scaled_mm, through reshapes), fused_matmul_reduce_scatter: the matmul in tp chunks, each pulled by its peer
#   while the next is computed (torch/distributed/_symmetric_memory _pipelined_produce_and_all2all), then one kernel
#   sums the tp partial shards (reduce_partials: reads the whole output, writes its shard), which nothing hides.
#   In the forward that is the row-parallel output projection's reduce-scatter.
# - in the backward the input gradient of a column-parallel block is a sum of matmuls (query, key and value; gate
#   and up projections), so its reduce-scatter has no producer matmul and stays a plain NCCL call; the gathered
#   input the weight gradients read is their right operand, so its all-gather is not fused either. Only the
#   all-gather of the output gradient (the row-parallel dgrad's left operand) is pipelined.
# The peer copies are copy_ calls between same-device views of symmetric memory (cudaMemcpyAsync: copy engines,
# no SMs), so what the GEMMs beside them lose is the contention alone.


def _sublayer_s(c_s, ar_s, in_s, out_s, tp, sp, overlapped, sm_share, contention=0.0, micro=0.0, reduce_s=0.0):
    """(forward, backward) seconds of one sub-layer instance's TP collectives: each all-gather or reduce-scatter
    takes c_s, hidden (where overlapped) under the GEMM TE pairs it with (in_s: the column-parallel GEMM, out_s:
    the row-parallel one; the backward's dgrad and wgrad GEMMs each take as long as the forward's). Each hidden
    second costs the GEMM its mechanism's SM share plus ``contention`` (the copies' HBM and L2 traffic, the shared
    power limit: GpuP.overlap_contention, cost/overlap.py), whether the copy runs on SMs or copy engines.
    ``micro`` (1: PyTorch's async TP instead of Transformer Engine's userbuffers) and ``reduce_s`` (its
    reduce-scatter's summing of the partial shards) select the mechanism described above."""
    # The mechanism chooses a collective's operands (SM count, whether it overlaps), so each is computed once:
    # selects on the small per-layout operands, not on per-design results (as overlap.exposed_s does)
    mp = micro > 0.5

    def pipelined(c, w, sms):
        # c in tp steps, each under the GEMM on the shard already there: the last step's GEMM has nothing left to
        # hide, so (tp - 1)/tp of the GEMM is the window
        return exposed_s(c, w * (tp - 1.0) / tp, overlapped, slowdown=sms * sm_share + contention)

    # all-gathers into the GEMM that reads them: TE's ring exchange (1 SM) or async TP's copy-engine steps (none)
    ring_sms = jnp.where(mp, 0.0, UB_RING_SMS)
    # the forward reduce-scatter: TE's 4-split pipeline (16 SMs, the last split exposed) or async TP's tp chunks on
    # copy engines (no split floor: each chunk is pulled while the next computes) then its summing kernel; the two
    # differ in their floor, so this one collective is computed both ways
    rs_fwd = jnp.where(mp, pipelined(c_s, out_s, 0.0) + jnp.where(overlapped, reduce_s, 0.0),
                       exposed_s(c_s, out_s * (UB_PIPELINE_SPLITS - 1.0) / UB_PIPELINE_SPLITS, overlapped,
                                 chunks=UB_PIPELINE_SPLITS, slowdown=UB_SMS * sm_share + contention))
    # the backward's saved-input all-gather and input-gradient reduce-scatter: TE's bulk overlap under the dgrad and
    # wgrad GEMMs; under async TP plain (neither has a matmul Inductor can fuse it with)
    bulk = exposed_s(c_s, in_s, overlapped & ~mp, slowdown=UB_SMS * sm_share + contention)
    # sequence parallel: forward AG -> column GEMM ... row GEMM -> RS; backward: AG of the output gradient (under
    # the row-parallel dgrad), AG of the saved input and RS of the input gradient (bulk); without it one all-reduce
    # (AG + RS) after the row-parallel GEMM forward and after the column-parallel dgrad backward, never overlapped
    # (Megatron-LM arguments: TP overlap requires sequence parallelism)
    fwd = jnp.where(sp, pipelined(c_s, in_s, ring_sms) + rs_fwd, ar_s)
    bwd = jnp.where(sp, pipelined(c_s, out_s, ring_sms) + 2.0 * bulk, ar_s)
    return fwd, bwd


def tp_term(ctx, d, train, gpu, model):
    """(Term, exposed forward seconds per layer): the forward share is what the pipeline's forward waits for."""
    k = ctx.tp.participants
    sp = train.seq_parallel > 0
    mla_sp = (model.mla > 0) & sp
    act_bytes = ctx.act_bytes * jnp.where(mla_sp, (3.0 + model.mla_latent / model.hidden) / 4.0, 1.0)
    # one all-gather or reduce-scatter and its NCCL call (each call under its fastest protocol)
    c_s = coll.ring_reduce_scatter_s(k, act_bytes, ctx.tp_net.alpha_s, ctx.tp_net.bw_Bps) + coll.launch_s(k, 1.0)
    # without sequence parallelism: one all-reduce call
    ar_s = coll.ring_allreduce_s(k, act_bytes, ctx.tp_net.alpha_s, ctx.tp_net.bw_Bps) + coll.launch_s(k, 1.0)
    # --tp-comm-overlap's mechanism (userbuffers: GEMM chunks that read and write peer memory over NVLink,
    # Megatron-Core docs "Communication overlap") needs the TP group inside one NVLink domain; a TP group across
    # nodes runs plain NCCL collectives between the GEMMs, fully exposed.
    in_nvlink = jnp.all(jnp.where(ctx.is_network, k, 1.0) <= 1.0 + 1e-6)
    # a framework without a mechanism (Framework.tp_overlap "none": eager PyTorch, whose DTensor collectives are
    # synchronous calls between the matmuls) exposes them whatever the design asks for
    overlapped = (d.overlap == Overlap.DP_TP) & in_nvlink & sp & (gpu.tp_overlappable > 0.5)
    g = ctx.layer.tp_gemms
    # async TP's reduce-scatter ends in one kernel that reads the tp partial shards (the whole output) and writes
    # the local one (torch symmetric memory reduce_partials), at the memory-bound kernels' bandwidth
    reduce_s = act_bytes * (1.0 + 1.0 / d.tp) / (gpu.hbm_Bps * gpu.memory_bound)
    # a transformer layer has an attention and an MLP sub-layer, a hybrid block one of attention, MLP or Mamba-2
    # mixer (Megatron-Core's MambaMixer is column-parallel in, row-parallel out like attention)
    fwd_layer_s, bwd_layer_s = 0.0, 0.0
    for share, w_in, w_out in ((model.attn_fraction, g.attn_in, g.attn_out), (model.mlp_fraction, g.mlp_in, g.mlp_out),
                               (model.mamba_fraction, g.mamba_in, g.mamba_out)):
        f, b = _sublayer_s(c_s, ar_s, w_in, w_out, d.tp, sp, overlapped, gpu.sm_share, gpu.overlap_contention,
                           gpu.tp_micro_pipeline, reduce_s)
        fwd_layer_s, bwd_layer_s = fwd_layer_s + share * f, bwd_layer_s + share * b
    # layers whose forward runs twice; an op-level selective policy (recompute module elementwise: torchtitan's op
    # SAC) keeps the reduce-scatters' outputs but re-runs the sequence-parallel all-gathers, half the forward's
    full = ctx.recompute_share + jnp.where((d.recompute == Recompute.SELECTIVE) & sp, 0.5 * train.rc_elementwise, 0.0)
    stage_s = ctx.layers_stage * (fwd_layer_s + bwd_layer_s + full * fwd_layer_s)

    sublayers = (model.attn_fraction + model.mlp_fraction + model.mamba_fraction) / 2.0
    sp_allreduces = jnp.where(sp, 1.0, 0.0)
    allreduces = FWD_ALLREDUCES * (1.0 + full) + BWD_ALLREDUCES + sp_allreduces
    per_gpu = allreduces * sublayers * jnp.sum(ctx.xb * coll.bytes_per_level_allreduce(k, act_bytes))
    cross = ctx.microbatches * ctx.layers_stage * per_gpu * train.n_gpus
    return Term(stage_s=stage_s, cross_bytes=cross), fwd_layer_s

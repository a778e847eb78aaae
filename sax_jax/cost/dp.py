"""Data-parallel synchronization: gradient reduction, parameter gathering, overlap with the backward pass.

Sharding (space.SHARDING): zero0 all-reduces gradients; zero1/zero2 (Megatron's distributed optimizer)
reduce-scatter gradients and all-gather updated 16-bit parameters; fsdp additionally gathers weights for
every microbatch's forward and backward and reduce-scatters its gradients (ZeRO-3); hsdp does the fsdp part
inside the building-local shard group and all-reduces the shard across buildings once per step.
Overlap: with `dp` overlap, bucketed reduction runs under the last microbatch's backward and the parameter
gather under the first microbatch's forward (Megatron --overlap-grad-reduce/--overlap-param-gather); what the
window cannot hide is exposed, and the last bucket always is.

Ring collectives over a multi-level group (validation change): NCCL builds one ring per channel and spreads
the channels over all the NICs of a node (one NIC per channel, rail-aligned), so the m GPUs of a ring that
sit in one node leave it through m NICs at once. Level L then carries (n-1)/n S per unit through the
NICs/links of the m_(L-1) members inside it: per-GPU time (n-1)/n S / (m_(L-1) B_L), and the levels run
pipelined (the slowest sets the pace). This is why NCCL's measured inter-node all-reduce bus bandwidth on
DGX A100/H100 (8 NICs per node) is ~8 x the per-GPU NIC rate, not 1 x (NVIDIA nccl-tests PERFORMANCE.md,
bus bandwidth; DGX SuperPOD reference architectures). The flat bottleneck form (collectives.ring_*) charged
the whole message to one NIC and made every data-parallel sync of the Megatron-Core H100 runs ~8x too slow
(dp=48 with 8, 4, 2 members per node); hierarchical and tree keep collectives.py's forms.
"""
from functools import partial

import jax.numpy as jnp

from ..space import DpAlgo, Overlap, Sharding
from .collectives import (NCCL_BASE_LATENCY_S, bytes_per_level_allreduce, hierarchical_allreduce_s, multirail_wire_s,
                          ps_bytes_per_level_allreduce, ps_reduce_scatter_s, tree_allreduce_s)
from .compute import layer_recompute_s
from .memory import model_state_bytes
from .nccl_protocol import ring_s
from .overlap import exposed_s, nccl_price
from .terms import Term

# Megatron-Core DDP's default bucket: max(40M, 1M x dp_cp) parameters ("larger DP sizes need larger buckets to ensure
# collectives do not become latency-bound", DistributedDataParallelConfig.bucket_size); without --overlap-grad-reduce
# it does not bucket at all (one call)
BUCKET_PARAMS = 4e7
BUCKET_PARAMS_PER_RANK = 1e6


def dp_calls(trained_gpu, group_gpus, layers_stage, overlapped, per_layer):
    """NCCL calls each data-parallel reduction (and gather) is issued as: one per layer for PyTorch FSDP-style
    frameworks (per_layer), else Megatron-Core's buckets (one without overlap)."""
    buckets = jnp.maximum(trained_gpu / jnp.maximum(BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK * group_gpus), 1.0)
    return jnp.where(per_layer > 0, layers_stage, jnp.where(overlapped, buckets, 1.0))


def multirail_ring_reduce_scatter_s(k, size_bytes, alpha_s, bw_Bps):
    """NCCL ring reduce-scatter (all-gather: same) over levels with k[L] participants each:
    (n-1) alpha_hop + max_L (n-1)/n S / (m_(L-1) B_L) over the spanned levels, m_(L-1) = prod(k below L);
    alpha_hop is the mean hop latency of the ring (collectives.ring_hop_latency_s); under the fastest of NCCL's
    protocols (nccl_protocol.ring_s)."""
    n = jnp.prod(k)
    return ring_s(k, n - 1.0, size_bytes, multirail_wire_s(k, (n - 1.0) / n * size_bytes, bw_Bps), alpha_s)


def server_paths(ctx):
    """(alpha_s, bw_Bps, alpha_grad_s, bw_grad_Bps) of a sharded parameter server's connections (context.py), or None
    for a program without one."""
    if ctx.ps_net is None:
        return None
    return ctx.ps_net.alpha_s, ctx.ps_net.bw_Bps, ctx.ps_alpha_grad_s, ctx.ps_bw_grad_Bps


def allreduce_bytes_per_level(algo, k, server):
    """Bytes per byte of message one GPU's all-reduce sends through each level (traffic accounting): the
    hierarchical form, or a sharded parameter server's where the design asks for one and the program has it
    (server, static: params.Topology.parameter_server)."""
    hier = bytes_per_level_allreduce(k, 1.0)
    return jnp.where(algo == DpAlgo.PS, ps_bytes_per_level_allreduce(k, 1.0), hier) if server else hier


def shards_weights(sharding):
    """ZeRO-3 family (fsdp, hsdp): weights gathered per microbatch, states sharded."""
    return (sharding == Sharding.FSDP) | (sharding == Sharding.HSDP)


def multirail_ring_allreduce_s(k, size_bytes, alpha_s, bw_Bps):
    """One ring all-reduce, 2(n-1) steps and twice the multi-rail reduce-scatter's bytes, under one protocol for
    the whole call as NCCL chooses it (with Simple's multi-node ring plateau, nccl_protocol.ring_s)."""
    n = jnp.prod(k)
    return ring_s(k, 2.0 * (n - 1.0), size_bytes, multirail_wire_s(k, 2.0 * (n - 1.0) / n * size_bytes, bw_Bps),
                  alpha_s, allreduce=True)


def _allreduce_s(algo, k, size_bytes, alpha_s, bw_Bps, calls=1.0, allreduce=True, ps=None):
    """algo: multi-rail ring, tree, hierarchical or sharded parameter server (space.DpAlgo). ``calls`` collectives of
    size_bytes/calls each (see per_call_s). allreduce (static): the call is an NCCL all-reduce; False: the caller
    takes half of this as a reduce-scatter or all-gather, which NCCL runs without a tree ('tree' runs the ring) and
    without the ring all-reduce's plateau (nccl_protocol.RING_ALLREDUCE_PLATEAU). ps: (alpha_s, bw_Bps) of a sharded
    parameter server's connections (context.py ps_net: one per peer), or None (static) for a program without one
    (params.Topology.parameter_server). Its all-reduce is its push and pull rounds (ps_reduce_scatter_s, twice);
    half of it, as the others', is a reduce-scatter or an all-gather."""
    if allreduce:
        ring = per_call_s(multirail_ring_allreduce_s, calls, k, size_bytes, alpha_s, bw_Bps)
        hier = per_call_s(hierarchical_allreduce_s, calls, k, size_bytes, alpha_s, bw_Bps)
    else:
        ring = 2.0 * per_call_s(multirail_ring_reduce_scatter_s, calls, k, size_bytes, alpha_s, bw_Bps)
        hier = per_call_s(partial(hierarchical_allreduce_s, allreduce=False), calls, k, size_bytes, alpha_s, bw_Bps)
    branches, choices = [algo == DpAlgo.RING], [ring]
    if allreduce:
        branches.append(algo == DpAlgo.TREE)
        choices.append(per_call_s(tree_allreduce_s, calls, k, size_bytes, alpha_s, bw_Bps))
    if ps is not None:
        branches.append(algo == DpAlgo.PS)
        choices.append(2.0 * per_call_s(ps_reduce_scatter_s, calls, k, size_bytes, *ps))
    # 'tree' on a reduce-scatter or all-gather falls to the ring, as NCCL has no tree for them
    return jnp.select(branches + [algo == DpAlgo.HIERARCHICAL], choices + [hier], ring)


def per_call_s(collective, calls, k, size_bytes, alpha_s, bw_Bps):
    """``size_bytes`` moved as ``calls`` collectives of equal size, one after the other: each NCCL call is its own
    pass around the ring (tree, hierarchy), so each pays the algorithm's step latencies, (n-1) hops for a ring
    reduce-scatter, and only the bandwidth part divides. NCCL's tuning model charges every call baseLat +
    nInterSteps x interLat + nIntraSteps x intraLat (src/graph/tuning.cc); a bucketed gradient reduction
    (Megatron's buckets, PyTorch FSDP's per-layer calls) is that many calls."""
    return calls * collective(k, size_bytes / calls, alpha_s, bw_Bps)


def dp_step_comm_s(sharding, algo, k_dp, k_inner, k_outer, grad_bytes, param_bytes, alpha_s, bw_Bps,
                   alpha_grad_s=None, bw_grad_Bps=None, calls=1.0, ps_path=None):
    """Per-step (gradient, parameter) communication seconds for the dp x cp group (before overlap).

    k_dp: participants per level of the whole group; k_inner/k_outer: the same split at the building
    boundary (hsdp shards inside, replicates across). alpha_grad_s/bw_grad_Bps: the levels as gradient traffic
    sees them (a bounded-loss transport may drop it, microbursts wait for the slowest flow: transport.py);
    alpha_s/bw_Bps by default. calls: the buckets each of the reductions and the gather is issued as. ps_path:
    (alpha_s, bw_Bps, alpha_grad_s, bw_grad_Bps) as a sharded parameter server's connections see the levels
    (context.py ps_net, ps_alpha_grad_s, ps_bw_grad_Bps), or None (static) for a program without a server.
    """
    alpha_g = alpha_s if alpha_grad_s is None else alpha_grad_s
    bw_g = bw_Bps if bw_grad_Bps is None else bw_grad_Bps
    ps_param = ps_grad = None
    if ps_path is not None:
        ps_param, ps_grad = ps_path[:2], ps_path[2:]
    # reduce-scatter and all-gather each cost half an all-reduce of the same size. NCCL has a tree only for the
    # all-reduce: its tuning model skips every other algorithm but the ring for the other collectives (tuning.cc,
    # "if (coll != ncclCollAllReduce && a != NCCL_ALGO_RING) continue"), so under 'tree' the distributed
    # optimizer's reduce-scatter and all-gather run as rings (charging them half a tree all-reduce let a search
    # pick 'tree' for ZeRO-1/2 for a latency NCCL never gives them)
    ar = _allreduce_s(algo, k_dp, grad_bytes, alpha_g, bw_g, calls, ps=ps_grad)
    rs = 0.5 * _allreduce_s(algo, k_dp, grad_bytes, alpha_g, bw_g, calls, allreduce=False, ps=ps_grad)
    ag = 0.5 * _allreduce_s(algo, k_dp, param_bytes, alpha_s, bw_Bps, calls, allreduce=False, ps=ps_param)
    shard = jnp.maximum(jnp.prod(k_inner), 1.0)
    hsdp_cross = _allreduce_s(algo, k_outer, grad_bytes / shard, alpha_g, bw_g, calls, ps=ps_grad)
    zero12 = (sharding == Sharding.ZERO1) | (sharding == Sharding.ZERO2)
    grad = jnp.select([sharding == Sharding.ZERO0, zero12, sharding == Sharding.FSDP], [ar, rs, 0.0], hsdp_cross)
    param = jnp.select([sharding == Sharding.ZERO0, zero12], [0.0, ag], 0.0)
    return grad, param


def fsdp_microbatch_comm_s(sharding, k_dp, k_inner, layer_param_bytes_stage, grad_bytes_stage, alpha_s, bw_Bps,
                           alpha_grad_s=None, bw_grad_Bps=None, calls=1.0, algo=DpAlgo.RING, ps_path=None):
    """Per-microbatch ZeRO-3 traffic as (forward, backward) seconds: the forward all-gathers the weights, the
    backward gathers them again and reduce-scatters the gradients (as gradient traffic: alpha_grad_s/bw_grad_Bps,
    see dp_step_comm_s); each issued as ``calls`` collectives (one per layer: per_call_s). Rings, but under a
    sharded parameter server (algo, space.DpAlgo.PS) the gathers are its pull rounds and the reduce-scatters its
    push rounds, over its own paths (ps_path as dp_step_comm_s; None: a program without a server)."""
    k = jnp.where(sharding == Sharding.HSDP, k_inner, k_dp)
    alpha_g = alpha_s if alpha_grad_s is None else alpha_grad_s
    bw_g = bw_Bps if bw_grad_Bps is None else bw_grad_Bps
    ag = per_call_s(multirail_ring_reduce_scatter_s, calls, k, layer_param_bytes_stage, alpha_s, bw_Bps)
    rs = per_call_s(multirail_ring_reduce_scatter_s, calls, k, grad_bytes_stage, alpha_g, bw_g)
    if ps_path is not None:
        ps = algo == DpAlgo.PS
        ag = jnp.where(ps, per_call_s(ps_reduce_scatter_s, calls, k, layer_param_bytes_stage, *ps_path[:2]), ag)
        rs = jnp.where(ps, per_call_s(ps_reduce_scatter_s, calls, k, grad_bytes_stage, *ps_path[2:]), rs)
    zero3 = shards_weights(sharding)
    return jnp.where(zero3, ag, 0.0), jnp.where(zero3, (FSDP_GATHERS - 1.0) * ag + rs, 0.0)


FSDP_GATHERS = 2.0  # ZeRO-3 gathers the weights for the forward and again for the backward


def expert_shards(shards, ctx, d):
    """Ranks an expert weight's state and update are sharded over, given the dense weights' ``shards``: its
    expert-data-parallel ranks, shards x (tp / etp) / ep, at least 1 (Megatron-Core's distributed optimizer keeps
    the expert buffers on the expert-data-parallel group)."""
    return jnp.maximum(shards * (d.tp / ctx.etp) / d.ep, 1.0)


def _group_sync_s(ctx, d, train, k, k_building, k_across, trained, gathered, overlapped, per_layer):
    """((forward, backward) per-microbatch ZeRO-3 seconds, per-step gradient seconds, per-step gather seconds, NCCL
    calls) of one weight group's synchronization over its ranks k (the dense weights over dp x cp, the experts over
    their expert-data-parallel ranks): ``trained`` weights per GPU have gradients, ``gathered`` are ZeRO-3-gathered.
    The group's network path is the gradient group's (ctx.dp_net, ctx.alpha_grad_s, ctx.bw_grad_Bps)."""
    grad_bytes, param_bytes = trained * train.grad_reduce_bytes, gathered * train.param_gather_bytes
    step_param_bytes = trained * train.param_gather_bytes
    # ZeRO-3: gathers and reduce-scatters per microbatch, prefetched layer by layer under the stage's compute
    ps_path = server_paths(ctx)
    fsdp_f, fsdp_b = fsdp_microbatch_comm_s(d.sharding, k, k_building, param_bytes, grad_bytes, ctx.dp_net.alpha_s,
                                            ctx.dp_net.bw_Bps, ctx.alpha_grad_s, ctx.bw_grad_Bps, ctx.layers_stage,
                                            d.dp_algo, ps_path)
    # one gather per layer forward; one gather and one gradient reduce-scatter per layer backward: NCCL calls
    fsdp_f = fsdp_f + jnp.where(fsdp_f > 0, ctx.layers_stage * NCCL_BASE_LATENCY_S, 0.0)
    fsdp_b = fsdp_b + jnp.where(fsdp_b > 0, FSDP_GATHERS * ctx.layers_stage * NCCL_BASE_LATENCY_S, 0.0)
    buckets = dp_calls(trained, jnp.prod(k), ctx.layers_stage, overlapped, per_layer)
    grad_s, param_s = dp_step_comm_s(d.sharding, d.dp_algo, k, k_building, k_across, grad_bytes, step_param_bytes,
                                     ctx.dp_net.alpha_s, ctx.dp_net.bw_Bps, ctx.alpha_grad_s, ctx.bw_grad_Bps, buckets,
                                     ps_path)
    # every bucket is one NCCL call (reduce-scatter / all-reduce, all-gather)
    grad_s = grad_s + jnp.where(grad_s > 0, buckets * NCCL_BASE_LATENCY_S, 0.0)
    param_s = param_s + jnp.where(param_s > 0, buckets * NCCL_BASE_LATENCY_S, 0.0)
    return (fsdp_f, fsdp_b), grad_s, param_s, buckets


def _weights_sync_s(ctx, d, train, gpu, trained_dense, gathered_dense, trained_expert, gathered_expert, overlapped,
                    expert_sync):
    """_group_sync_s of the dense weights over the dp x cp ranks plus, where the program has them (expert_sync,
    static), the expert weights over their expert-data-parallel ranks (ctx.edp_k): ZeRO-3 gathers every expert
    weight, trained or frozen; only trained ones (not LoRA's) are reduced and gathered after the step, so frozen
    experts add no calls there."""
    fsdp_s, grad_s, param_s, buckets = _group_sync_s(ctx, d, train, ctx.grad_k, ctx.grad_k_building, ctx.grad_k_across,
                                                     trained_dense, gathered_dense, overlapped, gpu.dp_per_layer)
    if expert_sync:
        e_fsdp_s, e_grad_s, e_param_s, e_buckets = _group_sync_s(
            ctx, d, train, ctx.edp_k, ctx.edp_k_building, ctx.edp_k_across, trained_expert, gathered_expert,
            overlapped, gpu.dp_per_layer)
        gathered, trained = gathered_expert > 0, trained_expert > 0
        fsdp_s = tuple(a + jnp.where(gathered, b, 0.0) for a, b in zip(fsdp_s, e_fsdp_s))
        grad_s = grad_s + jnp.where(trained, e_grad_s, 0.0)
        param_s = param_s + jnp.where(trained, e_param_s, 0.0)
        buckets = buckets + jnp.where(trained, e_buckets, 0.0)
    return fsdp_s, grad_s, param_s, buckets


def zero3_layer_s(ctx, d, train, gpu, expert_sync=True):
    """Seconds one more layer on a stage adds to the stage's exposed ZeRO-3 traffic per microbatch (fsdp, hsdp; 0
    otherwise): in each pass a layer's gathers (and its gradients' reduce-scatter) of c1 seconds hide under that
    layer's compute w1 but for the excess, and while they hide the compute pays their SM share s: (1 - s)
    max(c1 - w1, 0) + s c1, dp_term's exposed_s per layer without its floor of one layer's communication (a stage
    pays that once, whatever its layers). The weight heterogeneous splits add for ZeRO-3 (hetero.type_contexts): a
    faster GPU hides less of the same gathers per layer."""
    lt = ctx.layer
    lora = train.lora > 0
    per_layer = 1.0 / jnp.maximum(ctx.layers_first, 1.0)  # the stage's weights are the first stage's (context.py)
    one = ctx._replace(layers_stage=jnp.ones_like(ctx.layers_stage))
    overlapped = (d.overlap == Overlap.DP) | (d.overlap == Overlap.DP_TP)
    trained_dense = jnp.where(lora, ctx.params_adapter, ctx.params_dense) * per_layer
    trained_expert = jnp.where(lora, 0.0, ctx.params_expert) * per_layer
    (c_f, c_b), _, _, _ = _weights_sync_s(one, d, train, gpu, trained_dense, ctx.params_dense * per_layer,
                                          trained_expert, ctx.params_expert * per_layer, overlapped, expert_sync)
    s = nccl_price(gpu)
    w_f = lt.fwd_s
    w_b = (1.0 - gpu.fsdp_backward_serial) * (lt.bwd_s + layer_recompute_s(one, d))

    def marginal(c, w):
        return jnp.where(overlapped, (1.0 - s) * jnp.maximum(c - w, 0.0) + s * c, c)
    return jnp.where(shards_weights(d.sharding), marginal(c_f, w_f) + marginal(c_b, w_b), 0.0)


def dp_term(ctx, d, train, gpu, expert_sync=True):
    """Data-parallel synchronization as one term: ZeRO-3 traffic per microbatch (stage_s), the gradient
    reduction and parameter gather once per step (step_s), their cross-building bytes, and the model state
    (weights, gradients, optimizer) plus ZeRO-3's gather buffers in memory.

    Dense weights sync over the dp x cp ranks; expert weights over their expert-data-parallel ranks (ctx.edp_k),
    which hold the same experts: Megatron-Core keeps them in buffers of their own on the expert-data-parallel group
    (distributed/distributed_data_parallel.py, expert_parallel_buffers), so an EP group spanning the dp ranks of a
    building leaves no expert replica there to reduce with, and the whole expert gradient crosses to the next.
    expert_sync (static, Topology.expert_sync): False for a model without experts, whose program then leaves the
    expert group out instead of computing it to add zero."""
    sharding, lt = d.sharding, ctx.layer
    params_gpu = ctx.params_dense + ctx.params_expert
    # LoRA (cost/lora.py): only the adapters have gradients and updated parameters to sync; ZeRO-3 still gathers
    # every (frozen) weight
    lora = train.lora > 0
    trained_dense = jnp.where(lora, ctx.params_adapter, ctx.params_dense)
    trained_expert = jnp.where(lora, 0.0, ctx.params_expert)
    zero3 = shards_weights(sharding)
    overlapped = (d.overlap == Overlap.DP) | (d.overlap == Overlap.DP_TP)
    fsdp_s, grad_s, param_s, buckets = _weights_sync_s(ctx, d, train, gpu, trained_dense, ctx.params_dense,
                                                       trained_expert, ctx.params_expert, overlapped, expert_sync)
    slowdown = nccl_price(gpu)
    # ZeRO-3 prefetches layer by layer within a pass: the forward's gathers hide only under the forward, the
    # backward's gathers and reduce-scatters (one communicator, issued in order) only under the backward and the
    # forward it recomputes (PyTorch FSDP's forward and backward prefetch; Zhao et al. 2023, "PyTorch FSDP",
    # VLDB, section 3.3). A reduce-scatter cannot start before its layer's gradients exist, so a backward whose
    # communication outlasts its compute is exposed even when the whole microbatch's compute would cover it.
    # Under BACKWARD_POST (Framework.backward_prefetch "post") the next layer's gather is issued only after the
    # current layer's gradients and reduce-scatter, and one process group's collectives run in issue order on one
    # NCCL stream (torch.distributed.fsdp.BackwardPrefetch): compute_i -> reduce-scatter_i -> gather_(i-1) ->
    # compute_(i-1), so the backward's communication hides under nothing.
    bwd_window_zero3_s = (1.0 - gpu.fsdp_backward_serial) * ctx.layers_stage * (lt.bwd_s + layer_recompute_s(ctx, d))
    fsdp_f, fsdp_b = fsdp_s
    stage_s = jnp.where(zero3, exposed_s(fsdp_f, ctx.layers_stage * lt.fwd_s, overlapped, ctx.layers_stage, slowdown)
                        + exposed_s(fsdp_b, bwd_window_zero3_s, overlapped, ctx.layers_stage, slowdown), 0.0)
    # reductions hide under the last microbatch's backward compute, the gather under the first forward's
    bwd_window_s = ctx.layers_stage * lt.bwd_s + ctx.logits_bwd_s
    fwd_window_s = ctx.layers_stage * lt.fwd_s + ctx.logits_fwd_s
    step_s = (exposed_s(grad_s, bwd_window_s, overlapped, buckets, slowdown)
              + exposed_s(param_s, fwd_window_s, overlapped, buckets, slowdown))

    hsdp = sharding == Sharding.HSDP
    state_shards = jnp.where(hsdp, ctx.grad_shards_building, ctx.grad_shards)
    opt_shards = ctx.opt_shards  # the shard group's, or every dp rank's under hsdp_outer optim
    state = (model_state_bytes(ctx.params_dense, state_shards, sharding, train, opt_shards)
             # expert weights shard over their expert-data-parallel ranks: tp x cp x dp / (etp ep), i.e. dp x cp / ep
             # unless folding splits the experts over fewer ranks than the dense layers
             + model_state_bytes(ctx.params_expert, expert_shards(state_shards, ctx, d), sharding, train,
                                 expert_shards(opt_shards, ctx, d)))
    # LoRA: frozen weights keep their 16-bit copy only (sharded under ZeRO-3), the adapters the full state
    frozen = train.param_bytes * params_gpu / jnp.where(zero3, state_shards, 1.0)
    state = jnp.where(lora, frozen + model_state_bytes(ctx.params_adapter, state_shards, sharding, train), state)
    # ZeRO-3's two gathered layers (the one computing, the one prefetched), in the bytes they were gathered in
    layer_param_bytes = (ctx.params_dense + ctx.params_expert) / ctx.layers_first * train.param_gather_bytes
    buffers = jnp.where(zero3, 2.0 * layer_param_bytes, 0.0)
    cross = _cross_bytes(ctx, d, train, ctx.grad_k, ctx.grad_k_building, ctx.grad_k_across, trained_dense,
                         ctx.params_dense)
    if expert_sync:
        cross = cross + _cross_bytes(ctx, d, train, ctx.edp_k, ctx.edp_k_building, ctx.edp_k_across,
                                     trained_expert, ctx.params_expert)
    return Term(stage_s=stage_s, step_s=step_s, cross_bytes=cross, memory_bytes=state + buffers)


def _cross_bytes(ctx, d, train, k, k_building, k_across, trained, gathered):
    """Bytes one weight group's collectives (ranks k; trained / gathered weights per GPU as _group_sync_s) move over
    campus/region links (hierarchical accounting: level L carries 2 (k_L - 1)/k_L of the data left after the
    levels inside it; a reduce-scatter or all-gather half of that; a sharded parameter server sends every GPU's
    2 (m_L - m_(L-1))/n of it through level L: collectives.ps_bytes_per_level_allreduce)."""
    sharding = d.sharding
    grad_bytes, param_bytes = trained * train.grad_reduce_bytes, gathered * train.param_gather_bytes
    step_param_bytes = trained * train.param_gather_bytes

    # bytes per byte of message: depends on the placement only, so a grid evaluation computes it once per layout
    def per_byte(kk):
        return jnp.sum(ctx.xb * allreduce_bytes_per_level(d.dp_algo, kk, ctx.ps_net is not None))

    whole, across = per_byte(k), per_byte(k_across)
    zero12 = (sharding == Sharding.ZERO1) | (sharding == Sharding.ZERO2)
    per_step = jnp.select(
        [sharding == Sharding.ZERO0, zero12, sharding == Sharding.FSDP],
        [whole * grad_bytes, 0.5 * whole * (grad_bytes + step_param_bytes), 0.0],
        across * grad_bytes / jnp.maximum(jnp.prod(k_building), 1.0))
    # ZeRO-3 gathers and reduce-scatters inside its shard group: all of it (fsdp), the building (hsdp)
    zero3 = jnp.where(sharding == Sharding.HSDP, per_byte(k_building), whole)
    per_microbatch = jnp.where(shards_weights(sharding),
                               0.5 * zero3 * (FSDP_GATHERS * param_bytes + grad_bytes), 0.0)
    return (per_step + ctx.microbatches * per_microbatch) * train.n_gpus

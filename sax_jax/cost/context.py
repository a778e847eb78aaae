"""What every term of the step needs, resolved once per design point: the data-parallel size, microbatches,
layers on the slowest stage, where each parallel group sits in the hierarchy, the transport-adjusted latency and
bandwidth of each level, one layer's kernel times and the parameters one GPU holds.

Shapes: scalars unless marked [L] (one value per level of the system, inner to outer).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .compute import LayerTimes, layer_times, logits_times
from .lora import adapter_params_per_layer
from .memory import params_per_gpu
from .placement import group_members, layout_strides
from .stages import stage_layers
from .bursts import all_to_all_flows_per_level, ring_flows_per_level
from .placement import spans
from ..space import DpSync, Sharding, recompute_share
from .transport import (GradientPath, collective_factors, ecmp_table, effective_bandwidth, gradient_factors,
                        one_flow_factors, reliable_parts)

ACT_BYTES = 2.0  # 16-bit activations on the wire


class Group(NamedTuple):
    """One parallel group's place in the hierarchy."""
    members: jax.Array  # [L] members of one group inside one unit of each level (m_L)
    participants: jax.Array  # [L] participants of its hierarchical collective at each level (k_L)


class StageShare(NamedTuple):
    """One GPU type's share of a heterogeneous system's work (cost/hetero.py): layers on its slowest stage, whether
    that stage runs the output layer, microbatches per replica. Without it context derives today's split."""
    layers_stage: jax.Array
    with_logits: jax.Array
    layers_first: jax.Array  # layers on its first stage (its memory)
    microbatches: jax.Array


class NetPath(NamedTuple):
    alpha_s: jax.Array  # [L] one-way latency incl. the transport's retransmission and microburst tails
    bw_Bps: jax.Array  # [L] per-GPU bandwidth when every GPU of a unit sends across its level


class Context(NamedTuple):
    dp: jax.Array  # resolved data-parallel size (dp = auto -> GPUs / (tp cp pp))
    microbatches: jax.Array  # per pipeline per step
    seq: jax.Array  # tokens per sequence
    layers_stage: jax.Array  # layers on the slowest stage (all its chunks)
    layers_first: jax.Array  # layers on the first stage, whose weights and in-flight activations memory checks
    recompute_share: jax.Array  # fraction of the layers whose forward runs again (full / half / block recompute)
    tp: Group
    cp: Group
    pp: Group
    dp_group: Group
    ep: Group
    grad_k: jax.Array  # [L] participants of the gradient group synced every step (dp x cp: same weights; under
    #                    DiLoCo only its part inside one worker)
    grad_k_outer: jax.Array  # [L] participants of the DiLoCo outer sync (across workers); 1 everywhere without it
    local_sync: jax.Array  # True where the design syncs across workers only every sync_every > 1 steps
    grad_k_building: jax.Array  # [L] the part inside HSDP's shard group (a building, or a node: hsdp_shard), 1 outside
    grad_k_across: jax.Array  # [L] the part across the shard groups, 1 inside
    grad_shards: jax.Array  # GPUs that share one copy of the weights (prod grad_k)
    grad_shards_building: jax.Array  # of them inside one shard group
    # GPUs the optimizer state and its update are sharded over (every sharding but zero0): the shard group under hsdp,
    # every dp x cp rank otherwise and under hsdp_outer optim (Training.hsdp_outer)
    opt_shards: jax.Array
    # [L] participants of the expert-data-parallel group: the ranks that hold the same experts, over which the expert
    # gradients are reduced and their parameters gathered (dp x cp / ep, folded tp x cp x dp / (etp ep)); as grad_k
    # under DiLoCo; its parts inside and across buildings
    edp_k: jax.Array
    edp_k_building: jax.Array
    edp_k_across: jax.Array
    xb: jax.Array  # [L] 1 at the cross-building levels (campus, region), else 0
    is_network: jax.Array  # [L] 1 above the NVLink domain (node), else 0
    alpha_s: jax.Array  # [L] one-way latency incl. the transport's retransmission and microburst tails
    bw_Bps: jax.Array  # [L] per-GPU bandwidth when every GPU of a unit sends across its level
    alpha_grad_s: jax.Array  # [L] the same for data-parallel gradient traffic (transport.gradient_factors)
    bw_grad_Bps: jax.Array  # [L]
    gradient: GradientPath  # its drops and their variance (bounded-loss transports; cost/bursts.py)
    # [L] latency and bandwidth of each synchronous collective's traffic: its rounds wait for the slowest flow of a
    # microburst (cost/bursts.py); alpha_s / bw_Bps above are one flow's (a pipeline hop's)
    tp_net: NetPath
    cp_net: NetPath
    ep_net: NetPath
    dp_net: NetPath  # parameter gathers (reliable) on the gradient group's ring (for HSDP's in-building gathers an
    #                  upper bound, like the gradient path's)
    ps_net: NetPath | None  # the same and the gradient traffic under a sharded parameter server: a connection per
    ps_alpha_grad_s: jax.Array | None  # [L] peer (None unless Topology.parameter_server: the program has no server)
    ps_bw_grad_Bps: jax.Array | None  # [L]
    bw_pp_Bps: jax.Array  # [L] per-GPU bandwidth of a pipeline hop (only boundary stages send)
    layer: LayerTimes
    logits_fwd_s: jax.Array
    logits_bwd_s: jax.Array
    mtp_s: jax.Array  # multi-token-prediction modules on this stage (0 unless it is the last and MTP is trained)
    act_bytes: jax.Array  # one microbatch's activation on one GPU (b s/cp h, 16-bit): a TP collective's message
    tokens_gpu: jax.Array  # tokens one GPU processes per microbatch (b s / (cp tp))
    params_dense: jax.Array  # parameters one GPU of the first stage holds (dense part, incl. embeddings)
    params_expert: jax.Array  # and its experts
    etp: jax.Array  # ranks one expert is split over (the design's tp unless MoE parallel folding sets it)
    params_adapter: jax.Array  # LoRA adapter parameters it holds (0 without LoRA; cost/lora.py)
    # the split of the layers over stages (stages.py), for heterogeneous buildings (cost/hetero.py)
    with_logits: jax.Array  # 1 if the slowest stage runs the output layer and loss
    other_layers: jax.Array  # layers on every stage but the last
    last_logits_fwd_s: jax.Array  # the last stage's output layer and loss, forward (whichever stage is the slowest)
    last_logits_bwd_s: jax.Array  # and backward
    last_mtp_s: jax.Array  # its multi-token-prediction modules, forward + backward


def context(params, d, share: StageShare | None = None) -> Context:
    model, gpu, net, tr, train, topo = (params.model, params.gpu, params.net, params.transport, params.train,
                                        params.topology)
    tp, cp, pp, ep, vpp, mbs = d.tp, d.cp, d.pp, d.ep, d.vpp, d.mbs
    dp = jnp.where(d.dp == 0, train.n_gpus / (tp * cp * pp), d.dp)
    microbatches = train.gbs / (dp * mbs) if share is None else share.microbatches
    seq = train.seq

    sizes = jnp.stack([tp, cp, pp, dp])
    stride = layout_strides(sizes, params.placement_inner[d.placement])
    tp_g, cp_g, pp_g, dp_g = (Group(*group_members(sizes[i], stride[i], net.unit_gpus)) for i in range(4))
    # EP carved from the inner part of dp; with MoE parallel folding (Training.expert_tensor_parallel) formed over
    # the stage's tp x cp x dp ranks in rank order after the expert-TP ranks: a unit of a level holds the product
    # of the members of those groups it holds, / etp
    folded = train.etp > 0
    etp = jnp.where(folded, train.etp, tp)
    fold_m = jnp.clip(tp_g.members * cp_g.members * dp_g.members / etp, 1.0, ep)
    fold_m_below = jnp.concatenate([jnp.ones_like(fold_m[:1]), fold_m[:-1]])
    carved = Group(*group_members(ep, stride[3], net.unit_gpus))
    ep_g = Group(jnp.where(folded, fold_m, carved.members), jnp.where(folded, fold_m / fold_m_below,
                                                                       carved.participants))
    grad_k_all = dp_g.participants * cp_g.participants
    # DiLoCo / streaming DiLoCo (cost/outer_sync.py): inner steps sync only inside a worker; with H = 1, or when the
    # group has no member in another worker, the design is synchronous data parallelism
    outer = net.outer_worker > 0
    grad_k_across_workers = jnp.where(outer, grad_k_all, 1.0)
    local_sync = (d.dp_sync != DpSync.EVERY_STEP) & (d.sync_every > 1.0) & (jnp.prod(grad_k_across_workers) > 1.0)
    grad_k = jnp.where(local_sync, jnp.where(outer, 1.0, grad_k_all), grad_k_all)
    grad_k_outer = jnp.where(local_sync, grad_k_across_workers, 1.0)
    # sharding hsdp's shard group (Training.hsdp_shard): a building's levels, or the node's
    inside = np.asarray(topo.inside_building) if net.hsdp_group is None else net.hsdp_group > 0.5
    grad_k_building = jnp.where(inside, grad_k, 1.0)
    grad_k_across = jnp.where(inside, 1.0, grad_k)
    # Megatron-Core's expert-data-parallel group (parallel_state: expert_data_parallel_size = world / (etp ep pp));
    # members per unit of a level: unfolded, the dp x cp ranks left once EP took its inner dp ranks; folded, the
    # stage's tp x cp x dp ranks left once expert-TP and then EP took theirs
    tcd_m = tp_g.members * cp_g.members * dp_g.members
    edp_m = jnp.where(folded, tcd_m / (jnp.clip(tcd_m, 1.0, etp) * fold_m),
                      dp_g.members * cp_g.members / carved.members)
    edp_m = jnp.maximum(edp_m, 1.0)
    edp_all = edp_m / jnp.concatenate([jnp.ones_like(edp_m[:1]), edp_m[:-1]])
    edp_k = jnp.maximum(jnp.where(local_sync & outer, 1.0, edp_all), 1.0)

    ecmp_tab = ecmp_table(net)
    reliable = reliable_parts(net, tr, ecmp_tab, d.transport, d.qps, d.channels)
    factor, extra_latency_s, cap_Bps = one_flow_factors(reliable)
    alpha_s = net.latency_s + extra_latency_s
    bw_Bps = effective_bandwidth(net, factor, cap_Bps, 1.0)

    def collective(flows, cap=cap_Bps) -> NetPath:  # a synchronous collective's round waits for its slowest flow
        f, extra_s = collective_factors(reliable, flows)
        return NetPath(net.latency_s + extra_s, effective_bandwidth(net, f, cap, 1.0))
    gradient = gradient_factors(net, tr, ecmp_tab, d.transport, d.qps, d.channels, ring_flows_per_level(grad_k),
                                spans(grad_k), train.grad_var_tol)
    alpha_grad_s = net.latency_s + gradient.extra_latency_s
    bw_grad_Bps = effective_bandwidth(net, gradient.factor, cap_Bps, 1.0)
    # A sharded parameter server (space.DpAlgo.PS) opens one connection to each peer at once (m_L - m_(L-1) of them
    # through level L), each with its own window: its rounds wait for the slowest of more flows, and a window- or
    # loss-limited level (TCP over a WAN: cost/transport.py) carries that many windows per GPU. Its paths sit beside
    # the ring's, which every other algorithm uses, so that the ring's stay independent of the dp_algo axis (a
    # sweep's grid computes them once per layout). Levels without a window cap carry an infinite one: scaled
    # through a finite stand-in, so that no gradient of a relaxed search meets inf x 0.
    # (static: only a program whose designs may ask for a server carries them, params.Topology.parameter_server)
    ps_net = ps_alpha_grad_s = ps_bw_grad_Bps = None
    if params.topology.parameter_server:
        ps_flows = all_to_all_flows_per_level(grad_k)
        capped = jnp.isfinite(cap_Bps)
        ps_cap_Bps = jnp.where(capped, jnp.where(capped, cap_Bps, 0.0) * jnp.maximum(ps_flows / jnp.prod(grad_k), 1.0),
                               jnp.inf)
        ps_gradient = gradient_factors(net, tr, ecmp_tab, d.transport, d.qps, d.channels, ps_flows, spans(grad_k),
                                       train.grad_var_tol)
        ps_net = collective(ps_flows, ps_cap_Bps)
        ps_alpha_grad_s = net.latency_s + ps_gradient.extra_latency_s
        ps_bw_grad_Bps = effective_bandwidth(net, ps_gradient.factor, ps_cap_Bps, 1.0)
    bw_pp_Bps = effective_bandwidth(net, factor, cap_Bps, pp_g.members)

    layer = layer_times(tp, cp, mbs, seq, model, gpu, train, pp, vpp, ep)
    # Uneven splits are real practice (Llama 3 405B put 126 layers on 16 stages), so pp need not divide the
    # layers; the slowest stage sets the pace and carries the output layer only if it is the last (stages.py).
    logits_fwd_s, logits_bwd_s = logits_times(tp, cp, mbs, seq, model, gpu, train)
    # multi-token prediction (Training.mtp_layers) on the last stage: per module one more layer (a transformer
    # layer: attention + MLP/MoE, i.e. two hybrid blocks) and one more output layer + loss. Its embedding
    # projection (2h -> h) and the MTP layer's all-to-alls are left out.
    per_layer = 2.0 / (model.attn_fraction + model.mlp_fraction + model.mamba_fraction)
    mtp_s = train.mtp_layers * (per_layer * (layer.fwd_s + layer.bwd_s) + logits_fwd_s + logits_bwd_s)
    layers_stage, with_logits, other_layers, layers_first = stage_layers(
        model.layers, pp, vpp, layer.fwd_s + layer.bwd_s, logits_fwd_s + logits_bwd_s, mtp_s, train.pipeline_split)
    if share is not None:  # one GPU type of a heterogeneous system (cost/hetero.py)
        layers_stage, with_logits, layers_first = share.layers_stage, share.with_logits, share.layers_first
    last_logits_fwd_s, last_logits_bwd_s, last_mtp_s = logits_fwd_s, logits_bwd_s, mtp_s
    logits_fwd_s, logits_bwd_s = with_logits * logits_fwd_s, with_logits * logits_bwd_s
    mtp_s = with_logits * mtp_s
    # the first stage's weights: the most memory (with its microbatches in flight), and under 1F1B the stage whose
    # last backward ends the step, so its gradient reduction is the one left exposed
    params_dense, params_expert = params_per_gpu(tp, pp, ep, model, layers_first, etp)
    return Context(
        dp=dp, microbatches=microbatches, seq=seq, layers_stage=layers_stage, layers_first=layers_first,
        recompute_share=recompute_share(d.recompute, train.rc_layers, model.layers / (pp * vpp)),
        tp=tp_g, cp=cp_g, pp=pp_g, dp_group=dp_g, ep=ep_g,
        grad_k=grad_k, grad_k_outer=grad_k_outer, local_sync=local_sync, grad_k_building=grad_k_building, grad_k_across=grad_k_across,
        grad_shards=jnp.prod(grad_k), grad_shards_building=jnp.prod(grad_k_building),
        opt_shards=jnp.where((d.sharding == Sharding.HSDP) & (train.hsdp_optim < 0.5), jnp.prod(grad_k_building),
                             jnp.prod(grad_k)),
        edp_k=edp_k, edp_k_building=jnp.where(inside, edp_k, 1.0), edp_k_across=jnp.where(inside, 1.0, edp_k),
        xb=net.cross_building, is_network=net.is_network > 0, alpha_s=alpha_s, bw_Bps=bw_Bps, bw_pp_Bps=bw_pp_Bps, layer=layer,
        alpha_grad_s=alpha_grad_s, bw_grad_Bps=bw_grad_Bps, gradient=gradient,
        tp_net=collective(ring_flows_per_level(tp_g.participants)),
        cp_net=collective(ring_flows_per_level(cp_g.participants)),
        ep_net=collective(all_to_all_flows_per_level(ep_g.participants)),
        dp_net=collective(ring_flows_per_level(grad_k)),
        ps_net=ps_net, ps_alpha_grad_s=ps_alpha_grad_s, ps_bw_grad_Bps=ps_bw_grad_Bps,
        logits_fwd_s=logits_fwd_s, logits_bwd_s=logits_bwd_s, mtp_s=mtp_s,
        act_bytes=mbs * seq / cp * model.hidden * ACT_BYTES, tokens_gpu=mbs * seq / (cp * tp),
        params_dense=params_dense, params_expert=params_expert, etp=etp,
        params_adapter=adapter_params_per_layer(model, train) * layers_first / tp,
        with_logits=with_logits, other_layers=other_layers,
        last_logits_fwd_s=last_logits_fwd_s, last_logits_bwd_s=last_logits_bwd_s, last_mtp_s=last_mtp_s)


def restaged(ctx: Context, model, train, pp, vpp, layer_s) -> Context:
    """``ctx`` with the slowest stage chosen again on ``layer_s``: one layer's seconds with everything a stage pays
    per layer (its kernels, their recompute, and the tensor-, context- and expert-parallel communication it leaves
    exposed), where context() could weigh its kernels only. The stages hold different numbers of layers and only the
    last runs the output layer, the loss and MTP: weighed on kernels alone, a last stage with fewer layers could be
    taken for the slowest while the first, with more layers and as many all-to-alls per layer, sets the pace, and the
    step would count that communication for the last stage's layers only (DeepSeek-V3 at PP 16: 4 layers on the
    first stage, 1 + MTP + the output layer on the last)."""
    layers_stage, with_logits, other_layers, _ = stage_layers(
        model.layers, pp, vpp, layer_s, ctx.last_logits_fwd_s + ctx.last_logits_bwd_s, ctx.last_mtp_s,
        train.pipeline_split)
    return ctx._replace(layers_stage=layers_stage, with_logits=with_logits, other_layers=other_layers,
                        logits_fwd_s=with_logits * ctx.last_logits_fwd_s,
                        logits_bwd_s=with_logits * ctx.last_logits_bwd_s, mtp_s=with_logits * ctx.last_mtp_s)

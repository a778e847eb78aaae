"""Composition: one design point -> Cost, as a sum of named terms. Pure; ``evaluate.py`` vmaps it once.

    step = pipeline(stage terms: compute, offload, tp, cp, ep, ZeRO-3 share of dp)
                                     [compute + offload + tp + cp + ep + bubble + pp_p2p]
         + per-step terms: dp (gradient reduction, parameter gather), outer_sync (DiLoCo, amortized), optimizer
         + straggler (waiting for the slowest of N GPUs)
         + stall (expected failure stalls)
    goodput = tokens/s x ETTR (interruptions, checkpoints, degraded periods: goodput.py), beside the step
    time to target = target tokens x DiLoCo's tokens multiplier / goodput (outer_sync.py); what the infrastructure
    costs per hour and for the whole run (provision.py, which also applies the co-design axes first)
    microbursts and bounded loss act inside the communication terms (transport.py, bursts.py); their per-round
    loss and the gradient a bounded-loss transport drops are reported beside the step

Each term lives in the module of its physical concern and returns a ``terms.Term``: its seconds, its
cross-building bytes and its memory. The breakdown keys are the term names; cross-building traffic and
memory are the sums of the terms'.
"""
from __future__ import annotations

import jax.numpy as jnp

from .compute import compute_term, model_flops_per_sequence
from .context import context, restaged
from .context_parallel import cp_term
from .dp import dp_term
from .expert_placement import placed_params
from .feasibility import violation_mask
from .goodput import goodput
from .hetero import hetero_step_time
from .moe import ep_term
from .offload import offload_term
from .optimizer import optimizer_term
from .provision import network_usd_per_hour, provisioned
from .outer_sync import outer_sync_term, tokens_multiplier
from .pipeline import pipeline_terms
from .resilience import crossed_levels, stall_term
from .stage_cost import stage_layer_s
from .straggler import straggler_term
from .tensor_parallel import tp_term
from .terms import Breakdown, Cost


def step_time(params, d, share=None) -> Cost:
    """Cost of one design point ``d`` (a scalar-leaf ``space.Design``) under ``params`` (``params.Params``);
    ``share``: one GPU type's part of a heterogeneous system (cost/hetero.py, which calls back here per type)."""
    if params.hetero is not None:  # buildings of different GPU types: each type once, then the slowest paces
        return hetero_step_time(params, d, step_time)
    # the cross-building network as the design provisions it (co-design axes; unchanged where they are "auto").
    # Only where the scenario's space has such axes (static): otherwise the network stays shared by the batch.
    if params.topology.provisioned:
        params = params._replace(net=provisioned(params.net, d))
    params = placed_params(params, d)  # MoE expert placement from a trace (no-op without one)
    model, train = params.model, params.train
    ctx = context(params, d, share)
    if share is None:  # (a heterogeneous system's share fixes its own stage: cost/hetero.py)
        ctx = restaged(ctx, model, train, d.pp, d.vpp, stage_layer_s(ctx, d, params))
    micro = ctx.microbatches

    # ---- one microbatch on the slowest stage: kernels and the communication they cannot hide
    compute = compute_term(ctx, d, model)
    offload, offload_fwd_s = offload_term(ctx, d, model, train, params.gpu)
    tp, tp_fwd_s = tp_term(ctx, d, train, params.gpu, model)
    cp, cp_fwd_s = cp_term(ctx, d, model, train, params.gpu)
    ep, ep_fwd_s = ep_term(ctx, d, model, train, params.gpu, params.experts)
    dp = dp_term(ctx, d, train, params.gpu, params.topology.expert_sync)
    t_f = ctx.layers_stage * (ctx.layer.fwd_s + (tp_fwd_s + cp_fwd_s + ep_fwd_s)) + ctx.logits_fwd_s + offload_fwd_s
    t_b = compute.stage_s + offload.stage_s + tp.stage_s + cp.stage_s + ep.stage_s + dp.stage_s - t_f
    t_w = ctx.layers_stage * ctx.layer.weight_grad_s

    # ---- the schedule, then once per step: data-parallel sync, optimizer, failure stalls
    pipe = pipeline_terms(ctx, d, model, train, params.gpu, t_f, t_b, t_w)
    optimizer = optimizer_term(ctx, d, params.gpu, train)
    straggler = straggler_term(train.n_gpus, compute.seconds(micro), params.gpu.straggler_cv)
    # ep.step_s: the gradient exchange of EPLB's redundant expert replicas (0 without an expert trace)
    inner_s = pipe.total_s + dp.step_s + ep.step_s + optimizer.step_s + straggler.step_s
    outer = outer_sync_term(ctx, d, train, params.gpu, inner_s, params.topology.expert_sync)
    stall, total = stall_term(ctx, d, params.net, params.transport, inner_s + outer.step_s, train.n_gpus)

    terms = dict(compute=compute, offload=offload, tp=tp, cp=cp, ep=ep, pp_p2p=pipe.p2p, bubble=pipe.bubble, dp_exposed=dp,
                 outer_sync=outer, optimizer=optimizer, straggler=straggler, stall=stall)
    breakdown = Breakdown(**{name: t.seconds(micro) for name, t in terms.items()})
    memory = dp.memory_bytes + pipe.bubble.memory_bytes + compute.memory_bytes + outer.memory_bytes
    cross_bytes = sum(t.cross_bytes for t in terms.values())
    violation = violation_mask(params, d, ctx, memory)
    feasible = violation == 0

    flops = model_flops_per_sequence(ctx.seq, model) * train.gbs
    safe_total = jnp.where(feasible, total, 1.0)
    tokens_per_s = jnp.where(feasible, train.gbs * ctx.seq / safe_total, 0.0)
    good = goodput(ctx, d, params, tokens_per_s)
    mult = tokens_multiplier(train, d.sync_every, ctx.local_sync)
    effective = good.goodput_tokens_per_s / mult
    time_to_target_s = jnp.where(feasible & (effective > 0), train.target_tokens / jnp.where(effective > 0, effective,
                                                                                              1.0), jnp.inf)
    network_usd = network_usd_per_hour(params.net, params.prices, train.n_gpus)
    usd_per_hour = train.n_gpus * params.prices.gpu_usd_per_hour + network_usd
    return Cost(
        step_time_s=jnp.where(feasible, total, jnp.inf),
        tokens_per_s=tokens_per_s,
        mfu=jnp.where(feasible, flops / (safe_total * train.n_gpus * params.gpu.peak_flops), 0.0),
        memory_bytes=memory,
        breakdown=breakdown,
        cross_building_bytes=cross_bytes,
        feasible=feasible,
        violation=violation,
        group_levels=jnp.stack([ctx.tp.participants, ctx.cp.participants, ctx.pp.participants,
                                ctx.dp_group.participants]),
        raw_step_time_s=total,
        **good._asdict(),
        burst_round_loss=jnp.max(crossed_levels(ctx) * ctx.gradient.round_loss),
        gradient_drop_fraction=ctx.gradient.dropped,
        gradient_variance_increase=ctx.gradient.variance_increase,
        tokens_multiplier=mult,
        effective_tokens_per_s=effective,
        time_to_target_s=time_to_target_s,
        network_usd_per_hour=network_usd,
        cost_usd_per_hour=usd_per_hour,
        train_cost_usd=jnp.where(feasible, usd_per_hour * time_to_target_s / 3600.0, jnp.inf),
        paced_by=jnp.zeros((), jnp.int32),
    )

"""Heterogeneous buildings: one step over several GPU types (issue #16 item 1).

The step model (step.py) runs once per GPU type (buildings.building_types: a GPU with its in-building fabric),
vmapped over the stacked per-type params, each type with its share of the work (context.StageShare); the
slowest type paces the step and the Cost says which (``paced_by``). The share depends on where the buildings'
boundary falls in the rank layout:

- the pipeline spans every building (pp participants across buildings = B): building b holds stages
  b pp/B .. (b+1) pp/B - 1, the last building's last stage also the output layer and loss. ``layer_split``:
  even (today's split, stages.py), speed (layers per stage proportional to the type's speed 1 / t_layer,
  rounded up) or optimized (the integer layers per stage that minimize the slowest stage, ``min_max_split``).
- replicas inside buildings (the pp, tp and cp groups inside one building; only dp/ep cross): a type with n_g of
  the B buildings holds dp n_g / B replicas. ``batch_split``: even (gbs / dp sequences each) or balanced (integer
  microbatches per replica minimizing the slowest replica's 1F1B time (m + pp - 1) t_0, its stage time per
  microbatch t_0 from its kernels).
- otherwise (tp or cp across buildings, or a pipeline over only some of them): every type does the even share in
  lockstep and the slowest paces.

Each type's step is the full model with its share: its kernels, its NVLink and building fabric, its HBM (the
memory check is per GPU type). A pipeline of mixed stages is charged as if every stage were as slow as the
pacing type's (m + p - 1) t_max, not m t_max + sum of the others: an upper bound on the bubble.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..space import BatchSplit, LayerSplit, Schedule
from .context import StageShare, context, restaged
from .dp import zero3_layer_s
from .expert_placement import placed_params
from .provision import provisioned
from .stage_cost import last_stage_extra_s, stage_layer_s

SEARCH_STEPS = 24  # bisection steps of min_max_split: exact for up to 2^24 units
# Times within this relative distance count as equal when a unit is tried against a candidate time (_fits). Types
# whose per-layer times stand in exact ratios (2:3, a stage with the output layer at a whole number of layers' time)
# tie in real arithmetic; in float32 the tie falls either way by a rounding ulp, and which way depends on how XLA
# fuses the program (an FMA here and not there), so the same design split its layers differently in a batch than
# alone. 1e-5 is ~80 float32 ulps, 10 us of a 1 s stage: no physical difference.
TIE_RTOL = 1e-5


class HeteroP(NamedTuple):
    """Per GPU type, stacked on a leading axis [G] (params.hetero_params)."""
    gpu: object  # params.GpuP, leaves [G]
    net: object  # params.NetP, leaves [G, L]: this type's in-building levels, the shared cross-building ones
    count: jax.Array  # [G] buildings of the type
    last: jax.Array  # [G] 1 for the type of the last building (it runs the output layer)
    buildings: jax.Array  # B


def _fits(t, offset, slope, cmax):
    """Largest c in [0, cmax] with offset + slope c <= t (1 + TIE_RTOL), per group: a group's own candidate time
    always fits itself, and a tie with another group's time resolves the same way whatever the rounding."""
    t = t + TIE_RTOL * jnp.abs(t)
    c = jnp.clip(jnp.floor((t - offset) / slope), 0.0, cmax)
    c = jnp.where((c < cmax) & (offset + slope * (c + 1.0) <= t), c + 1.0, c)
    return jnp.where((c > 0.0) & (offset + slope * c > t), c - 1.0, c)


def min_max_split(offset, slope, weight, need):
    """Integer units c_k >= 1 per group minimizing max_k (offset_k + slope_k c_k) subject to
    sum_k weight_k c_k >= need, over the groups with weight_k > 0 (the rest get 0). Returns (c [K], that max).

    Exact up to TIE_RTOL (times that close count as one): the optimum is some group's time offset_j + slope_j c;
    for each j a bisection finds the least c whose time lets every group fit enough units (capacity is monotone in
    time), the least of those over j wins, and no group may go below one unit (the least time at which every group
    fits one)."""
    active = weight > 0.0
    cmax = jnp.ceil(need) + 1.0
    slope = jnp.where(active, slope, 1.0)

    def capacity(t):  # t [K] candidate times -> [K] units that fit at each
        c = _fits(t[:, None], offset[None, :], slope[None, :], cmax)
        return jnp.sum(jnp.where(active[None, :], weight[None, :] * c, 0.0), axis=1)

    def bisect(_, lohi):
        lo, hi = lohi
        mid = jnp.floor(0.5 * (lo + hi))
        ok = capacity(offset + slope * mid) >= need
        return jnp.where(ok, lo, mid + 1.0), jnp.where(ok, mid, hi)

    ones = jnp.ones_like(offset)
    lo, _ = jax.lax.fori_loop(0, SEARCH_STEPS, bisect, (ones, ones * cmax))
    t_fit = jnp.min(jnp.where(active, offset + slope * lo, jnp.inf))
    t_one = jnp.max(jnp.where(active, offset + slope, -jnp.inf))
    t = jnp.maximum(t_fit, t_one)
    c = jnp.where(active, jnp.maximum(_fits(t, offset, slope, cmax), 1.0), 0.0)
    # XLA may contract offset + slope c into one FMA in the bisection and not here (or the reverse), so a candidate
    # time can land one float32 ulp below the time its own unit needs, and the split comes up one unit short
    # (offset [0, 1.6], slope 0.8, 40 units: 20 + 19). Then the optimum is the next candidate time: the least
    # over the groups of the time of one more unit.
    short = jnp.sum(jnp.where(active, weight * c, 0.0)) < need
    t_next = jnp.min(jnp.where(active, offset + slope * (c + 1.0), jnp.inf))
    c = jnp.where(short, jnp.where(active, jnp.maximum(_fits(t_next, offset, slope, cmax), 1.0), 0.0), c)
    return c, jnp.max(jnp.where(active, offset + slope * c, -jnp.inf))


def _across(ctx, group):
    """Participants of a group across buildings (product over the cross-building levels)."""
    return jnp.prod(jnp.where(ctx.xb > 0, group.participants, 1.0))


def type_contexts(params, d):
    """(Context per GPU type [G], one layer's seconds per type [G]) before the types' shares are set: each type's
    context with its slowest stage chosen on what a stage pays per layer (stage_cost.stage_layer_s: kernels,
    recompute and the exposed TP/CP/EP communication) and, under ZeRO-3, what one more layer adds to its exposed
    gathers (dp.zero3_layer_s): the weight on which layer_shares and batch_shares split the work, so that a type
    whose fabric, or whose faster compute, leaves more communication exposed per layer is given fewer layers."""
    h = params.hetero
    one = placed_params(params._replace(hetero=None), d)  # as step.step_time sees each type: experts placed,
    model, train = one.model, one.train

    def per_type(g, n):  # and the network as the design provisions it
        p = one._replace(gpu=g, net=provisioned(n, d) if one.topology.provisioned else n)
        ctx = context(p, d)
        layer_s = stage_layer_s(ctx, d, p) + zero3_layer_s(ctx, d, train, p.gpu, p.topology.expert_sync)
        return restaged(ctx, model, train, d.pp, d.vpp, layer_s), layer_s
    return jax.vmap(per_type)(h.gpu, h.net)


def layer_shares(ctx, d, h: HeteroP, layers, layer_s):
    """(layers on the slowest stage, with_logits, layers on the type's first stage: its memory) per type [G] when
    the pipeline spans every building; layer_s [G]: one layer's seconds on each type's stages (type_contexts)."""
    extra_last = jnp.sum(h.last * last_stage_extra_s(ctx))
    stages = d.pp / h.buildings * h.count  # [G]
    # even: today's split; the last type's decision (counted units or not) holds for the whole pipeline
    even_other = jnp.sum(h.last * ctx.other_layers)
    # memory as on one GPU type: the pipeline's first stage (a middle stage with one layer more has fewer
    # microbatches in flight; context.py)
    even = (jnp.where(h.last > 0, ctx.layers_stage, even_other), jnp.where(h.last > 0, ctx.with_logits, 0.0),
            ctx.layers_first)
    # speed: layers per stage proportional to 1 / t_layer, rounded up
    speed = 1.0 / layer_s
    q = jnp.ceil(layers * speed / jnp.sum(stages * speed) - 1e-6)
    by_speed = (q, h.last, q)
    # optimized: groups = each type's stages but the last, then the last stage (with the output layer)
    offset = jnp.concatenate([jnp.zeros_like(layer_s), extra_last[None]])
    slope = jnp.concatenate([layer_s, jnp.sum(h.last * layer_s)[None]])
    weight = jnp.concatenate([stages - h.last, jnp.ones((1,), layer_s.dtype)])
    c, _ = min_max_split(offset, slope, weight, layers)
    q_other, q_last = c[:-1], c[-1]
    last_slower = (q_last * layer_s + extra_last >= q_other * layer_s) | (stages - h.last <= 0.0)
    opt = (jnp.where((h.last > 0) & last_slower, q_last, q_other), jnp.where((h.last > 0) & last_slower, 1.0, 0.0),
           jnp.where(stages - h.last > 0.0, q_other, q_last))
    pick = lambda i: jnp.select([d.layer_split == LayerSplit.SPEED, d.layer_split == LayerSplit.OPTIMIZED],
                                [by_speed[i], opt[i]], even[i])
    return pick(0), pick(1), pick(2)


def batch_shares(ctx, d, h: HeteroP, gbs, layer_s):
    """Microbatches per replica per type [G] when the replicas sit inside buildings (the pipeline's bubble as
    1F1B's, or interleaved's with v chunks; zero-bubble schedules are charged 1F1B's: a bound); layer_s [G] as
    layer_shares."""
    t0 = ctx.layers_stage * layer_s + ctx.logits_fwd_s + ctx.logits_bwd_s + ctx.mtp_s
    unit = jnp.where(d.schedule == Schedule.INTERLEAVED, d.pp, 1.0)  # interleaving needs m divisible by pp
    chunks = jnp.where(d.schedule == Schedule.INTERLEAVED, d.vpp, 1.0)  # its bubble (p - 1) t_0 / v (pipeline.py)
    replicas = ctx.dp * h.count / h.buildings
    c, _ = min_max_split((d.pp - 1.0) * t0 / chunks, unit * t0, replicas * unit, gbs / d.mbs)
    return jnp.where(d.batch_split == BatchSplit.BALANCED, unit * c, ctx.microbatches)


def hetero_step_time(params, d, step_time):
    """Cost of design ``d`` on a system of several GPU types; ``step_time`` is step.step_time (passed in: it
    dispatches here)."""
    h = params.hetero
    one = params._replace(hetero=None)
    per_type = lambda gpu, net: one._replace(gpu=gpu, net=net)
    ctx, layer_s = type_contexts(params, d)
    first = jax.tree_util.tree_map(lambda x: x[0], ctx)  # the layout is the same for every type
    x_pp = _across(first, first.pp)
    spans_all = (x_pp > h.buildings - 0.5) & (h.buildings > 1.5)
    local = (x_pp < 1.5) & (_across(first, first.tp) < 1.5) & (_across(first, first.cp) < 1.5)
    layers_stage, with_logits, layers_first = layer_shares(ctx, d, h, params.model.layers, layer_s)
    share = StageShare(layers_stage=jnp.where(spans_all, layers_stage, ctx.layers_stage),
                       with_logits=jnp.where(spans_all, with_logits, ctx.with_logits),
                       layers_first=jnp.where(spans_all, layers_first, ctx.layers_first),
                       microbatches=jnp.where(local, batch_shares(ctx, d, h, params.train.gbs, layer_s), ctx.microbatches))
    costs = jax.vmap(lambda g, n, s: step_time(per_type(g, n), d, s))(h.gpu, h.net, share)
    return combine(costs, h)


def combine(costs, h: HeteroP):
    """The step paced by the slowest type; feasible only if every type is (its own memory, its own batch)."""
    pace = jnp.argmax(costs.raw_step_time_s)
    pick = jax.tree_util.tree_map(lambda x: x[pace], costs)
    violation = costs.violation[0]
    for i in range(1, costs.violation.shape[0]):
        violation = violation | costs.violation[i]
    feasible = violation == 0
    # memory: the fill of the type nearest its HBM, in bytes of the first type's HBM (the system's reference GPU,
    # whose capacity reports show); exactly the first type's bytes when it is the nearest
    fill = costs.memory_bytes / h.gpu.hbm_bytes
    tight = jnp.argmax(fill)
    memory = jnp.where(tight == 0, costs.memory_bytes[0], fill[tight] * h.gpu.hbm_bytes[0])
    # MFU over the whole fleet: its peak is the buildings' mean
    peak_ratio = h.gpu.peak_flops[pace] / (jnp.sum(h.count * h.gpu.peak_flops) / h.buildings)
    zero = lambda x: jnp.where(feasible, x, 0.0)
    inf = lambda x: jnp.where(feasible, x, jnp.inf)
    return pick._replace(
        step_time_s=inf(pick.raw_step_time_s), tokens_per_s=zero(pick.tokens_per_s), mfu=zero(pick.mfu * peak_ratio),
        memory_bytes=memory, feasible=feasible, violation=violation,
        goodput_tokens_per_s=zero(pick.goodput_tokens_per_s), effective_tokens_per_s=zero(pick.effective_tokens_per_s),
        time_to_target_s=inf(pick.time_to_target_s), train_cost_usd=inf(pick.train_cost_usd),
        paced_by=pace.astype(jnp.int32))

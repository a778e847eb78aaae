"""Pipeline schedules -> time of one step's forward/backward phase, with per-hop delays.

Per stage and microbatch: forward t_F, backward t_B (of which t_W is the weight-gradient part); T0 = t_F + t_B.
Bubbles (p stages, m microbatches, v chunks): GPipe and 1F1B (p-1) T0; interleaved (p-1) T0 / v (Narayanan
et al. 2021); ZB-H1 (p-1)(F + B - W) and ZB-H2 (p-1)(F + B - 2W) with B = t_B - t_W the input-gradient part
(Qi et al. 2024), clamped at zero.

Hops: a pipeline hop at level L costs c_L = alpha_L + activation bytes / bandwidth. Filling and draining the
pipe adds 2 sum_j c_j. In the steady state a stage i keeps w_i microbatches in flight (1F1B: p - i) while one
round trip from i to the last stage and back takes (p-i) T0 + 2 D_i (D_i = hop costs downstream of i), so its
cycle is at least T0 + 2 D_i / w_i (the window bound); the worst stage is the first one or the one just upstream
of the last boundary of some level, so only those are evaluated. Two adjacent stages bound it too (pair_stretch):
the upstream one warms up only s = 1 (1F1B, ZB-H1) or 2 (ZB-H2) microbatches more, so one slow hop c anywhere
stretches 1F1B's cycle to T0 + c. Megatron-Core's 1F1B also waits on each exchange with its neighbours, so a stage
between two hops pays both every cycle (pair_stretch with adjacent_hops_s: T0 + 2c on uniform hops). Zero-bubble schedules run their
weight gradients while they wait, which keeps them off both loops. A latency-aware schedule (CrossPipe-style) adds ceil(2 c_j / T0) warm-up microbatches upstream
of each slow hop and recovers (m + p - 1) T0 + 2 sum_j c_j, paying the extra activations in memory. Megatron's
interleaved schedule warms up p - 2 chunks beyond its lap and so hides hops up to a third of a chunk's cycle
(interleaved_stretch_s); its overlapped send and receive kernels slow the GEMMs beside them instead.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..space import Schedule
from .context import ACT_BYTES
from .memory import activation_bytes_per_layer, in_flight_microbatches
from .offload import offloaded_layers
from .overlap import p2p_price
from .placement import hops_per_level
from .terms import Term

P2P_KERNELS_PER_CHUNK = 4.0  # per chunk a stage receives and sends the activation, and the gradient back
LATENCY_AWARE_THRESHOLD = 0.1  # hops whose round trip is under 10% of a cycle get no extra warm-up


def _candidate_stages(p, m_pp, k_pp, hop_s):
    """(window, downstream delay, exists) of the stage just upstream of the last unit of each level."""
    n_levels = m_pp.shape[0]
    out = []
    m_below = jnp.concatenate([jnp.ones_like(m_pp[:1]), m_pp[:-1]])
    for lu in range(n_levels):
        internal = jnp.sum(jnp.where(jnp.arange(n_levels) <= lu,
                                     (m_pp[lu] / m_below - m_pp[lu] / m_pp) * hop_s, 0.0))
        # the boundary before the last level-lu unit is at the next level above lu that the pipeline spans
        boundary = jnp.zeros_like(p)
        found = jnp.zeros_like(p)
        for up in range(n_levels - 1, lu, -1):
            crosses = k_pp[up] > 1.0 + 1e-6
            boundary = jnp.where(crosses, hop_s[up], boundary)
            found = jnp.maximum(found, crosses.astype(p.dtype))
        out.append((m_pp[lu] + 1.0, boundary + internal, found))
    return out


def wrap_hop_s(hop_s, hops_per_level):
    """One hop from the last stage back to the first (an interleaved chunk's next lap): it crosses the highest level
    the chain crosses; 0 without hops."""
    levels = jnp.arange(hop_s.shape[0])
    top = jnp.max(jnp.where(hops_per_level > 0.5, levels, -1))
    return jnp.sum(jnp.where(levels == top, hop_s, 0.0))


def slowest_hop(hop_s, hops_per_level, m_pp):
    """(delay of the slowest hop the chain crosses, the stages of one unit just below its level)."""
    levels = jnp.arange(hop_s.shape[0])
    crossed = hops_per_level > 0.5
    c_max = jnp.max(jnp.where(crossed, hop_s, 0.0))
    slow = jnp.max(jnp.where(crossed & (hop_s >= c_max), levels, -1))  # the highest such level on ties
    m_below = jnp.concatenate([jnp.ones_like(m_pp[:1]), m_pp[:-1]])
    return c_max, jnp.sum(jnp.where(levels == slow, m_below, 0.0))


def blocking_warmup_s(schedule, micro, t_f, t_b, c_max, u):
    """Seconds Megatron-Core's blocking sends add to 1F1B's warm-up above the slowest hop c.

    Non-interleaved 1F1B waits on each batch of sends and receives (forward_backward_pipelining_without_interleaving:
    send_forward, send_forward_recv_backward, ...), and an NCCL send larger than its channel buffers needs its
    receiver, so each warm-up forward of the stage above the hop waits for its hand-over: with u stages below the hop,
    (min(u, m) - 1) max(c - t_f, 2 c - T0, 0). The steady cycle keeps the pair bound T0 + c. Both are what a replay of
    those blocking calls gives (tests/test_pipeline_slow_hop.py, exact for four splits of t_f and t_b); interleaved,
    zero-bubble and latency-aware schedules post their transfers without waiting on them (c_max, u: slowest_hop)."""
    t0 = t_f + t_b
    wait = jnp.maximum(jnp.maximum(c_max - t_f, 2.0 * c_max - t0), 0.0)
    waits = jnp.maximum(jnp.minimum(u, micro) - 1.0, 0.0)
    return jnp.where(schedule == Schedule.ONE_F_ONE_B, waits * wait, 0.0)


def adjacent_hops_s(hop_s, hops_per_level, m_pp):
    """Largest delay of two consecutive hops of the chain (one hop's where the chain has one; 0 without hops).

    A stage between two hops sits alone in its unit of the level below both, so every pair of consecutive hops
    includes one at the lowest level the chain crosses, l0 (each of whose units holds single stages): it pairs with
    the slowest higher level crossed, or with another l0 hop where an l0 unit holds three or more stages."""
    levels = jnp.arange(hop_s.shape[0])
    crossed = hops_per_level > 0.5
    l0 = jnp.min(jnp.where(crossed, levels, hop_s.shape[0]))
    c_low = jnp.sum(jnp.where(levels == l0, hop_s, 0.0))
    m_below = jnp.concatenate([jnp.ones_like(m_pp[:1]), m_pp[:-1]])
    per_unit = jnp.sum(jnp.where(levels == l0, m_pp / jnp.maximum(m_below, 1.0), 0.0))
    higher = jnp.max(jnp.where(crossed & (levels > l0), hop_s, 0.0))
    return c_low + jnp.maximum(higher, jnp.where(per_unit >= 3.0 - 1e-6, c_low, 0.0))


def pair_stretch(schedule, micro, t_f, t_b, t_w, c_max, u, c_pair=None):
    """(seconds each steady cycle of the pair across the slowest hop c grows by, how many such cycles) for 1F1B,
    ZB-H1 and ZB-H2.

    The upstream stage of a pair warms up s microbatches more than the downstream one (1F1B and ZB-H1: s = 1;
    ZB-H2: s = 2, its warm-up 2 (p - r) - 1 falls by 2 per stage, Qi et al. 2024, the manual order of
    sail-sg/zero-bubble-pipeline-parallelism's scheduler/zb.py). The pair's critical loop runs a forward from the
    upstream stage to the downstream one, the downstream forward and backward, the backward back and the upstream
    backward and next forward: 2 (t_f + t_crit) + 2 c of work and hops for every s + 1 microbatches, so a cycle lasts
    at least (2 (t_f + t_crit) + 2 c) / (s + 1). 1F1B's t_crit is the whole backward (the cycle becomes T0 + c, one
    slow hop anywhere in the chain); zero-bubble schedules run deferred weight gradients while they wait, so only
    the input-gradient part t_b - t_w is on the loop. The loop binds once the stage above the last slow hop, with u
    stages below it, has finished its warm-up of about s u microbatches (1F1B: p - r - 1 = u), so for m - s u
    cycles. A discrete-event replay
    of each order (tests/test_pipeline_slow_hop.py) finds this cycle whatever p and wherever the slow hop sits,
    where the round trip through the downstream stages (the window bound) gives 2 c / (p - r) and underestimates
    it p / 2 times for a hop at the middle of a 1F1B chain (c_max, u: slowest_hop).

    Megatron-Core's 1F1B also waits on each exchange with its neighbours (send_backward_recv_forward with the stage
    above, send_forward_recv_backward with the one below), so a stage between two hops carries both on the loop:
    with c_pair (adjacent_hops_s) its cycle is T0 + c_pair, T0 + 2 c on uniform hops where an asynchronous order pays
    T0 + 2 c (p - 1) / p, and T0 + c where the other hops are free. A replay of those blocking calls
    (tests/test_pipeline_slow_hop.py) has exactly this cycle for any split of t_f and t_b."""
    zero_bubble = (schedule == Schedule.ZB_H1) | (schedule == Schedule.ZB_H2)
    slack = jnp.where(schedule == Schedule.ZB_H2, 2.0, 1.0)
    t_crit = jnp.where(zero_bubble, t_b - t_w, t_b)
    c_loop = c_max if c_pair is None else jnp.where(schedule == Schedule.ONE_F_ONE_B, c_pair, c_max)
    cycle = (2.0 * (t_f + t_crit) + 2.0 * c_loop) / (slack + 1.0)
    steady = jnp.maximum(micro - slack * u, 0.0)
    return jnp.maximum(cycle - (t_f + t_b), 0.0), steady


def interleaved_stretch_s(p, micro, v, t_f, t_b, hop_s, hops_per_level, chain_s, wrap_s):
    """Seconds hop delays add to the steady state of Megatron-Core's interleaved 1F1B (hops_per_level of a linear
    chain, whose hops add up to chain_s; wrap_s the hop back from its last stage to its first, wrap_hop_s; the fill
    and drain are charged apart).

    Its first stage warms up with 2 (p - 1) + (v - 1) p chunk forwards, p - 2 more than one lap of p v chunks
    (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving's
    num_warmup_microbatches; 1F1B's stage warms up with p - 1 microbatches, no more than its lap); then every stage runs
    one chunk forward and one chunk backward per cycle T = (t_f + t_b) / v. A periodic steady state of cycle T' must
    carry each dependency loop's work and hops within the cycles the loop spans:
    - two adjacent stages: stage r + 1 runs a chunk's forward two cycles after stage r did (plus the hop c between
      them), and stage r's backward of a chunk waits for stage r + 1's (plus c); with each stage starting a kernel as
      soon as its input is there, the pair settles at 3 T' = 2 (T + c) (the slowest hop binds);
    - the ring: the last stage's backward of a chunk waits for the first stage's backward of the next chunk, one lap
      of p cycles earlier, after p backward chunks and the p hops of the ring (p - 1 along the chain and the wrap
      from the last stage to the first, which crosses the highest level the chain crosses), so
      p T' >= p t_b / v + sum of the ring's hops; the forward wrap likewise with t_f.
    Below those bounds the extra warm-up hides every hop: a discrete-event replay of the schedule
    (tests/test_pipeline_interleaved.py) pays only fill and drain up to c = T/3 on uniform hops (t_b = 2 t_f) and
    C = T/2 on one slow hop, where 1F1B stretches every cycle by 2 (p - 1) c / p from the first hop on. Past them
    each of the first stage's steady cycles lasts T': within -11% / +19% of the replay on uniform hops and -12% /
    +13% on one slow hop."""
    t_cycle = (t_f + t_b) / v
    c_max = jnp.max(jnp.where(hops_per_level > 0.5, hop_s, 0.0))
    ring = chain_s + wrap_s
    cycle = jnp.maximum(jnp.maximum(t_cycle, 2.0 / 3.0 * (t_cycle + c_max)),
                        jnp.maximum(t_f, t_b) / v + ring / jnp.maximum(p, 1.0))
    steady_cycles = jnp.maximum(micro * v - (v - 1.0) * p - 2.0 * (p - 1.0), 0.0)
    return steady_cycles * (cycle - t_cycle)


def pipeline_time_s(schedule, p, micro, v, t_f, t_b, t_w, hop_s, hops_per_level, m_pp, k_pp):
    """Returns (total seconds, seconds without hop delays, extra warm-up microbatches of latency-aware).

    Scalars: p stages, micro microbatches, v chunks, t_f/t_b/t_w seconds per microbatch per stage; per level [L]:
    hop_s (one hop's delay), hops_per_level, m_pp (members inside a unit) and k_pp (participants)."""
    t0 = t_f + t_b
    b_input = t_b - t_w
    # Zero-bubble schedules defer weight gradients into the bubbles, but cannot beat the critical path: the
    # last microbatch's forward and input-gradient chain through all p stages, plus one W at the end. With
    # few microbatches (micro < ~2p) that bound, not the steady-state formula, sets their bubble.
    chain = (p - 1.0) * (t_f + b_input) - (micro - 1.0) * t_w
    bubble = jnp.select(
        [schedule == Schedule.INTERLEAVED, schedule == Schedule.ZB_H1, schedule == Schedule.ZB_H2],
        [(p - 1.0) * t0 / v,
         jnp.maximum((p - 1.0) * jnp.maximum(t_f + b_input - t_w, 0.0), chain),
         jnp.maximum((p - 1.0) * jnp.maximum(t_f + b_input - 2.0 * t_w, 0.0), chain)],
        (p - 1.0) * t0)
    base = micro * t0 + bubble

    chunks = jnp.where(schedule == Schedule.INTERLEAVED, v, 1.0)  # an interleaved microbatch crosses every hop v times
    chain_delay = jnp.sum(hops_per_level * hop_s)
    total_delay = chain_delay * chunks
    # and from the last stage back to the first between its laps (v - 1 times): part of the fill and drain
    wrap = wrap_hop_s(hop_s, hops_per_level)
    fill = 2.0 * (total_delay + (chunks - 1.0) * wrap)

    last_units = _candidate_stages(p, m_pp, k_pp, hop_s * chunks)
    # a microbatch's round trip from a stage back to it; zero-bubble schedules run weight gradients while they wait
    t_loop = jnp.where((schedule == Schedule.ZB_H1) | (schedule == Schedule.ZB_H2), t_f + b_input, t0)
    window_mult = jnp.where(schedule == Schedule.ZB_H2, 2.0, 1.0)  # ZB-H2 keeps ~2x the microbatches in flight
    cycles = []
    for w, d, ok in [(p, total_delay, jnp.ones_like(p))] + last_units:
        w_eff = jnp.minimum(window_mult * w - (window_mult - 1.0), jnp.maximum(micro, 1.0))
        cyc = (jnp.minimum(w, micro) * t_loop + 2.0 * d) / jnp.maximum(w_eff, 1.0)
        cycles.append(jnp.where(ok > 0, cyc, 0.0))
    stretch = jnp.maximum(jnp.max(jnp.stack(cycles)) - t0, 0.0)
    c_max, u = slowest_hop(hop_s, hops_per_level, m_pp)
    pair_s, pair_cycles = pair_stretch(schedule, micro, t_f, t_b, t_w, c_max, u,
                                       adjacent_hops_s(hop_s, hops_per_level, m_pp))
    no_stretch = (schedule == Schedule.GPIPE) | (schedule == Schedule.LATENCY_AWARE)  # GPipe has all micro in flight; latency-aware fills the gap
    interleaved = schedule == Schedule.INTERLEAVED
    steady = jnp.where(interleaved, interleaved_stretch_s(p, micro, v, t_f, t_b, hop_s, hops_per_level,
                                                          chain_delay, wrap),
                       jnp.where(no_stretch, 0.0, jnp.maximum((micro - 1.0) * stretch, pair_cycles * pair_s)))
    hop_time = fill + steady + blocking_warmup_s(schedule, micro, t_f, t_b, c_max, u)

    extra = jnp.sum(hops_per_level * jnp.ceil(jnp.maximum(2.0 * hop_s / t0 - LATENCY_AWARE_THRESHOLD, 0.0)))
    return base + hop_time, base, extra


class PipelineTerms(NamedTuple):
    p2p: Term  # hop delays: fill, drain and the steady-state stretch; the activations crossing buildings
    bubble: Term  # idle stages while the pipe fills and drains; the activations the schedule keeps in flight
    total_s: jax.Array  # the whole forward/backward phase of the step


def pipeline_terms(ctx, d, model, train, gpu, t_f, t_b, t_w) -> PipelineTerms:
    """The schedule over per-microbatch stage times t_f, t_b (t_w of it the weight gradients), in seconds."""
    pp, micro = d.pp, ctx.microbatches
    hop_levels = hops_per_level(pp, ctx.pp.members)
    # Megatron scatters pipeline messages over the TP group (and gathers them after the hop) even without
    # sequence parallelism (Narayanan et al. 2021, section 4.1): each GPU sends 1/tp of the activation.
    act_pp_bytes = d.mbs * ctx.seq / d.cp * model.hidden * ACT_BYTES / d.tp
    hop_s = ctx.alpha_s + act_pp_bytes / ctx.bw_pp_Bps
    total_s, base_s, extra_warmup = pipeline_time_s(d.schedule, pp, micro, d.vpp, t_f, t_b, t_w, hop_s, hop_levels,
                                                    ctx.pp.members, ctx.pp.participants)
    steady_s = micro * (t_f + t_b)
    # Interleaved 1F1B overlaps its sends and receives with compute (Megatron-Bridge sets overlap_p2p_comm when
    # vpp > 1, training/comm_overlap.py): the schedule hides their wire time (interleaved_stretch_s) but the NCCL
    # kernels run beside the GEMMs, which pay their SM share and contention (overlap.p2p_price) for as long
    # as they run: per chunk a stage receives and sends the activation and the gradient, P2P_KERNELS_PER_CHUNK
    # kernels of one hop's wire time each (the ring's mean hop)
    ring_hop_s = jnp.sum(hop_levels * hop_s) / jnp.maximum(pp - 1.0, 1.0)
    p2p_price_s = jnp.where(d.schedule == Schedule.INTERLEAVED,
                            p2p_price(gpu, 1.0) * P2P_KERNELS_PER_CHUNK * micro * d.vpp * ring_hop_s, 0.0)
    total_s = total_s + p2p_price_s
    in_flight = in_flight_microbatches(d.schedule, pp, micro, d.vpp, extra_warmup)
    # the first stage: the most microbatches in flight (with the embedding counted as a layer a middle stage
    # holds one layer more and two chunks fewer in flight); offloaded layers sit in host memory
    kept_layers = ctx.layers_first - offloaded_layers(train, ctx.layers_first)
    acts = in_flight * kept_layers * activation_bytes_per_layer(d.mbs, ctx.seq, d.tp, d.cp, d.recompute,
                                                                     model, train, gpu.gemm_input_bytes,
                                                                     ctx.recompute_share)
    # every hop carries each microbatch's activation forward and its gradient back, v times when interleaved
    passes = jnp.where(d.schedule == Schedule.INTERLEAVED, d.vpp, 1.0)
    cross = (jnp.sum(ctx.xb * hop_levels) * micro * 2.0 * act_pp_bytes * passes * d.tp * d.cp * ctx.dp)
    return PipelineTerms(p2p=Term(step_s=total_s - base_s, cross_bytes=cross),
                         bubble=Term(step_s=base_s - steady_s, memory_bytes=acts), total_s=total_s)

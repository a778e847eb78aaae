"""Composition: one design point -> Cost. Pure; ``evaluate.py`` vmaps it once.

Step time = pipeline phase (per-microbatch stage times incl. exposed TP/CP/EP communication, bubbles, hop
delays) + exposed data-parallel synchronization + optimizer step + expected failure stalls.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from . import collectives as coll
from .compute import layer_times, logits_times, model_flops_per_sequence
from .dp import BUCKET_PARAMS, dp_step_comm_s, exposed_s, fsdp_microbatch_comm_s
from .memory import activation_bytes_per_layer, in_flight_microbatches, model_state_bytes, params_per_gpu
from .moe import moe_alltoall_bytes, moe_layer_comm_s
from .pipeline import pipeline_time_s
from .placement import group_members, hops_per_level, layout_strides, spans
from .transport import ecmp_table, effective_bandwidth, level_factors

BREAKDOWN_KEYS = ("compute", "tp", "cp", "ep", "pp_p2p", "bubble", "dp_exposed", "optimizer", "stall")
# Adam step traffic per locally-updated parameter: read fp32 master, m, v and grad (16 B), write master, m, v
# (12 B) and the 16-bit copy (2 B).
ADAM_BYTES_PER_PARAM = 30.0
ACT_BYTES = 2.0  # 16-bit activations on the wire

VIOLATIONS = (
    ("GPU_COUNT", "tp x cp x pp x dp does not equal the number of GPUs"),
    ("TP_DIVIDES", "tp does not divide the attention heads, the kv heads and the ffn size"),
    ("LAYERS_PP", "pp x vpp exceeds the number of layers"),
    ("BATCH", "dp x mbs does not divide the global batch"),
    ("SEQ_CP", "2 x cp does not divide the sequence length (load-balanced causal context parallelism)"),
    ("MEMORY", "memory per GPU exceeds the usable HBM"),
    ("SCHEDULE", "vpp > 1 needs the interleaved schedule, which needs vpp > 1, pp > 1 and a number of "
                 "microbatches divisible by pp"),
    ("EXPERTS", "ep must be 1 for a dense model, divide the experts and divide dp x cp"),
    ("TRANSPORT", "bounded-loss transport changes training semantics and the scenario does not allow it"),
    ("NONINTEGER", "a parallelism or batch axis is not a whole number"),
)
VIOLATION_BIT = {name: 1 << i for i, (name, _) in enumerate(VIOLATIONS)}


def violation_reasons(code: int) -> list:
    return [text for i, (_, text) in enumerate(VIOLATIONS) if int(code) >> i & 1]


class Breakdown(NamedTuple):
    compute: jnp.ndarray
    tp: jnp.ndarray
    cp: jnp.ndarray
    ep: jnp.ndarray
    pp_p2p: jnp.ndarray
    bubble: jnp.ndarray
    dp_exposed: jnp.ndarray
    optimizer: jnp.ndarray
    stall: jnp.ndarray


class Cost(NamedTuple):
    step_time_s: jnp.ndarray  # +inf when infeasible
    tokens_per_s: jnp.ndarray
    mfu: jnp.ndarray
    memory_bytes: jnp.ndarray  # peak per GPU (first pipeline stage)
    breakdown: Breakdown  # seconds; sums to the step time of a feasible point
    cross_building_bytes: jnp.ndarray  # whole job, per step, over campus and region links
    feasible: jnp.ndarray
    violation: jnp.ndarray  # bit mask over VIOLATIONS
    group_levels: jnp.ndarray  # [4 (tp, cp, pp, dp), levels]: participants k_L of each group per level
    raw_step_time_s: jnp.ndarray  # the time even when infeasible (for penalties and explanations)


def _divides(a, b):
    q = b / a
    return jnp.abs(q - jnp.round(q)) < 1e-4


def _is_int(x):
    return jnp.abs(x - jnp.round(x)) < 1e-4


def step_time(P, d) -> Cost:
    """Cost of one design point ``d`` (a scalar-leaf ``space.Design``) under params ``P``."""
    m, g, net, tr, T = P.model, P.gpu, P.net, P.transport, P.train
    tp, cp, pp, ep, v, mbs = d.tp, d.cp, d.pp, d.ep, d.vpp, d.mbs
    dp = jnp.where(d.dp == 0, T.n_gpus / (tp * cp * pp), d.dp)
    micro = T.gbs / (dp * mbs)
    seq = T.seq
    sched = d.schedule
    recompute = d.recompute

    # ---- placement: members and participants of each group per level
    sizes = jnp.stack([tp, cp, pp, dp])
    stride = layout_strides(sizes, P.placement_inner[d.placement])
    (m_tp, k_tp), (m_cp, k_cp), (m_pp, k_pp), (m_dp, k_dp) = (
        group_members(sizes[i], stride[i], net.unit_gpus) for i in range(4))
    m_ep, k_ep = group_members(ep, stride[3], net.unit_gpus)
    k_dpc = k_dp * k_cp  # gradient group: dp x cp (same weights)
    building = min(1, k_dpc.shape[0] - 1)
    inner_mask = (jnp.arange(k_dpc.shape[0]) <= building)
    k_dpc_inner = jnp.where(inner_mask, k_dpc, 1.0)
    k_dpc_outer = jnp.where(inner_mask, 1.0, k_dpc)

    # ---- network: transport-adjusted latency and bandwidth per level
    f, extra_latency, cap_t = level_factors(net, tr, ecmp_table(net), d.transport, d.qps, d.channels)
    alpha = net.latency_s + extra_latency
    bw = effective_bandwidth(net, f, cap_t, 1.0)
    bw_pp = effective_bandwidth(net, f, cap_t, m_pp)  # only boundary stages send across

    # ---- per-layer compute and communication on one GPU, one microbatch
    lt = layer_times(tp, cp, mbs, seq, m, g, T)
    act = mbs * seq / cp * m.hidden * ACT_BYTES
    tp_ar = coll.ring_allreduce_s(k_tp, act, alpha, bw)  # SP: all-gather + reduce-scatter, same volume
    tp_overlap = d.overlap == 2
    # Sequence parallelism keeps only the scattered layer input, so the backward all-gathers it again for
    # the weight gradients: one more all-gather per linear pair, 3 all-reduce equivalents per layer instead
    # of 2 (Korthikanti et al. 2022, section 4.2.2).
    tp_b_volume = 2.0 * tp_ar + jnp.where(T.seq_parallel > 0, tp_ar, 0.0)
    tp_f = jnp.where(tp_overlap, jnp.maximum(2.0 * tp_ar - lt["linear_fwd"], 0.0), 2.0 * tp_ar)
    tp_b = jnp.where(tp_overlap, jnp.maximum(tp_b_volume - 2.0 * lt["linear_fwd"], 0.0), tp_b_volume)

    kv_chunk = 2.0 * mbs * (seq / cp) * 2.0 * m.kv_heads * m.head_dim / tp  # K and V, 16-bit
    a_cp, b_cp = coll.bottleneck(k_cp, alpha, bw)
    cp_ring = (cp - 1.0) * (a_cp + kv_chunk / b_cp)  # ring attention: overlapped with the attention core
    cp_f = jnp.maximum(cp_ring - lt["attn_fwd"], 0.0)
    cp_b = jnp.maximum(2.0 * cp_ring - 2.0 * lt["attn_fwd"], 0.0)

    tokens_gpu = mbs * seq / (cp * tp)
    ep_f_layer, ep_b_layer = moe_layer_comm_s(m_ep, k_ep, tokens_gpu, m, alpha, bw)
    ep_f, ep_b = m.moe_fraction * ep_f_layer, m.moe_fraction * ep_b_layer

    comm_f = tp_f + cp_f + ep_f
    rec_compute = jnp.select([recompute == 1, recompute == 2], [lt["recompute_selective"], lt["fwd"]], 0.0)
    rec_comm = jnp.where(recompute == 2, comm_f, 0.0)

    # Worst stage holds ceil(L / (pp v)) layers per chunk: uneven splits are real practice (Llama 3 405B put
    # 126 layers on 16 stages), so pp need not divide the layers; the slowest stage sets the pace.
    layers_stage = jnp.ceil(m.layers / (pp * v) - 1e-6) * v
    log_f, log_b = logits_times(tp, cp, mbs, seq, m, g)
    compute_mb = layers_stage * (lt["fwd"] + lt["bwd"] + rec_compute) + log_f + log_b
    tp_mb = layers_stage * (tp_f + tp_b + jnp.where(recompute == 2, tp_f, 0.0))
    cp_mb = layers_stage * (cp_f + cp_b + jnp.where(recompute == 2, cp_f, 0.0))
    ep_mb = layers_stage * (ep_f + ep_b + jnp.where(recompute == 2, ep_f, 0.0))

    # ---- data parallel: parameters held, ZeRO-3 traffic per microbatch
    dense_p, expert_p = params_per_gpu(tp, pp, ep, m, layers_stage)
    params_gpu = dense_p + expert_p
    layer_param_bytes = (dense_p + expert_p) / layers_stage * T.param_bytes
    fsdp_mb = fsdp_microbatch_comm_s(d.sharding, k_dpc, k_dpc_inner, params_gpu * T.param_bytes,
                                     params_gpu * T.grad_reduce_bytes, alpha, bw)
    fsdp_window = jnp.where(d.overlap >= 1, layers_stage * (lt["fwd"] + lt["bwd"]), 0.0)
    dp_mb = jnp.maximum(fsdp_mb - fsdp_window, jnp.where(d.overlap >= 1, fsdp_mb / layers_stage, fsdp_mb))
    dp_mb = jnp.where(d.sharding >= 3, dp_mb, 0.0)

    t_f = layers_stage * (lt["fwd"] + comm_f) + log_f
    t_b = compute_mb + tp_mb + cp_mb + ep_mb + dp_mb - t_f
    t_w = layers_stage * lt["weight_grad"]

    # ---- pipeline
    hop_levels = hops_per_level(pp, m_pp)
    # Megatron scatters pipeline messages over the TP group (and gathers them after the hop) even without
    # sequence parallelism (Narayanan et al. 2021, section 4.1): each GPU sends 1/tp of the activation.
    act_pp = mbs * seq / cp * m.hidden * ACT_BYTES / tp
    hop_cost = alpha + act_pp / bw_pp
    t_pipe, t_base, extra_warmup = pipeline_time_s(sched, pp, micro, v, t_f, t_b, t_w, hop_cost, hop_levels,
                                                   m_pp, k_pp)
    steady = micro * (t_f + t_b)

    # ---- once per step: gradient reduction, parameter gather, optimizer
    grad_comm, param_comm = dp_step_comm_s(d.sharding, d.dp_algo, k_dpc, k_dpc_inner, k_dpc_outer,
                                           params_gpu * T.grad_reduce_bytes, params_gpu * T.param_bytes,
                                           alpha, bw)
    n_buckets = jnp.maximum(params_gpu / BUCKET_PARAMS, 1.0)
    overlap_dp = d.overlap >= 1
    # reductions hide under the last microbatch's backward compute, the gather under the first forward's
    bwd_compute = layers_stage * lt["bwd"] + log_b
    fwd_compute = layers_stage * lt["fwd"] + log_f
    dp_step = (exposed_s(grad_comm, bwd_compute, overlap_dp, n_buckets)
               + exposed_s(param_comm, fwd_compute, overlap_dp, n_buckets))
    shard = jnp.prod(k_dpc)
    shard_hsdp = jnp.prod(k_dpc_inner)
    opt_shard = jnp.select([d.sharding == 0, d.sharding == 4], [1.0, shard_hsdp], shard)
    optimizer = params_gpu / opt_shard * ADAM_BYTES_PER_PARAM / (g.hbm_Bps * g.memory_bound)

    # ---- failures: a failed link on any level a group crosses stalls the step for the reroute time
    k_all = jnp.stack([k_tp, k_cp, k_pp, k_dp])
    crossed = jnp.max(spans(k_all), axis=0)
    # stall_per_s depends on placement and transport only, so a grid evaluation computes it once per pair
    stall_per_s = jnp.sum(crossed * net.fail_per_s) * tr.reroute_s[d.transport]
    pre_stall = t_pipe + dp_step + optimizer
    total = pre_stall * (1.0 + stall_per_s)
    stall = total - pre_stall

    # ---- memory (first stage)
    state = (model_state_bytes(dense_p, jnp.where(d.sharding == 4, shard_hsdp, shard), d.sharding, T)
             + model_state_bytes(expert_p, jnp.maximum(jnp.where(d.sharding == 4, shard_hsdp, shard) / ep, 1.0),
                                 d.sharding, T))
    fsdp_buffers = jnp.where(d.sharding >= 3, 2.0 * layer_param_bytes, 0.0)
    in_flight = in_flight_microbatches(sched, pp, micro, v, extra_warmup)
    acts = in_flight * layers_stage * activation_bytes_per_layer(mbs, seq, tp, cp, recompute, m, T)
    logits_mem = jnp.where(pp <= 1.0, 4.0 * mbs * seq * m.vocab / (tp * cp), 0.0)
    memory = state + fsdp_buffers + acts + logits_mem

    # ---- traffic over campus/region links, whole job per step
    xb = net.cross_building
    per_gpu = jnp.sum(xb * coll.bytes_per_level_allreduce(k_dpc, params_gpu * T.grad_reduce_bytes))
    per_gpu += micro * layers_stage * (4.0 + 2.0 * (recompute == 2)) * jnp.sum(
        xb * coll.bytes_per_level_allreduce(k_tp, act)) / 2.0
    per_gpu += micro * layers_stage * 3.0 * (cp - 1.0) * kv_chunk * jnp.max(xb * spans(k_cp))
    per_gpu += micro * layers_stage * m.moe_fraction * 6.0 * moe_alltoall_bytes(tokens_gpu, m) * jnp.sum(
        xb * (m_ep - jnp.concatenate([jnp.ones_like(m_ep[:1]), m_ep[:-1]])) / ep)
    pp_cross = jnp.sum(xb * hop_levels) * micro * 2.0 * act_pp * jnp.where(sched == 2, v, 1.0) * tp * cp * dp
    cross_bytes = per_gpu * T.n_gpus + pp_cross

    # ---- feasibility
    n_check = jnp.where(d.dp == 0, _divides(tp * cp * pp, T.n_gpus), jnp.abs(tp * cp * pp * dp - T.n_gpus) < 0.5)
    interleaved = sched == 2
    dense = m.experts == 0
    bits = [
        ~n_check,
        ~(_divides(tp, m.heads) & _divides(tp, m.kv_heads) & _divides(tp, m.ffn)),
        pp * v > m.layers,
        ~(_divides(dp * mbs, T.gbs) & (micro >= 1.0 - 1e-6)),
        ~_divides(2.0 * cp, seq) & (cp > 1.0),
        memory > g.hbm_bytes,
        ((v > 1.0) & ~interleaved) | (interleaved & ((v <= 1.0) | (pp <= 1.0) | ~_divides(pp, micro))),
        jnp.where(dense, ep > 1.0, ~(_divides(ep, m.experts) & _divides(ep, dp * cp))),
        (tr.bounded[d.transport] > 0) & (T.allow_bounded <= 0),
        ~(_is_int(tp) & _is_int(cp) & _is_int(pp) & _is_int(dp) & _is_int(ep) & _is_int(v) & _is_int(mbs)
          & _is_int(d.qps) & _is_int(d.channels)),
    ]
    violation = sum(jnp.where(b, 1 << i, 0) for i, b in enumerate(bits)).astype(jnp.int32)
    feasible = violation == 0

    breakdown = Breakdown(
        compute=micro * compute_mb,
        tp=micro * tp_mb,
        cp=micro * cp_mb,
        ep=micro * ep_mb,
        pp_p2p=t_pipe - t_base,
        bubble=t_base - steady,
        dp_exposed=micro * dp_mb + dp_step,
        optimizer=optimizer,
        stall=stall,
    )
    flops = model_flops_per_sequence(seq, m) * T.gbs
    safe_total = jnp.where(feasible, total, 1.0)
    return Cost(
        step_time_s=jnp.where(feasible, total, jnp.inf),
        tokens_per_s=jnp.where(feasible, T.gbs * seq / safe_total, 0.0),
        mfu=jnp.where(feasible, flops / (safe_total * T.n_gpus * g.peak_flops), 0.0),
        memory_bytes=memory,
        breakdown=breakdown,
        cross_building_bytes=cross_bytes,
        feasible=feasible,
        violation=violation,
        group_levels=k_all,
        raw_step_time_s=total,
    )

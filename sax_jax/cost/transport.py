"""Network-layer technology -> effective per-GPU bandwidth and latency at each level.

Three effects on levels above the node (NVLink is untouched):
  * load balancing: ECMP hashes F flows onto M equal-cost paths; the busiest path sets the pace, so the
    efficiency is max(lambda, 1) / E[max load] with lambda = F/M and E[max] = sum_k 1 - P(X <= k)^M,
    X ~ Poisson(lambda) (balls into bins; M=8, lambda=1 -> ~0.39). More QPs per connection raise F. On a
    multi-plane level a flow stays on one plane: M = paths x planes (``plane_paths``).
    Packet spraying reaches 1 - sqrt(2 M ln M / P) for P packets in flight (max of M binomial loads,
    normal approximation). A level with deterministic routing (InfiniBand, rail-optimized fabrics) has
    paths = 1 and no collisions.
  * loss recovery: go-back-N resends the whole window per loss, eta = (1-p)/(1 + p W0) with
    W0 = bandwidth x RTT / MTU packets in flight (collapses on long lossy links); selective repeat resends
    only the lost packet, eta = 1-p, plus a tail of E[R] = sum_r 1 - (1 - p^r)^n extra rounds (n packets; the
    expected maximum of n iid geometric counts, Eisenberg 2008, "On the expectation of the maximum of IID
    geometric random variables", Stat. Probab. Lett. 78(2)); bounded loss (DBLP, OptiReduce, MLT) drops up to a
    tolerated fraction at the deadline instead of retransmitting, for data-parallel gradient traffic only
    (``gradient_factors``): everything else it carries is recovered by selective repeat.
  * microbursts (cost/bursts.py): every round of one window pays the expected recovery time of a burst that
    overflows the port's buffer, per loss-recovery scheme; a pipeline hop is one flow, every synchronous
    collective's round (TP, CP, EP, data-parallel gradients and parameters) pays the slowest of its flows.
  * in-flight window: throughput <= window / RTT (NCCL keeps ~4 MiB per channel in flight).
  * TCP (NCCL's socket transport, the usual choice over a WAN without RDMA): each socket's congestion window
    settles where loss p allows, rate <= MSS / RTT x sqrt(3/2) / sqrt(p) (Mathis, Semke, Mahdavi & Ott 1997,
    "The macroscopic behavior of the TCP congestion avoidance algorithm"); a GPU's connection runs `channels` x
    `qps` sockets, so the level's cap is min(window / RTT, sockets x that rate).
Concurrency: a level-L unit's uplink carries size x bandwidth / oversubscription; when only 1/c of its GPUs
send across at once (pipeline boundaries) each gets up to c times the oversubscribed share.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import bursts

ECMP_MAX_TERMS = 160  # terms of the E[max load] series: covers lambda up to MAX_QPS = 64 (mean + 10 sd)
SR_MAX_ROUNDS = 8
MATHIS_C = 1.2247448713915890  # sqrt(3/2): periodic-loss constant of the Mathis et al. 1997 formula


def ecmp_efficiency(flows, paths):
    """Elementwise over paths (any shape)."""
    paths = jnp.asarray(paths)
    lam = (flows / paths)[..., None]
    k = jnp.arange(ECMP_MAX_TERMS, dtype=paths.dtype)
    # Poisson(lam) CDF by summing the pmf exp(k ln lam - lam - ln k!): cheaper to compile than gammaincc
    log_pmf = k * jnp.log(lam) - lam - jnp.cumsum(jnp.log(jnp.maximum(k, 1.0)))
    cdf = jnp.minimum(jnp.cumsum(jnp.exp(log_pmf), axis=-1), 1.0)
    e_max = jnp.sum(1.0 - cdf ** paths[..., None], axis=-1)
    return jnp.minimum(1.0, jnp.maximum(lam[..., 0], 1.0) / jnp.maximum(e_max, 1e-9))


def spray_efficiency(paths, packets_in_flight):
    x = 2.0 * paths * jnp.log(paths) / jnp.maximum(packets_in_flight, 1.0)
    return jnp.clip(1.0 - jnp.sqrt(jnp.maximum(x, 1e-30)), 0.05, 1.0)


def expected_extra_rounds(p, n_packets):
    """Expected retransmission rounds until all n packets arrive, loss p per packet (elementwise)."""
    p = jnp.asarray(p)
    r = jnp.arange(1, SR_MAX_ROUNDS + 1, dtype=p.dtype)
    # 1 - (1 - p^r)^n as -expm1(n log1p(-p^r)): exact in float32 when n p^r is tiny
    return jnp.sum(-jnp.expm1(jnp.asarray(n_packets)[..., None] * jnp.log1p(-(p[..., None] ** r))), axis=-1)


MAX_QPS = 64


def plane_paths(net):
    """[L] bins ECMP hashes flows into: the level's paths on each of its planes. A multi-plane NIC (one 800G port
    split into 8 x 100G links to independent planes) binds each flow to one plane, so P planes are P times as many
    bins. Packet spraying is unaffected: the NIC stripes packets evenly over its planes (deterministically, as MRC
    does), so its balance is that of the paths within one plane."""
    return net.paths * net.planes


def ecmp_table(net):
    """ECMP efficiency for 1..MAX_QPS flows per connection at each level: [MAX_QPS, L].

    Depends only on the system, so under vmap it is computed once per call; designs interpolate in it.
    """
    q = jnp.arange(1, MAX_QPS + 1, dtype=net.paths.dtype)
    # one connection per path (M senders share M paths), each split into q flows: F = q M, lambda = q
    paths = plane_paths(net)
    return ecmp_efficiency(q[:, None] * paths[None, :], paths[None, :])


def _interp_rows(table, x):
    """Linear interpolation of table rows at fractional row position x - 1 (x in [1, rows])."""
    pos = jnp.clip(x - 1.0, 0.0, table.shape[0] - 1.0)
    lo = jnp.floor(pos).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, table.shape[0] - 1)
    w = pos - lo
    return table[lo] * (1.0 - w) + table[hi] * w


class Round(NamedTuple):
    """One round of a GPU's traffic at each level [L]: one window of the transport through the GPU's port."""
    rtt_s: jax.Array
    window_bytes: jax.Array
    packets: jax.Array  # in the round
    in_flight_packets: jax.Array  # W = min(packets, C r / MTU)
    packet_s: jax.Array  # MTU / C
    send_s: jax.Array  # window / C
    burst: bursts.BurstRound


def _round(net, tr, t, channels) -> Round:
    window_bytes = jnp.where(channels > 0, channels * tr.window_bytes[t] / tr.channels[t], tr.window_bytes[t])
    rtt_s = 2.0 * net.latency_s
    port = jnp.maximum(net.bw_Bps, 1.0)
    packets = jnp.maximum(window_bytes / net.mtu_bytes, 1.0)
    send_s = window_bytes / port
    burst = bursts.burst_round(net.burst_rate_per_s, net.burst_duration_s, net.burst_overload, net.buffer_bytes,
                               port, send_s + rtt_s)
    return Round(rtt_s=rtt_s, window_bytes=window_bytes, packets=packets,
                 in_flight_packets=jnp.minimum(packets, port * rtt_s / net.mtu_bytes),
                 packet_s=net.mtu_bytes / port, send_s=send_s, burst=burst)


def _of(x, t):
    """Transport t's value of a per-transport field (a scalar default of hand-built params applies to all)."""
    x = jnp.asarray(x)
    return x[t] if x.ndim else x


def _reliable_burst_delay_s(tr, t, rd: Round):
    """Recovery time of a hit round for delivered-for-sure traffic: go-back-N or selective repeat (bounded-loss and
    TCP transports recover such traffic selectively)."""
    sr = bursts.selective_repeat_delay_s(rd.burst, rd.rtt_s, rd.packets, rd.packet_s, _of(tr.rto_s, t))
    gbn = bursts.go_back_n_delay_s(rd.burst, rd.rtt_s, rd.in_flight_packets, rd.packet_s, _of(tr.rto_s, t))
    return jnp.where(tr.go_back_n[t] > 0, gbn, sr), sr


class Reliable(NamedTuple):
    """Per level [L], traffic that must arrive (everything but the gradient traffic of a bounded-loss transport):
    what a round of one flow costs before and during a microburst."""
    lb_eta: jax.Array  # load balancing x loss-recovery efficiency
    tail_s: jax.Array  # retransmission tail per round
    cap_Bps: jax.Array  # window cap
    send_s: jax.Array  # one window through the port
    pi: jax.Array  # probability that a round of one flow is hit by a burst
    delay_s: jax.Array  # recovery time of a hit round (go-back-N or selective repeat)
    net_level: jax.Array  # True above the NVLink domain


def reliable_parts(net, tr, ecmp_tab, t, qps, channels) -> Reliable:
    """For transport index t with qps flows/connection and `channels` in-flight windows (0: the transport's own)."""
    lb, eta, tail_s, cap_Bps, rd = _loss_free_parts(net, tr, ecmp_tab, t, qps, channels)
    return Reliable(lb_eta=lb * eta, tail_s=tail_s, cap_Bps=cap_Bps, send_s=rd.send_s, pi=rd.burst.pi,
                    delay_s=_reliable_burst_delay_s(tr, t, rd)[0], net_level=net.is_network > 0)


def one_flow_factors(rel: Reliable):
    """Per level [L]: bandwidth factor, extra latency (s) and window cap (B/s) of one flow of reliable traffic (a
    pipeline hop): it waits pi x d per round. ``collective_factors`` charges a synchronous collective its slowest
    flow."""
    factor, extra_s = _burst_factors(rel, rel.pi * rel.delay_s)
    return factor, extra_s, jnp.where(rel.net_level, rel.cap_Bps, jnp.inf)


def level_factors(net, tr, ecmp_tab, t, qps, channels):
    """``one_flow_factors`` of transport index t with qps flows/connection and `channels` windows."""
    return one_flow_factors(reliable_parts(net, tr, ecmp_tab, t, qps, channels))


def collective_factors(rel: Reliable, flows):
    """(bandwidth factor, extra latency) per level [L] of a synchronous collective whose every round waits for the
    slowest of ``flows`` [L] flows crossing the level: E[max] = d (1 - (1 - pi)^flows) (cost/bursts.py)."""
    return _burst_factors(rel, bursts.expected_max_delay_s(rel.pi, rel.delay_s, flows))


def _burst_factors(rel: Reliable, burst_s):
    factor = rel.lb_eta * (rel.send_s / (rel.send_s + burst_s))
    return (jnp.where(rel.net_level, factor, 1.0), jnp.where(rel.net_level, rel.tail_s + burst_s, 0.0))


def _loss_free_parts(net, tr, ecmp_tab, t, qps, channels):
    """Load balancing, reliable loss recovery (eta and the retransmission tail), the window cap and the round."""
    qps = jnp.where(qps > 0, qps, tr.qps[t])
    rd = _round(net, tr, t, channels)
    window_bytes, rtt_s = rd.window_bytes, rd.rtt_s
    in_flight_bytes = net.bw_Bps * rtt_s
    # The loss tail is charged per collective step as extra latency, so it counts the packets of one window (the
    # data the transport keeps in flight by its own setting), not min(window, bandwidth x RTT): with the latter a
    # faster link put more packets in flight, raised the expected retransmission rounds and made a step SLOWER
    # (a 16k-GPU ring pays (n-1) of these latencies; found by the monotonicity property test).
    packets = rd.packets
    # spraying balances the packets that the M senders sharing the M paths keep in flight together
    lb = jnp.where(tr.ecmp[t] > 0, _interp_rows(ecmp_tab, qps),
                   spray_efficiency(net.paths, net.paths * window_bytes / net.mtu_bytes))
    p = net.loss
    eta_gbn = (1.0 - p) / (1.0 + p * in_flight_bytes / net.mtu_bytes)
    eta = jnp.where(tr.go_back_n[t] > 0, eta_gbn, 1.0 - p)
    tail_s = jnp.where(p <= 0, 0.0, expected_extra_rounds(p, packets) * rtt_s)
    cap_Bps = window_bytes / jnp.maximum(rtt_s, 1e-12)
    sockets = jnp.where(channels > 0, channels, tr.channels[t]) * qps
    per_socket_Bps = net.mtu_bytes * MATHIS_C / (jnp.maximum(rtt_s, 1e-12) * jnp.sqrt(jnp.maximum(p, 1e-30)))
    cap_Bps = jnp.where((tr.tcp[t] > 0) & (p > 0), jnp.minimum(cap_Bps, sockets * per_socket_Bps), cap_Bps)
    return lb, eta, tail_s, cap_Bps, rd


class GradientPath(NamedTuple):
    factor: jax.Array  # [L] bandwidth factor of gradient traffic (phase-averaged time per byte)
    extra_latency_s: jax.Array  # [L] per round, phase-averaged
    dropped: jax.Array  # expected fraction of the gradient dropped (training average); 0 unless bounded loss
    variance_increase: jax.Array  # training average of d / (1 - d) (cost/bursts.py)
    round_loss: jax.Array  # [L] per-round loss probability of one flow from microbursts (cost/bursts.py)


def gradient_factors(net, tr, ecmp_tab, t, qps, channels, flows, spanned, variance_tolerance) -> GradientPath:
    """The data-parallel gradient traffic of transport t: the slowest of ``flows`` [L] per round of a burst, and
    for a bounded-loss transport the drops its loss schedule allows, phase by phase (weights tr.phase_weight[t]),
    capped by the scenario's variance tolerance and split evenly over the ``spanned`` [L] network levels so that
    the whole gradient loses at most the tolerated fraction. Time per byte and latency are averaged over the phases
    (the training-time average of every linear collective term)."""
    lb, eta_rel, tail_rel, _, rd = _loss_free_parts(net, tr, ecmp_tab, t, qps, channels)
    rel_s, sr_s = _reliable_burst_delay_s(tr, t, rd)
    net_level = net.is_network > 0
    bounded = tr.bounded[t] > 0
    # reliable transports: one phase, the maximum over the flows of a round
    max_rel_s = bursts.expected_max_delay_s(rd.burst.pi, rel_s, flows)
    factor_rel = lb * eta_rel * (rd.send_s / (rd.send_s + max_rel_s))
    # bounded loss: tolerated loss per phase [K, 1] and level, within the scenario's tolerance
    on_net = spanned * net_level
    levels = jnp.maximum(jnp.sum(on_net), 1.0)
    wk = jnp.atleast_1d(_of(tr.phase_weight, t))  # [K]
    q = (jnp.minimum(jnp.atleast_1d(_of(tr.phase_loss, t)), bursts.tolerated_loss_cap(variance_tolerance))
         / levels)[:, None]
    w = wk[:, None]
    p = net.loss
    dropped_ok = p <= q  # [K, L]
    eta_k = jnp.where(dropped_ok, 1.0, 1.0 - p)
    tail_k = jnp.where(dropped_ok, 0.0, tail_rel)
    random_dropped = jnp.where(dropped_ok, p, 0.0)
    # bursts may drop what the random loss leaves of the budget, so each level drops at most q
    bl_s, bl_dropped = bursts.bounded_loss_delay_s(rd.burst, sr_s, _of(tr.deadline_s, t), q - random_dropped)
    max_bl_s = bursts.expected_max_delay_s(rd.burst.pi, bl_s, flows)
    factor_k = lb * eta_k * (rd.send_s / (rd.send_s + max_bl_s))
    factor_bl = 1.0 / jnp.sum(w / jnp.maximum(factor_k, 1e-12), axis=0)
    latency_bl = jnp.sum(w * (tail_k + max_bl_s), axis=0)
    drop_kl = (random_dropped + rd.burst.pi * bl_dropped) * on_net
    d_k = -jnp.expm1(jnp.sum(jnp.log1p(-jnp.clip(drop_kl, 0.0, 1.0 - 1e-6)), axis=1))  # 1 - prod(1 - d_L)  [K]
    factor = jnp.where(bounded, factor_bl, factor_rel)
    latency = jnp.where(bounded, latency_bl, tail_rel + max_rel_s)
    return GradientPath(
        factor=jnp.where(net_level, factor, 1.0), extra_latency_s=jnp.where(net_level, latency, 0.0),
        dropped=jnp.where(bounded, jnp.sum(wk * d_k), 0.0),
        variance_increase=jnp.where(bounded, jnp.sum(wk * bursts.variance_increase(d_k)), 0.0),
        round_loss=jnp.where(net_level, rd.burst.pi, 0.0))


def effective_bandwidth(net, bw_factor, cap_Bps, concurrency):
    """Per-GPU bytes/s at each level when 1/concurrency of a unit's GPUs send across it at once."""
    share = jnp.minimum(1.0, concurrency / net.oversub)
    return jnp.minimum(net.bw_Bps * bw_factor * share, cap_Bps)

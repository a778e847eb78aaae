"""Microbursts and per-round tails: what a burst at a switch port costs one round of communication, per loss-recovery
scheme, and what a synchronous round over many flows pays (the slowest of them).

Burst model (per level, at the port a GPU's traffic crosses; Level.burst_*). Bursts arrive as a Poisson process of
rate lam, last an exponential time of mean D and, while one lasts, traffic arrives at rho x the port rate C. Fluid
queue (the on-off fluid model of Anick, Mitra & Sondhi 1982, "Stochastic theory of a data-handling system with
multiple sources", Bell Syst. Tech. J. 61(8), with one source): the buffer Q fills in t_f = Q / ((rho - 1) C) and
overflows iff the burst outlasts t_f:
    p_ovf = exp(-t_f / D)                                     (exponential duration)
By memorylessness the overflow then lasts Exp(D) more, and overflow periods form a Poisson process of rate
lam p_ovf. The number of them that overlap a window of length T is Poisson with mean lam p_ovf (T + D) (the M/G/inf
occupancy argument: a period overlaps the window iff it starts inside it or is in progress at its start), so the
per-round loss probability of a round lasting T is
    pi = 1 - exp(-lam p_ovf (T + D)).
A round that meets an overflow (a "hit") overlaps it for o = D (1 - e^(-T/D)) on average (E[min(Exp(D), T)]);
the full port drops (1 - 1/rho) of its arrivals, so the round loses f = (1 - 1/rho) o / T of its packets, its last
packet with probability o / T (the overflow outlasts the round's sending; uniform start), and every packet that
gets through waited Q / C in the full buffer.

Recovery of a hit round (extra time beyond the loss-free round; r = RTT, tau = MTU / C, n packets in the round,
W = min(n, C r / MTU) in flight, RTO the transport's retransmission timeout for a lost tail):
  * selective repeat (IRN, Mittal et al. SIGCOMM 2018; MRC; SDR-RDMA): learns its losses in an RTT and resends
    only them:                       d_sr  = Q/C + r + f n tau + (o/T) RTO
  * go-back-N (RoCE RC): each loss resends the window behind it; the overflow drops the resent packets too, so the
    sender goes back once per cycle of r + W tau while it lasts and once more after it (the wasted-window argument
    of IRN):                 d_gbn = Q/C + (1 + o / (r + W tau)) (r + W tau) + (o/T) RTO
                                           = Q/C + o + r + W tau + (o/T) RTO
  * bounded loss with a deadline (OptiReduce, Warraich et al. NSDI 2025; MLT, Wang et al. NSDI 2024; DBLP): gradient
    rounds end at most `deadline` past their expected end and proceed without what is missing if the round lost no
    more than the tolerated fraction q:
                                     d_bl  = min(d_sr, Q/C + deadline)  if f <= q,  else d_sr
    and drop f of the round's data when the deadline comes first.
A synchronous round waits for its slowest flow. Each flow's extra time is 0 with probability 1 - pi and d with
probability pi, independently across flows, so the maximum over n flows is d with probability 1 - (1 - pi)^n
(the distribution of the maximum of n iid variables is F^n; David & Nagaraja 2003, "Order Statistics", sec. 2.1):
    E[max over n flows] = d (1 - (1 - pi)^n),
and a collective of R rounds pays R of these in expectation (the rounds are sequential and independent).

Inside the step model (cost/transport.py, context.py) a round is one window of the transport (channels x window
per channel, all channels of a GPU share its port): T = window / C + r. A round's expected wait is charged as extra
latency and as a bandwidth factor (a transfer of S bytes is S / window rounds): a pipeline hop is one flow and pays
pi d; a synchronous collective pays the maximum over the flows one of its rounds sends across the level: a ring
(TP, CP, data-parallel gradients and parameters) the hops that leave a unit of the level below
(``ring_flows_per_level``), an all-to-all (EP) every pair of GPUs in different units of the level below
(``all_to_all_flows_per_level``). Bounded-loss transports drop only data-parallel gradient data: activations,
pipeline and parameter traffic are always delivered. Bursts are charged as time waiting for recovery;
their share of the port's long-run bandwidth (the burst duty lam D (1 - 1/rho)) is not taken from the flow.

The accuracy side of bounded loss: dropping a fraction d of a gradient and rescaling the rest by 1 / (1 - d) keeps
it unbiased (E[m / (1 - d)] = 1 for a keep mask m ~ Bernoulli(1 - d)) and adds Var = g^2 (1/(1 - d) - 1) =
g^2 d / (1 - d) per coordinate: relative extra variance d / (1 - d). The scenario bounds it
(training.gradient_variance_tolerance), which caps the tolerated loss at tol / (1 + tol) whatever the transport's
schedule allows; DBLP-style schedules tolerate less in the critical early phase and at the end (Achille et al.
ICLR 2019, "Critical learning periods in deep networks"; Agarwal et al. MLSys 2021, "Adaptive gradient
communication via critical learning regime identification", Accordion).

All functions are elementwise over arrays (levels, phases, batches) and finite for every input in the spec ranges.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from .placement import ring_hops_per_level

TINY = 1e-30


class BurstRound(NamedTuple):
    """One round of one flow at each level [L] (or any shape)."""
    pi: object  # probability that the round meets a buffer overflow (per-round loss probability)
    lost_fraction: object  # f: fraction of the round's packets lost in a hit round
    tail_lost: object  # o / T: probability that the round's last packet is lost in a hit round
    queue_s: object  # Q / C: wait of the packets that get through the full buffer
    overlap_s: object  # o: expected overlap of the overflow with the round


def overflow_probability(buffer_bytes, overload, port_Bps, duration_s):
    """p_ovf = exp(-Q / ((rho - 1) C D)): the probability that a burst overflows the buffer (0 when rho = 1)."""
    excess = jnp.maximum((overload - 1.0) * port_Bps, TINY)
    p = jnp.exp(-buffer_bytes / (excess * jnp.maximum(duration_s, TINY)))
    return jnp.where(overload > 1.0, p, 0.0)


def round_loss_probability(rate_per_s, p_ovf, round_s, duration_s):
    """pi = 1 - exp(-lam p_ovf (T + D)): a round of T seconds overlaps at least one overflow period."""
    return -jnp.expm1(-rate_per_s * p_ovf * (round_s + duration_s))


def burst_round(rate_per_s, duration_s, overload, buffer_bytes, port_Bps, round_s) -> BurstRound:
    """The burst model of one round of ``round_s`` seconds at a port of ``port_Bps`` (module docstring)."""
    d = jnp.maximum(duration_s, TINY)
    t = jnp.maximum(round_s, TINY)
    p_ovf = overflow_probability(buffer_bytes, overload, port_Bps, d)
    pi = round_loss_probability(rate_per_s, p_ovf, t, d)
    overlap = d * -jnp.expm1(-t / d)  # E[min(Exp(D), T)]
    tail = jnp.clip(overlap / t, 0.0, 1.0)
    lost = (1.0 - 1.0 / jnp.maximum(overload, 1.0)) * tail
    return BurstRound(pi=pi, lost_fraction=lost, tail_lost=tail, queue_s=buffer_bytes / jnp.maximum(port_Bps, TINY),
                      overlap_s=overlap)


def selective_repeat_delay_s(b: BurstRound, rtt_s, packets, packet_s, rto_s):
    """d_sr = Q/C + r + f n tau + (o/T) RTO."""
    return b.queue_s + rtt_s + b.lost_fraction * packets * packet_s + b.tail_lost * rto_s


def go_back_n_delay_s(b: BurstRound, rtt_s, window_packets, packet_s, rto_s):
    """d_gbn = Q/C + (1 + o / (r + W tau)) (r + W tau) + (o/T) RTO = Q/C + o + r + W tau + (o/T) RTO."""
    return b.queue_s + b.overlap_s + rtt_s + window_packets * packet_s + b.tail_lost * rto_s


def bounded_loss_delay_s(b: BurstRound, sr_delay_s, deadline_s, tolerated):
    """d_bl = min(d_sr, Q/C + deadline) if f <= q else d_sr; and the fraction of the round's data dropped."""
    within = b.lost_fraction <= tolerated
    capped = b.queue_s + deadline_s
    delay = jnp.where(within, jnp.minimum(sr_delay_s, capped), sr_delay_s)
    dropped = jnp.where(within & (capped < sr_delay_s), b.lost_fraction, 0.0)
    return delay, dropped


def expected_max_delay_s(pi, delay_s, flows):
    """E[max over n flows] of a delay that is d with probability pi and 0 otherwise: d (1 - (1 - pi)^n)."""
    n = jnp.maximum(flows, 0.0)
    hit_any = -jnp.expm1(n * jnp.log1p(-jnp.minimum(pi, 1.0 - 1e-7)))
    return delay_s * hit_any


def tolerated_loss_cap(variance_tolerance):
    """The largest drop fraction d with d / (1 - d) <= tol: tol / (1 + tol)."""
    return variance_tolerance / (1.0 + variance_tolerance)


def variance_increase(dropped):
    """Relative gradient variance that unbiased rescaling of a fraction ``dropped`` adds: d / (1 - d)."""
    d = jnp.clip(dropped, 0.0, 1.0 - 1e-6)
    return d / (1.0 - d)


# flows of one ring round that cross each level: its hops (a ring's flows are its hops)
ring_flows_per_level = ring_hops_per_level


def all_to_all_flows_per_level(k):
    """[L] flows of one all-to-all round that cross each level: each of the n = prod(k) GPUs sends to every peer at
    once, and m_L - m_(L-1) of its peers (m_L = prod(k[:L+1]) GPUs of the group share its unit of level L) are
    reached through level L and no higher."""
    m = jnp.cumprod(k)
    below = jnp.concatenate([jnp.ones_like(m[:1]), m[:-1]])
    return m[-1] * (m - below)

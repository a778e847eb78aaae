"""Goodput: tokens/s after interruptions, checkpoints and degraded periods (per design, inside the jitted model).

Three ways failures cost training time beyond the stalls already in the step (resilience.stall_term):

* Interruptions end the job; it restarts from the last checkpoint. Rate (per second of wall time)
      lambda = n_gpus x gpu_failures_per_gpu_s + sum_L links_L x link_fail_per_s_L x (1 - survives_L)
  non-network failures (GPU, HBM, host: the Llama 3 run's statistics, specs.Training) plus the hard failures of
  the GPUs' own links that the transport does not survive (RDMA RC: retry timeout -> QP error -> NCCL abort;
  any transport with one plane). links_L = GPUs x [the design's groups cross level L] (resilience.job_links).
* Checkpoints: with checkpoint write time C, restart time R and MTBF M = 1/lambda, the useful fraction of wall
  time at checkpoint interval tau is (Daly 2006, "A higher order estimate of the optimum checkpoint interval for
  restart dumps", FGCS 22(3): T_wall = M e^(R/M) (e^((tau + C)/M) - 1) T_solve / tau, exponential failures,
  failures also during restarts and checkpoints):
      useful = tau / (M e^(R/M) (e^((tau + C)/M) - 1))
  at Daly's optimum tau = sqrt(2CM) [1 + sqrt(C/2M)/3 + (C/2M)/9] - C for C < 2M, else M (first order: Young
  1974, tau = sqrt(2CM)), unless the scenario fixes the interval.
* Degraded periods: a hard failure the transport survives (it sprays over the P planes and stops using the
  failed one, MRC-style) leaves the GPU's NIC at (P - f)/P of its bandwidth until repair, f = 1 failed plane:
  communication slows by P/(P - f). Approximation, conservative: the whole step stretches by P/(P - 1) (only its
  communication does, and only where the failed NIC's traffic sets the pace), so each degraded second loses
  1 - (P - 1)/P = 1/P of a second of training. The job may instead take a checkpoint and restart onto a spare
  (C + R seconds, no lost work), so one event costs min(repair_s / P, C + R) seconds; concurrent failures on
  different NICs are counted as if each slowed the step on its own (conservative again).

Plane switches (Level.switch_failures_per_switch_hour, gpus_per_switch g): each of the job's NICs on a level has one
port on each of the P planes, so the job depends on links_L x P / g plane switches; a failed one takes one plane of
its g NICs at once. For a transport that does not survive, that is an interruption; for one that does, one degraded
event (the synchronous step slows by P/(P-1) however many NICs lost the plane: the slowest sets the pace), costing
min(repair_s / P, C + R) like a link. At a fixed g more planes mean more switches; a switch ASIC of fixed bandwidth
has P times as many ports of 1/P the speed, so g scales with P in practice.

Second failures (f = 2): a NIC that already lost a plane loses another at rate nu (P-1)/P while the first is repaired
(nu = its plane-loss rate: link + P x switch): p2 = 1 - exp(-nu (P-1)/P x repair_s). The step slows by the worst
NIC's P/(P-f), so an event that degraded n NICs (1 for a link, g for a switch) meets f = 2 with probability
1 - (1 - p2)^n (the maximum over its NICs). With P = 2 the NIC has no plane left: an interruption even for a
transport that survives one failure. With P > 2 the step slows by P/(P-2) for the overlap (repair_s / 2 on
average): 1/P more of each second. The job rides an event out (repair_s / P plus the expected second-failure cost)
or swaps onto spares (C + R), whichever costs less; only a ridden-out event has a degraded period.

ETTR (effective training time ratio, Kokolis et al. HPCA 2025, "Revisiting reliability in large-scale machine
learning research clusters") = useful x (1 - degraded loss per second); goodput = tokens/s x ETTR.
All formulas are elementwise and finite for every input (lambda = 0 gives useful = tau / (tau + C) -> 1).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .resilience import job_links, survives

TINY_RATE = 1e-30  # per second: stands in for "no failures" inside the formulas (finite in float32)


class Goodput(NamedTuple):
    interruptions_per_hour: jax.Array  # job-ending failures per hour of wall time
    degraded_fraction: jax.Array  # fraction of wall time running on fewer planes (before any repair)
    checkpoint_interval_s: jax.Array  # the interval used (Daly's optimum unless the scenario fixes one)
    ettr: jax.Array  # effective training time ratio: useful training time / wall time
    goodput_tokens_per_s: jax.Array


def young_interval_s(write_s, mtbf_s):
    """Young 1974, "A first order approximation to the optimum checkpoint interval": sqrt(2 C M)."""
    return jnp.sqrt(2.0 * write_s * mtbf_s)


def daly_interval_s(write_s, mtbf_s):
    """Daly 2006: sqrt(2CM) [1 + sqrt(C/2M)/3 + (C/2M)/9] - C for C < 2M, else M."""
    x = write_s / (2.0 * mtbf_s)
    tau = young_interval_s(write_s, mtbf_s) * (1.0 + jnp.sqrt(x) / 3.0 + x / 9.0) - write_s
    return jnp.where(x < 1.0, tau, mtbf_s)


def useful_fraction(interval_s, write_s, restart_s, rate_per_s):
    """Daly 2006: tau / (M e^(R/M) (e^((tau + C)/M) - 1)), written with lambda = 1/M so that lambda -> 0 is exact:
    tau lambda / (e^(R lambda) expm1((tau + C) lambda))."""
    lam = jnp.maximum(rate_per_s, TINY_RATE)
    return interval_s * lam / (jnp.exp(restart_s * lam) * jnp.expm1((interval_s + write_s) * lam))


def degradation_slowdown(planes, failed_planes=1.0):
    """Communication slowdown of a NIC with ``failed_planes`` of its ``planes`` down: P / (P - f)."""
    return planes / jnp.maximum(planes - failed_planes, 1e-9)


def second_failure_probability(nic_plane_loss_per_s, planes, repair_s):
    """p2 = 1 - exp(-nu (P-1)/P R): another plane of a degraded NIC fails before the first is repaired."""
    return -jnp.expm1(-nic_plane_loss_per_s * (planes - 1.0) / jnp.maximum(planes, 1.0) * repair_s)


def goodput(ctx, d, params, tokens_per_s) -> Goodput:
    net, tr, train = params.net, params.transport, params.train
    links = job_links(ctx, net, train.n_gpus)  # [L] NICs the job depends on per level
    planes = jnp.maximum(net.planes, 1.0)
    switches = links * planes / jnp.maximum(net.gpus_per_switch, 1.0)
    link_events = links * net.link_fail_per_s  # [L] per second
    switch_events = switches * net.switch_fail_per_s
    hard_per_s = link_events + switch_events  # failure events, each taking one plane of >= 1 NIC
    ok = survives(net, tr, d.transport)  # [L]
    write_s, restart_s = train.checkpoint_write_s, train.restart_s
    swap_s = write_s + restart_s  # checkpoint, restart onto spares: no degraded period, no lost work
    # second failures (f = 2): a first event degrades 1 NIC (link) or g NICs (switch); the step slows by the worst
    # NIC's P/(P-f), so an event meets f = 2 with probability 1 - (1 - p2)^nics (the maximum over its NICs)
    nic_nu = net.link_fail_per_s + planes * net.switch_fail_per_s
    p2 = second_failure_probability(nic_nu, planes, net.repair_s)
    g = jnp.minimum(net.gpus_per_switch, jnp.maximum(links, 1.0))
    p2_link = p2
    p2_switch = -jnp.expm1(g * jnp.log1p(-jnp.minimum(p2, 1.0 - 1e-7)))
    p2_event = (link_events * p2_link + switch_events * p2_switch) / jnp.maximum(hard_per_s, TINY_RATE)
    dark = planes <= 2.0  # no plane left after two failures: the NIC is gone, the job is interrupted
    # riding an event out costs 1/P of each second until the repair, plus 1/P more over the overlap with a second
    # failure (P/(P-1) -> P/(P-2), repair / 2 on average) or, with two planes, an interruption (counted as one more
    # restart here and in the interruption rate below); the job swaps onto spares when that is cheaper
    lost_per_degraded_s = 1.0 - 1.0 / degradation_slowdown(planes)  # = 1/P
    extra_per_s = 1.0 / degradation_slowdown(planes) - 1.0 / degradation_slowdown(planes, 2.0)  # = 1/P
    second_cost_s = jnp.where(dark, swap_s, jnp.minimum(0.5 * net.repair_s * extra_per_s, swap_s))
    ride_s = net.repair_s * lost_per_degraded_s + p2_event * second_cost_s
    ride_out = ride_s <= swap_s
    degraded_per_s = hard_per_s * ok  # [L]
    dark_per_s = degraded_per_s * ride_out * p2_event * dark
    rate_per_s = (train.n_gpus * train.gpu_fail_per_s + jnp.sum(hard_per_s * (1.0 - ok)) + jnp.sum(dark_per_s))
    mtbf_s = 1.0 / jnp.maximum(rate_per_s, TINY_RATE)
    interval_s = jnp.where(train.checkpoint_interval_s > 0, train.checkpoint_interval_s,
                           daly_interval_s(write_s, mtbf_s))
    useful = useful_fraction(interval_s, write_s, restart_s, rate_per_s)

    # degraded periods: each survived failure loses min(ride_s, C + R) seconds (the dark part is in useful above)
    cost_s = jnp.where(ride_out, ride_s - jnp.where(dark, p2_event * second_cost_s, 0.0), swap_s)
    lost = jnp.clip(jnp.sum(degraded_per_s * cost_s), 0.0, 1.0)
    degraded = jnp.clip(jnp.sum(degraded_per_s * jnp.where(ride_out, net.repair_s, 0.0)), 0.0, 1.0)
    ettr = jnp.clip(useful, 0.0, 1.0) * (1.0 - lost)
    return Goodput(interruptions_per_hour=rate_per_s * 3600.0, degraded_fraction=degraded,
                   checkpoint_interval_s=interval_s, ettr=ettr, goodput_tokens_per_s=tokens_per_s * ettr)

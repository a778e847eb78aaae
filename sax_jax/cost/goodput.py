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


def goodput(ctx, d, params, tokens_per_s) -> Goodput:
    net, tr, train = params.net, params.transport, params.train
    hard_per_s = job_links(ctx, net, train.n_gpus) * net.link_fail_per_s  # [L]
    ok = survives(net, tr, d.transport)  # [L]
    rate_per_s = train.n_gpus * train.gpu_fail_per_s + jnp.sum(hard_per_s * (1.0 - ok))
    write_s, restart_s = train.checkpoint_write_s, train.restart_s
    mtbf_s = 1.0 / jnp.maximum(rate_per_s, TINY_RATE)
    interval_s = jnp.where(train.checkpoint_interval_s > 0, train.checkpoint_interval_s,
                           daly_interval_s(write_s, mtbf_s))
    useful = useful_fraction(interval_s, write_s, restart_s, rate_per_s)

    # degraded periods: each survived failure loses min(repair / P, C + R) seconds (1/P of each degraded second)
    planes = jnp.maximum(net.planes, 1.0)
    lost_per_degraded_s = 1.0 - 1.0 / degradation_slowdown(planes)  # = 1/P
    ride_out = net.repair_s * lost_per_degraded_s <= write_s + restart_s
    cost_s = jnp.where(ride_out, net.repair_s * lost_per_degraded_s, write_s + restart_s)
    degraded_per_s = hard_per_s * ok  # [L]
    lost = jnp.clip(jnp.sum(degraded_per_s * cost_s), 0.0, 1.0)
    degraded = jnp.clip(jnp.sum(degraded_per_s * jnp.where(ride_out, net.repair_s, 0.0)), 0.0, 1.0)
    ettr = jnp.clip(useful, 0.0, 1.0) * (1.0 - lost)
    return Goodput(interruptions_per_hour=rate_per_s * 3600.0, degraded_fraction=degraded,
                   checkpoint_interval_s=interval_s, ettr=ettr, goodput_tokens_per_s=tokens_per_s * ettr)

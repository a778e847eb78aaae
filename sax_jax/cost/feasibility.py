"""Feasibility of a design point as one table of named checks. The violation bit of a check is its position in
``CHECKS``; the messages, the bit mask, the count of violations and the search penalty all derive from it.

A predicate gets ``(params, design, context, memory_bytes)`` and returns True where the design VIOLATES it.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp

from ..space import Schedule
from .stages import EXTRA_PIPELINE_UNITS

TOL = 1e-4


def divides(a, b):
    q = b / a
    return jnp.abs(q - jnp.round(q)) < TOL


def is_int(x):
    return jnp.abs(x - jnp.round(x)) < TOL


class Check(NamedTuple):
    name: str
    message: str
    violated: Callable


def _gpu_count(p, d, c, mem):
    n = p.train.n_gpus
    ok = jnp.where(d.dp == 0, divides(d.tp * d.cp * d.pp, n), jnp.abs(d.tp * d.cp * d.pp * c.dp - n) < 0.5)
    return ~ok


def _schedule(p, d, c, mem):
    interleaved = d.schedule == Schedule.INTERLEAVED
    return (((d.vpp > 1.0) & ~interleaved)
            | (interleaved & ((d.vpp <= 1.0) | (d.pp <= 1.0) | ~divides(d.pp, c.microbatches))))


def _experts(p, d, c, mem):
    # folded (Training.expert_tensor_parallel > 0): etp x ep must divide the stage's tp x cp x dp ranks
    within = jnp.where(p.train.etp > 0, divides(d.ep * p.train.etp, d.tp * c.dp * d.cp), divides(d.ep, c.dp * d.cp))
    return jnp.where(p.model.experts == 0, d.ep > 1.0, ~(divides(d.ep, p.model.experts) & within))


def _nonintegral(p, d, c, mem):
    ok = (is_int(d.tp) & is_int(d.cp) & is_int(d.pp) & is_int(c.dp) & is_int(d.ep) & is_int(d.vpp)
          & is_int(d.mbs) & is_int(d.qps) & is_int(d.channels) & is_int(d.sync_every) & is_int(d.xb_planes))
    return ~ok


CHECKS = (
    Check("GPU_COUNT", "tp x cp x pp x dp does not equal the number of GPUs", _gpu_count),
    Check("TP_DIVIDES", "tp does not divide the attention heads, the kv heads and the ffn size",
          lambda p, d, c, mem: ~(divides(d.tp, p.model.heads) & divides(d.tp, p.model.kv_heads)
                                 & divides(d.tp, p.model.ffn))),
    Check("LAYERS_PP", "pp x vpp exceeds the number of layers (+ 2 with pp > 1: embedding and loss as pipeline units)",
          lambda p, d, c, mem: d.pp * d.vpp > p.model.layers + jnp.where(d.pp > 1.0, EXTRA_PIPELINE_UNITS, 0.0)),
    Check("BATCH", "dp x mbs does not divide the global batch",
          lambda p, d, c, mem: ~(divides(c.dp * d.mbs, p.train.gbs) & (c.microbatches >= 1.0 - 1e-6))),
    Check("SEQ_CP", "2 x cp does not divide the sequence length (load-balanced causal context parallelism)",
          lambda p, d, c, mem: ~divides(2.0 * d.cp, c.seq) & (d.cp > 1.0)),
    Check("MEMORY", "memory per GPU exceeds the usable HBM", lambda p, d, c, mem: mem > p.gpu.hbm_bytes),
    Check("SCHEDULE", "vpp > 1 needs the interleaved schedule, which needs vpp > 1, pp > 1 and a number of "
                      "microbatches divisible by pp", _schedule),
    Check("EXPERTS", "ep must be 1 for a dense model, divide the experts and divide dp x cp (with MoE parallel "
                     "folding: etp x ep must divide tp x cp x dp)", _experts),
    Check("TRANSPORT", "bounded-loss transport changes training semantics and the scenario does not allow it",
          lambda p, d, c, mem: (p.transport.bounded[d.transport] > 0) & (p.train.allow_bounded <= 0)),
    Check("NONINTEGER", "a parallelism or batch axis is not a whole number", _nonintegral),
)
VIOLATIONS = tuple((c.name, c.message) for c in CHECKS)
VIOLATION_BIT = {c.name: 1 << i for i, c in enumerate(CHECKS)}


def violation_mask(params, d, ctx, memory_bytes):
    """int32 bit mask of the violated checks (0 = feasible)."""
    bits = [c.violated(params, d, ctx, memory_bytes) for c in CHECKS]
    return sum(jnp.where(b, 1 << i, 0) for i, b in enumerate(bits)).astype(jnp.int32)


def violation_count(mask):
    """Number of violated checks in a mask (any shape), as float32."""
    return sum(((mask >> i) & 1).astype(jnp.float32) for i in range(len(CHECKS)))


def violation_reasons(code: int) -> list:
    return [c.message for i, c in enumerate(CHECKS) if int(code) >> i & 1]

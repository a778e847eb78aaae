"""Failures: a failed link on any level a parallel group crosses stalls the step for the transport's reroute
time (ECMP + routing convergence: seconds; multipath transports: microseconds). Expected stall per second of
work = sum over crossed levels of failure rate x reroute time, so the step stretches by that fraction."""
import jax.numpy as jnp

from .placement import spans
from .terms import Term


def crossed_levels(ctx):
    """[L] 1 where any of the tp, cp, pp, dp groups crosses the level."""
    k_all = jnp.stack([ctx.tp.participants, ctx.cp.participants, ctx.pp.participants, ctx.dp_group.participants])
    return jnp.max(spans(k_all), axis=0)


def stall_term(ctx, d, net, transport, work_s):
    """(Term, step seconds with stalls) for a step whose failure-free time is ``work_s``."""
    # stall_per_s depends on placement and transport only, so a grid evaluation computes it once per pair
    stall_per_s = jnp.sum(crossed_levels(ctx) * net.fail_per_s) * transport.reroute_s[d.transport]
    total_s = work_s * (1.0 + stall_per_s)
    return Term(step_s=total_s - work_s), total_s

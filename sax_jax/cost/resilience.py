"""Failures inside the step: a failed link on any level a parallel group crosses stalls the step for the
transport's reroute time (ECMP + routing convergence: seconds; multipath transports: microseconds). Expected stall
per second of work = sum over crossed levels of event rate x reroute time, so the step stretches by that fraction.

Events that stall (and do not end the job): failures the fabric routes around (the level's failure_rate_per_hour,
per job), flaps of the GPUs' own links (down and up again; per link-hour, one link per GPU and crossed level) and
hard failures of those links and of plane switches that the transport survives by leaving the failed plane
(``survives``). Hard failures
it does not survive end the job: they are interruptions (cost/goodput.py), not stalls.
"""
import jax.numpy as jnp

from .placement import spans
from .terms import Term


def crossed_levels(ctx):
    """[L] 1 where any of the tp, cp, pp, dp groups crosses the level."""
    k_all = jnp.stack([ctx.tp.participants, ctx.cp.participants, ctx.pp.participants, ctx.dp_group.participants])
    return jnp.max(spans(k_all), axis=0)


def job_links(ctx, net, n_gpus):
    """[L] GPU links the job depends on per level: one per GPU at each network level its groups cross."""
    return n_gpus * crossed_levels(ctx) * net.is_network


def survives(net, transport, t):
    """[L] 1 where a hard failure of a GPU's link leaves the job running: the transport moves the connection to the
    other planes, so it needs one (planes > 1)."""
    return transport.survives[t] * (net.planes > 1)


def stall_term(ctx, d, net, transport, work_s, n_gpus):
    """(Term, step seconds with stalls) for a step whose failure-free time is ``work_s``."""
    links = job_links(ctx, net, n_gpus)
    ok = survives(net, transport, d.transport)
    switches = links * jnp.maximum(net.planes, 1.0) / jnp.maximum(net.gpus_per_switch, 1.0)
    own_links_per_s = (links * (net.link_flap_per_s + net.link_fail_per_s * ok)
                       + switches * net.switch_fail_per_s * ok)  # survived plane-switch failures stall too
    # stall_per_s depends on placement and transport only, so a grid evaluation computes it once per pair
    stall_per_s = (jnp.sum(crossed_levels(ctx) * net.fail_per_s + own_links_per_s)
                   * transport.reroute_s[d.transport])
    total_s = work_s * (1.0 + stall_per_s)
    return Term(step_s=total_s - work_s), total_s

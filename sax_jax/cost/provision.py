"""Infrastructure co-design: the cross-building network as design axes, and what the infrastructure costs.

Axes ``xb_bandwidth_GBps``, ``xb_planes`` and ``xb_oversub`` set the per-GPU bandwidth (per direction, before the
NCCL bus efficiency the system file's levels also get), the NIC planes and the oversubscription of every
cross-building level (campus, region); 0 ("auto") keeps the system file's value, so a scenario without these
axes evaluates exactly as before. They replace the levels' numbers before anything else reads them, so every
term (collectives, transport efficiency, failures and planes, microbursts) sees the provisioned network, and a
sweep over them stays one jitted program: the values are array leaves of the design like any other axis. They are
applied only when the scenario's space lists a value other than "auto" for one of them (params.Topology.provisioned,
static): a per-design network makes every system-only table (ECMP, transport rounds, microbursts) per design too,
~6x the memory of a flat batch, which scenarios without these axes should not pay (`sax eval --set xb_...` on such
a scenario is refused: design_args.resolve_design).

Prices (``Scenario.prices``, e.g. configs/prices/example.yaml; all 0 without a prices file):

    network_usd_per_hour = sum over cross-building levels L of
                             n_gpus x bandwidth_GBps_L / oversubscription_L x link_usd_per_GBps_hour   (uplink capacity)
                           + n_gpus x planes_L x port_usd_per_hour                                      (NIC ports, optics)
    cost_usd_per_hour    = n_gpus x gpu_usd_per_hour + network_usd_per_hour
    train_cost_usd       = cost_usd_per_hour x time_to_target_s / 3600

The uplink capacity of a unit of level L is its GPUs x their per-GPU bandwidth / oversubscription
(transport.effective_bandwidth's model), summed over the units: n_gpus x B / o.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class PriceP(NamedTuple):
    gpu_usd_per_hour: jnp.ndarray | float = 0.0
    link_usd_per_GBps_hour: jnp.ndarray | float = 0.0
    port_usd_per_hour: jnp.ndarray | float = 0.0


def provisioned(net, d):
    """``net`` with the design's cross-building bandwidth, planes and oversubscription where they are set (> 0)."""
    xb = net.cross_building > 0

    def pick(axis_value, field):
        return jnp.where(xb & (axis_value > 0), axis_value, field)

    # xb_bandwidth_GBps is 0 where unset: pick's condition tests the axis, not the product
    xb_bw = jnp.where(xb & (d.xb_bandwidth_GBps > 0), d.xb_bandwidth_GBps * 1e9 * net.bus, net.bw_Bps)
    return net._replace(bw_Bps=xb_bw,
                        planes=pick(d.xb_planes, net.planes), oversub=pick(d.xb_oversub, net.oversub))


def network_usd_per_hour(net, prices, n_gpus):
    """Hourly price of the cross-building network as provisioned (see the module docstring)."""
    xb = net.cross_building
    gbps = net.bw_Bps / (1e9 * net.bus)
    capacity = n_gpus * gbps / jnp.maximum(net.oversub, 1.0)
    return jnp.sum(xb * (capacity * prices.link_usd_per_GBps_hour + n_gpus * net.planes * prices.port_usd_per_hour))

"""Expert placement in the jitted model: the host tables (sax_jax/moe/tables.py) indexed by the design's
expert_placement code and ep.

Without an activation trace ``Params.experts`` is None and nothing here runs: the model keeps its constant
``moe.locality`` and ``moe.imbalance`` (today's numbers, bit for bit). With one, the design's (policy, ep) gives
the placement's max/mean rank load (the slowest receiver of the all-to-all and the busiest GPU's expert compute),
its expert slots per rank (redundant replicas: memory and gradient traffic) and, per level of the hierarchy, the
share of a token's top_k dispatches that cross it.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class ExpertTables(NamedTuple):
    ep_values: jnp.ndarray  # [E] ep options the tables were computed for
    outside: jnp.ndarray  # [P, E, 1 + n_gran, n_block] distinct GPUs (row 0), nodes of 2^a ranks (row 1 + a)
    #                       outside the source's own 2^b block, / top_k
    imbalance: jnp.ndarray  # [P, E] max/mean rank load
    slots: jnp.ndarray  # [P, E] expert slots per rank / (experts / ep)


def _index(tables: ExpertTables, d):
    """(policy code, ep index): the listed ep nearest to the design's (a value between options takes the nearest)."""
    e = jnp.argmin(jnp.abs(tables.ep_values - d.ep))
    return d.expert_placement, e


def placed_params(params, d):
    """Params with the design's placement imbalance and expert slots in the model (unchanged without a trace)."""
    tables = params.experts
    if tables is None:
        return params
    p, e = _index(tables, d)
    model = params.model._replace(imbalance=tables.imbalance[p, e], expert_slots=tables.slots[p, e])
    return params._replace(model=model)


def _at_log2(row, m):
    """row[log2 m], linear between the tabulated powers of two."""
    x = jnp.clip(jnp.log2(jnp.maximum(m, 1.0)), 0.0, row.shape[-1] - 1.0)
    lo = jnp.floor(x).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, row.shape[-1] - 1)
    t = x - lo
    return row[lo] * (1.0 - t) + row[hi] * t


def level_fractions(tables: ExpertTables, d, members):
    """[L] share of a token's top_k dispatches crossing each level, for an EP group with ``members`` [L] EP ranks
    inside one unit of each level (m_L). Level 0 (NVLink) carries one copy per destination GPU other than the
    source: sent there directly, or forwarded inside the destination node after the RDMA hop; a network level
    carries one copy per destination node outside the source's unit below it and inside its unit at this level
    (DeepEP's per-node dedup; tables.py)."""
    p, e = _index(tables, d)
    ep = tables.ep_values[e]
    m = jnp.clip(members, 1.0, ep)
    g = jnp.clip(jnp.round(jnp.log2(m[0])), 0, tables.outside.shape[2] - 2).astype(jnp.int32)
    per_gpu, per_node = tables.outside[p, e, 0], tables.outside[p, e, 1 + g]
    node_total = _at_log2(per_node, m[0])
    level0 = _at_log2(per_gpu, 1.0) - node_total
    below = jnp.concatenate([m[:1], m[:-1]])
    net = _at_log2(per_node, below) - _at_log2(per_node, m)
    return jnp.concatenate([level0[None], net[1:]])

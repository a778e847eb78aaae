"""Folding one evaluated block into the running top-k and Pareto fronts (per device, inside ``shard_map``).

The block arrives as grid-shaped arrays (``neg_key``: the objective negated, so larger is better; ``neg_t``:
the step time negated; one array per front metric), -inf/+inf where a design is infeasible or outside the swept
range. Work here is a handful of passes over the block, whatever its feasibility:

- top-k: the k groups of consecutive designs with the best maximum key (a streaming group maximum, then a
  ``lax.top_k`` over groups), skipped when no key beats the running k-th; their designs, from every device,
  are all-gathered and merged.
- fronts: one pass looks every point up in both fronts' staircase tables (``pareto.dominated``). When more
  than ``CANDIDATES`` survive on some device (a block of a region the fronts have not seen yet), the block's own
  staircase (a scatter-min per front, any feasible design of the range being a valid dominator) filters them
  again. Survivors are then taken ``CANDIDATES`` at a time, fastest first (best groups, then the best points
  in them), all-gathered and merged into both fronts; only if some are left are the rest re-filtered by the
  merged fronts.

Every merge is order-independent (ties broken by the global design index), so the result does not depend on
block size, device count or interruption.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from . import pareto, topk

CANDIDATES = 2048  # front candidates per device per merge round


def _flat(x):
    # Flattened only here, behind the caller's cond: a reshape beside the grid would be fused into it, and
    # XLA's CPU emitter then rebuilds the many-dimensional index of every operand from the flat one (7x slower).
    return x.reshape(-1)


def _lookup_live(neg_t, ys, tabs):
    """Feasible points not strictly dominated in at least one front's tables."""
    t = -neg_t
    live = jnp.zeros(t.shape, bool)
    for tab, y in zip(tabs, ys):
        live = live | ~pareto.dominated(tab, t, y)
    return jnp.isfinite(t) & live


def _count(mask):
    return jnp.sum(mask, dtype=jnp.int32)


def _best_groups(score, m: int, group: int):
    """Positions of every point of the ``m`` groups of ``group`` consecutive points with the largest maximum
    score (equal maxima: lowest group first). The m best points lie in them: a point outside is beaten by the
    maximum of each of those m groups (larger, or equal and at a lower position). A group maximum is one
    streaming pass; ``top_k`` over all points is a partial sort, several times slower on CPU."""
    _, gid = jax.lax.top_k(score.reshape(-1, group).max(axis=1), m)
    return (gid[:, None] * group + jnp.arange(group, dtype=gid.dtype)[None, :]).reshape(-1)


def fold_block(top, fronts, neg_key, neg_t, ys, index_of, gather, anywhere, group: int = 1, distinct: bool = False):
    """(top, fronts) after the block. index_of: local flat positions -> global (hi, lo); gather: all-gather
    over devices (tiled); anywhere: a boolean scalar reduced with "any" over devices (uniform control flow);
    group: designs per group for the two-level selections (a divisor of the block, e.g. the last grid axes);
    distinct: the top-k keeps the k best distinct objective values (``topk.merge``)."""
    neg_key, neg_t, ys = _flat(neg_key), _flat(neg_t), [_flat(y) for y in ys]
    n = neg_t.shape[0]
    k = min(top.key.shape[0], n)
    n_cand = min(CANDIDATES, n)

    def fastest(score, m):
        """(values, positions) of the m largest scores; ties in any order (callers do not depend on it)."""
        if group > 1 and n // group > m:
            pos = _best_groups(score, m, group)
            vals, j = jax.lax.top_k(score[pos], m)
            return vals, pos[j]
        return jax.lax.top_k(score, m)

    def merge_top(top):
        # all points of the k best groups: the merge orders them by (key, index), so ties resolve exactly
        if distinct:
            _, pos = topk.distinct_best(neg_key, k)
        elif group > 1 and n // group > k:
            pos = _best_groups(neg_key, k, group)
        else:
            _, pos = jax.lax.top_k(neg_key, k)  # equal keys: lowest position (= lowest index) first
        hi, lo = index_of(pos)
        return topk.merge(top, topk.TopK(gather(topk.clean_key(-neg_key[pos], True)), gather(hi), gather(lo)),
                          distinct)

    top = jax.lax.cond(anywhere(jnp.max(neg_key) >= -top.key[-1]), merge_top, lambda top: top, top)

    front_tabs = [(fr.y_below_t, fr.t_below_y) for fr in fronts]
    live = _lookup_live(neg_t, ys, front_tabs)
    n_live = _count(live)
    crowded = anywhere(n_live > n_cand)

    def with_block_tables(live):
        out = []
        for (y_below_t, t_below_y), y in zip(front_tabs, ys):
            out.append((jnp.minimum(y_below_t, pareto.block_y_below_t(-neg_t, y, live)), t_below_y))
        return out

    # Tables leave a cond as buffers: computed next to the lookup, XLA would fuse their cumulative minimum into
    # it and redo it for every point.
    tabs = jax.lax.cond(crowded, with_block_tables, lambda live: front_tabs, live)
    live, n_live = jax.lax.cond(crowded, lambda lv: (lambda m: (m, _count(m)))(_lookup_live(neg_t, ys, tabs)),
                                lambda lv: (lv, n_live), live)

    def merge_round(carry):
        fronts, live, n_live = carry
        vals, ids = fastest(jnp.where(live, neg_t, -jnp.inf), n_cand)  # fastest survivors first
        take = live[ids]
        hi, lo = index_of(ids)
        t_c, hi_c, lo_c = gather(jnp.where(take, -vals, jnp.inf)), gather(hi), gather(lo)
        fronts = tuple(pareto.merge(fr, t_c, gather(y[ids]), hi_c, lo_c) for fr, y in zip(fronts, ys))
        live = live.at[ids].set(False)
        n_live = n_live - _count(take)
        tabs = [(fr.y_below_t, fr.t_below_y) for fr in fronts]
        live, n_live = jax.lax.cond(anywhere(n_live > 0),
                                    lambda lv: (lambda m: (m, _count(m)))(lv & _lookup_live(neg_t, ys, tabs)),
                                    lambda lv: (lv, n_live), live)
        return fronts, live, n_live

    fronts, _, _ = jax.lax.while_loop(lambda c: anywhere(c[2] > 0), merge_round, (tuple(fronts), live, n_live))
    return top, fronts

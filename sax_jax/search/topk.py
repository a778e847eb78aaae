"""Running top-k on device: the k smallest keys, ties broken by the (hi, lo) global design index.

The result is a pure function of the set of (key, index) pairs seen, not of the order or grouping in which
chunks arrive, so sharded, resumed and single-device sweeps agree exactly. Keys are the objective oriented so
that smaller is better (+inf for infeasible or out-of-range points, which never appear in the result).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

INT_MAX = np.iinfo(np.int32).max


class TopK(NamedTuple):
    key: jnp.ndarray  # [k] float32, ascending
    hi: jnp.ndarray  # [k] int32
    lo: jnp.ndarray  # [k] int32


def init(k: int) -> TopK:
    return TopK(np.full(k, np.inf, np.float32), np.full(k, INT_MAX, np.int32), np.full(k, INT_MAX, np.int32))


def distinct_best(neg_key, k: int):
    """(values, positions) of the k largest distinct values of ``neg_key`` (a flat array), each at its lowest
    position; -inf where fewer exist. Two streaming passes per value (a maximum below the previous one, then
    the first position holding it): for ``--distinct`` sweeps, where top_k's ties would fill k slots with one
    value."""
    def step(i, carry):
        vals, pos, bound = carry
        v = jnp.max(jnp.where(neg_key < bound, neg_key, -jnp.inf))
        return vals.at[i].set(v), pos.at[i].set(jnp.argmax(neg_key == v).astype(jnp.int32)), v

    # the initial carry takes its type from neg_key: under shard_map a per-device value, like the loop's output
    like = lambda x: jnp.where(True, x, neg_key[0].astype(x.dtype))  # noqa: E731
    init_ = (like(jnp.full((k,), -jnp.inf, neg_key.dtype)), like(jnp.zeros((k,), jnp.int32)),
             like(jnp.asarray(jnp.inf, neg_key.dtype)))
    vals, pos, _ = jax.lax.fori_loop(0, k, step, init_)
    return vals, pos


def clean_key(key, ok):
    """+inf where not ok or NaN (searches treat NaN/inf as worst)."""
    return jnp.where(ok & ~jnp.isnan(key), key, jnp.inf)


def merge(state: TopK, cand: TopK, distinct: bool = False) -> TopK:
    """k best of the union; ``cand`` may hold any number of entries (e.g. gathered from every device).

    distinct: keep one design per key value (the lowest index), i.e. the k best distinct objective values.
    Still order-independent: a value once pushed out by k better ones can never come back."""
    k = state.key.shape[0]
    key, hi, lo = (jnp.concatenate([a, b]) for a, b in zip(state, cand))
    key, hi, lo = jax.lax.sort((key, hi, lo), num_keys=3)
    # a design seen twice (several candidate groups may overlap) counts once; with ``distinct``, a key value too
    same = key[1:] == key[:-1]
    if not distinct:
        same = same & (hi[1:] == hi[:-1]) & (lo[1:] == lo[:-1])
    dup = jnp.concatenate([jnp.zeros((1,), bool), same])
    if key.shape[0] > 1:
        key = jnp.where(dup, jnp.inf, key)
        hi, lo = jnp.where(dup, INT_MAX, hi), jnp.where(dup, INT_MAX, lo)
        key, hi, lo = jax.lax.sort((key, hi, lo), num_keys=3)
    return TopK(key[:k], hi[:k], lo[:k])

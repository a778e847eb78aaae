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


def clean_key(key, ok):
    """+inf where not ok or NaN (searches treat NaN/inf as worst)."""
    return jnp.where(ok & ~jnp.isnan(key), key, jnp.inf)


def merge(state: TopK, cand: TopK) -> TopK:
    """k best of the union; ``cand`` may hold any number of entries (e.g. gathered from every device)."""
    k = state.key.shape[0]
    key, hi, lo = (jnp.concatenate([a, b]) for a, b in zip(state, cand))
    key, hi, lo = jax.lax.sort((key, hi, lo), num_keys=3)
    # a design seen twice (several candidate groups may overlap) counts once
    dup = jnp.concatenate([jnp.zeros((1,), bool), (hi[1:] == hi[:-1]) & (lo[1:] == lo[:-1]) & (key[1:] == key[:-1])])
    if key.shape[0] > 1:
        key = jnp.where(dup, jnp.inf, key)
        hi, lo = jnp.where(dup, INT_MAX, hi), jnp.where(dup, INT_MAX, lo)
        key, hi, lo = jax.lax.sort((key, hi, lo), num_keys=3)
    return TopK(key[:k], hi[:k], lo[:k])

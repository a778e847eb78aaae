"""Rank layout -> which hierarchy levels each parallel group spans, and how many of its members sit together.

Axes are laid out inner to outer in the placement order; axis a of size n_a has stride s_a (product of the
sizes of the axes inside it). A level-L unit of U_L GPUs holds m_L = clamp(U_L / s_a, 1, n_a) members of one
group, so the group's hierarchical collective has k_L = m_L / m_(L-1) participants at level L (DESIGN.md 5).
"""
import jax.numpy as jnp

SPAN_EPS = 1e-6  # k_L above 1 + eps means the group crosses level L


def layout_strides(sizes, inner):
    """sizes: [4] (tp, cp, pp, dp); inner: [4, 4] with inner[a, b] = 1 when b is laid out inside a."""
    return jnp.prod(jnp.where(inner > 0, sizes[None, :], 1.0), axis=1)


def group_members(n, stride, unit_gpus):
    """Members of one group inside a unit of each level (m) and participants per level (k); both [L]."""
    m = jnp.clip(unit_gpus / stride, 1.0, n)
    m_below = jnp.concatenate([jnp.ones_like(m[:1]), m[:-1]])
    return m, m / m_below


def spans(k):
    """1.0 where the group crosses a level, else 0.0 (as float so it can weight costs)."""
    return (k > 1.0 + SPAN_EPS).astype(k.dtype)


def ring_hops_per_level(k):
    """[L] hops of one lap of a ring laid out level by level that cross each level and no higher: prod(k[L:]) -
    prod(k[L+1:]) hops leave a unit of level L-1 through level L (when prod(k[L:]) > 1); they sum to n. E.g. 2
    buildings x 256 nodes x 8 GPUs: 2 at the cross-building level, 510 at the building fabric, 3,584 in the nodes."""
    suffix = jnp.cumprod(k[::-1])[::-1]  # suffix[L] = prod(k[L:])
    leaving = jnp.where(suffix > 1.0 + SPAN_EPS, suffix, 0.0)
    return leaving - jnp.concatenate([leaving[1:], jnp.zeros_like(leaving[:1])])


def ring_hop_weights(k):
    """[L] share of a ring's hops at each level (ring_hops_per_level / n; 0 for one GPU)."""
    n = jnp.prod(k)
    return jnp.where(n > 1.0 + SPAN_EPS, ring_hops_per_level(k) / jnp.maximum(n, 1.0), 0.0)


def hops_per_level(n, m):
    """Pipeline hops of a linear chain of n members crossing exactly level L: n/m_(L-1) - n/m_L (sum n-1)."""
    m_below = jnp.concatenate([jnp.ones_like(m[:1]), m[:-1]])
    return n / m_below - n / m

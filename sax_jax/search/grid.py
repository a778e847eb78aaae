"""Grid (broadcast) evaluation of a contiguous block of the mixed-radix design space.

A block of the flat index range whose length is a multiple of ``inner_n = prod(radices[split:])`` and whose
start is aligned to it is an outer product: ``rows`` consecutive combinations of the outer axes
(``AXES[:split]``) times *every* option of each inner axis. Instead of decoding each point and vmapping the
model over a flat batch, the block is evaluated as ``vmap(outer rows) o vmap(inner axis 1) o ... o
vmap(inner axis n)`` of the same one-point model ``cost.step_time``. JAX's batching then computes every
intermediate only over the axes it depends on: layer compute times, for instance, depend on tp, cp, mbs and
not on the transport or the overlap flags, so they are computed once per (tp, cp, mbs) instead of once per
design. The results are bit-identical to the flat evaluation (same element-wise ops); the row-major flattening
of the output is exactly the flat index order (last axis fastest), so position p of a block is design
``start + p``.

Nothing here knows the model's formulas: the model is still the single ``step_time`` function, vmapped.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from ..cost import step_time
from ..space import AXES, Design

IDX_BITS = 30  # a global design index is carried on device as (hi, lo) int32 with lo < 2**30
IDX_MASK = (1 << IDX_BITS) - 1
MAX_BLOCK = 1 << 29  # positions inside one block (summed with lo < 2**30 they stay below 2**31)


@dataclasses.dataclass(frozen=True)
class GridLayout:
    split: int  # AXES[:split] are outer (decoded per row), AXES[split:] inner (full grids)
    inner_axes: tuple  # indices of inner axes with more than one option (vmapped)
    inner_n: int  # designs per row = prod(radices[split:])

    def shape(self, radices) -> tuple:
        return tuple(radices[i] for i in self.inner_axes)


def choose_layout(radices, inner_max: int) -> GridLayout:
    """The deepest split whose inner grid holds at most ``inner_max`` designs (at least the last axis)."""
    split = len(radices)
    while split > 0 and math.prod(radices[split - 1:]) <= inner_max:
        split -= 1
    split = min(split, len(radices) - 1)
    inner_axes = tuple(i for i in range(split, len(radices)) if radices[i] > 1)
    return GridLayout(split=split, inner_axes=inner_axes, inner_n=int(math.prod(radices[split:])))


def option_tables(space):
    """Per-axis option values as host numpy arrays in the model's dtypes (numeric float32, codes int32)."""
    return space.host_tables()


def grid_costs(params, space, layout: GridLayout, base_digits, row0, rows: int):
    """Cost of ``rows`` consecutive rows starting at row ``row0`` after the block whose digits are base_digits.

    base_digits: int32 [n_axes] digits of the (row-aligned) block start; row0: int32 scalar (may be traced).
    Returns the model's ``Cost`` with leaves of shape [rows, *radices of the vmapped inner axes, ...]; the
    row-major order of the leading dims is the flat index order.
    """
    tables = option_tables(space)
    offsets = (row0 + jnp.arange(rows, dtype=jnp.int32)) * jnp.int32(layout.inner_n)
    outer, _ = space.decode_from(base_digits, offsets)  # inner digits of these indices are all 0
    inner = set(layout.inner_axes)

    def level(pos, vals):
        if pos == len(AXES):
            return step_time(params, Design(*vals))
        if pos < layout.split:
            return level(pos + 1, vals)
        if pos not in inner:  # a single option: a constant, folded at compile time
            return level(pos + 1, vals[:pos] + [jnp.asarray(tables[pos][0])] + vals[pos + 1:])
        return jax.vmap(lambda v: level(pos + 1, vals[:pos] + [v] + vals[pos + 1:]))(jnp.asarray(tables[pos]))

    def row(*outer_leaves):
        return level(0, list(outer_leaves) + [None] * (len(AXES) - len(outer_leaves)))

    if layout.split > 0:
        return jax.vmap(row)(*[getattr(outer, ax) for ax in AXES[:layout.split]])
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (rows,) + x.shape), row())


def positions(layout: GridLayout, radices, rows: int):
    """int32 [rows, *inner]: position of each grid point inside the rows (flat index order)."""
    shape = (rows,) + layout.shape(radices)
    return jnp.arange(math.prod(shape), dtype=jnp.int32).reshape(shape)


def split_index(index: int) -> tuple:
    return index >> IDX_BITS, index & IDX_MASK


def join_index(hi, lo) -> int:
    return (int(hi) << IDX_BITS) | int(lo)


def global_index(start_hi, start_lo, pos):
    """(hi, lo) of start + pos on device, start = (start_hi, start_lo), 0 <= pos < MAX_BLOCK."""
    lo = start_lo + pos
    return start_hi + (lo >> IDX_BITS), lo & IDX_MASK

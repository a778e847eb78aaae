"""Searches at sweep speed: a search point is a *sub-grid* of designs, evaluated like a block of the sweep.

A flat batch of unrelated designs shares nothing: every design recomputes its layer kernel times, placement and
collectives. The sweep is ~13x cheaper per design because ``grid.grid_costs`` vmaps the one-point model axis by
axis, so each sub-expression is computed once per combination of the axes it depends on. Here the searches get
the same economy: the axes split into **outer** ones (``AXES[:split]``: tp, cp, pp, ..., the knobs the search
moves) and **inner** ones (the last axes: schedule, sharding, dp_algo, overlap, ...). A search point is one
choice of the outer digits; its fitness is the best penalized fitness over *every* combination of the inner
options, found exactly by the nested vmap of ``cost.step_time`` (the sweep's path), and its reported design
is that best combination. The search then moves in the outer space only (``inner_n`` times smaller), and each
point costs ``inner_n`` designs of the budget.

Everything stays inside one jitted function of (params, outer tables, outer digits): a population of B points is
evaluated in chunks of ``chunk`` points (``lax.map``), so device memory is set by the chunk, and the population's
own arrays grow linearly in B.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..cost import step_time
from ..cost.feasibility import violation_count
from ..space import AXES, Design, axis_dtype

CPU_BLOCK = 1 << 17  # designs per chunk of a population evaluation (lax.map step) on CPU
ACCEL_BLOCK = 1 << 22  # on accelerators (scaled by device memory in ``block_designs``)
MIN_POINTS = 1024  # a search of ``budget`` designs evaluates at least this many sub-grids (else: flat)
MAX_INNER = 1 << 14  # designs per sub-grid at most (larger ones leave the search too few points to move)


def block_designs(device=None) -> int:
    """Designs per evaluation chunk: CPU_BLOCK on CPU; on an accelerator ACCEL_BLOCK per 80 GB of memory
    (a chunk holds ~100 float32 intermediates per design at most, so 2**22 designs stay under 2 GB)."""
    device = device or jax.devices()[0]
    if device.platform == "cpu":
        return CPU_BLOCK
    try:
        mem = device.memory_stats().get("bytes_limit", 80e9)
    except Exception:  # noqa: BLE001 (backends without memory stats)
        mem = 80e9
    return int(ACCEL_BLOCK * max(1, 2 ** int(np.floor(np.log2(max(mem / 80e9, 1.0))))))


def choose_split(radices, inner_max: int) -> int:
    """The smallest split (most inner axes) whose inner grid holds at most ``inner_max`` designs, keeping at
    least two outer axes with more than one option (the search needs something to move)."""
    n = len(radices)
    split = n
    while split > 0 and math.prod(radices[split - 1:]) <= inner_max:
        split -= 1
    movable = [i for i, r in enumerate(radices) if r > 1]
    if len(movable) >= 2:
        split = max(split, movable[1] + 1)
    return min(split, n)


def inner_for_budget(budget: int) -> int:
    """Designs per sub-grid for a budget: at least MIN_POINTS points, at most MAX_INNER designs each."""
    return int(max(1, min(MAX_INNER, budget // MIN_POINTS)))


@dataclasses.dataclass(frozen=True)
class Spec:
    """Static description of a sub-grid problem (hashable: it keys the compiled evaluator)."""
    split: int
    inner_values: tuple  # per inner axis (AXES[split:]): option values in problem digit order
    objective: str  # genome.objective_kind: "step", "goodput", "target" (time to the target loss) or "cost"

    @property
    def inner_radices(self) -> tuple:
        return tuple(len(v) for v in self.inner_values)

    @property
    def inner_n(self) -> int:
        return int(math.prod(self.inner_radices))


def _subgrid(params, spec: Spec, outer_leaves):
    """(fitness, step time, cost) over the inner grid of one outer point: leaves shaped [*inner radices]."""
    split = spec.split

    def level(pos, vals):
        if pos == len(AXES):
            return step_time(params, Design(*vals))
        tab = spec.inner_values[pos - split]
        const = jnp.asarray(np.asarray(tab, axis_dtype(AXES[pos])))
        if len(tab) == 1:  # a single option: a constant, folded at compile time
            return jax.tree_util.tree_map(lambda x: x[None], level(pos + 1, vals + [const[0]]))
        return jax.vmap(lambda v: level(pos + 1, vals + [v]))(const)

    return level(split, list(outer_leaves))


def best_of_subgrid(params, spec: Spec, outer_leaves):
    """(fitness, step time, flat inner index) of the best design of one outer point's sub-grid.

    The fitness is ``genome.penalized_fitness`` of the chosen design (minus log ETTR under the goodput
    objective), but the choice costs no logarithm per design: a feasible design's fitness is log(time), so the
    best feasible one is the fastest; with none feasible, the point's best is the design with the fewest
    violated checks and, among those, the smallest raw time x memory excess (INFEASIBLE + violations +
    log(time x excess) is exactly its penalized fitness; a lexicographic choice instead of the sum's, which
    only reorders infeasible designs). Ties: the lowest inner index.
    """
    from .genome import INFEASIBLE, PER_VIOLATION
    cost = _subgrid(params, spec, outer_leaves)
    flat = lambda x: x.reshape(-1)  # noqa: E731
    raw = jnp.maximum(flat(cost.raw_step_time_s), 1e-30)
    if spec.objective != "step":  # log(step / ETTR) = -log(goodput) + const
        raw = raw / jnp.maximum(flat(cost.ettr), 1e-30)
    if spec.objective in ("target", "cost"):  # time to the target loss: x tokens multiplier
        raw = raw * jnp.maximum(flat(cost.tokens_multiplier), 1e-30)
    if spec.objective == "cost":  # its price: x USD per hour
        raw = raw * jnp.maximum(flat(cost.cost_usd_per_hour), 1e-30)
    feasible = flat(cost.feasible)
    nviol = violation_count(flat(cost.violation))
    excess = raw * jnp.maximum(flat(cost.memory_bytes) / params.gpu.hbm_bytes, 1.0)
    # ONE reduction over the grid (each reduction of a fused grid is a fusion that evaluates the model again):
    # an unsigned key whose order is (feasible by time; then infeasible by violations, then time x excess).
    # Positive float32 bit patterns order like the floats and stay below 2**31.
    bits = lambda x: jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)  # noqa: E731
    bad = (jnp.uint32(1 << 31) + (jnp.minimum(nviol, 31).astype(jnp.uint32) << 26)
           + (bits(jnp.minimum(excess, 3e38)) >> 6))
    i = jnp.argmin(jnp.where(feasible, bits(raw), bad))
    f = jnp.where(feasible[i], jnp.log(raw[i]), INFEASIBLE + PER_VIOLATION * nviol[i] + jnp.log(excess[i]))
    return f, flat(cost.step_time_s)[i], i.astype(jnp.int32)


@functools.lru_cache(maxsize=64)
def fitness_fn(spec: Spec, chunk_points: int):
    """A ``Problem.fitness_fn`` over outer digits: (aux, digits [B, split]) -> (fitness [B], time [B],
    inner index [B]). aux = (params, outer tables). Cached per spec, so equal problems share one compile."""

    def fn(aux, digits):
        params, tables = aux
        outer = [tab[digits[..., a]] for a, tab in enumerate(tables)]

        def one(leaves):
            return best_of_subgrid(params, spec, leaves)

        b = digits.shape[0]

        # jnp's jitted helpers would be re-batched at every nested vmap level; inlined, tracing is faster
        # (same primitives, same numbers; see exhaustive._build_step). Only around the model: under disable_jit a
        # lax.scan runs as a Python loop, so the scan below would be unrolled into one copy of the model per chunk
        # (compile time linear in the chunks: 6.9 s for one chunk, 21.5 s for 3, 42.8 s for 5 on 2 CPU cores)
        def batch(o):
            with jax.disable_jit():
                return jax.vmap(one)(o)

        if b <= chunk_points:
            return batch(outer)
        # chunks of chunk_points under a scan (padded with copies of the first point, dropped after): memory is set
        # by the chunk. (lax.map's batch_size compiles the model a second time for the remainder.)
        n = -(-b // chunk_points)
        pad = n * chunk_points - b
        xs = [jnp.concatenate([x, jnp.broadcast_to(x[:1], (pad,) + x.shape[1:])]).reshape(
            (n, chunk_points) + x.shape[1:]) for x in outer]
        _, ys = jax.lax.scan(lambda c, o: (c, batch(o)), None, xs)
        return tuple(y.reshape((n * chunk_points,) + y.shape[2:])[:b] for y in ys)

    fn.__name__ = fn.__qualname__ = f"subgrid_fitness_{spec.split}"
    return fn


def inner_digits(spec: Spec, index) -> np.ndarray:
    """Flat inner index -> inner digits (problem order), row-major like the nested vmap."""
    return np.asarray(np.unravel_index(int(index), spec.inner_radices), np.int32)

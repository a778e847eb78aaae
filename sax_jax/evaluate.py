"""THE jit(vmap(step_time)) boundary. Model code never jits; searches and sweeps call through here.

``Evaluator`` compiles once per (scenario shapes, batch size); a second call with the same shapes does not
retrace. Params are passed as arguments (not closed over) so swapping hardware numbers needs no recompile.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .cost import Cost, step_time
from .params import build_params
from .space import AXES, NUMERIC_AXES, Design, add_digits

TRACE_COUNT = {"batched": 0}


def _batched(params, design):
    TRACE_COUNT["batched"] += 1  # runs at trace time only: counts compilations
    return jax.vmap(step_time, in_axes=(None, 0))(params, design)


evaluate_batch = jax.jit(_batched)


def as_batch(design: Design) -> Design:
    """Scalar leaves -> batch of one; cast leaves to the model's dtypes."""
    leaves = []
    for ax in AXES:
        x = jnp.asarray(getattr(design, ax))
        x = x.astype(jnp.float32 if ax in NUMERIC_AXES else jnp.int32)
        leaves.append(x[None] if x.ndim == 0 else x)
    return Design(*leaves)


def evaluate(scenario, designs: Design, params=None) -> Cost:
    """Cost of a batch (or a single design) of the scenario; arrays over the batch."""
    params = build_params(scenario) if params is None else params
    batch = as_batch(designs)
    return evaluate_batch(params, batch)


_PARAMS: dict = {}


def _params_cached(scenario):
    key = scenario.fingerprint
    if key not in _PARAMS:
        _PARAMS[key] = build_params(scenario)
    return _PARAMS[key]


def evaluate_one(scenario, design: Design) -> dict:
    """Host dict of one design's cost (python floats)."""
    cost = evaluate(scenario, design, _params_cached(scenario))
    return cost_to_dict(cost, 0)


def cost_to_dict(cost: Cost, i: int) -> dict:
    get = lambda x: np.asarray(x)[i]  # noqa: E731
    out = {
        "step_time_s": float(get(cost.step_time_s)),
        "tokens_per_s": float(get(cost.tokens_per_s)),
        "mfu": float(get(cost.mfu)),
        "memory_bytes": float(get(cost.memory_bytes)),
        "breakdown": {k: float(get(v)) for k, v in cost.breakdown._asdict().items()},
        "cross_building_bytes": float(get(cost.cross_building_bytes)),
        "feasible": bool(get(cost.feasible)),
        "violation": int(get(cost.violation)),
        "raw_step_time_s": float(get(cost.raw_step_time_s)),
        "group_levels": np.asarray(cost.group_levels)[i].tolist(),
    }
    return out


# Axis groups of the grid evaluator, in radix order: compute/memory axes, network axes, per-point choices.
GRID_GROUPS = (("tp", "cp", "pp", "dp", "ep", "vpp", "mbs", "recompute"),
               ("placement", "transport", "qps", "channels"),
               ("schedule", "sharding", "dp_algo", "overlap"))


class GridEvaluator:
    """Evaluates contiguous blocks of a space's mixed-radix grid with nested vmaps of the same step_time.

    One block = one combination of the outer (compute) axes x every combination of the network and
    per-point axes, in index order. Under nested vmap, JAX batches each intermediate only over the axes it
    depends on, so per-layer compute times are computed once per outer combination and transport factors
    once per network combination instead of once per design: ~10x fewer FLOPs per design than a flat
    vmap over decoded points, with bit-identical results (tests/test_evaluate.py).
    """

    def __init__(self, space):
        self.space = space
        radices = space.radices
        n_outer = len(GRID_GROUPS[0])
        if AXES != sum(GRID_GROUPS, ()):
            raise RuntimeError("GRID_GROUPS must list AXES in radix order")
        self.outer_radices = radices[:n_outer]
        self.block = int(np.prod(radices[n_outer:], dtype=np.int64))
        tables = space._tables()
        self._outer_tables = tables[:n_outer]
        self._groups = []
        start = n_outer
        for group in GRID_GROUPS[1:]:
            stop = start + len(group)
            r = radices[start:stop]
            idx = np.indices(r).reshape(len(r), -1).T
            self._groups.append(tuple(tables[start + k][idx[:, k]] for k in range(len(r))))
            start = stop

    def outer_digits(self, outer_start: int):
        """Host digits of an outer-combination index (Python int, any size)."""
        digits = []
        for r in reversed(self.outer_radices):
            digits.append(outer_start % r)
            outer_start //= r
        return np.asarray(digits[::-1], np.int32)

    def __call__(self, params, outer_base_digits, n_outer: int):
        """Cost of designs [outer_start * block, (outer_start + n_outer) * block), flattened in index order.

        Traceable: call it inside your own jit with n_outer static. Also returns in_range [n_outer] (False
        past the end of the space).
        """
        digits, in_range = add_digits(self.outer_radices, outer_base_digits, jnp.arange(n_outer, dtype=jnp.int32))
        outer = tuple(t[digits[:, k]] for k, t in enumerate(self._outer_tables))

        def one(x1, x2, x3):
            return step_time(params, Design(*x1, *x2, *x3))

        nested = jax.vmap(jax.vmap(jax.vmap(one, in_axes=(None, None, 0)), in_axes=(None, 0, None)),
                          in_axes=(0, None, None))
        cost = nested(outer, *self._groups)
        flat = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[3:]), cost)
        return flat, in_range

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
from .space import AXES, NUMERIC_AXES, Design

TRACE_COUNT = {"batched": 0}


def _batched(params, design):
    TRACE_COUNT["batched"] += 1  # runs at trace time only: counts compilations
    return jax.vmap(step_time, in_axes=(None, 0))(params, design)


evaluate_batch = jax.jit(_batched)


def as_batch(design: Design) -> Design:
    """Scalar leaves -> batch of one; cast leaves to the model's dtypes."""
    leaves = []
    for ax in AXES:
        x = getattr(design, ax)
        dtype = np.float32 if ax in NUMERIC_AXES else np.int32
        # host values stay numpy (one transfer at the jit call); device values are cast on device
        x = x.astype(dtype) if isinstance(x, jax.Array) else np.asarray(x, dtype)
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
    cost = jax.device_get(cost)  # one transfer for the whole tree, not one per leaf
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


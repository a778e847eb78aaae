"""THE jit(vmap(step_time)) boundary. Model code never jits; searches and sweeps call through here.

``Evaluator`` compiles once per (scenario shapes, batch size); a second call with the same shapes does not
retrace. Params are passed as arguments (not closed over) so swapping hardware numbers needs no recompile.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from .cost import Cost, step_time
from .cost.terms import REPORT_FIELDS
from .engine import DEFAULT_ENGINE
from .params import build_params
from .space import AXES, Design, DpAlgo, axis_dtype

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
        dtype = axis_dtype(ax)
        # host values stay numpy (one transfer at the jit call); device values are cast on device
        x = x.astype(dtype) if isinstance(x, jax.Array) else np.asarray(x, dtype)
        leaves.append(x[None] if x.ndim == 0 else x)
    return Design(*leaves)


def evaluate(scenario, designs: Design, params=None) -> Cost:
    """Cost of a batch (or a single design) of the scenario; arrays over the batch."""
    params = build_params(scenario) if params is None else params
    batch = as_batch(designs)
    return evaluate_batch(with_parameter_server(params, batch), batch)


def with_parameter_server(params, batch: Design):
    """``params`` whose static topology carries the sharded parameter server's paths (params.Topology) when a design
    of the batch asks for one that the scenario's space and baselines did not."""
    if params.topology.parameter_server or not np.any(np.asarray(batch.dp_algo) == int(DpAlgo.PS)):
        return params
    return params._replace(topology=dataclasses.replace(params.topology, parameter_server=True))


def evaluate_one(scenario, design: Design, engine=None) -> dict:
    """Host dict of one design's cost (python floats)."""
    cost = evaluate(scenario, design, (engine or DEFAULT_ENGINE).params(scenario))
    return cost_to_dict(cost, 0)


def cost_to_dict(cost: Cost, i: int) -> dict:
    cost = jax.device_get(cost)  # one transfer for the whole tree, not one per leaf
    get = lambda x: np.asarray(x)[i]  # noqa: E731
    kinds = {"feasible": bool, "violation": int}
    out = {}
    for name in REPORT_FIELDS + ("raw_step_time_s",):
        x = getattr(cost, name)
        out[name] = ({k: float(get(v)) for k, v in x._asdict().items()} if name == "breakdown"
                     else kinds.get(name, float)(get(x)))
    out["group_levels"] = np.asarray(cost.group_levels)[i].tolist()
    return out


"""Robust optimum (``sax sweep --robust``): the sweep's best designs re-ranked under uncertain system numbers.

A scenario's latencies, bandwidths, loss and failure rates are nominal values; the real system deviates from
them. ``sample_params`` draws N systems around the nominal one (sample 0 *is* the nominal one, so the sweep's
time is always among the samples), ``evaluate_samples`` evaluates designs x samples as one tensor through the
same ``cost.step_time`` the sweep uses (a vmap over the params' sample axis around the usual vmap over designs),
and ``rank`` orders the designs by their expected and 90th-percentile step time.

The distribution (``DISTRIBUTION``: the sigma of the log of a multiplicative factor, per kind of level; each
level and each sample draws independently):

* latency x lognormal(median 1, sigma): the path can be longer or shorter than assumed;
* bandwidth x exp(-|N(0, sigma)|): never above nominal (the nominal value is the datasheet rate after NCCL's
  bus efficiency: congestion and bad links only take away), below it by ~sigma typically;
* loss rate x lognormal(median 1, sigma), clipped below 0.5 (the valid range is [0, 0.5)); a lossless level
  stays lossless;
* failure rate x lognormal(median 1, sigma); a level that never fails stays so.

The NVLink node level is not a network and is left at its nominal values. The noise does not change
feasibility (memory does not depend on it); a non-finite time (an infeasible design, a baseline) counts as
infinitely slow and never produces NaN. The p90 is the nearest-rank 90th percentile (numpy's
``method="inverted_cdf"``), which picks a sample and never interpolates between two infinite ones.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .cost import step_time
from .evaluate import as_batch
from .params import Params
from .space import Design, stack

DEFAULT_SAMPLES = 256
DEFAULT_TOP = 100
QUANTILE = 0.9
QUANTITIES = ("latency", "bandwidth", "loss", "failure")
# sigma of log(factor) by kind of level; the cross-building links (campus, region) are the least known
DISTRIBUTION = {
    "node": {"latency": 0.0, "bandwidth": 0.0, "loss": 0.0, "failure": 0.0},
    "inside_building": {"latency": 0.2, "bandwidth": 0.05, "loss": 1.0, "failure": 1.0},
    "cross_building": {"latency": 0.5, "bandwidth": 0.2, "loss": 1.0, "failure": 1.0},
}
# the largest float32 below 0.5: loss must stay in [0, 0.5)
LOSS_MAX = float(np.nextafter(np.float32(0.5), np.float32(0.0)))
# designs x samples per call: 2**18 cells keep the vmapped model's intermediates under 2 GB on CPU; the defaults
# (100 x 256) are one call
MAX_CELLS = 1 << 18


def describe(distribution=DISTRIBUTION) -> dict:
    """The distribution as it goes into ``--json``."""
    return {"latency": "x lognormal(median 1, sigma)", "bandwidth": "x exp(-|N(0, sigma)|) (never above nominal)",
            "loss": "x lognormal(median 1, sigma), clipped to [0, 0.5)",
            "failure": "x lognormal(median 1, sigma)", "sigma": distribution,
            "p90": "nearest-rank (numpy method='inverted_cdf')", "sample_0": "nominal"}


def _level_kinds(topology) -> list:
    return ["node" if not net else "cross_building" if cross else "inside_building"
            for net, cross in zip(topology.is_network, topology.cross_building)]


def sample_params(params: Params, n_samples: int, seed: int, distribution=DISTRIBUTION) -> Params:
    """Params whose every leaf has a leading axis of ``n_samples`` systems; sample 0 is ``params`` itself."""
    net = params.net
    kinds = _level_kinds(params.topology)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(QUANTITIES))
    factor = {}
    for q, key in zip(QUANTITIES, keys):
        sigma = jnp.asarray([distribution[k][q] for k in kinds], net.latency_s.dtype)
        z = jax.random.normal(key, (n_samples, len(kinds)), net.latency_s.dtype).at[0].set(0.0)
        factor[q] = jnp.exp(-jnp.abs(sigma * z)) if q == "bandwidth" else jnp.exp(sigma * z)
    tiled = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n_samples,) + jnp.shape(x)), params)
    noisy = tiled.net._replace(latency_s=net.latency_s * factor["latency"], bw_Bps=net.bw_Bps * factor["bandwidth"],
                               loss=jnp.clip(net.loss * factor["loss"], 0.0, LOSS_MAX),
                               fail_per_s=net.fail_per_s * factor["failure"],
                               link_fail_per_s=net.link_fail_per_s * factor["failure"],
                               link_flap_per_s=net.link_flap_per_s * factor["failure"])
    return tiled._replace(net=noisy)


@jax.jit
def _grid_step_time_s(sampled: Params, designs: Design):
    """[samples, designs] step times: the sweep's model vmapped over designs, then over the params' sample axis."""
    per_system = jax.vmap(step_time, in_axes=(None, 0))
    return jax.vmap(per_system, in_axes=(0, None))(sampled, designs).step_time_s


def n_samples_of(sampled: Params) -> int:
    return int(jax.tree_util.tree_leaves(sampled)[0].shape[0])


def evaluate_samples(sampled: Params, designs: Design, max_cells: int = MAX_CELLS) -> np.ndarray:
    """float64 [samples, designs] step times (inf where infeasible or non-finite). One call when samples x designs
    fits in ``max_cells``; else equal blocks of samples (the last padded by repeating a sample, so one compile)."""
    batch = as_batch(designs)
    n, n_designs = n_samples_of(sampled), int(np.shape(batch.tp)[0])
    block = max(1, min(n, max_cells // n_designs))
    n_blocks = -(-n // block)
    take = np.minimum(np.arange(n_blocks * block), n - 1)
    padded = jax.tree_util.tree_map(lambda x: x[take], sampled) if n_blocks * block != n else sampled
    parts = [_grid_step_time_s(jax.tree_util.tree_map(lambda x: x[b * block:(b + 1) * block], padded), batch)
             for b in range(n_blocks)]
    times = np.concatenate([np.asarray(p, np.float64) for p in jax.device_get(parts)])[:n]
    return np.where(np.isfinite(times), times, np.inf)


def p90(times_s: np.ndarray) -> np.ndarray:
    """Nearest-rank QUANTILE over the sample axis (0): the ceil(q N)-th smallest sample."""
    n = times_s.shape[0]
    return np.sort(times_s, axis=0)[max(0, math.ceil(QUANTILE * n) - 1)]


def rank(times_s: np.ndarray) -> dict:
    """Statistics of a [samples, candidates] matrix whose columns are in nominal order: per candidate the nominal
    (sample 0), mean and p90 times and its 1-based rank by each (ties keep the nominal order)."""
    mean_s, p90_s = times_s.mean(axis=0), p90(times_s)
    ranks = lambda key: np.argsort(np.argsort(key, kind="stable"), kind="stable") + 1  # noqa: E731
    return {"nominal_s": times_s[0], "mean_s": mean_s, "p90_s": p90_s, "mean_rank": ranks(mean_s),
            "p90_rank": ranks(p90_s)}


def robust_ranking(scenario, params: Params, candidates: list, baselines: dict, n_samples: int, seed: int,
                   distribution=DISTRIBUTION) -> dict:
    """The "robust" record of ``sax sweep --json``.

    candidates: design dicts in the sweep's (nominal) order; baselines: {name: single Design}. Candidates and
    baselines are evaluated together, on the same samples, in one batch.
    """
    sampled = sample_params(params, n_samples, seed, distribution)
    designs = [scenario.space.design(d) for d in candidates] + list(baselines.values())
    times = evaluate_samples(sampled, stack(designs))
    k = len(candidates)
    r = rank(times[:, :k])
    recs = [{"design": d, "nominal_rank": i + 1, **{key: _num(v[i]) for key, v in r.items()}}
            for i, d in enumerate(candidates)]
    by = lambda key: min(recs, key=lambda c: c[key]) if recs else None  # noqa: E731
    base = {name: {"nominal_s": float(times[0, k + j]), "mean_s": float(times[:, k + j].mean()),
                   "p90_s": float(p90(times[:, k + j:k + j + 1])[0])} for j, name in enumerate(baselines)}
    return {"samples": n_samples, "seed": seed, "distribution": describe(distribution), "candidates": recs,
            "best_mean": by("mean_rank"), "best_p90": by("p90_rank"), "baselines": base}


def _num(x):
    return int(x) if isinstance(x, np.integer) else float(x)


def neighbourhood(scenario, design: dict, k: int, engine=None) -> list:
    """Candidates for a robust ranking where the space is too large to sweep (`sax search --robust`): the found
    design and every feasible design that differs from it in one axis, fastest first (nominal step time), at
    most ``k``. A search yields one design; its neighbourhood is the set of alternatives a planner could pick
    instead by changing one decision."""
    from .compare import evaluate_designs
    from .search.genome import design_digits, design_dict, neighbours_of, scenario_problem
    problem = scenario_problem(scenario)
    digits = design_digits(problem, scenario.space.design(design))
    around = [design] + [design_dict(problem, row) for row in neighbours_of(problem, digits)]
    costs = evaluate_designs(scenario, [scenario.space.design(d) for d in around], engine)
    ok = sorted((c["step_time_s"], i) for i, c in enumerate(costs) if c["feasible"] and i > 0)
    return [design] + [around[i] for _, i in ok[:max(k - 1, 0)]]

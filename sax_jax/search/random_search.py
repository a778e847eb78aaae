"""Random search: uniform samples of the whole space at a given budget (the floor every search must beat).

Batches of a fixed size are drawn and evaluated under ``lax.scan`` (one batched model call per batch), so a
budget compiles once per batch size. Same seed, same result.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from .genome import (Problem, SearchResult, archive_init, archive_update, complete, fitness_outputs, points_budget,
                     random_digits, safe_fitness)

BATCH = 256


@functools.partial(jax.jit, static_argnames=("fitness_fn", "radices", "batch", "n_batches"))
def _random(aux, key, n_valid, *, fitness_fn, radices, batch, n_batches):
    def step(carry, i):
        key, arc = carry
        key, k = jax.random.split(key)
        digits = random_digits(k, (batch,), radices)
        f, v = fitness_outputs(fitness_fn(aux, digits))
        f = safe_fitness(f)
        valid = i * batch + jnp.arange(batch) < n_valid  # the last batch may be partial
        arc = archive_update(arc, digits, jnp.where(valid, f, jnp.inf), jnp.where(valid, v, jnp.inf))
        return (key, arc), arc.value

    return jax.lax.scan(step, (key, archive_init(len(radices))), jnp.arange(n_batches))


def random_search(problem: Problem, budget: int = 5000, seed: int = 0, batch: int = BATCH) -> SearchResult:
    """Best of ``budget`` uniform samples (designs; for a sub-grid problem, uniform outer points, each the best
    of its sub-grid, ``budget // point_designs`` of them)."""
    t0 = time.perf_counter()
    unit = problem.point_designs
    budget = points_budget(problem, budget)
    batch = min(batch, budget)
    n_batches = -(-budget // batch)
    (_, arc), hist = _random(problem.aux, jax.random.PRNGKey(seed), budget, fitness_fn=problem.fitness_fn,
                             radices=tuple(problem.radices), batch=batch, n_batches=n_batches)
    return SearchResult(method="random", strategy="uniform", digits=complete(problem, np.asarray(arc.digits)),
                        value=float(arc.value), fitness=float(arc.fitness), evaluations=budget * unit,
                        seconds=time.perf_counter() - t0, history=np.asarray(hist), seed=seed,
                        extras={"designs_per_point": unit})

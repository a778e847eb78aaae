"""Island model over the local devices: one evosax population per device under ``shard_map``, with migration.

Each device runs its own island (a DE or GA population of ``popsize``, its own key and archive) through the
same generation step as ``evolution.py``; every ``every`` generations each island sends copies of its
``migrants`` best members to the next island of a ring (``lax.ppermute``), where they replace the worst ones.
Islands explore apart (diversity) and share what works (migration), and a generation evaluates
``islands x popsize`` points with no communication but the migrants.

Like ``evolve``: a uniform sample (a fifth of the budget) seeds the islands (its best points dealt round-robin,
so every island starts from good and different ones), and the best point of all islands is polished at the end.
Determinism: every random number derives from ``seed`` (island i gets the i-th split key), the ring and the
replacement order are fixed (stable sorts), so a fixed seed and device count give the same result.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .evolution import POPSIZE, POPULATION_BASED, _algorithm, generation, segment_plan, strategy_name
from .exhaustive import _shard_map
from .genome import (SearchResult, archive_init, archive_update, complete, digits_to_genome, evaluate_digits,
                     explore, explore_count, multi_polish, points_budget, polish_reserve, random_digits)

AXIS = "island"
MIGRATE_EVERY = 5  # generations between migrations
MIGRANTS = 2  # best members each island sends to the next


def migrate(state, migrants: int, n_islands: int):
    """Inside shard_map: the ``migrants`` best members of this island replace the worst of the next island."""
    order = jnp.argsort(state.fitness, stable=True)  # best first
    best, worst = order[:migrants], order[-migrants:]
    ring = [(i, (i + 1) % n_islands) for i in range(n_islands)]
    pop_in = jax.lax.ppermute(state.population[best], AXIS, ring)
    fit_in = jax.lax.ppermute(state.fitness[best], AXIS, ring)
    return state.replace(population=state.population.at[worst].set(pop_in),
                         fitness=state.fitness.at[worst].set(fit_in))


@functools.lru_cache(maxsize=32)
def _program(devices: tuple, fitness_fn, radices: tuple, strategy: str, popsize: int, total_gens: int,
             every: int, migrants: int, n_epochs: int):
    """jit(shard_map(n_epochs x (every generations, then migration))) over a 1-D mesh of ``devices``; cached,
    so equal searches share one compile. Arguments: aux (replicated), carry (stacked per island), es_params."""
    algo, _ = _algorithm(strategy, popsize, len(radices), total_gens)
    n_islands = len(devices)
    mesh = Mesh(np.array(devices), (AXIS,))

    def body(aux, carry, es_params):
        carry = jax.tree_util.tree_map(lambda x: x[0], carry)  # this device's island

        def epoch(carry, _):
            carry = jax.lax.fori_loop(0, every, lambda _, c: generation(
                aux, c, es_params, algo, fitness_fn=fitness_fn, radices=radices, strategy=strategy), carry)
            key, state, arc = carry
            if n_islands > 1 and migrants > 0:
                state = migrate(state, migrants, n_islands)
            return (key, state, arc), arc.value

        carry, best = jax.lax.scan(epoch, carry, None, length=n_epochs)
        return jax.tree_util.tree_map(lambda x: x[None], (carry, best))

    rep, per = PartitionSpec(), PartitionSpec(AXIS)
    specs = dict(mesh=mesh, in_specs=(rep, per, rep), out_specs=per)
    # evosax's ask mixes per-island and replicated values in a lax.cond: no replication check
    try:
        mapped = _shard_map(body, check_vma=False, **specs)
    except TypeError:  # older JAX
        mapped = _shard_map(body, check_rep=False, **specs)
    return jax.jit(mapped), mesh


def island_evolve(problem, strategy: str = "de", budget: int = 5000, seed: int = 0, popsize: int | None = None,
                  n_islands: int | None = None, every: int = MIGRATE_EVERY, migrants: int = MIGRANTS,
                  do_polish: bool = True, progress=None, seconds: float | None = None) -> SearchResult:
    """``evolve`` with one island of ``popsize`` per local device (the first ``n_islands`` of them; default:
    all), migrating every ``every`` generations. At most ``budget`` designs (whole epochs), same seed and
    device count, same result."""
    strategy = strategy_name(strategy)
    if strategy not in POPULATION_BASED:
        raise ValueError(f"islands need a population-based strategy ({', '.join(POPULATION_BASED)}), not {strategy}")
    devices = tuple(jax.local_devices()[:n_islands] if n_islands else jax.local_devices())
    if n_islands and len(devices) < n_islands:
        raise ValueError(f"{n_islands} islands need as many local devices; {len(devices)} present")
    n_isl, n = len(devices), problem.n_axes
    popsize = max(int(popsize or POPSIZE[strategy]), 4, migrants + 1)
    radices = tuple(problem.radices)
    t0 = time.perf_counter()
    deadline = None if seconds is None else t0 + float(seconds)
    unit = problem.point_designs
    budget = points_budget(problem, budget)
    key, k_explore, k_pop, k_init = jax.random.split(jax.random.PRNGKey(seed), 4)
    n_explore = explore_count(problem, budget)
    seeds = explore(problem, k_explore, n_explore, problem.anchors)
    need = n_isl * popsize
    digits, fit, val = (np.asarray(x)[:need] for x in seeds)
    evaluations = n_explore
    if len(digits) < need:  # too small a sample: uniform points fill the islands
        extra = np.asarray(random_digits(k_pop, (need - len(digits),), radices))
        f, v = evaluate_digits(problem, extra)
        digits, fit, val = np.concatenate([digits, extra]), np.concatenate([fit, f]), np.concatenate([val, v])
        evaluations += len(extra)
    # round-robin deal: island i gets rows i, i + islands, ... (each a share of the best)
    deal = lambda x: np.swapaxes(x.reshape((popsize, n_isl) + x.shape[1:]), 0, 1)  # noqa: E731
    digits, fit, val = deal(digits), deal(np.asarray(fit, np.float32)), deal(np.asarray(val, np.float32))
    gens = max((budget - evaluations - polish_reserve(problem, budget)) // need, 1)
    every = min(every, gens)  # a budget of fewer generations migrates once, at the end
    epochs = gens // every
    per_segment, segments = segment_plan(epochs)
    total = per_segment * segments * every  # the generations that run (schedules anneal over them)
    algo, es_params = _algorithm(strategy, popsize, n, total)
    fn, mesh = _program(devices, problem.fitness_fn, radices, strategy, popsize, total, every, migrants,
                        per_segment)
    states = jax.vmap(lambda k, p, f: algo.init(k, p, f, es_params))(
        jax.random.split(k_init, n_isl), digits_to_genome(digits, radices), jnp.asarray(fit))
    arcs = jax.vmap(lambda d, f, v: archive_update(archive_init(n), d, f, v))(
        jnp.asarray(digits), jnp.asarray(fit), jnp.asarray(val))
    carry = jax.device_put((jax.random.split(key, n_isl), states, arcs), NamedSharding(mesh, PartitionSpec(AXIS)))
    history, done = [], 0
    for s in range(segments):
        if deadline is not None and s > 0 and time.perf_counter() >= deadline:
            break
        carry, best = fn(problem.aux, carry, es_params)
        evaluations += per_segment * every * need
        done += per_segment * every
        history.append(np.min(np.asarray(best), axis=0))
        if progress is not None:
            progress((s + 1) / segments, float(history[-1][-1]))
    arc = jax.tree_util.tree_map(np.asarray, carry[2])
    i = int(np.argmin(arc.fitness))  # the first island of ties
    digits, fitness, value = arc.digits[i], float(arc.fitness[i]), float(arc.value[i])
    local, left = False, budget - evaluations
    if do_polish and left > 0:
        digits, fitness, value, used, local = multi_polish(problem, [digits, *seeds[0][:2]],
                                                           [fitness, *seeds[1][:2]], left, seed, deadline)
        evaluations += used
    return SearchResult(method="evolution", strategy=f"{strategy}-islands", digits=complete(problem, digits),
                        value=value, fitness=fitness, evaluations=evaluations * unit,
                        seconds=time.perf_counter() - t0,
                        history=np.concatenate(history) if history else np.zeros(0), seed=seed,
                        extras={"local_optimum": local, "popsize": popsize, "islands": n_isl, "generations": done,
                                "migrate_every": every, "migrants": migrants, "designs_per_point": unit})

"""Evolutionary search: evosax strategies over the [0, 1]^n_axes genome (``genome.py``).

A fifth of the budget first goes to a uniform sample (``genome.explore``) whose best points seed the strategy.
ask/tell then runs under ``lax.scan``; each generation's population is decoded to digits and evaluated in ONE
batched call of the problem's fitness (the vmapped model). The scan runs in a few segments so the caller can
show progress between them; the compiled segment is reused (no retrace). Infeasible points get the finite
penalized fitness of ``genome.penalized_fitness``; evosax minimizes, as do we. After the last generation the
best point is polished by one- and two-axis moves (``genome.polish``) with the budget kept for it, then by block
moves over the coupled pipeline axes (``block.block_polish``: schedule x vpp x pp, where the search chooses all
three), whose evaluations come out of the generations.

Strategies (evosax 0.3 names in brackets): ``cma_es`` [CMA_ES], ``ga`` [SimpleGA], ``de``
[DifferentialEvolution], ``sa`` [SimulatedAnnealing]. Same seed, same result: every random number comes from
``jax.random.PRNGKey(seed)``.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from evosax.algorithms import CMA_ES, DifferentialEvolution, SimpleGA, SimulatedAnnealing

from .block import BLOCK_AXES, block_budget, block_polish, coupled_block
from .genome import (Archive, Problem, SearchResult, archive_init, archive_update, complete, digits_to_genome,
                     evaluate_digits, explore, explore_count, fitness_outputs, genome_to_digits, multi_polish,
                     points_budget, polish_reserve, safe_fitness)

STRATEGIES = ("cma_es", "ga", "de", "sa")
DEFAULT_STRATEGY = "de"  # the most reliable on the search-quality suite (benchmarks/search_quality.py)
ALIASES = {"cma-es": "cma_es", "cmaes": "cma_es", "simple_ga": "ga", "genetic": "ga",
           "differential_evolution": "de", "simulated_annealing": "sa", "annealing": "sa"}
POPSIZE = {"cma_es": 32, "ga": 64, "de": 32, "sa": 16}
POPULATION_BASED = ("ga", "de")
N_SEGMENTS = 10
BOUNDARY = 100.0  # weight of the CMA-ES boundary penalty (fitness units per squared gene overshoot)


def strategy_name(name: str) -> str:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in STRATEGIES:
        raise ValueError(f"unknown evolution strategy {name!r}; strategies are: {', '.join(STRATEGIES)}")
    return key


@functools.lru_cache(maxsize=None)
def _algorithm(strategy: str, popsize: int, n_axes: int, total_gens: int):
    """The evosax object (cached: its identity is part of the jit cache key) and its params."""
    solution = jnp.zeros((n_axes,), jnp.float32)
    t = max(total_gens, 1)
    if strategy == "cma_es":
        algo = CMA_ES(popsize, solution)
        params = algo.default_params.replace(std_init=jnp.asarray(0.3), std_min=0.05)
    elif strategy == "ga":
        algo = SimpleGA(popsize, solution, std_schedule=optax.exponential_decay(0.2, t, 0.1))
        algo.elite_ratio = 0.25
        params = algo.default_params.replace(crossover_rate=0.5)
    elif strategy == "de":
        algo = DifferentialEvolution(popsize, solution)
        params = algo.default_params.replace(elitism=False, crossover_rate=0.5, differential_weight_min=0.5,
                                             differential_weight_max=1.0)
    elif strategy == "sa":
        algo = SimulatedAnnealing(popsize, solution, std_schedule=optax.exponential_decay(0.3, t, 0.1))
        params = algo.default_params.replace(temperature_init=1.0, temperature_limit=0.01,
                                             temperature_decay=float(0.01 ** (1.0 / t)), boltzmann_constant=0.05)
    else:
        raise ValueError(strategy)
    return algo, params


def _init(problem: Problem, algo, es_params, key, strategy: str, popsize: int, seeds):
    """Initial state from the explored points ``seeds`` = (digits, fitness, value), best first: a
    population-based strategy starts from the best ``popsize`` of them, a distribution-based one is centred on
    the best (the host-side evaluator is shared, so no extra compile of the model)."""
    n = problem.n_axes
    key, k_init, k_pop = jax.random.split(key, 3)
    arc = archive_init(n)
    s_digits, s_f, s_v = seeds
    if len(s_f):
        arc = archive_update(arc, jnp.asarray(s_digits[:1]), jnp.asarray(s_f[:1]), jnp.asarray(s_v[:1]))
    if strategy in POPULATION_BASED:
        if len(s_f) >= popsize:
            pop = digits_to_genome(s_digits[:popsize], problem.radices)
            f = jnp.asarray(s_f[:popsize])
        else:
            pop = jax.random.uniform(k_pop, (popsize, n))
            digits = genome_to_digits(pop, problem.radices)
            f, v = evaluate_digits(problem, digits)
            arc = archive_update(arc, digits, jnp.asarray(f), jnp.asarray(v))
            f = jnp.asarray(f)
        state = algo.init(k_init, pop, f, es_params)
    else:
        mean = digits_to_genome(s_digits[0], problem.radices) if len(s_f) else jnp.full((n,), 0.5, jnp.float32)
        state = algo.init(k_init, mean, es_params)
    return key, state, arc


def generation(aux, carry, es_params, algo, *, fitness_fn, radices, strategy):
    """One ask / evaluate / tell step of ``carry`` = (key, strategy state, archive); returns the new carry
    (shared by ``_segment`` and the islands of ``islands.py``)."""
    key, state, arc = carry
    key, k_ask, k_tell = jax.random.split(key, 3)
    pop, state = algo.ask(k_ask, state, es_params)
    if strategy != "cma_es":  # repair (Lamarckian): what is evaluated is what the strategy remembers
        pop = jnp.clip(pop, 0.0, 1.0)
    digits = genome_to_digits(pop, radices)
    f, v = fitness_outputs(fitness_fn(aux, digits))  # the whole generation in one batched call
    f = safe_fitness(f)
    # CMA-ES samples outside [0, 1], where the clipped genome is a plateau it would drift on: a quadratic
    # boundary penalty pulls the mean back (zero inside the box, so the archive is unaffected).
    out = jnp.sum(jnp.square(pop - jnp.clip(pop, 0.0, 1.0)), axis=-1)
    state, _ = algo.tell(k_tell, pop, f + BOUNDARY * out, state, es_params)
    return key, state, archive_update(arc, digits, f, v)


@functools.partial(jax.jit, static_argnames=("fitness_fn", "radices", "strategy", "popsize", "total_gens",
                                             "n_gens"))
def _segment(aux, carry, es_params, *, fitness_fn, radices, strategy, popsize, total_gens, n_gens):
    algo, _ = _algorithm(strategy, popsize, len(radices), total_gens)

    def step(carry, _):
        carry = generation(aux, carry, es_params, algo, fitness_fn=fitness_fn, radices=radices, strategy=strategy)
        return carry, carry[2].value

    return jax.lax.scan(step, carry, None, length=n_gens)


def segment_plan(n: int, most: int = N_SEGMENTS) -> tuple:
    """(steps per segment, segments) running at most ``n`` steps in up to ``most`` segments of one compiled length;
    the n mod segments steps left over are not run (their budget goes to the polish)."""
    segments = max(1, min(most, n))
    return n // segments, segments


def plan(budget: int, popsize: int, reserve: int, population_based: bool) -> tuple:
    """(generations per segment, segments, polish budget) so that evaluations stay <= budget."""
    init = popsize if population_based else 0
    gens = max((budget - reserve - init) // popsize, 1)
    segments = min(N_SEGMENTS, gens)
    per = gens // segments
    return per, segments, budget - init - per * segments * popsize


def evolve(problem: Problem, strategy: str = DEFAULT_STRATEGY, budget: int = 5000, seed: int = 0,
           popsize: int | None = None, do_polish: bool = True, do_explore: bool = True,
           progress=None, seconds: float | None = None, block_axes=BLOCK_AXES) -> SearchResult:
    """Run one evosax strategy on ``problem`` with at most ``budget`` evaluations (designs; a sub-grid point
    costs ``problem.point_designs``) unless the budget is below one generation, and, with ``seconds``, stop
    between segments (and polish rounds) once that much wall time has passed. ``progress(fraction,
    best_value)`` is called between segments. ``block_axes``: the axes the final ``block.block_polish`` moves
    together (``()``: none). The result's digits cover every axis (``genome.complete``)."""
    strategy = strategy_name(strategy)
    popsize = int(popsize or POPSIZE[strategy])
    if strategy == "de":
        popsize = max(popsize, 4)
    t0 = time.perf_counter()
    deadline = None if seconds is None else t0 + float(seconds)
    unit = problem.point_designs
    budget = points_budget(problem, budget)
    key, k_explore = jax.random.split(jax.random.PRNGKey(seed))
    n_explore = explore_count(problem, int(budget)) if do_explore else 0
    seeds = explore(problem, k_explore, n_explore, problem.anchors)
    pop_init = strategy in POPULATION_BASED and n_explore < popsize
    reserve = polish_reserve(problem, int(budget))
    per, segments, left = plan(int(budget) - n_explore, popsize, reserve, pop_init)
    # the block moves' evaluations come out of the generations, never out of the polish; none when that would
    # leave fewer than half of the generations (block.py)
    block = coupled_block(problem, block_axes) if do_polish else None
    for_block = block_budget(problem, block, int(budget))
    if for_block:
        per_b, segments_b, left_b = plan(int(budget) - n_explore - for_block, popsize, reserve, pop_init)
        if per_b * segments_b >= max(per * segments // 2, 1):
            per, segments, left = per_b, segments_b, left_b
        else:
            for_block = 0
    total = per * segments
    static = dict(fitness_fn=problem.fitness_fn, radices=tuple(problem.radices), strategy=strategy,
                  popsize=popsize, total_gens=total)
    algo, es_params = _algorithm(strategy, popsize, problem.n_axes, total)
    carry = _init(problem, algo, es_params, key, strategy, popsize, seeds)
    evaluations = n_explore + (popsize if pop_init else 0)
    history = []
    done = 0
    for s in range(segments):
        if deadline is not None and s > 0 and time.perf_counter() >= deadline:
            break
        carry, best = _segment(problem.aux, carry, es_params, n_gens=per, **static)
        evaluations += per * popsize
        done += per
        history.append(np.asarray(best))
        if progress is not None:
            progress((s + 1) / segments, float(best[-1]))
    arc: Archive = carry[2]
    digits, fitness, value = np.asarray(arc.digits), float(arc.fitness), float(arc.value)
    local = False
    if do_polish and left > 0:  # the search's best, then the best explored points while budget remains
        digits, fitness, value, used, local = multi_polish(problem, [digits, *seeds[0][:2]],
                                                           [fitness, *seeds[1][:2]], left, seed, deadline)
        evaluations += used
    block_improved = False
    if for_block and int(budget) - evaluations > 0:
        digits, fitness, value, used, block_improved, block_local = block_polish(
            problem, block, digits, fitness, value, int(budget) - evaluations, deadline)
        evaluations += used
        local = block_local if block_improved else local
    return SearchResult(method="evolution", strategy=strategy, digits=complete(problem, digits), value=value,
                        fitness=fitness, evaluations=evaluations * unit, seconds=time.perf_counter() - t0,
                        history=np.concatenate(history) if history else np.zeros(0), seed=seed,
                        extras={"local_optimum": local, "popsize": popsize, "generations": done,
                                "block_axes": ",".join(problem.names[a] for a in block.axes) if for_block else "",
                                "block_improved": block_improved, "designs_per_point": unit})

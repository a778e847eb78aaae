"""Searches: evolution (evosax), relaxed (optax), random, baselines and `sax search`."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sax_jax import load_scenario
from sax_jax.search.baselines import baseline_costs, best_baseline
from sax_jax.search.evolution import STRATEGIES, evolve
from sax_jax.search.genome import (INFEASIBLE, Problem, digits_to_genome, genome_to_digits,
                                   scenario_problem)
from sax_jax.search.block import block_moves, coupled_block
from sax_jax.search.random_search import random_search
from sax_jax.search.relaxed import relaxed_objective, relaxed_search

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUGE = os.path.join(ROOT, "configs", "scenarios", "huge-four-buildings.yaml")

# ------------------------------------------------------------------------------------ a synthetic cost
BUDGET = 2000  # one budget for every synthetic run: equal plans share compilations
RADICES = (6, 5, 7, 4, 6, 8)  # 40,320 points
TARGET = np.array([4, 1, 5, 2, 3, 6])  # the known optimum (digits)
WEIGHTS = np.array([1.0, 2.0, 0.5, 1.5, 1.0, 0.7])


def quad_fitness(aux, digits):
    """1 + weighted squared distance to TARGET (+ an interaction); digit 0 of axis 1 is infeasible."""
    w, target = aux
    d = digits.astype(jnp.float32)
    value = 1.0 + jnp.sum(w * (d - target) ** 2, axis=-1) + 0.3 * ((d[..., 0] - target[0]) * (d[..., 2] - target[2])) ** 2
    feasible = digits[..., 1] != 0
    fitness = jnp.where(feasible, jnp.log(value), jnp.log(value) + INFEASIBLE)
    return fitness, jnp.where(feasible, value, jnp.inf)


def quad_smooth(aux, digits, relaxed):
    w, target = aux
    return jnp.log(1.0 + jnp.sum(w * (relaxed - (target + 1.0)) ** 2))  # option values are digit + 1


def nan_fitness(aux, digits):
    """Nothing is feasible and the cost itself is NaN/inf: a search must neither crash nor return NaN."""
    bad = jnp.where(digits[..., 0] % 2 == 0, jnp.nan, jnp.inf)
    return bad, jnp.full(digits.shape[:-1], jnp.inf)


def quad_problem(fitness_fn=quad_fitness):
    values = tuple(np.arange(1.0, r + 1.0) for r in RADICES)
    return Problem(radices=RADICES, fitness_fn=fitness_fn,
                   aux=(jnp.asarray(WEIGHTS, jnp.float32), jnp.asarray(TARGET, jnp.float32)),
                   values=values, relaxable=(True,) * len(RADICES), smooth_fn=quad_smooth)


def test_genome_roundtrip():
    d = jnp.asarray([TARGET, [0, 0, 0, 0, 0, 0], [r - 1 for r in RADICES]], jnp.int32)
    assert np.array_equal(genome_to_digits(digits_to_genome(d, RADICES), RADICES), d)
    g = jnp.asarray([[-3.0, 7.0, jnp.nan, 0.999999, 1.0, 0.0]])
    out = np.asarray(genome_to_digits(g, RADICES))[0]
    assert out.tolist() == [0, 4, 3, 3, 5, 0]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_evolution_finds_known_optimum(strategy):
    pb = quad_problem()
    for polish in (False, True):
        r = evolve(pb, strategy, budget=BUDGET, seed=0, do_polish=polish)
        assert r.evaluations <= BUDGET
        assert np.array_equal(r.digits, TARGET), (strategy, polish, r.digits)
        assert r.value == pytest.approx(1.0)


def test_relaxed_finds_known_optimum():
    pb = quad_problem()
    for polish in (False, True):
        r = relaxed_search(pb, budget=BUDGET, seed=0, do_polish=polish)
        assert r.evaluations <= BUDGET
        assert r.extras["gradients_finite"] and r.extras["mean_gradient_norm"] > 0
        assert np.array_equal(r.digits, TARGET), (polish, r.digits)


def test_random_search_respects_budget():
    pb = quad_problem()
    r = random_search(pb, budget=BUDGET, seed=0)
    assert r.evaluations == BUDGET and np.isfinite(r.value) and r.value >= 1.0


@pytest.mark.parametrize("method", ["cma_es", "ga", "de", "sa", "relaxed", "random"])
def test_same_seed_same_result(method):
    pb = quad_problem()
    run = {"relaxed": lambda s: relaxed_search(pb, budget=BUDGET, seed=s),
           "random": lambda s: random_search(pb, budget=BUDGET, seed=s)}.get(
        method, lambda s: evolve(pb, method, budget=BUDGET, seed=s, do_polish=False))
    a, b = run(3), run(3)
    assert np.array_equal(a.digits, b.digits) and a.value == b.value and a.evaluations == b.evaluations
    assert np.array_equal(a.history, b.history)


def test_relaxed_gradient_finite_synthetic():
    pb = quad_problem()
    logits = jax.random.normal(jax.random.PRNGKey(0), (len(RADICES), max(RADICES)))
    grad = jax.jit(jax.grad(lambda l, tau: relaxed_objective(pb, l, jax.random.PRNGKey(1), tau=tau)))
    for tau in (1.0, 0.05):
        g = grad(logits, tau)
        assert bool(jnp.all(jnp.isfinite(g))) and float(jnp.abs(g).sum()) > 0


# a coupled pipeline block: the optimum needs schedule, vpp and pp to change together (as vpp > 1 needs the
# interleaved schedule); a broad decoy (schedule 1, vpp 0, best at pp 3) attracts a factorized distribution, and
# no one- or two-axis move leaves it
PIPE_RADICES = (8, 8, 8, 4, 3, 4, 8, 8, 8)
PIPE_NAMES = ("a0", "a1", "a2", "schedule", "vpp", "pp", "a3", "a4", "a5")
PIPE_TARGET = np.array([5, 2, 6, 2, 2, 1, 3, 6, 1])


def coupled_fitness(target, digits):
    d = digits.astype(jnp.float32)
    free = jnp.asarray([0, 1, 2, 6, 7, 8])
    base = jnp.log1p(jnp.sum((d[..., free] - target[free]) ** 2, axis=-1))
    s, v, p = digits[..., 3], digits[..., 4], digits[..., 5]
    pipe = jnp.where((s == 2) & (v == 2) & (p == 1), 0.0,
                     jnp.where((s == 1) & (v == 0), 0.05 + 0.02 * (p != 3), 1.0))
    return base + pipe, jnp.exp(base + pipe)


def coupled_problem():
    return Problem(radices=PIPE_RADICES, fitness_fn=coupled_fitness, aux=jnp.asarray(PIPE_TARGET, jnp.float32),
                   names=PIPE_NAMES)


def test_coupled_block_found_by_name_or_skipped():
    blk = coupled_block(coupled_problem())
    assert blk.axes == (3, 4, 5) and blk.radices == (4, 3, 4) and blk.size == 48
    assert coupled_block(quad_problem()) is None  # no axis names
    no_pp = Problem(radices=(4, 3, 5), fitness_fn=coupled_fitness, aux=None, names=("schedule", "vpp", "mbs"))
    assert coupled_block(no_pp) is None  # an axis the search does not choose (absent, or inner in a sub-grid)
    fixed = Problem(radices=(4, 1, 1), fitness_fn=coupled_fitness, aux=None, names=("schedule", "vpp", "pp"))
    assert coupled_block(fixed) is None  # one axis with a choice: nothing coupled
    assert coupled_block(coupled_problem(), ()) is None


def test_coupled_block_skips_inner_axes_of_a_subgrid(huge):
    from sax_jax.search.genome import subgrid_problem
    sc, flat = huge
    pb = subgrid_problem(flat, 4096)
    inner = set(flat.names[pb.subgrid.split:])
    if inner & {"schedule", "vpp", "pp"}:
        assert coupled_block(pb) is None
    else:
        assert coupled_block(pb) is not None and max(coupled_block(pb).axes) < pb.n_axes


def test_block_moves_cover_every_other_combination():
    blk = coupled_block(coupled_problem())
    rows = block_moves(PIPE_TARGET, blk)
    assert rows.shape == (blk.size - 1, len(PIPE_RADICES)) and rows.dtype == np.int32
    free = [a for a in range(len(PIPE_RADICES)) if a not in blk.axes]
    assert np.all(rows[:, free] == PIPE_TARGET[free])  # only the block's axes move
    assert np.all((rows >= 0) & (rows < np.asarray(PIPE_RADICES)))
    combos = {tuple(r[list(blk.axes)]) for r in rows}
    assert len(combos) == blk.size - 1 and tuple(PIPE_TARGET[list(blk.axes)]) not in combos


@pytest.mark.parametrize("seed", [0, 2])
def test_relaxed_block_polish_finds_coupled_optimum(seed):
    """Schedule x vpp x pp moved together reach the coupled optimum the factorized search and its one- and
    two-axis polish miss; every evaluation stays within the budget."""
    pb = coupled_problem()
    r = relaxed_search(pb, budget=3000, seed=seed)
    assert r.evaluations <= 3000 and r.extras["block_axes"] == "schedule,vpp,pp"
    assert np.array_equal(r.digits, PIPE_TARGET), r.digits
    plain = relaxed_search(pb, budget=3000, seed=seed, block_axes=())
    assert plain.evaluations <= 3000 and plain.extras["block_axes"] == "" and not plain.extras["block_improved"]
    assert plain.value > r.value and plain.digits[3] == 1  # stuck in the decoy


@pytest.mark.parametrize("seed", [1, 3])
def test_evolution_block_polish_finds_coupled_optimum(seed):
    """On these seeds DE ends in the decoy as the relaxed search does; the same block moves take it to the coupled
    optimum, within the budget."""
    pb = coupled_problem()
    r = evolve(pb, "de", budget=3000, seed=seed)
    assert r.evaluations <= 3000 and r.extras["block_axes"] == "schedule,vpp,pp"
    assert np.array_equal(r.digits, PIPE_TARGET), r.digits
    plain = evolve(pb, "de", budget=3000, seed=seed, block_axes=())
    assert plain.evaluations <= 3000 and plain.extras["block_axes"] == "" and not plain.extras["block_improved"]
    assert plain.value > r.value and plain.digits[3] == 1  # stuck in the decoy


@pytest.mark.parametrize("method", ["cma_es", "ga", "de", "sa", "relaxed", "random"])
def test_infeasible_only_does_not_crash(method):
    pb = quad_problem(nan_fitness)
    if method == "relaxed":
        r = relaxed_search(pb, budget=BUDGET, seed=0)
    elif method == "random":
        r = random_search(pb, budget=BUDGET, seed=0)
    else:
        r = evolve(pb, method, budget=BUDGET, seed=0)
    assert r.value == np.inf and np.isfinite(r.fitness) and r.evaluations <= BUDGET


def test_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="strategies are"):
        evolve(quad_problem(), "nope", budget=100)


# ------------------------------------------------------------------------------------ the real model
@pytest.fixture(scope="module")
def huge():
    sc = load_scenario(HUGE)
    return sc, scenario_problem(sc)


def test_huge_space_is_beyond_exhaustive(huge):
    sc, pb = huge
    assert sc.space.size > 10 ** 15 and pb.size == sc.space.size
    assert {"production", "crosspipe"} <= set(sc.baselines)


def test_penalty_orders_feasible_before_infeasible(huge):
    sc, pb = huge
    from sax_jax.search.genome import design_digits, evaluate_digits, random_digits
    digits = random_digits(jax.random.PRNGKey(0), (256,), pb.radices)
    base = jnp.asarray(np.stack([design_digits(pb, sc.baseline_design(n)) for n in sc.baselines]))
    f, v = evaluate_digits(pb, jnp.concatenate([digits, base]))
    assert bool(jnp.all(jnp.isfinite(f)))
    feas = jnp.isfinite(v)
    assert bool(jnp.all(feas[-len(sc.baselines):]))  # the baselines are feasible
    assert bool(jnp.any(~feas))
    assert float(jnp.max(jnp.where(feas, f, -jnp.inf))) < float(jnp.min(jnp.where(feas, jnp.inf, f)))


def test_huge_evolution_beats_best_baseline(huge, capsys):
    """`sax search --json` on a 1.3e15-point space with 5000 evaluations: faster than every named baseline.
    (The search of test_a_search_too_small_to_explore_still_starts_from_the_baselines: one problem and plan, so
    one compile of its evaluator and segments for both tests.)"""
    from sax_jax.cli import main
    sc, _ = huge
    assert main(["search", HUGE, "--method", "evolution", "--budget", "5000", "--seed", "0", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["method"] == "evolution" and rec["strategy"] == "de"
    assert rec["evaluations"] <= 5000 and rec["seconds"] > 0
    assert set(rec["speedup_vs"]) == set(sc.baselines)
    _, best_t = best_baseline(baseline_costs(sc))
    assert rec["best"]["step_time_s"] is not None and rec["best"]["step_time_s"] < best_t
    assert all(s > 1.0 for s in rec["speedup_vs"].values())
    assert set(rec["best"]["design"]) >= {"tp", "pp", "qps", "channels", "schedule"}


def test_a_search_too_small_to_explore_still_starts_from_the_baselines(huge):
    """With sub-grid points of 3 designs a budget of 5,000 designs leaves under one evaluator block for the uniform
    sample, which once dropped the baselines with it: differential evolution (seed 0) then ended at 6.07 s, 0.91x
    the production layout. The baselines are always evaluated, the polish takes the best start first, and the
    result is never worse than the best baseline."""
    from sax_jax.search.genome import explore_count
    from sax_jax.search.runner import run_search
    sc, pb = huge
    assert len(pb.anchors) == len(sc.baselines) and explore_count(pb, 10) >= len(pb.anchors)
    rec = run_search(sc, "evolution", strategy="de", budget=5000, seed=0)
    _, best_t = best_baseline(baseline_costs(sc))
    assert rec["best"]["step_time_s"] is not None and rec["best"]["step_time_s"] <= best_t * (1 + 1e-6)


def test_huge_relaxed_beats_best_baseline_with_finite_gradients(huge):
    """The relaxed search on the real model: every score-function + pathwise gradient finite and non-zero,
    and the result beats the best baseline."""
    sc, pb = huge
    r = relaxed_search(pb, budget=3000, seed=0)
    assert r.extras["gradients_finite"] and r.extras["mean_gradient_norm"] > 0
    assert r.evaluations <= 3000
    _, best_t = best_baseline(baseline_costs(sc))
    assert np.isfinite(r.value) and r.value < best_t

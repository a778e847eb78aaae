"""Genome <-> design mapping, the search problem, and the local polish shared by every search.

A search sees a **Problem**: mixed-radix digits (one per axis), a batched fitness function and, for the relaxed
search, a smooth surrogate. A scenario becomes a Problem through ``scenario_problem``: numeric axes are ordered
by value (neighbouring digits are neighbouring knob values, so a genome moves a knob monotonically), and
the model (``cost.step_time``) is vmapped once inside the caller's jitted step, so a whole generation is one
batched call. Synthetic problems (tests) plug in any pure ``fitness_fn(aux, digits)``.

Fitness (minimized) is ``log(raw step time)`` for a feasible point; an infeasible point adds ``INFEASIBLE``
plus ``PER_VIOLATION`` per violated constraint plus the log of its memory excess, so every infeasible point
ranks below every feasible one, points closer to feasibility rank higher, and nothing is ever NaN or inf.
Step time, tokens/s and MFU are monotone in the step time, so minimizing it serves each; goodput is not (a
transport that survives failures trains more per hour at the same step time), so under that objective the
fitness is log(step time / ETTR) = -log(goodput) + const, and the exact value reported stays the step time.

The genome of the evolutionary strategies lives in [0, 1]^n_axes: gene g selects option floor(g * radix).
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..cost import step_time
from ..params import build_params
from ..cost.feasibility import violation_count
from ..space import AUTO, AXES, NUMERIC_AXES, Design, axis_dtype

INFEASIBLE = 8.0  # fitness offset of any infeasible point (e^8 ~ 3000x slower than its raw time)
PER_VIOLATION = 1.0  # and per violated constraint
WORST = 1e4  # a fitness that is not finite (cannot happen for the model; guards synthetic costs)


@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
    """What a search optimizes. ``fitness_fn``/``smooth_fn`` are static (module-level functions, hashable);
    ``aux`` is a pytree of arrays passed to them at run time, so scenarios with equal shapes share compiles."""
    radices: tuple  # options per axis
    fitness_fn: Callable  # (aux, digits int32 [B, n]) -> (fitness f32 [B] finite, exact f32 [B], +inf infeasible)
    aux: Any
    values: tuple = ()  # per axis: option values in digit order (numpy float), for the relaxation
    relaxable: tuple = ()  # per axis: True where the pathwise relaxation applies (numeric, all >= 1, > 1 option)
    smooth_fn: Callable | None = None  # (aux, digits int32 [n], relaxed f32 [n]) -> smooth scalar fitness
    names: tuple = ()  # axis names (reporting)
    scenario: Any = None
    perm: tuple = ()  # per axis: digit -> index into the scenario's option list
    numeric: tuple = ()  # per axis: True where options are ordered numbers (default: ``relaxable``)
    anchors: tuple = ()  # digits of known-good designs (a scenario's baselines) that seed the strategies
    # sub-grid problems (``subgrid.py``): a point is the outer digits of a whole grid of inner designs
    subgrid: Any = None  # subgrid.Spec, or None for a flat problem (a point is one design)
    full: Any = None  # the flat Problem of all axes (reporting, design_dict), for a sub-grid problem

    @property
    def point_designs(self) -> int:
        """Designs one point of the problem evaluates (what it costs of a budget in designs)."""
        return 1 if self.subgrid is None else self.subgrid.inner_n

    @property
    def n_axes(self) -> int:
        return len(self.radices)

    @property
    def size(self) -> int:
        return int(np.prod(self.radices, dtype=object))

    @property
    def neighbours(self) -> int:
        """Designs that differ from one point in exactly one axis."""
        return int(sum(r - 1 for r in self.radices))


class SearchResult(NamedTuple):
    method: str
    strategy: str
    digits: np.ndarray  # best point found (problem digit order)
    value: float  # its exact objective (step time, +inf when no feasible point was found)
    fitness: float  # its penalized fitness
    evaluations: int  # model evaluations spent, polish included
    seconds: float
    history: np.ndarray  # best exact value after each generation / step (for progress and plots)
    seed: int
    extras: dict = {}  # method-specific diagnostics (e.g. the relaxed search's gradient checks)


# ---------------------------------------------------------------------------------------------- genome
def genome_to_digits(genome, radices: tuple):
    """[..., n] genes (any real; clipped to [0, 1]) -> int32 digits [..., n]."""
    r = jnp.asarray(radices, jnp.float32)
    g = jnp.clip(jnp.nan_to_num(genome, nan=0.5), 0.0, 1.0)
    return jnp.minimum(jnp.floor(g * r), r - 1).astype(jnp.int32)


def digits_to_genome(digits, radices: tuple):
    """Digits -> the centre of each option's gene interval."""
    return (jnp.asarray(digits, jnp.float32) + 0.5) / jnp.asarray(radices, jnp.float32)


def random_digits(key, shape: tuple, radices: tuple):
    """Uniform digits [*shape, n]: a uniform sample of the whole space."""
    keys = jax.random.split(key, len(radices))
    cols = [jax.random.randint(k, shape, 0, r) for k, r in zip(keys, radices)]
    return jnp.stack(cols, axis=-1).astype(jnp.int32)


def safe_fitness(f):
    return jnp.where(jnp.isfinite(f), f, WORST)


# ---------------------------------------------------------------------------------------------- archive
class Archive(NamedTuple):
    """Best point seen so far (by penalized fitness, which orders feasible points by their exact value)."""
    digits: jnp.ndarray  # int32 [n]
    fitness: jnp.ndarray  # f32
    value: jnp.ndarray  # f32 exact (+inf when infeasible)


def archive_init(n_axes: int) -> Archive:
    return Archive(jnp.zeros((n_axes,), jnp.int32), jnp.asarray(jnp.inf, jnp.float32),
                   jnp.asarray(jnp.inf, jnp.float32))


def archive_update(arc: Archive, digits, fitness, value) -> Archive:
    """Keep the earliest best (argmin takes the first of ties: deterministic)."""
    i = jnp.argmin(fitness)
    better = fitness[i] < arc.fitness
    return Archive(jnp.where(better, digits[i], arc.digits), jnp.where(better, fitness[i], arc.fitness),
                   jnp.where(better, value[i], arc.value))


# ---------------------------------------------------------------------------------------------- host-side evaluation
def fitness_outputs(out):
    """(fitness, value) of a fitness_fn's outputs (a sub-grid fitness also returns the best inner index)."""
    return out[0], out[1]


@functools.partial(jax.jit, static_argnames=("fitness_fn",))
def _evaluate(aux, digits, *, fitness_fn):
    out = fitness_fn(aux, digits)
    extra = out[2] if len(out) > 2 else jnp.zeros(digits.shape[:1], jnp.int32)
    return safe_fitness(out[0]), out[1], extra


def block_size(problem: Problem) -> int:
    """Fixed batch of the host-side evaluator (a power of two >= one polish round): every host-side call of a
    problem (polish, rounding, initial populations) pads to a multiple of it and so shares ONE compilation."""
    return int(max(64, 1 << int(np.ceil(np.log2(sum(problem.radices))))))


def points_budget(problem: Problem, budget: int) -> int:
    """A budget in designs as points of the problem (a sub-grid point costs ``point_designs``)."""
    return max(int(budget) // problem.point_designs, 1)


def evaluate_points(problem: Problem, digits):
    """(fitness, exact value, best inner index) numpy arrays of digits [B, n], evaluated in padded blocks of
    ``block_size`` (the inner index is 0 for a flat problem)."""
    digits = np.asarray(digits, np.int32).reshape(-1, problem.n_axes)
    b = block_size(problem)
    n = digits.shape[0]
    pad = np.zeros((-(-n // b) * b, problem.n_axes), np.int32)
    pad[:n] = digits
    outs = [_evaluate(problem.aux, jnp.asarray(pad[s:s + b]), fitness_fn=problem.fitness_fn)
            for s in range(0, pad.shape[0], b)]  # all dispatched before any is fetched
    f, v, x = (np.concatenate([np.asarray(o[i]) for o in outs])[:n] for i in range(3))
    return f, v, x


def evaluate_digits(problem: Problem, digits):
    """(fitness, exact value) numpy arrays of digits [B, n], evaluated in padded blocks of ``block_size``."""
    f, v, _ = evaluate_points(problem, digits)
    return f, v


def complete(problem: Problem, digits) -> np.ndarray:
    """Digits of every axis (the flat problem's order) of a point: for a sub-grid problem, the outer digits and
    the inner digits of the best design of its sub-grid; a flat problem's digits unchanged."""
    digits = np.asarray(digits, np.int32)
    if problem.subgrid is None:
        return digits
    from .subgrid import inner_digits
    _, _, x = evaluate_points(problem, digits[None])
    return np.concatenate([digits, inner_digits(problem.subgrid, x[0])]).astype(np.int32)


def reporting_problem(problem: Problem) -> Problem:
    """The problem whose digits a search result holds (``complete``): the flat one of a sub-grid problem."""
    return problem if problem.full is None else problem.full


# ---------------------------------------------------------------------------------------------- exploration
EXPLORE_FRACTION = 0.2  # of a search's budget spent on a uniform sample that seeds it


def explore_count(problem: Problem, budget: int) -> int:
    """Uniform samples that seed a search: a whole number of evaluator blocks, about a fifth of the budget; never
    fewer than the anchors (the baselines), which a budget below one block would otherwise drop unevaluated."""
    b = block_size(problem)
    return max(int(b * (int(budget * EXPLORE_FRACTION) // b)), min(len(problem.anchors), int(budget)))


def explore(problem: Problem, key, n: int, anchors=()):
    """``n`` samples, best first: (digits [n, axes], fitness [n], value [n]) as numpy arrays: uniform ones, the
    last of them replaced by ``anchors`` (known-good designs, e.g. the scenario's baselines).
    Random search at a fraction of the budget finds the right basin surprisingly often in these spaces; the
    strategies start from its best points instead of from blind guesses, and a search seeded with the baselines
    can only end at or below the best of them (the polish then looks for a better neighbour)."""
    if n <= 0:
        return (np.zeros((0, problem.n_axes), np.int32), np.zeros((0,), np.float32), np.zeros((0,), np.float32))
    digits = np.array(random_digits(key, (n,), tuple(problem.radices)))  # a writable host copy
    anchors = np.asarray(anchors, np.int32).reshape(-1, problem.n_axes)[:n]
    if len(anchors):
        digits[n - len(anchors):] = anchors
    f, v = evaluate_digits(problem, digits)
    order = np.argsort(f, kind="stable")
    return digits[order], f[order], v[order]


def multi_polish(problem: Problem, starts, fitnesses, budget: int, seed: int = 0, deadline: float | None = None):
    """Polish each distinct start in turn (best first) while budget (and time, until ``deadline`` on
    ``time.perf_counter``) remains; keep the best result. Returns (digits, fitness, value, evaluations,
    local_optimum)."""
    best, used, seen = None, 0, set()
    # best first: the first start may spend the whole budget, and a search seeded with the baselines must end at
    # or below the best of them (explore) even when the strategy's own best is worse
    order = sorted(range(len(starts)), key=lambda i: float(fitnesses[i]))
    for d, f in ((starts[i], fitnesses[i]) for i in order):
        key = tuple(int(x) for x in np.asarray(d))
        if key in seen or used >= budget or (best is not None and deadline is not None
                                             and time.perf_counter() >= deadline):
            continue
        seen.add(key)
        out = polish(problem, d, float(f), budget - used, seed, deadline)
        used += out[3]
        if best is None or out[1] < best[1]:
            best = out
    return best[0], best[1], best[2], used, best[4]


# ---------------------------------------------------------------------------------------------- polish
def neighbours_of(problem: Problem, digits) -> np.ndarray:
    """Every design that differs from ``digits`` in exactly one axis [neighbours, n]."""
    digits = np.asarray(digits, np.int32)
    rows = []
    for a, r in enumerate(problem.radices):
        for k in range(r):
            if k != digits[a]:
                row = digits.copy()
                row[a] = k
                rows.append(row)
    return np.asarray(rows, np.int32).reshape(-1, problem.n_axes)


def _local_options(problem: Problem, digits, a: int) -> list:
    """Options of axis a worth pairing with a move of another axis: all of a short or categorical axis; for a
    long numeric axis the neighbours by value (+-1 option) and the options nearest half and twice the value
    (the coupled moves that keep tp x cp x pp fixed)."""
    r, d = problem.radices[a], int(digits[a])
    numeric = problem.numeric[a] if problem.numeric else (problem.relaxable[a] if problem.relaxable else False)
    if r <= 8 or not numeric:
        return [k for k in range(r) if k != d]
    vals = np.asarray(problem.values[a], np.float64)
    picks = {d - 1, d + 1, int(np.argmin(np.abs(vals - vals[d] / 2))), int(np.argmin(np.abs(vals - vals[d] * 2)))}
    return sorted(k for k in picks if 0 <= k < r and k != d)


def pair_moves(problem: Problem, digits, limit: int, seed: int = 0) -> np.ndarray:
    """Designs differing from ``digits`` in exactly two axes (``_local_options`` each); a deterministic random
    subset of ``limit`` rows when there are more."""
    digits = np.asarray(digits, np.int32)
    opts = [_local_options(problem, digits, a) for a in range(problem.n_axes)]
    rows = []
    for a in range(problem.n_axes):
        for b in range(a + 1, problem.n_axes):
            for ka in opts[a]:
                for kb in opts[b]:
                    row = digits.copy()
                    row[a], row[b] = ka, kb
                    rows.append(row)
    rows = np.asarray(rows, np.int32).reshape(-1, problem.n_axes)
    if len(rows) > limit:
        keep = np.sort(np.random.default_rng(seed).choice(len(rows), size=max(limit, 0), replace=False))
        rows = rows[keep]
    return rows


def polish(problem: Problem, digits, fitness: float, budget: int, seed: int = 0, deadline: float | None = None,
           pairs: bool = True, value: float | None = None):
    """Local search from ``digits``: steepest descent over one-axis moves (every neighbour in one batched
    call per round); at a one-axis local optimum, one round of two-axis moves (coupled knobs such as
    schedule + vpp or tp + pp; not with ``pairs=False``), back to one-axis moves after an improvement. Never
    exceeds ``budget``. ``value``: the start's known objective value (else it is evaluated when no move helps).
    Returns (digits, fitness, value, evaluations, local_optimum): ``local_optimum`` is True when no one-axis
    change of the returned point is better (a certificate the search can report)."""
    digits = np.asarray(digits, np.int32)
    used, local = 0, False
    while used < budget and (deadline is None or time.perf_counter() < deadline):
        if used + problem.neighbours <= budget:
            cand = neighbours_of(problem, digits)
        else:
            break
        f, v = evaluate_digits(problem, cand)
        used += len(cand)
        i = int(np.argmin(f))
        if f[i] < fitness:
            digits, fitness, value = cand[i], float(f[i]), float(v[i])
            continue
        local = True
        if not pairs or budget - used <= 0:
            break
        cand = pair_moves(problem, digits, budget - used, seed)
        if len(cand) == 0:
            break
        f, v = evaluate_digits(problem, cand)
        used += len(cand)
        i = int(np.argmin(f))
        if not f[i] < fitness:
            break
        digits, fitness, value, local = cand[i], float(f[i]), float(v[i]), False
    if value is None:
        f, v = evaluate_digits(problem, digits[None])
        value = float(v[0])
    return digits, fitness, value, used, local


def polish_reserve(problem: Problem, budget: int) -> int:
    """Evaluations a search keeps for its polish: enough for two starts of a few one-axis rounds and one round
    of pair moves each, at most a quarter of the budget."""
    pairs = len(pair_moves(problem, np.zeros(problem.n_axes, np.int32), 1 << 30)) if problem.n_axes < 64 else 0
    return int(min(budget // 4, 2 * (4 * problem.neighbours + pairs)))


# ---------------------------------------------------------------------------------------------- scenarios
def penalty(cost, hbm_bytes):
    """0 for a feasible point; INFEASIBLE + PER_VIOLATION per violated check + log of the memory excess otherwise."""
    excess = jnp.log(jnp.maximum(cost.memory_bytes / hbm_bytes, 1.0))
    return jnp.where(cost.feasible, 0.0, INFEASIBLE + PER_VIOLATION * violation_count(cost.violation) + excess)


def penalized_fitness(cost, hbm_bytes):
    """Cost batch -> finite fitness to minimize (see module docstring)."""
    return safe_fitness(jnp.log(jnp.maximum(cost.raw_step_time_s, 1e-30)) + penalty(cost, hbm_bytes))


def digits_design(tables, digits) -> Design:
    return Design(*[tab[digits[..., i]] for i, tab in enumerate(tables)])


# What a scenario's objective multiplies the step time by, ordered as the log of it (smaller is better): "step"
# nothing; "goodput" 1 / ETTR (goodput ~ 1 / (step / ETTR)); "target" (time to the target loss) also DiLoCo's
# tokens multiplier; "cost" (its price) also the infrastructure's USD per hour. subgrid.py applies the same factors.
TARGET_OBJECTIVES = ("time_to_target_s", "effective_tokens_per_s")


def objective_kind(scenario) -> str:
    obj = None if scenario is None else scenario.objective
    if obj == "goodput_tokens_per_s":
        return "goodput"
    if obj in TARGET_OBJECTIVES:
        return "target"
    return "cost" if obj == "train_cost_usd" else "step"


def _objective_log(x, cost, kind: str):
    """x (a log step time) plus the log of the objective's factors (``objective_kind``)."""
    if kind != "step":
        x = x - jnp.log(jnp.maximum(cost.ettr, 1e-30))
    if kind in ("target", "cost"):
        x = x + jnp.log(jnp.maximum(cost.tokens_multiplier, 1e-30))
    if kind == "cost":
        x = x + jnp.log(jnp.maximum(cost.cost_usd_per_hour, 1e-30))
    return x


@functools.lru_cache(maxsize=None)
def objective_fitness(kind: str = "step"):
    """Batched fitness for an objective kind: one vmapped call of the model, ``penalized_fitness`` plus the log of
    the objective's factors. Cached: one function object per kind, so equal problems share one compile."""

    def fitness(aux, digits):
        params, tables = aux
        cost = jax.vmap(step_time, in_axes=(None, 0))(params, digits_design(tables, digits))
        return _objective_log(penalized_fitness(cost, params.gpu.hbm_bytes), cost, kind), cost.step_time_s

    fitness.__name__ = f"{kind}_fitness"
    return fitness


@functools.lru_cache(maxsize=None)
def objective_smooth(kind: str = "step"):
    """One point whose relaxable numeric axes take continuous values ``relaxed`` (others from ``digits``): log raw
    step time plus a smooth memory penalty plus the log of the objective's factors. Non-integer values are flagged
    NONINTEGER by the model, which is exactly why the raw time is used; divisibility constraints are left to the
    exact evaluation."""

    def smooth(aux, digits, relaxed):
        params, tables = aux
        design = digits_design(tables, digits)
        leaves = [relaxed[i] if ax in NUMERIC_AXES else getattr(design, ax) for i, ax in enumerate(AXES)]
        c = step_time(params, Design(*leaves))
        excess = jnp.maximum(c.memory_bytes / params.gpu.hbm_bytes - 1.0, 0.0)
        return _objective_log(jnp.log(jnp.maximum(c.raw_step_time_s, 1e-30)) + 4.0 * excess, c, kind)

    smooth.__name__ = f"{kind}_smooth"
    return smooth


scenario_fitness = objective_fitness("step")  # the step-time objective (tests and synthetic problems use it)


def scenario_problem(scenario, params=None, inner_max: int | None = None) -> Problem:
    """A scenario's design space as a Problem; numeric axes in increasing value order.

    inner_max: None or 1 for a flat problem (a point is one design); otherwise a sub-grid problem
    (``subgrid.py``) whose points are the outer axes' digits and whose fitness is the best design of a grid of
    at most ``inner_max`` designs over the last axes."""
    flat = _flat_problem(scenario, params)
    if inner_max is None or inner_max <= 1:
        return flat
    return subgrid_problem(flat, inner_max)


def subgrid_problem(flat: Problem, inner_max: int, chunk_designs: int | None = None) -> Problem:
    """The sub-grid problem of a scenario's flat problem (``subgrid.py``)."""
    from . import subgrid
    split = subgrid.choose_split(flat.radices, inner_max)
    if split >= flat.n_axes:
        return flat
    spec = subgrid.Spec(split=split, inner_values=tuple(tuple(float(x) for x in v) for v in flat.values[split:]),
                        objective=objective_kind(flat.scenario))
    chunk = max(1, (chunk_designs or subgrid.block_designs()) // spec.inner_n)
    params, tables = flat.aux
    anchors = tuple(dict.fromkeys(a[:split] for a in flat.anchors))
    return Problem(radices=tuple(flat.radices[:split]), fitness_fn=subgrid.fitness_fn(spec, chunk),
                   aux=(params, tuple(tables[:split])), values=flat.values[:split], relaxable=(),
                   smooth_fn=None, names=tuple(flat.names[:split]), scenario=flat.scenario,
                   perm=flat.perm[:split], numeric=flat.numeric[:split], anchors=anchors, subgrid=spec, full=flat)


def _flat_problem(scenario, params=None) -> Problem:
    params = build_params(scenario) if params is None else params
    tables, values, relaxable, perm = [], [], [], []
    for ax, opts in zip(AXES, scenario.space.options):
        numeric = ax in NUMERIC_AXES
        order = tuple(np.argsort(np.asarray(opts, np.float64), kind="stable")) if numeric else \
            tuple(range(len(opts)))
        vals = np.asarray([opts[i] for i in order], np.float64)
        perm.append(tuple(int(i) for i in order))
        values.append(vals)
        relaxable.append(bool(numeric and len(vals) > 1 and np.all(vals >= 1.0) and not np.any(vals == AUTO)))
        tables.append(jnp.asarray(vals, axis_dtype(ax)))
    kind = objective_kind(scenario)
    fitness, smooth = objective_fitness(kind), objective_smooth(kind)
    problem = Problem(radices=scenario.space.radices, fitness_fn=fitness,
                      aux=(params, tuple(tables)), values=tuple(values), relaxable=tuple(relaxable),
                      smooth_fn=smooth, names=AXES,
                      scenario=scenario, perm=tuple(perm), numeric=tuple(ax in NUMERIC_AXES for ax in AXES))
    anchors = []
    for name in scenario.baselines:
        try:  # a baseline with a value outside the space's options cannot seed it
            anchors.append(tuple(int(x) for x in design_digits(problem, scenario.baseline_design(name))))
        except ValueError:
            continue
    return dataclasses.replace(problem, anchors=tuple(anchors))


def scenario_digits(problem: Problem, digits) -> list:
    """Problem digits -> digits in the scenario's option order (for ``space.encode`` and the sweep's index)."""
    return [int(p[int(d)]) for p, d in zip(problem.perm, np.asarray(digits))]


def design_dict(problem: Problem, digits) -> dict:
    """Host dict {axis: option name} of one point."""
    sc = problem.scenario
    if sc is None:
        return {n: int(d) for n, d in zip(problem.names or range(problem.n_axes), np.asarray(digits))}
    d = sc.space.decode_digits(jnp.asarray(scenario_digits(problem, digits), jnp.int32))
    return sc.space.to_dict(d)


def design_digits(problem: Problem, design) -> np.ndarray:
    """Problem digits of a scalar Design whose values are among the options (e.g. a baseline); raises
    ValueError naming the axis otherwise."""
    out = []
    for a, ax in enumerate(AXES):
        v = float(np.asarray(getattr(design, ax)))
        hits = np.flatnonzero(np.isclose(np.asarray(problem.values[a], np.float64), v))
        if len(hits) == 0:
            raise ValueError(f"{ax}={v:g} is not among the options of the space")
        out.append(int(hits[0]))
    return np.asarray(out, np.int32)

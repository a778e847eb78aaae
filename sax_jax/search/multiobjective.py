"""Multi-objective evolutionary search: the Pareto front of step time vs a second metric (NSGA-II).

evosax (0.3) has no multi-objective strategy, so this is NSGA-II (Deb et al. 2002) over the problem's digits,
written in JAX and run under ``lax.scan`` like the single-objective strategies:

- **variation**: binary tournaments by (non-domination rank, crowding distance) pick parents; uniform
  crossover of their digits, then each axis is redrawn with probability 1/axes (at least one axis of every
  child changes, so no evaluation is spent on a copy of its parent);
- **selection**: parents and children (2N) are ranked by non-dominated sorting (peeling fronts off the
  domination matrix) and crowding distance; the best N survive;
- **archive**: every evaluated feasible design enters a running exact front (``pareto.merge``, the sweep's
  merge: distinct (t, y) vectors, lowest-position design for ties, at most ``FRONT_SIZE`` points), so a good
  point the population later loses is still reported;
- **block polish**: the coupled pipeline axes (``block.BLOCK_AXES``: schedule, vpp, pp) pay only when they move
  together, which one-axis mutation rarely does; the last evaluations (at most a quarter of the budget) try
  every other combination of them at the archive's fastest points and merge what they find (a PP 2 / VPP 2
  interleaved point that every seed of NSGA-II alone missed for PP 2 ZB-H2, 0.9% slower at the same traffic).

Objectives (both minimized): the penalized fitness of ``genome.penalized_fitness`` (log step time, plus a
penalty for an infeasible design) and log of the metric plus the same penalty, so a feasible design dominates
every infeasible one and infeasible ones are ranked by how far from feasible they are. Goodput is maximized:
its objective is -log goodput. Points are single designs (the flat problem): a sub-grid point keeps only its
fastest inner design, which would drop the inner axes' side of the front.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from . import pareto
from .pareto import FRONT_SIZE
from .runner import PARETO
from .evolution import segment_plan
from .block import block_moves, coupled_block
from .genome import Problem, design_dict, digits_design, penalty, random_digits
from ..cost import step_time

METRICS = PARETO  # --pareto NAME -> (Cost field, maximized?)
POPSIZE = 128


def metric_name(name: str) -> str:
    if name not in METRICS:
        raise ValueError(f"unknown Pareto metric {name!r}; metrics: {', '.join(METRICS)}")
    return name


def objectives(aux, digits, which):
    """(aux, digits [B, n], metric index into METRICS) -> (objectives [B, 2] finite, step time [B] (+inf
    infeasible), signed metric [B] (minimized: a maximized metric negated)). The metric is a traced index, so
    every metric shares one compiled search."""
    params, tables = aux
    cost = jax.vmap(step_time, in_axes=(None, 0))(params, digits_design(tables, digits))
    pen = penalty(cost, params.gpu.hbm_bytes)
    ys = [(-1.0 if maximize else 1.0) * getattr(cost, field) for field, maximize in METRICS.values()]
    logs = [-jnp.log(jnp.maximum(getattr(cost, field), 1e-30)) if maximize
            else jnp.log(jnp.maximum(getattr(cost, field), 1.0)) for field, maximize in METRICS.values()]
    y, log_y = jnp.stack(ys)[which], jnp.stack(logs)[which]
    obj = jnp.stack([jnp.log(jnp.maximum(cost.raw_step_time_s, 1e-30)) + pen, log_y + pen], axis=-1)
    obj = jnp.where(jnp.isfinite(obj), obj, 1e4)
    return obj, jnp.where(cost.feasible, cost.step_time_s, jnp.inf), y


# ---------------------------------------------------------------------------------------------- NSGA-II pieces
def nondominated_rank(obj):
    """Rank of every row of obj [M, 2] (0: not dominated; k: dominated only by ranks < k), by peeling."""
    a, b = obj[:, None, :], obj[None, :, :]
    dom = jnp.all(a <= b, axis=-1) & jnp.any(a < b, axis=-1)  # dom[i, j]: i dominates j
    m = obj.shape[0]

    def body(s):
        rank, assigned, r = s
        alive = ~assigned
        front = alive & ~jnp.any(alive[:, None] & dom, axis=0)
        return jnp.where(front, r, rank), assigned | front, r + 1

    rank, _, _ = jax.lax.while_loop(lambda s: ~jnp.all(s[1]), body,
                                    (jnp.zeros(m, jnp.int32), jnp.zeros(m, bool), jnp.int32(0)))
    return rank


def crowding(obj, rank):
    """Crowding distance of every row within its rank (boundary points of a rank: +inf)."""
    m, k = obj.shape
    dist = jnp.zeros(m, jnp.float32)
    for j in range(k):
        order = jnp.lexsort((obj[:, j], rank))  # by rank, then by objective j
        v, r = obj[order, j], rank[order]
        span = jnp.maximum(jnp.max(obj[:, j]) - jnp.min(obj[:, j]), 1e-12)
        prev_same = jnp.concatenate([jnp.zeros(1, bool), r[1:] == r[:-1]])
        next_same = jnp.concatenate([r[:-1] == r[1:], jnp.zeros(1, bool)])
        gap = (jnp.concatenate([v[1:], v[-1:]]) - jnp.concatenate([v[:1], v[:-1]])) / span
        d = jnp.where(prev_same & next_same, gap, jnp.inf)
        dist = dist.at[order].add(d)
    return dist


def _better(rank, crowd, i, j):
    return (rank[i] < rank[j]) | ((rank[i] == rank[j]) & (crowd[i] > crowd[j]))


def offspring(key, digits, rank, crowd, radices):
    """N children of a population by binary tournaments, uniform crossover and per-axis redraws."""
    n_pop, n = digits.shape
    k_t, k_x, k_m, k_v, k_f = jax.random.split(key, 5)
    cand = jax.random.randint(k_t, (2, 2, n_pop), 0, n_pop)  # [parent slot, contestant, child]
    parents = jnp.where(_better(rank, crowd, cand[:, 0], cand[:, 1]), cand[:, 0], cand[:, 1])
    pa, pb = digits[parents[0]], digits[parents[1]]
    child = jnp.where(jax.random.bernoulli(k_x, 0.5, pa.shape), pa, pb)
    redraw = random_digits(k_v, (n_pop,), radices)
    mutate = jax.random.bernoulli(k_m, 1.0 / n, child.shape)
    movable = jnp.asarray(radices) > 1
    forced = jax.nn.one_hot(jax.random.categorical(k_f, jnp.where(movable, 0.0, -jnp.inf), shape=(n_pop,)), n) > 0
    child = jnp.where(mutate & movable, redraw, child)
    # a child equal to its first parent moves on its forced axis; a redraw may pick the parent's option there:
    # shift it by one (mod radix)
    moved = jnp.where(redraw == pa, (pa + 1) % jnp.asarray(radices), redraw)
    return jnp.where(forced & jnp.all(child == pa, axis=-1, keepdims=True), moved, child).astype(jnp.int32)


def _archive_merge(front: pareto.Front, front_digits, t, y, digits):
    """The exact front of the archive and a batch (feasible points only: t finite), digits carried along."""
    size = front.t.shape[0]
    pool = jnp.concatenate([front_digits, digits])
    lo = jnp.arange(size + t.shape[0], dtype=jnp.int32)  # position in ``pool``: earlier points win ties
    base = front._replace(lo=lo[:size], hi=jnp.zeros(size, jnp.int32))
    new = pareto.merge_points(base, t, y, jnp.zeros(t.shape, jnp.int32), lo[size:])
    kept = jnp.isfinite(new.t)
    return new, jnp.where(kept[:, None], pool[jnp.where(kept, new.lo, 0)], 0)


@functools.partial(jax.jit, static_argnames=("radices", "n_gens"))
def _segment(aux, carry, which, *, radices, n_gens):
    def generation(carry, _):
        key, gen, digits, obj, rank, crowd, front, front_digits = carry
        key, k = jax.random.split(key)
        # generation 0 evaluates the initial population itself (its placeholder objectives lose every
        # comparison), so the initial evaluation shares this compiled function
        kids = jnp.where(gen == 0, digits, offspring(k, digits, rank, crowd, radices))
        k_obj, t, y = objectives(aux, kids, which)
        front, front_digits = _archive_merge(front, front_digits, t, y, kids)
        all_d, all_o = jnp.concatenate([digits, kids]), jnp.concatenate([obj, k_obj])
        r = nondominated_rank(all_o)
        c = crowding(all_o, r)
        keep = jnp.lexsort((-c, r))[:digits.shape[0]]
        carry = (key, gen + 1, all_d[keep], all_o[keep], r[keep], c[keep], front, front_digits)
        return carry, jnp.sum(jnp.isfinite(front.t))

    return jax.lax.scan(generation, carry, None, length=n_gens)


def _start(key, anchors, radices: tuple, popsize: int):
    """Initial carry: a uniform population (its last rows the anchors), not yet evaluated."""
    key, k = jax.random.split(key)
    digits = np.array(random_digits(k, (popsize,), radices))
    if len(anchors):
        digits[popsize - len(anchors):] = anchors
    n = len(radices)
    placeholder = jnp.full((popsize, 2), 2e4, jnp.float32)  # worse than any evaluated objective (<= 1e4)
    return (key, jnp.int32(0), jnp.asarray(digits), placeholder, jnp.zeros(popsize, jnp.int32),
            jnp.zeros(popsize, jnp.float32), pareto.init(FRONT_SIZE), jnp.zeros((FRONT_SIZE, n), jnp.int32))


POLISH_POINTS = 64  # front points (fastest first) whose coupled block the final polish scans


@functools.partial(jax.jit, static_argnames=("n_points",))
def _polish_eval(aux, front, front_digits, which, cand, n_points):
    """Evaluate the block moves ``cand`` [n_points x moves, n] and merge them into the archive."""
    _, t, y = objectives(aux, cand, which)
    return _archive_merge(front, front_digits, t, y, cand)


def _front_block_polish(aux, front, front_digits, which, block, n_points: int):
    """Every other combination of the block's axes at each of the archive's ``n_points`` fastest points (past the
    archive's end its last point is repeated: a fixed batch, one compilation), merged into the archive."""
    digits = np.asarray(front_digits)
    kept = int(np.sum(np.isfinite(np.asarray(front.t))))
    rows = [digits[min(i, kept - 1) if kept else 0] for i in range(n_points)]
    cand = np.concatenate([block_moves(r, block) for r in rows]).astype(np.int32)
    return _polish_eval(aux, front, front_digits, which, jnp.asarray(cand), n_points)


def pareto_search(problem: Problem, metric: str, budget: int = 5000, seed: int = 0, popsize: int = POPSIZE,
                  seconds: float | None = None, progress=None) -> dict:
    """NSGA-II on a flat problem: the front of (step time, ``metric``) among at most ``budget`` evaluated
    designs (whole generations of ``popsize``). Same seed, same front. Returns {"metric", "field", "front":
    [{"step_time_s", field, "design"}, ...] (step time ascending), "evaluations", "seconds", "truncated",
    "generations"}."""
    metric = metric_name(metric)
    if problem.subgrid is not None:
        raise ValueError("pareto_search needs a flat problem (a sub-grid point keeps only its fastest design)")
    t0 = time.perf_counter()
    deadline = None if seconds is None else t0 + float(seconds)
    field, maximize = METRICS[metric]
    popsize = int(max(4, min(popsize, budget)))
    block = coupled_block(problem)
    moves = block.size - 1 if block is not None else 0
    # the block polish's share: whole scans of the block at up to POLISH_POINTS front points, a quarter of the budget
    polish_points = min(POLISH_POINTS, (int(budget) // 4) // moves) if moves else 0
    gens = max((int(budget) - polish_points * moves) // popsize, 1)
    per, segments = segment_plan(gens)  # progress and --seconds checks between segments of one compiled length
    radices = tuple(problem.radices)
    which = jnp.int32(list(METRICS).index(metric))
    anchors = np.asarray(problem.anchors, np.int32).reshape(-1, problem.n_axes)[:popsize // 2]
    carry = _start(jax.random.PRNGKey(seed), anchors, radices, popsize)
    evaluations, done = 0, 0
    for s in range(segments):
        if deadline is not None and s > 0 and time.perf_counter() >= deadline:
            break
        carry, n_front = _segment(problem.aux, carry, which, radices=radices, n_gens=per)
        evaluations += per * popsize
        done += per
        if progress is not None:
            progress((s + 1) / segments, float(n_front[-1]))
    front, front_digits = carry[6], carry[7]
    if polish_points and (deadline is None or time.perf_counter() < deadline):
        front, front_digits = _front_block_polish(problem.aux, front, front_digits, which, block, polish_points)
        evaluations += polish_points * moves
    digits = np.asarray(front_digits)
    t, y = np.asarray(front.t), np.asarray(front.y)
    keep = np.isfinite(t)
    points = [{"step_time_s": float(ti), field: float(-yi if maximize else yi),
               "design": design_dict(problem, d)} for ti, yi, d in zip(t[keep], y[keep], digits[keep])]
    return {"metric": metric, "field": field, "maximize": maximize, "front": points, "evaluations": evaluations,
            "seconds": time.perf_counter() - t0, "truncated": bool(front.truncated), "generations": done,
            "popsize": popsize, "seed": seed}


# ---------------------------------------------------------------------------------------------- front quality
def coverage(found, exact, rel: float = 0.01) -> float:
    """Fraction of the exact front's points (t, y) [P, 2] (both minimized) that some found point matches within
    ``rel``: t' <= t (1 + rel) and y' <= y + rel |y|."""
    found, exact = np.asarray(found, np.float64).reshape(-1, 2), np.asarray(exact, np.float64).reshape(-1, 2)
    if len(exact) == 0:
        return 1.0
    if len(found) == 0:
        return 0.0
    ok_t = found[None, :, 0] <= exact[:, None, 0] * (1 + rel)
    ok_y = found[None, :, 1] <= exact[:, None, 1] + rel * np.abs(exact[:, None, 1])
    return float(np.mean(np.any(ok_t & ok_y, axis=1)))


def hypervolume(points, ref) -> float:
    """Area dominated by 2-D points (both minimized) up to the reference point ``ref`` = (t, y)."""
    p = np.asarray(points, np.float64).reshape(-1, 2)
    p = p[(p[:, 0] < ref[0]) & (p[:, 1] < ref[1])]
    p = p[np.lexsort((p[:, 1], p[:, 0]))]
    area, y_min = 0.0, ref[1]
    for i, (t, y) in enumerate(p):
        if y < y_min:
            area += (ref[0] - t) * (y_min - y)
            y_min = y
    return area

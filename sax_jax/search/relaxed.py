"""Gradient-relaxed search: per-axis logits -> probabilities, optimized with optax.

Each axis a holds logits theta_a over its options; p_a = softmax(theta_a / tau). The search minimizes the
expected fitness E_{x ~ p}[f(x)] with two gradient estimators combined in one surrogate loss:

- **score function** (REINFORCE) over a batch of sampled designs, evaluated exactly in one batched call:
  grad = mean_b (u_b - baseline) grad log p(x_b), with u the centred ranks of the batch (the baseline is
  their mean, 0), so the penalties of infeasible points cannot blow up the step;
- **pathwise** through the continuous relaxation of numeric axes (tp, pp, mbs, qps, ...): the relaxed knob is
  the geometric mean of its options under p, exp(sum_k p_k log v_k); the model (smooth in its numeric leaves)
  is differentiated at that point for a few sampled categorical settings (``Problem.smooth_fn``).

The logits start from the option frequencies of the best points of a uniform sample (a fifth of the budget,
``genome.explore``). The temperature tau anneals geometrically from ``tau0`` to ``tau1``. At the end the argmax design is rounded
(one option per axis), evaluated exactly, compared with the best sampled design, and the winner is polished by
one- and two-axis moves (``genome.polish``), then by **block moves** over the coupled pipeline axes (``BLOCK_AXES``:
schedule x vpp x pp, where the search chooses all three): every other combination of them at the polished design
in one batched call, and a short one-axis descent from each of the ``BLOCK_TOP`` best (``block_polish``). The
per-axis distribution cannot hold their coupling (vpp > 1 only under the interleaved schedule, each schedule has
its own best pp), and one- and two-axis moves cannot cross it: e.g. PP 8 / ZB-H2 -> PP 4 / VPP 4 / interleaved,
with tp or mbs following. Every evaluation (samples, pathwise points, polish, block moves) counts against the
budget; the block moves' share comes out of the sampling (whole segments), never out of the polish's.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .block import BLOCK_AXES, block_budget, block_polish, coupled_block
from .genome import (Problem, SearchResult, archive_init, archive_update, complete, evaluate_digits, explore,
                     explore_count, fitness_outputs, multi_polish, points_budget, polish_reserve, safe_fitness)

N_SEGMENTS = 10
ELITE = 32  # explored designs that shape the initial distribution
NEG = -1e9  # logit of a padding option


def _tables(problem: Problem):
    """Padded option mask [n, R], log option values [n, R] and the relaxable mask [n]."""
    n, rmax = problem.n_axes, max(problem.radices)
    mask = np.zeros((n, rmax), bool)
    logv = np.zeros((n, rmax), np.float32)
    relax = np.zeros((n,), bool)
    for a, r in enumerate(problem.radices):
        mask[a, :r] = True
        if problem.relaxable and problem.relaxable[a]:
            logv[a, :r] = np.log(np.asarray(problem.values[a], np.float64))
            relax[a] = True
    return jnp.asarray(mask), jnp.asarray(logv), jnp.asarray(relax)


def probabilities(logits, mask, tau):
    return jax.nn.softmax(jnp.where(mask, logits / tau, NEG), axis=-1)


def _centred_ranks(f):
    ranks = jnp.argsort(jnp.argsort(f)).astype(jnp.float32)
    return ranks / jnp.maximum(f.shape[0] - 1, 1) - 0.5


def surrogate(logits, digits, utility, aux, tau, tables, *, smooth_fn, path_samples, path_weight):
    """Loss whose gradient is the combined estimator (score function + pathwise)."""
    mask, logv, relax = tables
    logp = jax.nn.log_softmax(jnp.where(mask, logits / tau, NEG), axis=-1)  # [n, R]
    n = logits.shape[0]
    chosen = logp[jnp.arange(n)[None, :], digits]  # [B, n]
    loss = jnp.mean(jax.lax.stop_gradient(utility) * jnp.sum(chosen, axis=-1))
    if smooth_fn is not None and path_samples > 0 and path_weight > 0:
        p = jnp.exp(logp)
        soft = jnp.exp(jnp.sum(p * logv, axis=-1))  # geometric mean of each relaxable axis' options
        picked = jnp.exp(logv[jnp.arange(n)[None, :], digits[:path_samples]])  # [S, n] (1 where not relaxable)
        relaxed = jnp.where(relax[None, :], soft[None, :], picked)
        vals = jax.vmap(smooth_fn, in_axes=(None, 0, 0))(aux, digits[:path_samples], relaxed)
        vals = jnp.where(jnp.isfinite(vals), vals, 0.0)
        loss = loss + path_weight * jnp.mean(vals)
    return loss


def relaxed_objective(problem: Problem, logits, key, tau=1.0, batch=32, path_samples=4, path_weight=1.0):
    """The surrogate loss at ``logits`` [n, max radix] for one sampled batch (tests check its gradient)."""
    tables = _tables(problem)
    mask = tables[0]
    digits = jax.random.categorical(key, jnp.where(mask, logits / tau, NEG)[None], axis=-1,
                                    shape=(batch, problem.n_axes)).astype(jnp.int32)
    f, _ = fitness_outputs(problem.fitness_fn(problem.aux, digits))
    return surrogate(logits, digits, _centred_ranks(safe_fitness(f)), problem.aux, tau, tables,
                     smooth_fn=problem.smooth_fn if any(problem.relaxable) else None,
                     path_samples=min(path_samples, batch), path_weight=path_weight)


def warm_logits(problem: Problem, elite) -> np.ndarray:
    """Initial logits [n, max radix]: log of (1 + how often each option appears among the explored elite), so
    the distribution starts where a uniform sample found good designs (zeros without an elite)."""
    logits = np.zeros((problem.n_axes, max(problem.radices)), np.float32)
    for row in np.asarray(elite, np.int64).reshape(-1, problem.n_axes):
        logits[np.arange(problem.n_axes), row] += 1.0
    return np.log1p(logits)


@functools.lru_cache(maxsize=None)
def _optimizer(lr: float):
    return optax.adam(lr)


@functools.partial(jax.jit, static_argnames=("fitness_fn", "smooth_fn", "radices", "batch", "path_samples",
                                             "path_weight", "lr", "n_steps"))
def _segment(aux, carry, tables, taus, *, fitness_fn, smooth_fn, radices, batch, path_samples, path_weight, lr,
             n_steps):
    opt = _optimizer(lr)
    mask = tables[0]
    n = len(radices)

    def step(carry, tau):
        key, logits, opt_state, arc = carry
        key, k = jax.random.split(key)
        digits = jax.random.categorical(k, jnp.where(mask, logits / tau, NEG)[None], axis=-1,
                                        shape=(batch, n)).astype(jnp.int32)
        f, v = fitness_outputs(fitness_fn(aux, digits))  # the whole batch in one call
        f = safe_fitness(f)
        arc = archive_update(arc, digits, f, v)
        grads = jax.grad(surrogate)(logits, digits, _centred_ranks(f), aux, tau, tables, smooth_fn=smooth_fn,
                                    path_samples=path_samples, path_weight=path_weight)
        finite = jnp.all(jnp.isfinite(grads))
        grads = jnp.where(mask & finite, grads, 0.0)  # a non-finite estimate is skipped, and reported
        updates, opt_state = opt.update(grads, opt_state, logits)
        logits = optax.apply_updates(logits, updates)
        return (key, logits, opt_state, arc), (arc.value, finite, jnp.sqrt(jnp.sum(grads ** 2)))

    return jax.lax.scan(step, carry, taus, length=n_steps)


def relaxed_search(problem: Problem, budget: int = 5000, seed: int = 0, batch: int = 64, lr: float = 0.1,
                   tau0: float = 1.0, tau1: float = 0.2, path_samples: int = 4, path_weight: float = 1.0,
                   do_polish: bool = True, do_explore: bool = True, progress=None,
                   seconds: float | None = None, block_axes=BLOCK_AXES) -> SearchResult:
    """Optimize the per-axis distributions; at most ``budget`` evaluations (designs: a sub-grid point costs
    ``problem.point_designs``) and, with ``seconds``, stop between segments and polish rounds once that much
    wall time has passed. ``block_axes``: the axes the final ``block_polish`` moves together (``()``: none).
    The result's digits cover every axis (``genome.complete``)."""
    t0 = time.perf_counter()
    deadline = None if seconds is None else t0 + float(seconds)
    unit = problem.point_designs
    budget = points_budget(problem, budget)
    tables = _tables(problem)
    smooth = problem.smooth_fn if (problem.smooth_fn is not None and any(problem.relaxable)) else None
    path_samples = min(path_samples, batch) if smooth is not None else 0
    per_step = batch + path_samples
    block = coupled_block(problem, block_axes) if do_polish else None
    reserve = polish_reserve(problem, budget)
    key, k_explore = jax.random.split(jax.random.PRNGKey(seed))
    n_explore = explore_count(problem, budget) if do_explore else 0
    seeds = explore(problem, k_explore, n_explore, problem.anchors)
    steps = max((budget - n_explore - reserve - 1) // per_step, 1)
    segments = min(N_SEGMENTS, steps)
    per = steps // segments
    steps = per * segments
    # the block moves' evaluations come out of the sampling (whole segments), never out of the polish; none when
    # that would take more than half of the sampling steps
    for_block = block_budget(problem, block, budget)
    short = (steps * per_step - for_block) // per_step
    if for_block and short >= max(steps // 2, 1):
        segments = min(N_SEGMENTS, short)
        per = short // segments
        steps = per * segments
    else:
        for_block = 0
    taus = tau0 * (tau1 / tau0) ** (np.arange(steps) / max(steps - 1, 1))
    logits = jnp.asarray(warm_logits(problem, seeds[0][:ELITE]), jnp.float32)
    arc = archive_init(problem.n_axes)
    if n_explore:
        arc = archive_update(arc, jnp.asarray(seeds[0][:1]), jnp.asarray(seeds[1][:1]), jnp.asarray(seeds[2][:1]))
    carry = (key, logits, _optimizer(lr).init(logits), arc)
    static = dict(fitness_fn=problem.fitness_fn, smooth_fn=smooth, radices=tuple(problem.radices), batch=batch,
                  path_samples=path_samples, path_weight=float(path_weight), lr=float(lr), n_steps=per)
    history, finite, norms = [], [], []
    done = 0
    for s in range(segments):
        if deadline is not None and s > 0 and time.perf_counter() >= deadline:
            break
        done += per
        carry, (best, ok, norm) = _segment(problem.aux, carry, tables,
                                           jnp.asarray(taus[s * per:(s + 1) * per], jnp.float32), **static)
        history.append(np.asarray(best))
        finite.append(np.asarray(ok))
        norms.append(np.asarray(norm))
        if progress is not None:
            progress((s + 1) / segments, float(best[-1]))
    evaluations = n_explore + done * per_step
    _, logits, _, arc = carry
    rounded = np.asarray(jnp.argmax(jnp.where(tables[0], logits, NEG), axis=-1), np.int32)
    f_r, v_r = evaluate_digits(problem, rounded[None])
    evaluations += 1
    digits, fitness, value = np.asarray(arc.digits), float(arc.fitness), float(arc.value)
    if float(f_r[0]) < fitness:
        digits, fitness, value = rounded, float(f_r[0]), float(v_r[0])
    left = budget - evaluations
    local = False
    if do_polish and left - for_block > 0:
        digits, fitness, value, used, local = multi_polish(problem, [digits, *seeds[0][:2]], [fitness, *seeds[1][:2]],
                                                           left - for_block, seed, deadline)
        evaluations += used
    block_improved = False
    if for_block and budget - evaluations > 0:
        digits, fitness, value, used, block_improved, block_local = block_polish(
            problem, block, digits, fitness, value, budget - evaluations, deadline)
        evaluations += used
        local = block_local if block_improved else local
    probs = np.asarray(probabilities(logits, tables[0], taus[-1]))
    return SearchResult(method="relaxed", strategy="adam", digits=complete(problem, digits), value=value,
                        fitness=fitness, evaluations=evaluations * unit, seconds=time.perf_counter() - t0,
                        history=np.concatenate(history), seed=seed,
                        extras={"gradients_finite": bool(np.all(np.concatenate(finite))),
                                "mean_gradient_norm": float(np.mean(np.concatenate(norms))),
                                "local_optimum": local,
                                # how settled the distribution is: mean over axes of the top option's probability
                                "confidence": float(np.mean(probs.max(axis=-1))), "steps": done,
                                "block_axes": ",".join(problem.names[a] for a in block.axes) if for_block else "",
                                "block_improved": block_improved,
                                "designs_per_point": unit})

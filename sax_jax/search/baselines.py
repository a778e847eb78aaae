"""Named reference designs (a scenario's ``baselines``) and every search result as a speedup over them.

speedup = baseline step time / found step time (> 1: the search found something faster). Tokens/s and MFU are
both inversely proportional to the step time, so the same ratio is the speedup under every objective. An
infeasible baseline (e.g. one that no longer fits in memory) has no speedup: ``None`` (JSON ``null``).
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ..evaluate import evaluate_one
from .genome import Problem, SearchResult, design_dict, scenario_digits


def baseline_costs(scenario) -> dict:
    """{name: {"design": {...}, "step_time_s": float | None, "feasible": bool}} for each named baseline."""
    out = {}
    for name in scenario.baselines:
        design = scenario.baseline_design(name)
        cost = evaluate_one(scenario, design)
        out[name] = {"design": scenario.space.to_dict(design),
                     "step_time_s": cost["step_time_s"] if cost["feasible"] else None,
                     "feasible": cost["feasible"], "memory_bytes": cost["memory_bytes"],
                     "cross_building_bytes": cost["cross_building_bytes"],
                     "goodput_tokens_per_s": cost["goodput_tokens_per_s"],
                     "time_to_target_s": cost["time_to_target_s"], "train_cost_usd": cost["train_cost_usd"]}
    return out


def speedup(baseline_s, found_s):
    if baseline_s is None or found_s is None or not math.isfinite(found_s) or found_s <= 0:
        return None
    return float(baseline_s) / float(found_s)


def speedups(baselines: dict, found_s) -> dict:
    return {name: speedup(b["step_time_s"], found_s) for name, b in baselines.items()}


def best_baseline(baselines: dict):
    """(name, step time) of the fastest feasible baseline, or (None, None)."""
    feasible = [(b["step_time_s"], n) for n, b in baselines.items() if b["step_time_s"] is not None]
    if not feasible:
        return None, None
    t, n = min(feasible)
    return n, t


def best_record(problem: Problem, result: SearchResult) -> dict:
    """The best design of a search, evaluated exactly, as a JSON-ready dict."""
    sc = problem.scenario
    digits = scenario_digits(problem, result.digits)
    design = sc.space.decode_digits(jnp.asarray(digits, jnp.int32))
    cost = evaluate_one(sc, design)
    return {"design": design_dict(problem, result.digits), "index": int(sc.space.encode(digits)),
            "step_time_s": cost["step_time_s"] if cost["feasible"] else None,
            "tokens_per_s": cost["tokens_per_s"], "mfu": cost["mfu"], "memory_bytes": cost["memory_bytes"],
            "feasible": cost["feasible"], "violation": cost["violation"]}


def search_record(problem: Problem, result: SearchResult, budget: int | None = None) -> dict:
    """What ``sax search --json`` prints for an evolution / relaxed / random search."""
    sc = problem.scenario
    base = baseline_costs(sc)
    best = best_record(problem, result)
    return {"scenario": sc.name, "method": result.method, "strategy": result.strategy, "seed": result.seed,
            "budget": budget, "objective": sc.objective, "best": best, "evaluations": int(result.evaluations),
            "space_size": problem.size, "fraction_of_space": result.evaluations / float(problem.size),
            "seconds": result.seconds,
            "local_optimum": bool(result.extras.get("local_optimum", False)),
            "diagnostics": {k: v for k, v in result.extras.items() if isinstance(v, (bool, int, float, str))},
            "history": [float(x) if np.isfinite(x) else None for x in result.history],
            "baselines": {n: b["step_time_s"] for n, b in base.items()},
            "speedup_vs": speedups(base, best["step_time_s"])}

"""One search of a scenario by name of method: the Python API behind `sax search` (``sax_jax.search``)."""
from __future__ import annotations

import math
import numbers

from ..specs import ConfigError

METHODS = ("exhaustive", "evolution", "relaxed", "random")
MAX_BUDGET = 10**9  # model evaluations; beyond this use `sax sweep` (exhaustive, streamed, resumable)
MAX_SEED = 2**32 - 1


def check_search_args(method: str, strategy: str | None = None, budget=5000, seed=0) -> None:
    """Method, strategy, budget and seed checked before anything is compiled."""
    if method not in METHODS:
        raise ConfigError(None, "--method", method, "unknown search method", f"methods: {', '.join(METHODS)}")
    if strategy is not None and method != "evolution":
        raise ConfigError(None, "--strategy", strategy, f"only applies to --method evolution, not {method}",
                          "drop --strategy or use --method evolution")
    if method == "evolution" and strategy is not None:
        from .evolution import STRATEGIES, strategy_name
        try:
            strategy_name(strategy)
        except ValueError:
            raise ConfigError(None, "--strategy", strategy, "unknown evolution strategy",
                              f"strategies are: {', '.join(STRATEGIES)}") from None
    if method == "exhaustive":
        return
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or not 1 <= budget <= MAX_BUDGET:
        raise ConfigError(None, "--budget", budget, f"must be a whole number of evaluations in [1, {MAX_BUDGET:,}]",
                          "to evaluate a whole space use `sax sweep` (or `sax search --method exhaustive`)")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(None, "--seed", seed, f"must be a whole number in [0, {MAX_SEED}]")


def run_search(scenario, method: str, strategy: str | None = None, budget: int = 5000, seed: int = 0,
               progress=None) -> dict:
    """One search as a JSON-ready record (the Python API behind `sax search`)."""
    from .baselines import search_record
    from .genome import scenario_problem
    check_search_args(method, strategy, budget, seed)
    if method == "exhaustive":
        return _exhaustive(scenario, progress is not None)
    problem = scenario_problem(scenario)
    if method == "evolution":
        from .evolution import DEFAULT_STRATEGY, STRATEGIES, evolve, strategy_name
        try:
            name = strategy_name(strategy or DEFAULT_STRATEGY)
        except ValueError:
            raise ConfigError(None, "--strategy", strategy, "unknown evolution strategy",
                              f"strategies are: {', '.join(STRATEGIES)}") from None
        result = evolve(problem, name, budget=budget, seed=seed, progress=progress)
    elif method == "relaxed":
        from .relaxed import relaxed_search
        result = relaxed_search(problem, budget=budget, seed=seed, progress=progress)
    else:
        from .random_search import random_search
        result = random_search(problem, budget=budget, seed=seed)
    return search_record(problem, result, budget)


def _exhaustive(scenario, show_progress: bool) -> dict:
    from .baselines import baseline_costs, speedups
    from .exhaustive import sweep  # written alongside; imported lazily
    res = sweep(scenario, top_k=10, progress=show_progress)
    top = res.top[0] if res.top else None
    t = top["step_time_s"] if top is not None else None
    t = t if t is not None and math.isfinite(t) else None
    base = baseline_costs(scenario)
    best = dict(top) if top is not None else {"design": None, "step_time_s": None}
    best["step_time_s"] = t
    return {"scenario": scenario.name, "method": "exhaustive", "strategy": None, "seed": None, "budget": None,
            "objective": scenario.objective, "best": best, "evaluations": int(res.n_designs),
            "space_size": scenario.space.size, "fraction_of_space": res.n_designs / float(scenario.space.size),
            "seconds": res.seconds, "n_feasible": int(res.n_feasible),
            "baselines": {n: b["step_time_s"] for n, b in base.items()}, "speedup_vs": speedups(base, t)}

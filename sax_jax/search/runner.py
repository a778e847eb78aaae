"""One search of a scenario by name of method: the Python API behind `sax search` (``sax_jax.search``)."""
from __future__ import annotations

import math
import numbers

from ..specs import ConfigError

METHODS = ("exhaustive", "evolution", "relaxed", "random")
# `sax search --pareto NAME` -> (Cost field, maximized?): the one table of the Pareto search's metrics
PARETO = {"memory": ("memory_bytes", False), "cross_bytes": ("cross_building_bytes", False),
          "goodput": ("goodput_tokens_per_s", True)}
PARETO_METRICS = tuple(PARETO)
MAX_BUDGET = 10**9  # model evaluations; beyond this use `sax sweep` (exhaustive, streamed, resumable)
MAX_SEED = 2**32 - 1
MAX_SECONDS = 7 * 86400
RATE_FLOOR_CPU, RATE_FLOOR_ACCEL = 1e6, 1e8  # designs/s that size --seconds searches' sub-grids


def check_search_args(method: str, strategy: str | None = None, budget=5000, seed=0, seconds=None) -> None:
    """Method, strategy, budget, seed and time limit checked before anything is compiled."""
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
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, numbers.Real)
                                or not math.isfinite(seconds) or not 0 < seconds <= MAX_SECONDS):
        raise ConfigError(None, "--seconds", seconds, f"must be a number of seconds in (0, {MAX_SECONDS:,}]",
                          "e.g. --seconds 60")


def problem_for(scenario, budget: int, subgrid: bool = True):
    """The problem a search of ``budget`` designs runs on: a sub-grid problem (``subgrid.py``: each point the
    best of up to ``inner_for_budget(budget)`` designs over the last axes, evaluated the sweep's way), or the
    flat one (``subgrid=False``, or when the budget leaves sub-grids of one design)."""
    from .genome import scenario_problem
    from .subgrid import inner_for_budget
    return scenario_problem(scenario, inner_max=inner_for_budget(budget) if subgrid else None)


def calibrate(problem, seconds: float, budget: int, t0: float) -> int:
    """The budget (designs) a search can spend in what is left of ``seconds`` since ``t0``: the problem's
    evaluator is compiled and timed on one block (a warm call), and the search gets 70% of the remaining time
    at that rate (explore, strategy bookkeeping and polish take the rest); never more than ``budget``."""
    import time

    import numpy as np

    from .genome import block_size, evaluate_points, random_digits
    import jax
    digits = np.asarray(random_digits(jax.random.PRNGKey(0), (block_size(problem),), tuple(problem.radices)))
    evaluate_points(problem, digits)  # compiles
    t = time.perf_counter()
    evaluate_points(problem, digits)
    rate = len(digits) * problem.point_designs / max(time.perf_counter() - t, 1e-6)
    left = seconds - (time.perf_counter() - t0)
    fits = max(problem.point_designs, 0.7 * rate * max(left, 0.0))
    # a power of two: the strategies' plans (compiled scan lengths, schedules) depend on the budget, so a
    # quantized budget reuses the compiled segments of an earlier search at a similar rate
    return int(min(budget, 2 ** int(np.floor(np.log2(fits)))))


def run_search(scenario, method: str, strategy: str | None = None, budget: int = 5000, seed: int = 0,
               progress=None, seconds: float | None = None, subgrid: bool = True) -> dict:
    """One search as a JSON-ready record (the Python API behind `sax search`).

    budget: designs evaluated at most; seconds: wall-time limit (the budget is cut to what the measured
    evaluator rate allows, and the search stops between segments once the time is up); subgrid: evaluate
    sub-grids the sweep's way (``subgrid.py``; False: flat batches of single designs)."""
    import time
    from .baselines import search_record
    from .genome import reporting_problem
    t0 = time.perf_counter()
    check_search_args(method, strategy, budget, seed, seconds)
    if method == "exhaustive":
        return _exhaustive(scenario, progress is not None)
    asked, asked_s = budget, seconds
    if seconds is None:
        problem = problem_for(scenario, budget, subgrid)
    else:
        # sub-grids sized from a fixed floor rate, not the measured one: the same --seconds picks the same
        # problem (one compile), whatever the machine's load; the budget then comes from the measured rate
        import jax
        floor = RATE_FLOOR_CPU if jax.devices()[0].platform == "cpu" else RATE_FLOOR_ACCEL
        problem = problem_for(scenario, int(min(budget, seconds * floor)), subgrid)
        budget = calibrate(problem, seconds, budget, t0)
        seconds = max(seconds - (time.perf_counter() - t0), 1e-3)
    if method == "evolution":
        from .evolution import DEFAULT_STRATEGY, STRATEGIES, evolve, strategy_name
        try:
            name = strategy_name(strategy or DEFAULT_STRATEGY)
        except ValueError:
            raise ConfigError(None, "--strategy", strategy, "unknown evolution strategy",
                              f"strategies are: {', '.join(STRATEGIES)}") from None
        result = evolve(problem, name, budget=budget, seed=seed, progress=progress, seconds=seconds)
    elif method == "relaxed":
        from .relaxed import relaxed_search
        result = relaxed_search(problem, budget=budget, seed=seed, progress=progress, seconds=seconds)
    else:
        from .random_search import random_search
        result = random_search(problem, budget=budget, seed=seed)
    rec = search_record(reporting_problem(problem), result, asked)
    rec["designs_per_point"] = problem.point_designs
    rec["inner_axes"] = [] if problem.subgrid is None else list(problem.full.names[problem.subgrid.split:])
    rec["designs_per_s"] = result.evaluations / max(result.seconds, 1e-9)
    if asked_s is not None:
        rec["seconds_limit"] = asked_s
        rec["budget_from_seconds"] = budget
    return rec


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


def run_pareto(scenario, metric: str, budget: int = 5000, seed: int = 0, progress=None,
               seconds: float | None = None) -> dict:
    """`sax search --pareto METRIC`: the front of step time vs METRIC (``multiobjective.METRICS``) from the
    NSGA-II search of single designs (``multiobjective.py``), as a JSON-ready record."""
    from .genome import scenario_problem
    from .multiobjective import pareto_search
    if metric not in PARETO_METRICS:
        raise ConfigError(None, "--pareto", metric, "unknown Pareto metric", f"metrics: {', '.join(PARETO_METRICS)}")
    import time
    t0 = time.perf_counter()
    check_search_args("evolution", None, budget, seed, seconds)
    problem = scenario_problem(scenario)
    if seconds is not None:  # as run_search: the budget the measured rate allows, the rest of the time as the limit
        budget = calibrate(problem, seconds, budget, t0)
        seconds = max(seconds - (time.perf_counter() - t0), 1e-3)
    res = pareto_search(problem, metric, budget=budget, seed=seed, seconds=seconds, progress=progress)
    return {"scenario": scenario.name, "method": "evolution", "strategy": "nsga2", "objective": scenario.objective,
            "budget": budget, "space_size": problem.size, "fraction_of_space": res["evaluations"] / float(problem.size),
            **res}

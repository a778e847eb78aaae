"""`sax search SCENARIO --method {exhaustive,evolution,relaxed,random} [--strategy NAME] [--budget N] [--seed S]
[--json]`: find a fast design and report it as a speedup over the scenario's named baselines.

Same seed, same result. ``--json`` prints one object: {"method", "best": {"design", "step_time_s", ...},
"evaluations", "seconds", "speedup_vs": {BASELINE: ratio}, ...}.
"""
from __future__ import annotations

import json
import math
import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..config import load_scenario
from ..report import fmt_time
from ..specs import ConfigError

METHODS = ("exhaustive", "evolution", "relaxed", "random")


def _progress_bar(enabled: bool):
    if not enabled:
        return None, None
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                   TextColumn("best {task.fields[best]}"), TimeElapsedColumn(), console=Console(stderr=True),
                   transient=True)
    task = bar.add_task("searching", total=1.0, best="-")

    def update(fraction, best):
        bar.update(task, completed=fraction, best=fmt_time(best))
    return bar, update


def run_search(scenario, method: str, strategy: str | None = None, budget: int = 5000, seed: int = 0,
               progress=None) -> dict:
    """One search as a JSON-ready record (the Python API behind `sax search`)."""
    from ..search.baselines import search_record
    from ..search.genome import scenario_problem
    if method not in METHODS:
        raise ConfigError(None, "--method", method, "unknown search method", f"methods: {', '.join(METHODS)}")
    if budget < 1:
        raise ConfigError(None, "--budget", budget, "must be a positive number of evaluations")
    if method == "exhaustive":
        return _exhaustive(scenario, progress is not None)
    problem = scenario_problem(scenario)
    if method == "evolution":
        from ..search.evolution import DEFAULT_STRATEGY, STRATEGIES, evolve, strategy_name
        try:
            name = strategy_name(strategy or DEFAULT_STRATEGY)
        except ValueError:
            raise ConfigError(None, "--strategy", strategy, "unknown evolution strategy",
                              f"strategies are: {', '.join(STRATEGIES)}") from None
        result = evolve(problem, name, budget=budget, seed=seed, progress=progress)
    elif method == "relaxed":
        from ..search.relaxed import relaxed_search
        result = relaxed_search(problem, budget=budget, seed=seed, progress=progress)
    else:
        from ..search.random_search import random_search
        result = random_search(problem, budget=budget, seed=seed)
    return search_record(problem, result, budget)


def _exhaustive(scenario, show_progress: bool) -> dict:
    from ..search.baselines import baseline_costs, speedups
    from ..search.exhaustive import sweep  # written alongside; imported lazily
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


def print_record(rec: dict, console: Console | None = None):
    con = console or Console()
    title = f"sax search: {rec['scenario']} ({rec['method']}" + (f"/{rec['strategy']}" if rec.get("strategy") else "") \
        + (f", seed {rec['seed']})" if rec.get("seed") is not None else ")")
    t = Table(title=title, show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value")
    best = rec["best"]
    t.add_row("best design", ", ".join(f"{k}={v}" for k, v in (best.get("design") or {}).items()) or "-")
    st = best.get("step_time_s")
    t.add_row("step time", fmt_time(st) if st is not None else "[red]no feasible design found[/red]")
    if best.get("tokens_per_s"):
        t.add_row("tokens/s, MFU", f"{best['tokens_per_s']:,.0f}, {100 * best['mfu']:.1f} %")
    t.add_row("evaluations", f"{rec['evaluations']:,} of {rec['space_size']:.3g} ({100 * rec['fraction_of_space']:.3g} %)")
    t.add_row("seconds", f"{rec['seconds']:.2f}")
    con.print(t)
    b = Table(title="speedup over the scenario's baselines")
    b.add_column("baseline")
    b.add_column("step time", justify="right")
    b.add_column("speedup", justify="right")
    for name, s in rec["speedup_vs"].items():
        bt = rec["baselines"][name]
        b.add_row(name, fmt_time(bt) if bt is not None else "infeasible", f"{s:.3f}x" if s is not None else "-")
    con.print(b)


def run(args) -> int:
    scenario = load_scenario(args.scenario)
    bar, update = _progress_bar(not args.json and sys.stderr.isatty() and args.method != "random")
    if bar is not None:
        with bar:
            rec = run_search(scenario, args.method, args.strategy, args.budget, args.seed, update)
    else:
        rec = run_search(scenario, args.method, args.strategy, args.budget, args.seed,
                         None if args.json else (lambda f, b: None))
    if args.json:
        rec.pop("history", None)
        print(json.dumps(rec, indent=2, allow_nan=False, default=str))
    else:
        print_record(rec)
    return 0


def register(sub):
    p = sub.add_parser("search", help="search a design space (exhaustive, evolution, relaxed, random)")
    p.add_argument("scenario", help="scenario YAML, e.g. configs/scenarios/huge-four-buildings.yaml")
    p.add_argument("--method", choices=METHODS, default="evolution", help="search method (default: evolution)")
    p.add_argument("--strategy", default=None,
                   help="evolution strategy: cma_es, ga, de (differential evolution), sa (simulated "
                        "annealing); default: de")
    p.add_argument("--budget", type=int, default=5000, help="model evaluations at most (default 5000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same result)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)

"""`sax search SCENARIO --method {exhaustive,evolution,relaxed,random} [--strategy NAME] [--budget N]
[--seconds S] [--seed S] [--flat] [--json]`: find a fast design and report it as a speedup over the scenario's named baselines.
`sax search SCENARIO --pareto {memory,cross_bytes,goodput} [--budget N] [--seed S] [--json]`: the Pareto front of
step time vs that metric from the multi-objective evolution (``search/multiobjective.py``).

Same seed, same result. ``--json`` prints one object: {"method", "best": {"design", "step_time_s", ...},
"evaluations", "seconds", "speedup_vs": {BASELINE: ratio}, ...}.
"""
from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import print_json, whole_number
from ..config import load_scenario
from ..report import fmt_time
from ..search.runner import MAX_BUDGET, METHODS, PARETO_METRICS, check_search_args, run_pareto, run_search
from ..specs import ConfigError
from ..trust import feasible_mfu, print_warnings, warnings_for


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
    ev = f"{rec['evaluations']:,} of {rec['space_size']:.3g} ({100 * rec['fraction_of_space']:.3g} %)"
    if rec.get("budget") and rec["evaluations"] < rec["budget"]:
        ev += f"; budget {rec['budget']:,}, used in whole generations/batches"
    t.add_row("evaluations", ev)
    t.add_row("seconds", f"{rec['seconds']:.2f}" + (f" (limit {rec['seconds_limit']:g})"
                                                     if rec.get("seconds_limit") else ""))
    if rec.get("designs_per_point", 1) > 1:
        t.add_row("search points", f"sub-grids of {rec['designs_per_point']:,} designs over "
                                   f"{', '.join(rec['inner_axes'])}, {rec['designs_per_s']:.3g} designs/s")
    con.print(t)
    b = Table(title="speedup over the scenario's baselines")
    b.add_column("baseline")
    b.add_column("step time", justify="right")
    b.add_column("speedup", justify="right")
    for name, s in rec["speedup_vs"].items():
        bt = rec["baselines"][name]
        b.add_row(name, fmt_time(bt) if bt is not None else "infeasible", f"{s:.3f}x" if s is not None else "-")
    con.print(b)
    print_warnings(rec.get("warnings", []), con)


def check_robust_args(args) -> None:
    from .sweep import MAX_ROBUST_TOP, MAX_SAMPLES
    for flag, value, hi in (("--samples", args.samples, MAX_SAMPLES), ("--robust-top", args.robust_top,
                                                                       MAX_ROBUST_TOP)):
        if value is not None and not args.robust:
            raise ConfigError(None, flag, value, "only with --robust", f"sax search SCENARIO --robust {flag} ...")
        if value is not None and not 1 <= value <= hi:
            raise ConfigError(None, flag, value, f"must be a whole number in [1, {hi:,}]")


def run(args) -> int:
    if args.method == "exhaustive" and (args.budget is not None or args.seed is not None):
        raise ConfigError(None, "--budget" if args.budget is not None else "--seed",
                          args.budget if args.budget is not None else args.seed,
                          "does not apply to --method exhaustive (it evaluates every design)",
                          "drop it, or pick --method evolution/relaxed/random")
    if args.method == "exhaustive" and args.seconds is not None:
        raise ConfigError(None, "--seconds", args.seconds, "does not apply to --method exhaustive",
                          "drop it, or pick --method evolution/relaxed/random")
    # with --seconds alone the time limits the search (the budget is sized from the measured rate)
    args.budget = (MAX_BUDGET if args.seconds is not None else 5000) if args.budget is None else args.budget
    args.seed = 0 if args.seed is None else args.seed
    check_search_args(args.method, args.strategy, args.budget, args.seed, args.seconds)  # before any compile
    check_robust_args(args)
    if args.pareto is not None:
        return _run_pareto(args)
    scenario = load_scenario(args.scenario)
    bar, update = _progress_bar(not args.json and sys.stderr.isatty() and args.method != "random")
    if bar is not None:
        with bar:
            rec = run_search(scenario, args.method, args.strategy, args.budget, args.seed, update,
                             seconds=args.seconds, subgrid=not args.flat)
    else:
        rec = run_search(scenario, args.method, args.strategy, args.budget, args.seed,
                         None if args.json else (lambda f, b: None), seconds=args.seconds, subgrid=not args.flat)
    best = (rec.get("best") or {}).get("design")
    rec["warnings"] = warnings_for(scenario, [best] if best else [], feasible_mfu(rec.get("best")))
    if args.robust and best and rec["best"].get("step_time_s") is not None:
        from .. import robust
        from ..engine import DEFAULT_ENGINE
        cands = robust.neighbourhood(scenario, best, args.robust_top or robust.DEFAULT_TOP)
        rec["robust"] = robust.robust_ranking(scenario, DEFAULT_ENGINE.params(scenario), cands,
                                              {n: scenario.baseline_design(n) for n in scenario.baselines},
                                              args.samples or robust.DEFAULT_SAMPLES, args.seed)
        rec["robust"]["candidates_from"] = "the found design and its feasible one-axis neighbours"
    if args.json:
        rec.pop("history", None)
        print_json(rec)
    else:
        print_record(rec)
        if rec.get("robust"):
            from .sweep import print_robust
            print_robust(rec["robust"], Console(), scenario.space, 10)
    return 0


def _run_pareto(args) -> int:
    if args.method != "evolution" or args.strategy is not None or args.robust or args.flat:
        flag = "--robust" if args.robust else "--flat" if args.flat else "--strategy" if args.strategy else "--method"
        raise ConfigError(None, flag, getattr(args, flag[2:]), "does not apply to --pareto",
                          "--pareto runs the multi-objective evolution (NSGA-II) over single designs")
    scenario = load_scenario(args.scenario)
    rec = run_pareto(scenario, args.pareto, args.budget, args.seed, seconds=args.seconds)
    if args.json:
        print_json(rec)
        return 0
    con = Console()
    t = Table(title=f"sax search --pareto {rec['metric']}: {rec['scenario']} ({len(rec['front'])} points, "
                    f"{rec['evaluations']:,} evaluations, {rec['seconds']:.1f} s)")
    t.add_column("step time", justify="right")
    t.add_column(rec["field"], justify="right")
    t.add_column("design")
    for p in rec["front"]:
        t.add_row(fmt_time(p["step_time_s"]), f"{p[rec['field']]:.4g}",
                  ", ".join(f"{k}={v}" for k, v in p["design"].items()))
    con.print(t)
    return 0


def register(sub):
    p = sub.add_parser("search", help="search a design space (exhaustive, evolution, relaxed, random)")
    p.add_argument("scenario", help="scenario: a bundled name (huge-four-buildings, default, ...) or a YAML path")
    p.add_argument("--method", choices=METHODS, default="evolution", help="search method (default: evolution)")
    p.add_argument("--strategy", default=None,
                   help="evolution strategy: cma_es, ga, de (differential evolution), sa (simulated "
                        "annealing); default: de")
    p.add_argument("--budget", type=whole_number, default=None,
                   help=f"model evaluations at most, 1 to {MAX_BUDGET:,} (default 5000); evolution uses whole "
                        "generations, so it may stop a little below")
    p.add_argument("--seconds", type=float, default=None, metavar="S",
                   help="wall-time limit: the budget is cut to what the measured evaluation rate allows in S "
                        "seconds, and the search stops between generations once S have passed; without --budget "
                        "the time alone limits it")
    p.add_argument("--flat", action="store_true",
                   help="evaluate single designs (flat batches) instead of sub-grids of the last axes")
    p.add_argument("--seed", type=whole_number, default=None, help="random seed, 0 to 2**32-1 (default 0; same seed, same "
                                                           "result)")
    p.add_argument("--robust", action="store_true",
                   help="re-rank the found design and its one-axis neighbours by mean and p90 step time over sampled "
                        "system numbers (as sax sweep --robust, for spaces too large to sweep); samples use --seed")
    p.add_argument("--samples", type=whole_number, default=None, metavar="N",
                   help="with --robust: systems sampled (default 256)")
    p.add_argument("--robust-top", type=whole_number, default=None, metavar="K",
                   help="with --robust: candidates re-ranked (default 100)")
    p.add_argument("--pareto", choices=PARETO_METRICS, default=None,
                   help="multi-objective evolution (NSGA-II): the Pareto front of step time vs peak memory, "
                        "cross-building bytes or goodput, instead of one best design")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)

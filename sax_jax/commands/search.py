"""`sax search SCENARIO --method {exhaustive,evolution,relaxed,random} [--strategy NAME] [--budget N] [--seed S]
[--json]`: find a fast design and report it as a speedup over the scenario's named baselines.

Same seed, same result. ``--json`` prints one object: {"method", "best": {"design", "step_time_s", ...},
"evaluations", "seconds", "speedup_vs": {BASELINE: ratio}, ...}.
"""
from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..config import load_scenario
from ..report import fmt_time
from ..search.runner import METHODS, run_search


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

"""`sax sensitivity SCENARIO --vary LEVEL.FIELD=V1,V2,... [--top K] [--json] [--plot FILE]`: the best design,
its baselines and the crossovers between them as one system or training number varies."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from . import add_search_args, check_output_file, output_console, print_json, whole_number
from .sweep import PLOT_SUFFIXES, setup_compile_cache
from ..config import load_scenario
from ..cost import BREAKDOWN_KEYS
from ..report import fmt_time
from ..search.runner import check_search_args
from ..sensitivity import SEARCH_BUDGET, SWEEP_LIMIT, parse_vary, sensitivity
from ..space import AXES
from ..specs import ConfigError
from ..trust import print_warnings

MAX_TOP = 100  # designs listed per value


def check_plot_path(path: str) -> None:
    """The --plot file can be written (the same rules as `sax sweep --plot`), checked before any sweep runs."""
    check_output_file("--plot", path, PLOT_SUFFIXES, "sensitivity.png")


def fmt_value(v) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def _differing_axes(designs: list, space) -> tuple[list, list]:
    """(axes every design shares, axes that tell them apart), among the axes the space varies."""
    varied = [ax for ax, r in zip(AXES, space.radices) if r > 1] if designs else []
    shared = [ax for ax in varied if designs and all(d[ax] == designs[0][ax] for d in designs)]
    return shared, [ax for ax in varied if ax not in shared]


def print_study(study: dict, space, console: Console) -> None:
    vary, points = study["vary"], study["points"]
    name = f"{vary['level']}.{vary['field']}"
    best = [p["best"]["design"] for p in points if p["best"]]
    shared, differ = _differing_axes(best, space)
    names = list(points[0]["baselines"]) if points else []
    tab = Table(title=f"sax sensitivity: {study['scenario']}, best design vs {name}")
    for col in (name, "best step", "MFU", *[f"{b} (speedup)" for b in names]):
        tab.add_column(col, justify="right")
    for ax in differ:
        tab.add_column(ax, justify="left")
    for p in points:
        b = p["best"]
        cells = [fmt_value(p["value"]), fmt_time(b["step_time_s"]) if b else "infeasible",
                 f"{100 * b['mfu']:.1f}%" if b else "-"]
        for n in names:
            t, s = p["baselines"][n]["step_time_s"], p["baselines"][n]["speedup"]
            cells.append("infeasible" if t is None else fmt_time(t) + (f" ({s:.2f}x)" if s else ""))
        tab.add_row(*cells, *[str(b["design"][ax]) if b else "-" for ax in differ])
    if study.get("method") == "search":
        sr = study["search"]
        console.print(f"the space is too large to sweep at each value: best designs from an {sr['algorithm']} search "
                      f"of {sr['budget']:,} evaluations per value (seed {sr['seed']}), each found design evaluated at "
                      "every value; a better design may exist", soft_wrap=True)
    if shared:
        console.print("every best design: " + ", ".join(f"{ax}={best[0][ax]}" for ax in shared))
    console.print(tab)
    terms = [k for k in BREAKDOWN_KEYS if any(p["best"] and p["best"]["breakdown"][k] > 0 for p in points)]
    bd = Table(title="time breakdown of the best design")
    for col in (name, *terms):
        bd.add_column(col, justify="right")
    for p in points:
        if p["best"]:
            bd.add_row(fmt_value(p["value"]), *[fmt_time(p["best"]["breakdown"][k]) for k in terms])
    if best:
        console.print(bd)
    if any(len(p["top"]) > 1 for p in points):
        print_top(points, name, space, console)
    for p in points:
        if p["best"] is None:
            console.print(f"[red]no feasible design[/red] at {name} = {fmt_value(p['value'])}")
    print_crossovers(study["crossovers"], name, console)
    print_warnings(study.get("warnings", []), console)


def print_top(points: list, name: str, space, console: Console) -> None:
    _, differ = _differing_axes([r["design"] for p in points for r in p["top"]], space)
    tab = Table(title=f"top designs at each {name}")
    for col in (name, "#", "step", "vs best", "MFU"):
        tab.add_column(col, justify="right")
    for ax in differ:
        tab.add_column(ax, justify="left")
    for p in points:
        for i, r in enumerate(p["top"]):
            gap = 100 * (r["step_time_s"] / p["top"][0]["step_time_s"] - 1)
            tab.add_row(fmt_value(p["value"]) if i == 0 else "", str(i + 1), fmt_time(r["step_time_s"]),
                        f"+{gap:.2f}%", f"{100 * r['mfu']:.1f}%", *[str(r["design"][ax]) for ax in differ])
    console.print(tab)


def print_crossovers(crossovers: list, name: str, console: Console) -> None:
    if not crossovers:
        console.print(f"no crossover: the best design is the same at every {name} with a feasible design")
        return
    pairs = {}
    for c in crossovers:
        pairs.setdefault(tuple(c["between"]), []).append(c)
    for (a, b), cs in pairs.items():
        at = cs[0]["at"]
        where = f", crossover at {name} = {at:.4g}" if at is not None else ""
        changes = "; ".join(f"the best {c['axis']} changes from {c['from']} to {c['to']}" for c in cs)
        console.print(f"between {fmt_value(a)} and {fmt_value(b)}{where}: {changes}")


# ~5 minutes of sweeping at the 2-core CPU's ~4e7 designs/s; a GPU does this in seconds
MAX_STUDY_DESIGNS = 1e10


def run(args) -> int:
    # flags first: nothing is read or compiled for a bad one
    if not 1 <= args.top <= MAX_TOP:
        raise ConfigError(None, "--top", args.top, f"must be a whole number in [1, {MAX_TOP}]",
                          "the number of best designs listed at each value")
    if args.plot is not None:
        check_plot_path(args.plot)
    vary = parse_vary(args.vary)
    scenario = load_scenario(args.scenario)
    check_search_args("evolution", budget=args.budget, seed=args.seed)
    designs = scenario.space.size * len(vary.values)
    if scenario.space.size <= SWEEP_LIMIT and designs > MAX_STUDY_DESIGNS:
        # an exhaustive study of a space this size would run for days or years, not fail: refuse up front
        raise ConfigError(scenario.path, "space", f"{scenario.space.size:.3g} designs x {len(vary.values)} values",
                          f"is too large for an exhaustive sensitivity study (limit {MAX_STUDY_DESIGNS:.0e} designs "
                          "in all)", "fewer values, or narrow the scenario's space (fewer options per axis)")
    import jax
    setup_compile_cache(jax)
    console = output_console(args.json)
    study = sensitivity(scenario, vary, top_k=args.top, progress=sys.stderr.isatty(), search_budget=args.budget,
                        seed=args.seed)
    if args.json:
        print_json(study)
    else:
        print_study(study, scenario.space, console)
    if args.plot:
        from ..sensitivity_plot import plot_sensitivity
        console.print(f"wrote {plot_sensitivity(study, args.plot)}")
    return 0


def register(sub):
    p = sub.add_parser("sensitivity", help="the best design and the baselines as one system or training number "
                                           "varies; where the best design changes (crossovers)")
    p.add_argument("scenario", help="scenario: a bundled name (default, two-regions, ...) or a YAML path")
    p.add_argument("--vary", required=True, metavar="LEVEL.FIELD=V1,V2,...",
                   help="a level field of the scenario's system (latency_us, bandwidth_GBps, loss_rate, "
                        "oversubscription, failure_rate_per_hour, size, paths, mtu_bytes, planes), e.g. "
                        "region.latency_us=1000,5000,20000, or training.FIELD (global_batch_sequences, seq_len, ...); "
                        "values are sorted, each swept exhaustively")
    p.add_argument("--top", type=whole_number, default=1, metavar="K",
                   help=f"designs listed at each value, 1 to {MAX_TOP} (default 1: the best)")
    add_search_args(p, "at each value", SWEEP_LIMIT, SEARCH_BUDGET)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", default=None, metavar="PNG", help="write step time vs the value as a plot")
    p.set_defaults(func=run)

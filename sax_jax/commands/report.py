"""`sax report SCENARIO [-o report.html] [--top K] [--vary LEVEL.FIELD=V1,V2,...]... [--no-sensitivity]
[--budget N] [--seed S] [--json]`: one self-contained, offline HTML page with the scenario, its baselines, the
near-optimal designs and the decisions they share, breakdowns, Pareto fronts and sensitivity curves
(sax_jax.report_data collects, sax_jax.report_html renders)."""
from __future__ import annotations

import os
import sys

from . import add_search_args, check_output_file, output_console, print_json, whole_number
from .sweep import setup_compile_cache
from ..config import load_scenario
from ..report_data import DEFAULT_TOP, SEARCH_BUDGET, SWEEP_LIMIT
from ..search.runner import check_search_args
from ..specs import ConfigError

MAX_TOP = 1000
MAX_VARIES = 8
# every value of a --vary study sweeps the space again: refuse what would run for hours on a CPU
MAX_STUDY_DESIGNS = 1e10


def check_args(args) -> None:
    if not 1 <= args.top <= MAX_TOP:
        raise ConfigError(None, "--top", args.top, f"must be a whole number in [1, {MAX_TOP}]",
                          "the number of best designs listed")
    check_search_args("evolution", budget=args.budget, seed=args.seed)
    if args.no_sensitivity and args.vary:
        raise ConfigError(None, "--vary", args.vary[0], "conflicts with --no-sensitivity", "drop one of them")
    if len(args.vary or []) > MAX_VARIES:
        raise ConfigError(None, "--vary", f"{len(args.vary)} studies", f"at most {MAX_VARIES} per report")
    check_output_file("--out", args.out, (".html", ".htm"), "report.html")


def run(args) -> int:
    check_args(args)  # flags first: nothing is read or compiled for a bad one
    from ..sensitivity import parse_vary
    varies = [parse_vary(v) for v in args.vary] if args.vary else None
    if args.no_sensitivity:
        varies = []
    scenario = load_scenario(args.scenario)
    from .. import report_data
    studies = varies if varies is not None else report_data.default_varies(scenario)
    if scenario.space.size <= SWEEP_LIMIT:
        designs = scenario.space.size * (1 + sum(len(v.values) for v in studies))
        if designs > MAX_STUDY_DESIGNS:
            raise ConfigError(None, "--vary", f"{designs:.3g} designs in all",
                              f"is too many to sweep for one report (limit {MAX_STUDY_DESIGNS:.0e})",
                              "fewer --vary values, or --no-sensitivity")
    import jax

    from .. import __version__
    from ..report_html import render
    setup_compile_cache(jax)
    console = output_console(args.json)
    data = report_data.collect(scenario, top_k=args.top, varies=studies, progress=sys.stderr.isatty(),
                               search_budget=args.budget, seed=args.seed)
    page = render(data, __version__)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, args.out)  # never a half-written report under the final name
    if args.json:
        print_json({**data, "out": args.out, "bytes": len(page.encode())})
    else:
        best = data["top"][0]["step_time_s"] if data["top"] else None
        tail = f"best {best:.3f} s" if best is not None else "no feasible design"
        console.print(f"wrote {args.out} ({len(page.encode()) / 1e6:.1f} MB, self-contained; {tail}; "
                      f"{len(data['sensitivity'])} sensitivity stud{'y' if len(data['sensitivity']) == 1 else 'ies'})")
    return 0


def register(sub):
    p = sub.add_parser("report", help="one self-contained HTML page: baselines, near-optimal designs, breakdowns, "
                                      "Pareto fronts, sensitivity curves")
    p.add_argument("scenario", help="scenario: a bundled name (default, two-regions, ...) or a YAML path")
    p.add_argument("-o", "--out", default="report.html", metavar="FILE.html",
                   help="the page to write (default report.html)")
    p.add_argument("--top", type=whole_number, default=DEFAULT_TOP, metavar="K",
                   help=f"best designs listed, 1 to {MAX_TOP} (default {DEFAULT_TOP})")
    p.add_argument("--vary", action="append", default=None, metavar="LEVEL.FIELD=V1,V2,...",
                   help="a sensitivity study (repeatable; as `sax sensitivity --vary`); default: the outermost "
                        "level's latency_us and bandwidth_GBps around their nominal values")
    p.add_argument("--no-sensitivity", action="store_true", help="no sensitivity studies (faster)")
    add_search_args(p, "here and at each sensitivity value", SWEEP_LIMIT, SEARCH_BUDGET)
    p.add_argument("--json", action="store_true", help="also print the report's data as one JSON object")
    p.set_defaults(func=run)

"""`sax study [STUDY] [--json] [--out DIR]`: the seed paper's characterization as one command: over a bundled
(or given) study config's grid, sax's best design vs the production layout and vs the state of the art."""
from __future__ import annotations

import csv
import json
import os
import sys

from rich.console import Console
from rich.table import Table

from . import output_console, print_json
from .sweep import setup_compile_cache
from ..report import fmt_time, json_safe
from ..specs import ConfigError
from ..study import DECISIONS, load_study, run_study

DEFAULT_STUDY = "default"


def check_out(out: str) -> None:
    """--out names a directory that exists or can be created (the rules of `sax sweep --out`)."""
    if out.strip() == "":
        raise ConfigError(None, "--out", out, "is empty", "give a directory for result.json, points.csv and figures")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(None, "--out", out, "exists and is not a directory",
                          "--out names a directory for result.json, points.csv and the figures")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out) and not os.path.isdir(parent):
        raise ConfigError(None, "--out", out, f"directory {parent} does not exist", "create it first")
    if not os.path.isdir(out) and not os.access(parent, os.W_OK):
        raise ConfigError(None, "--out", out, f"cannot create it: {parent} is not writable")


def _t(s) -> str:
    return "infeasible" if s is None else fmt_time(s)


def _x(r) -> str:
    return "-" if r is None else f"{r:.2f}x"


def print_study(result: dict, console: Console) -> None:
    points = result["points"]
    # one column per field (latency, bandwidth, size), whichever level a model varies (see the models line)
    axes = list(dict.fromkeys(k.split(".", 1)[1] for p in points for k in p["values"]))
    console.print("varied: " + "; ".join(f"{m} ({info['system']}): {', '.join(info['axes'])}"
                                         for m, info in result["models"].items()))
    tab = Table(title=f"sax study {result['study']['name']}: best design vs production and state of the art")
    for col in ("model", *axes, "production", "SOTA", "sax best", "vs prod", "vs SOTA", *DECISIONS):
        tab.add_column(col, justify="left" if col in ("model", *DECISIONS) else "right")
    for p in points:
        sota = f"{_t(p['sota_s'])} ({p['sota']})" if p["sota"] else "-"
        dec = p["decisions"] or {}
        by_field = {k.split(".", 1)[1]: v for k, v in p["values"].items()}
        tab.add_row(p["model"], *[f"{by_field[a]:g}" if a in by_field else "" for a in axes],
                    _t(p["production_s"]), sota, _t(p["best_s"]), _x(p["speedup_vs_production"]),
                    _x(p["speedup_vs_sota"]), *[str(dec.get(d, "-")) for d in DECISIONS])
    console.print(tab)
    summ = Table(title="speedup of sax's best design (points where both are feasible)")
    for col in ("model", "max vs prod", "median vs prod", "max vs SOTA", "median vs SOTA", "SOTA",
                "shared by every best design"):
        summ.add_column(col, justify="left" if col in ("model", "SOTA", "shared by every best design") else "right")
    for label, s in result["summary"].items():
        vp, vs = s["vs_production"], s["vs_sota"]
        summ.add_row(label, _x(vp["max"]), _x(vp["median"]), _x(vs["max"]), _x(vs["median"]), s["sota"] or "none",
                     ", ".join(f"{k}={v}" for k, v in s["shared_decisions"].items()) or "none")
    console.print(summ)
    for s in result["skipped"]:
        where = ", ".join(f"{k}={v:g}" for k, v in s["values"].items())
        console.print(f"skipped {s['model']} at {where}: {s['reason']}")


def write_points_csv(result: dict, path: str) -> None:
    axes = list(dict.fromkeys(k for p in result["points"] for k in p["values"]))
    cols = ["model", *axes, "production_s", "sota", "sota_s", "best_s", "speedup_vs_production", "speedup_vs_sota",
            *DECISIONS]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for p in result["points"]:
            row = {**p, **p["values"], **(p["decisions"] or {})}
            w.writerow(["" if row.get(c) is None else row.get(c, "") for c in cols])


def write_outputs(result: dict, out: str) -> list:
    from ..study_plot import plot_breakdown, plot_heatmaps
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "result.json"), "w") as fh:
        json.dump(json_safe(result), fh, indent=2, allow_nan=False, default=str)
    write_points_csv(result, os.path.join(out, "points.csv"))
    return ["result.json", "points.csv", *plot_heatmaps(result, out), *plot_breakdown(result, out)]


def run(args) -> int:
    if args.out is not None:
        check_out(args.out)
    header, models = load_study(args.study)  # every key checked before anything is compiled
    import jax
    setup_compile_cache(jax)
    console = output_console(args.json, piped_width=160)
    progress = (lambda p: console.print(f"{p['model']} {p['values']}: {_x(p['speedup_vs_production'])}")
                ) if sys.stderr.isatty() else None
    result = run_study(header, models, on_point=progress)
    if args.json:
        print_json(result)
    else:
        print_study(result, console)
    if args.out:
        console.print(f"wrote {', '.join(write_outputs(result, args.out))} in {args.out}")
    return 0


def register(sub):
    p = sub.add_parser("study", help="the paper's characterization: best design vs production and the state of "
                                     "the art over a grid of cross-building latency, bandwidth and building count")
    p.add_argument("study", nargs="?", default=DEFAULT_STUDY,
                   help="study config: a bundled name (default) or a YAML path")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", default=None, metavar="DIR", help="write result.json, points.csv and the figures here")
    p.set_defaults(func=run)

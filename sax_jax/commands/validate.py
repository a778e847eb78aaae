"""`sax validate [PATH ...] [--dataset NAME] [--json]`: predicted vs measured on published training runs.

PATH: case files (configs/validation/*.yaml), directories of them, or CSV files with the columns of
shared/data/published_runs.csv (+ optional gpus_per_node, link_gbps, link_latency_ms). Default:
configs/validation/. Bad rows are reported (file, row, column) and the other rows still run; the exit
status is 1 when any row was bad.
"""
import json
import math

from rich.console import Console
from rich.table import Table

from ..validation import METRICS, validate

CALCULON = {"korthikanti2022": "Calculon 3.65% / 8.87%"}  # Isaev et al., SC23: MAPE / max


def _fmt(metric, x):
    if x is None or not math.isfinite(x):
        return "-"
    return f"{100 * x:.1f} %" if metric == "mfu" else f"{x:,.0f}" if metric == "tokens_per_s" else f"{x:.3f}" \
        if metric == "iteration_s" else f"{x:.1f}"


def print_report(res, console=None):
    con = console or Console()
    for case in res["cases"]:
        t = Table(title=f"{case['id']} ({case['dataset']})" + (" [fit]" if case["used_for_fitting"] else ""),
                  title_justify="left")
        for col in ("metric", "predicted", "measured", "error"):
            t.add_column(col, justify="left" if col == "metric" else "right")
        for m in METRICS:
            pred = case["metrics"][m]
            if m == case["metric"]:
                t.add_row(f"[bold]{m}[/bold]", _fmt(m, pred), _fmt(m, case["measured"]),
                          f"{100 * case['error']:+.2f} %")
            else:
                t.add_row(m, _fmt(m, pred), "", "")
        con.print(t)
        d = case["design"]
        con.print("  design: " + ", ".join(f"{k}={v}" for k, v in d.items()))
        for f in case["filled"]:
            con.print(f"  [yellow]not stated, filled:[/yellow] {f}")
    t = Table(title="per dataset (|relative error|)", title_justify="left")
    for col in ("dataset", "n", "MAPE", "max", "held-out n", "held-out MAPE", "held-out max", "peer"):
        t.add_column(col, justify="left" if col in ("dataset", "peer") else "right")
    for name, s in res["datasets"].items():
        h = s.get("held_out", {"n": 0})
        t.add_row(name, str(s["n"]), f"{100 * s['mape']:.2f} %", f"{100 * s['max_abs_error']:.2f} %",
                  str(h["n"]), f"{100 * h['mape']:.2f} %" if h["n"] else "-",
                  f"{100 * h['max_abs_error']:.2f} %" if h["n"] else "-", CALCULON.get(name, ""))
    con.print(t)
    for e in res["errors"]:
        con.print(f"[red]error:[/red] {e}")


def run(args) -> int:
    res = validate(args.paths or None, args.dataset)
    if args.json:
        print(json.dumps(res, indent=2, default=lambda x: None if isinstance(x, float) else str(x)))
    else:
        print_report(res)
    return 1 if res["errors"] else 0


def register(sub):
    p = sub.add_parser("validate", help="compare predictions with published training runs")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="case files, directories or CSV files (default: configs/validation/)")
    p.add_argument("--dataset", default=None, help="only the cases of this dataset")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)

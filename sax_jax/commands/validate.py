"""`sax validate [PATH ...] [--dataset NAME] [--json]`: predicted vs measured on published training runs.

PATH: case files (configs/validation/*.yaml), directories of them (with their data/*.csv), or CSV files with
the columns of configs/data/published_runs.csv (bundled with the package) (+ optional gpus_per_node, link_gbps, link_latency_ms and the
public-run columns ep, etp, fsdp, experts, top_k, moe_ffn, shared_experts, dense_layers, schedule, head_dim,
sharding, overlap, features, exclude). Default: configs/validation/ (27 Megatron-LM runs + the public-run
collection). Bad rows are reported (file, row, column) and the other rows still run; the exit status is 1 when
any row was bad. Runs the model cannot represent are listed as unsupported with the reason (exit status 0).
An empty CSV or an unknown --dataset is refused (exit status 2).
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


DETAIL_MAX = 40  # more cases than this: one line per case (use --dataset for the per-case tables)


def _signed(x):
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:+.1f} %"


def _step(x):
    """A step-time error with its direction (the metric's own error flips sign for throughput metrics)."""
    if x is None or not math.isfinite(x):
        return "-"
    return f"{_signed(x)} ({'slower' if x > 0 else 'faster' if x < 0 else 'equal'})"


def _pct(x):
    return "-" if x is None else f"{100 * x:.2f} %"


def print_report(res, console=None):
    con = console or Console()
    if len(res["cases"]) > DETAIL_MAX:
        t = Table(title="cases (--dataset NAME for per-case detail)", title_justify="left")
        for col in ("id", "dataset", "metric", "predicted", "measured", "error", "step time", "split", "approx."):
            t.add_column(col, justify="left" if col in ("id", "dataset", "metric", "split") else "right")
        for c in res["cases"]:
            t.add_row(c["id"], c["dataset"], c["metric"], _fmt(c["metric"], c["predicted"]),
                      _fmt(c["metric"], c["measured"]), f"{100 * c['error']:+.1f} %" if c["error"] is not None
                      else "-", _step(c.get("step_time_error")),
                      "fit" if c["used_for_fitting"] else "calib" if c["calibration_split"] else "held",
                      str(len(c["approximations"])) if c["approximations"] else "")
        con.print(t)
    for case in res["cases"] if len(res["cases"]) <= DETAIL_MAX else []:
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
        con.print(f"  model step time vs the run's: {_step(case.get('step_time_error'))}")
        d = case["design"]
        con.print("  design: " + ", ".join(f"{k}={v}" for k, v in d.items()))
        for f in case["filled"]:
            con.print(f"  [yellow]not stated, filled:[/yellow] {f}")
        for f in case.get("approximations", []):
            con.print(f"  [yellow]approximated:[/yellow] {f}")
    t = Table(title="per dataset (|relative error|; bias: mean step-time error, + = the model slower; held out = not "
                    "in the calibration split)", title_justify="left")
    for col in ("dataset", "n", "MAPE", "max", "bias", "held-out n", "held-out MAPE", "held-out max", "unsupported",
                "excluded", "approx.", "peer"):
        t.add_column(col, justify="left" if col in ("dataset", "peer") else "right")
    for name, s in res["datasets"].items():
        h = s.get("held_out", {"n": 0})
        t.add_row(name, str(s["n"]), _pct(s.get("mape")), _pct(s.get("max_abs_error")),
                  _signed(s.get("step_time_bias")),
                  str(h["n"]), _pct(h.get("mape")), _pct(h.get("max_abs_error")), str(s.get("unsupported", 0)),
                  str(s.get("excluded", 0)), str(s.get("approximated", 0)), CALCULON.get(name, ""))
    o = res.get("overall")
    if o:
        t.add_row("[bold]all[/bold]", str(o["n"]), _pct(o.get("mape")), _pct(o.get("max_abs_error")),
                  _signed(o.get("step_time_bias")), str(o["held_out"]["n"]), _pct(o["held_out"].get("mape")),
                  _pct(o["held_out"].get("max_abs_error")),
                  str(o["unsupported"]), str(o["excluded"]), str(o["approximated"]), "")
    con.print(t)
    if o:
        con.print(f"mean of per-dataset MAPE: {_pct(o['mean_dataset_mape'])} over {o['datasets']} datasets "
                  f"(held out: {_pct(o['mean_dataset_mape_held_out'])}); {o['n_sources']} sources; "
                  f"{o['model_infeasible']} real runs the model calls infeasible (scored on raw step time)")
        by = o.get("by_class") or {}
        con.print("by model class: " + "; ".join(
            f"{cls} {_pct(v.get('mape'))} over {v['n']} runs (held out {_pct(v['held_out'].get('mape'))})"
            for cls, v in by.items() if v["n"]))
    rk = res.get("ranking")
    if rk and rk["groups"]:
        t = Table(title="ranking fidelity (Spearman, predicted vs measured model TFLOP/s per GPU)",
                  title_justify="left")
        for col in ("group", "runs", "layouts", "Spearman"):
            t.add_column(col, justify="left" if col == "group" else "right")
        for g in rk["groups"]:
            t.add_row(g["name"], str(g["n"]), str(g["layouts"]),
                      "-" if g["spearman"] is None else f"{g['spearman']:+.2f}")
        con.print(t)
        fmt = (lambda x: "-" if x is None else f"{x:+.2f}")
        con.print(f"ranking: {rk['n_groups']} groups ({rk['n_defined']} defined), mean Spearman "
                  f"{fmt(rk['mean_spearman'])}, median {fmt(rk['median_spearman'])}")
        order = ", ".join(f"{c['share']:.0%} of {c['pairs']}"
                          + (f" > {c['min_gap']:.0%} apart" if c["min_gap"] else "")
                          for c in rk.get("pairwise", []) if c["share"] is not None)
        if order:
            con.print(f"pairs in one group in the measured order: {order}")
    ws = res.get("weak_scaling")
    if ws and ws["n_pairs"]:
        con.print(f"weak scaling: step time per doubling of the GPUs at the same per-GPU work, median of "
                  f"{ws['n_pairs']} run pairs: measured {100 * ws['median_measured']:+.2f}%, predicted "
                  f"{100 * ws['median_predicted']:+.2f}%")
    hp = res.get("hardware_pairs")
    if hp and hp["pairs"]:
        t = Table(title="hardware choice (the same run on two GPU types: speedup of the second over the first)",
                  title_justify="left")
        for col in ("GPU types", "runs", "measured", "predicted", "model error"):
            t.add_column(col, justify="left" if col == "GPU types" else "right")
        for p in hp["pairs"]:
            t.add_row(f"{p['gpus'][0]} -> {p['gpus'][1]}", str(p["n"]), f"{p['measured_speedup_median']:.3f}x",
                      f"{p['predicted_speedup_median']:.3f}x", f"{100 * p['ratio_error_median']:+.1f}%")
        con.print(t)
    by_reason = {}
    for u in res.get("unsupported", []):
        by_reason.setdefault(u["reason"], []).append(u)
    for reason, us in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        con.print(f"[magenta]unsupported ({len(us)}):[/magenta] {reason}: "
                  + ", ".join(u["id"] for u in us))
    for u in res.get("excluded", []):
        con.print(f"[magenta]excluded:[/magenta] {u['id']} ({u['dataset']}): {u['reason']}")
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

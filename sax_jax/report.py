"""Human-readable reports (rich tables) and JSON-ready dicts of evaluated designs."""
from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from .buildings import paced_label
from .cost import BREAKDOWN_KEYS, violation_reasons
from .trust import print_warnings, warnings_for

GROUPS = ("tp", "cp", "pp", "dp")


def fmt_time(s: float) -> str:
    if not math.isfinite(s):
        return "inf"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def json_safe(x):
    """Non-finite floats (inf step time of an infeasible point, NaN) become null: JSON has no NaN."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def resolved_dp(scenario, design: dict):
    """dp of a design: its value, or for 'auto' the GPUs left after tp x cp x pp (None when that is no integer)."""
    if design.get("dp") != "auto":
        return design.get("dp")
    prod = design["tp"] * design["cp"] * design["pp"]
    n = scenario.system.n_gpus
    return int(n // prod) if prod and n % prod == 0 else None


def crossings(scenario, group_levels) -> dict:
    """{group: {level: participants}} for levels each group actually spans."""
    names = [lv.name for lv in scenario.system.levels]
    out = {}
    for g, ks in zip(GROUPS, group_levels):
        out[g] = {n: round(float(k), 3) for n, k in zip(names, ks) if k > 1 + 1e-6}
    return out


def eval_record(scenario, design: dict, cost: dict) -> dict:
    hbm = scenario.system.gpu.usable_bytes
    rec = {
        "scenario": scenario.name,
        "design": design,
        "step_time_s": cost["step_time_s"] if cost["feasible"] else None,
        "raw_step_time_s": cost["raw_step_time_s"],
        "tokens_per_s": cost["tokens_per_s"],
        "mfu": cost["mfu"],
        "memory_bytes": cost["memory_bytes"],
        "memory_capacity_bytes": hbm,
        "breakdown": cost["breakdown"],
        "cross_building_bytes": cost["cross_building_bytes"],
        "feasible": cost["feasible"],
        "violation": cost["violation"],
        "reasons": violation_reasons(cost["violation"]),
        "crossings": crossings(scenario, cost["group_levels"]),
        "resolved": {"dp": resolved_dp(scenario, design)},
        "warnings": warnings_for(scenario, [design], cost["mfu"] if cost["feasible"] else None),
        # beside the step: interruptions, checkpoints and degraded periods (cost/goodput.py)
        "goodput_tokens_per_s": cost["goodput_tokens_per_s"],
        "ettr": cost["ettr"],
        "interruptions_per_hour": cost["interruptions_per_hour"],
        "degraded_fraction": cost["degraded_fraction"],
        "checkpoint_interval_s": cost["checkpoint_interval_s"],
        # microbursts and bounded loss (cost/bursts.py)
        "burst_round_loss": cost["burst_round_loss"],
        "gradient_drop_fraction": cost["gradient_drop_fraction"],
        "gradient_variance_increase": cost["gradient_variance_increase"],
        # low-communication training (cost/outer_sync.py): time to the synchronous run's loss
        "tokens_multiplier": cost["tokens_multiplier"],
        "effective_tokens_per_s": cost["effective_tokens_per_s"],
        "time_to_target_s": cost["time_to_target_s"],
        # infrastructure prices (cost/provision.py)
        "network_usd_per_hour": cost["network_usd_per_hour"],
        "cost_usd_per_hour": cost["cost_usd_per_hour"],
        "train_cost_usd": cost["train_cost_usd"],
    }
    if scenario.system.buildings:  # heterogeneous buildings (cost/hetero.py)
        rec["paced_by"] = paced_label(scenario.system, cost["paced_by"])
    return rec


def print_eval(rec: dict, console: Console | None = None):
    con = console or Console()
    head = Table(title=f"sax eval: {rec['scenario']}", show_header=False)
    head.add_column("what", style="bold")
    head.add_column("value")
    dp = (rec.get("resolved") or {}).get("dp")
    head.add_row("design", ", ".join(f"{k}={v}" + (f" (= {dp})" if k == "dp" and v == "auto" and dp else "")
                                     for k, v in rec["design"].items()))
    status = "[green]feasible[/green]" if rec["feasible"] else "[red]INFEASIBLE[/red]"
    head.add_row("status", status)
    head.add_row("step time", fmt_time(rec["raw_step_time_s"]) + ("" if rec["feasible"] else " (if it ran)"))
    band = rec.get("band")
    if band:
        lo, hi = band["measured_s"]
        head.add_row("80% band", f"{fmt_time(lo)} - {fmt_time(hi)} (validation residuals of {band['n_runs']} runs: "
                                 f"{band['group']})")
    head.add_row("tokens/s", f"{rec['tokens_per_s']:,.0f}")
    head.add_row("MFU", f"{100 * rec['mfu']:.1f} %")
    if "goodput_tokens_per_s" in rec:
        head.add_row("goodput", f"{rec['goodput_tokens_per_s']:,.0f} tokens/s (ETTR {100 * rec['ettr']:.1f} %: "
                                f"{rec['interruptions_per_hour']:.3g} interruptions/h, checkpoint every "
                                f"{rec['checkpoint_interval_s'] / 60:.1f} min, {100 * rec['degraded_fraction']:.2g} % "
                                f"of the time on fewer planes)")
    if rec.get("tokens_multiplier", 1.0) != 1.0:
        head.add_row("time to target", f"{rec['time_to_target_s'] / 86400:,.2f} days ({rec['effective_tokens_per_s']:,.0f} "
                                       f"tokens/s of synchronous-equivalent progress: DiLoCo needs "
                                       f"{rec['tokens_multiplier']:.3f}x the tokens)")
    if rec.get("cost_usd_per_hour"):
        head.add_row("infrastructure", f"${rec['cost_usd_per_hour']:,.0f}/h (cross-building network "
                                       f"${rec['network_usd_per_hour']:,.0f}/h); to the target: "
                                       f"${rec['train_cost_usd'] / 1e6:,.2f}M")
    if "burst_round_loss" in rec:
        head.add_row("microbursts, bounded loss",
                     f"{100 * rec['burst_round_loss']:.3g} % of a flow's rounds meet a buffer overflow; gradient "
                     f"dropped {100 * rec['gradient_drop_fraction']:.3g} % (adds {100 * rec['gradient_variance_increase']:.3g} "
                     f"% of |g|^2 in variance)")
    if rec.get("paced_by"):
        head.add_row("paced by", rec["paced_by"])
    head.add_row("memory / GPU", f"{rec['memory_bytes'] / 2**30:.1f} GiB of {rec['memory_capacity_bytes'] / 2**30:.1f} "
                                 f"GiB usable" + (" (the GPU type nearest its HBM, scaled to the first building's)"
                                                  if rec.get("paced_by") else ""))
    head.add_row("cross-building traffic", f"{rec['cross_building_bytes'] / 1e12:.3f} TB per step")
    con.print(head)
    bd = Table(title="time breakdown")
    bd.add_column("component")
    bd.add_column("time", justify="right")
    bd.add_column("share", justify="right")
    vs = rec.get("versus_published")
    if vs:  # the best published run of the class, as predicted (trust.py above_published_mfu)
        bd.add_column(f"share, {vs['id']}", justify="right")
    total = max(rec["raw_step_time_s"], 1e-30)
    for k in BREAKDOWN_KEYS:
        v = rec["breakdown"][k]
        beside = [f"{100 * vs['shares'].get(k, 0.0):.1f} %"] if vs else []
        bd.add_row(k, fmt_time(v), f"{100 * v / total:.1f} %", *beside)
    con.print(bd)
    if vs:
        con.print(f"above the best published run of its class, {vs['id']} ({vs['n_gpus']:,} GPUs; MFU "
                  f"{100 * vs['measured_mfu']:.1f} % measured, {100 * vs['predicted_mfu']:.1f} % predicted): "
                  f"compute alone at {100 * vs['design']['compute_mfu']:.1f} % MFU here and "
                  f"{100 * vs['compute_mfu']:.1f} % there; the rest of the gain is in the other terms' shares")
    cr = Table(title="levels each parallel group spans (participants per level)")
    cr.add_column("group")
    cr.add_column("spans")
    for g, lv in rec["crossings"].items():
        cr.add_row(g, ", ".join(f"{n} x{k:g}" for n, k in lv.items()) or "(one GPU)")
    con.print(cr)
    for r in rec["reasons"]:
        con.print(f"[red]infeasible:[/red] {r}")
    print_published(rec.get("published"), rec, con)
    print_warnings(rec.get("warnings", []), con)


def print_published(pub: dict | None, rec: dict, con: Console):
    """The validation set's measurements next to the prediction (sax_jax.published)."""
    if not pub:
        return
    for run in pub["exact"]:
        con.print(f"published: {run['id']} ({run['source']}): step {fmt_time(run['measured_step_s'])}, MFU "
                  f"{100 * run['measured_mfu']:.1f} % measured; predicted {fmt_time(rec['raw_step_time_s'])}, "
                  f"MFU {100 * rec['mfu']:.1f} %")
    k = pub["class"]
    if not pub["exact"] and k["runs"]:
        con.print(f"published: no run with this layout; {k['runs']} run(s) of {k['model']} on {k['gpu']} "
                  f"({k['gpus_range'][0]:,}-{k['gpus_range'][1]:,} GPUs, {'/'.join(k['precisions'])}) reached MFU "
                  f"{100 * k['mfu_range'][0]:.1f}-{100 * k['mfu_range'][1]:.1f} % of their precision's peak")
    elif not k["runs"]:
        con.print(f"published: no run of {k['model']} on {k['gpu']} in the validation set")

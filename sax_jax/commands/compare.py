"""`sax compare SCENARIO A B [C ...] [--json]`: designs side by side, and what explains their differences.

A design is a baseline name (``production``), overrides of the default baseline (``tp=8,pp=4``) or both
(``production:tp=4,pp=16``); overrides are the `sax eval --set` pairs, comma-separated.
"""
import json

from rich.console import Console
from rich.table import Table

from ..compare import compare
from ..config import load_scenario
from ..cost import BREAKDOWN_KEYS
from ..design_args import parse_sets, resolve_design
from ..report import fmt_time, json_safe
from ..space import AXES
from ..specs import ConfigError
from ..trust import print_warnings

PAIRS_EXAMPLE = "comma-separated axis=value pairs, e.g. tp=4,pp=16,placement=tp-cp-pp-dp"
EXAMPLE = "e.g. sax compare default production crosspipe 'production:tp=4,pp=16'"


def argument_key(text: str):
    """ConfigError key of one design argument: the argument, with the axis once it is known."""
    return lambda axis=None: f"argument {text!r}" + (f", axis {axis}" if axis else "")


def parse_design(text: str) -> tuple:
    """(baseline name or None, {axis: value}) of 'name', 'axis=value,...' or 'name:axis=value,...'."""
    if "=" not in text:
        return text, {}
    head = text.split("=", 1)[0]
    baseline, pairs = text.split(":", 1) if ":" in head else ("", text)
    return baseline or None, parse_sets(pairs.split(","), key=argument_key(text), example=PAIRS_EXAMPLE)


def run(args) -> int:
    if len(args.designs) < 2:
        raise ConfigError(None, "argument DESIGN", args.designs, "compare needs at least two designs", EXAMPLE)
    parsed = [parse_design(t) for t in args.designs]  # syntax first: no scenario read for a malformed design
    scenario = load_scenario(args.scenario)
    designs = [scenario.space.to_dict(resolve_design(scenario, base, sets, key=argument_key(t),
                                                     baseline_key=f"argument {t!r}"))
               for t, (base, sets) in zip(args.designs, parsed)]
    result = compare(scenario, designs, labels=list(args.designs))
    if args.json:
        print(json.dumps(json_safe(result), indent=2, allow_nan=False))
    else:
        print_compare(result)
    return 0


def signed_time(s: float) -> str:
    """A delta with its sign; an unchanged term is a plain 0 (not '+0.0 us', which reads as rounding)."""
    return "0" if s == 0 else ("-" if s < 0 else "+") + fmt_time(abs(s))


def print_compare(result: dict, console: Console | None = None):
    con = console or Console()
    recs, differ = result["designs"], result["differing_axes"]
    t = Table(title=f"sax compare: {result['scenario']} ({len(recs)} designs; * = axis that differs)")
    t.add_column("")
    for i, r in enumerate(recs):
        t.add_column(r["label"] + (" (reference)" if i == 0 else ""), justify="right")
    for ax in AXES:
        mark = ax in differ
        t.add_row(f"* {ax}" if mark else f"  {ax}", *[str(r["design"][ax]) for r in recs],
                  style="bold yellow" if mark else None)
    t.add_section()
    t.add_row("step time", *[fmt_time(r["raw_step_time_s"]) + ("" if r["feasible"] else " (if it ran)")
                             for r in recs])
    t.add_row("tokens/s", *[f"{r['tokens_per_s']:,.0f}" for r in recs])
    t.add_row("MFU", *[f"{100 * r['mfu']:.1f} %" for r in recs])
    t.add_row("memory / GPU", *[f"{r['memory_GiB']:.1f} of {r['memory_capacity_GiB']:.1f} GiB" for r in recs])
    t.add_row("feasible", *["yes" if r["feasible"] else "[red]no: " + "; ".join(r["violations"]) + "[/red]"
                            for r in recs])
    t.add_row("cross-building", *[f"{r['cross_building_bytes'] / 1e12:.3f} TB/step" for r in recs])
    t.add_section()
    for k in BREAKDOWN_KEYS:
        t.add_row(k, *[fmt_time(r["breakdown"][k]) for r in recs])
    con.print(t)
    ref = recs[0]
    for diff in result["differences"]:
        changed = ", ".join(f"{ax} {a} -> {b}" for ax, (a, b) in diff["changed"].items()) or "nothing"
        # a heading line, not a table title: rich wraps titles to the (narrow) table's width
        band = ""
        if "speedup_band" in diff:
            lo, hi = diff["speedup_band"]
            band = f" [{lo:.3f}x, {hi:.3f}x]" + (": a tie, within the model's resolution" if diff["tie"] else "")
        con.print(f"[bold]what explains the difference: {diff['design']} vs {ref['label']}[/bold] ({changed}); "
                  f"speedup {diff['speedup']:.3f}x{band}", soft_wrap=True)
        d = Table()
        d.add_column("term")
        d.add_column("delta", justify="right")
        d.add_column("share of the difference", justify="right")
        for term in diff["terms"]:
            share = "-" if term["share"] is None else f"{100 * term['share']:.1f} %"
            d.add_row(term["term"], signed_time(term["delta_s"]), share)
        d.add_section()
        d.add_row("step time", signed_time(diff["delta_s"]), "100.0 %" if any(
            term["share"] is not None for term in diff["terms"]) else "-")
        con.print(d)
    con.print("The terms sum to the step time, so each design's term deltas add up to its step-time delta; "
              "speedup = reference step time / design step time, with its 80% band from the validation's run "
              "pairs (sax_jax/uncertainty.py).", soft_wrap=True)
    print_warnings(result["warnings"], con)


def register(sub):
    p = sub.add_parser("compare", help="compare designs side by side and explain their step-time differences")
    p.add_argument("scenario", help="scenario: a bundled name (default, huge-four-buildings, ...) or a YAML path")
    p.add_argument("designs", nargs="+", metavar="DESIGN",
                   help="a baseline name (production), overrides of the default baseline (tp=8,pp=4) or both "
                        "(production:tp=4,pp=16); the first is the reference")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)

"""What `sax eval` shows about expert placement: for the design's ep and layout, every policy's share of a token's
dispatched copies that leave the node and the building, its max/mean rank load and expert slots, and its step
time; the fastest feasible policy and why (fewer bytes leaving the node, or a lighter busiest GPU)."""
from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.table import Table

from ..space import EXPERT_PLACEMENTS


def placement_record(scenario, design: dict, cost: dict | None = None) -> dict | None:
    """Host record of the placement policies at this design (None without an activation trace).

    Each policy is evaluated as a batch of one (`evaluate_one`, the program `sax eval` already compiled, not a new
    batch-of-four shape); `cost`, the host cost of `design` itself when the caller has it, is reused for its policy."""
    if getattr(scenario, "expert_trace", None) is None:
        return None
    import jax
    from ..cost.context import context
    from ..cost.expert_placement import level_fractions, placed_params
    from ..engine import DEFAULT_ENGINE
    from ..evaluate import evaluate_one

    params = DEFAULT_ENGINE.params(scenario)
    designs = [scenario.space.design({**design, "expert_placement": p}) for p in EXPERT_PLACEMENTS]
    xb = np.asarray(params.net.cross_building) > 0
    rows = []
    for name, d in zip(EXPERT_PLACEMENTS, designs):
        placed = placed_params(params, d)
        frac = np.asarray(jax.device_get(level_fractions(params.experts, d, context(placed, d).ep.members)))
        c = cost if cost is not None and name == design["expert_placement"] else evaluate_one(scenario, d)
        rows.append(dict(policy=name, leaves_node=float(frac[1:].sum()), crosses_building=float(frac[xb].sum()),
                         imbalance=float(placed.model.imbalance), expert_slots=float(placed.model.expert_slots),
                         step_time_s=c["step_time_s"] if c["feasible"] else None))
    feasible = [r for r in rows if r["step_time_s"] is not None]
    best = min(feasible, key=lambda r: r["step_time_s"]) if feasible else None
    return dict(trace=scenario.expert_trace.path, source=scenario.expert_trace.source, chosen=design["expert_placement"],
                rows=rows, best=best and best["policy"], reason=_reason(best, rows[0]) if best else "none feasible")


def _reason(best: dict, base: dict) -> str:
    if best["policy"] == base["policy"]:
        return "no policy beats contiguous here"
    parts = []
    if base["leaves_node"] > 0 and best["leaves_node"] < 0.995 * base["leaves_node"]:
        parts.append(f"{100 * (1 - best['leaves_node'] / base['leaves_node']):.0f} % fewer dispatched bytes leave the "
                     "node")
    if best["imbalance"] < 0.995 * base["imbalance"]:
        parts.append(f"busiest GPU at {best['imbalance']:.2f}x the mean load instead of {base['imbalance']:.2f}x")
    if best["expert_slots"] > 1.0:
        parts.append(f"for {100 * (best['expert_slots'] - 1):.0f} % more expert memory")
    gain = 100 * (1 - best["step_time_s"] / base["step_time_s"]) if base["step_time_s"] else 0.0
    return f"{gain:.1f} % faster than contiguous: " + (", ".join(parts) or "shorter step")


def print_placement(rec: dict | None, console: Console | None = None) -> None:
    if rec is None:
        return
    con = console or Console()
    t = Table(title=f"expert placement (trace {rec['trace']})")
    for col in ("policy", "leaves node", "crosses building", "max/mean load", "expert slots", "step time"):
        t.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
    for r in rec["rows"]:
        mark = (" *" if r["policy"] == rec["chosen"] else "") + (" (best)" if r["policy"] == rec["best"] else "")
        t.add_row(r["policy"] + mark, f"{100 * r['leaves_node']:.1f} %", f"{100 * r['crosses_building']:.1f} %",
                  f"{r['imbalance']:.2f}", f"{r['expert_slots']:.2f}",
                  f"{r['step_time_s']:.3f} s" if r["step_time_s"] is not None else "infeasible")
    con.print(t)
    con.print(f"shares are of a token's top_k dispatched copies (per-node dedup); * this design. best: {rec['best']}: "
              f"{rec['reason']}")

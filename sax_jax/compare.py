"""A few designs of one scenario side by side, and which breakdown terms explain their step-time differences.

Pure functions: design dicts in, JSON-ready records and differences out (printing lives in
``sax_jax.commands.compare``). A few designs go through the jitted, vmapped step-time model one at a time, in the
program `sax eval` runs with a batch of one; many in one stacked batch (``evaluate_designs``).

The breakdown terms sum to the step time (``cost.terms.Breakdown``), so for each design the term deltas
against the reference (the first design) sum to its step-time delta, up to float32 rounding; each term's
share is its delta over that total delta.
"""
from __future__ import annotations

from . import uncertainty
from .cost import BREAKDOWN_KEYS
from .engine import DEFAULT_ENGINE
from .evaluate import cost_to_dict, evaluate
from .report import eval_record
from .space import AXES, stack
from .trust import warnings_for

GiB = 2**30
# The model computes in float32: a step-time difference below this fraction of the reference's step time is
# rounding, and shares of it would be noise.
NEGLIGIBLE_REL = 1e-6


# Up to this many designs go through the model one at a time: the batch-of-one program is the one `sax eval` and the
# baselines (search.baselines.baseline_costs) already compiled for the scenario, where a batch of n is a new XLA
# program per n (a report's best-vs-baselines comparison compiled one: 8-24 s per scenario on 2 CPU cores, against
# ~0.1 s for the few calls). One design then has the same numbers in a comparison as in `sax eval`.
ONE_BY_ONE_MAX = 32


def evaluate_designs(scenario, points: list, engine=None) -> list:
    """Cost dicts (as ``evaluate_one`` returns them) of Designs: one by one for a few (ONE_BY_ONE_MAX), else one
    batched model call."""
    params = (engine or DEFAULT_ENGINE).params(scenario)
    if len(points) <= ONE_BY_ONE_MAX:
        return [cost_to_dict(evaluate(scenario, p, params), 0) for p in points]
    cost = evaluate(scenario, stack(points), params)
    return [cost_to_dict(cost, i) for i in range(len(points))]


def design_record(scenario, label: str, design: dict, cost: dict) -> dict:
    """The `sax eval` numbers of one design, under the names `sax compare --json` prints."""
    rec = eval_record(scenario, design, cost)
    return {
        "label": label,
        "design": design,
        "step_time_s": rec["step_time_s"],  # None when infeasible, as in `sax eval`
        "raw_step_time_s": rec["raw_step_time_s"],  # what it would take if it ran
        "tokens_per_s": rec["tokens_per_s"],
        "mfu": rec["mfu"],
        "memory_GiB": rec["memory_bytes"] / GiB,
        "memory_capacity_GiB": rec["memory_capacity_bytes"] / GiB,
        "feasible": rec["feasible"],
        "violations": rec["reasons"],
        "cross_building_bytes": rec["cross_building_bytes"],
        "breakdown": rec["breakdown"],
    }


def differing_axes(designs: list) -> list:
    """Axes (in ``AXES`` order) on which the design dicts do not all agree."""
    return [ax for ax in AXES if len({repr(d[ax]) for d in designs}) > 1]


def difference(ref: dict, rec: dict) -> dict:
    """Step-time delta of ``rec`` over ``ref`` (records of ``design_record``), split into breakdown terms.

    Infeasible designs are compared on their raw step time (what they would take if they ran): the terms
    still say where the time goes."""
    ref_s, rec_s = ref["raw_step_time_s"], rec["raw_step_time_s"]
    delta_s = rec_s - ref_s
    explained = abs(delta_s) > NEGLIGIBLE_REL * abs(ref_s)
    terms = []
    for k in BREAKDOWN_KEYS:
        d = rec["breakdown"][k] - ref["breakdown"][k]
        share = (0.0 if d == 0 else d / delta_s) if explained else None  # 0.0, not -0.0, for an unchanged term
        terms.append({"term": k, "delta_s": d, "share": share})
    terms.sort(key=lambda t: abs(t["delta_s"]), reverse=True)
    return {
        "design": rec["label"],
        "changed": {ax: [ref["design"][ax], rec["design"][ax]] for ax in differing_axes([ref["design"],
                                                                                        rec["design"]])},
        "delta_s": delta_s,
        "speedup": ref_s / rec_s,  # > 1: faster than the reference
        "terms": terms,
    }


def notes(records: list) -> list:
    """Warnings specific to a comparison: repeated designs, infeasible designs compared on raw times."""
    out = []
    for i, rec in enumerate(records):
        same = [j for j, r in enumerate(records[:i]) if r["design"] == rec["design"]]
        if same:
            out.append({"kind": "same_design",
                        "message": f"design {i + 1} ({rec['label']}) is the same design as design {same[0] + 1} "
                                   f"({records[same[0]]['label']}): compared anyway, the two have the same numbers"})
    for rec in records:
        if not rec["feasible"]:
            out.append({"kind": "infeasible_design",
                        "message": f"{rec['label']} is infeasible ({'; '.join(rec['violations'])}): its times, "
                                   "differences and speedup are what it would take if it ran"})
    return out


def compare(scenario, designs: list, labels: list | None = None, engine=None) -> dict:
    """Records of ``designs`` (dicts {axis: value}) and their differences from the first (the reference)."""
    labels = labels or [f"design {i + 1}" for i in range(len(designs))]
    points = [scenario.baseline_design(None, d) for d in designs]  # axes left out: the default baseline's
    full = [scenario.space.to_dict(p) for p in points]
    costs = evaluate_designs(scenario, points, engine)
    records = [design_record(scenario, lb, d, c) for lb, d, c in zip(labels, full, costs)]
    differences = [difference(records[0], r) for r in records[1:]]
    b = uncertainty.bands()
    for diff in differences if b is not None else ():
        # the speedup's 80% band from the validation's run pairs, as a sweep's speedups over its baselines: the
        # two designs tie when it contains 1 (the model cannot order them)
        lo, hi = uncertainty.speedup_band(b, diff["speedup"])
        diff.update(speedup_band=[lo, hi], tie=lo <= 1.0 <= hi)
    return {
        "scenario": scenario.name,
        "reference": labels[0],
        "differing_axes": differing_axes(full),
        "designs": records,
        "differences": differences,
        "warnings": warnings_for(scenario, full) + notes(records),
    }

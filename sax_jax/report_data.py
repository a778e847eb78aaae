"""Everything `sax report` shows, as one JSON-ready dict (rendering lives in ``sax_jax.report_html``).

The numbers come from the same functions the other commands use, so the page never disagrees with them: the
exhaustive sweep (`sax sweep`: top-k, Pareto fronts), the validation bands and near-optimal set
(``uncertainty.for_sweep``), the side-by-side breakdowns of the best design and the baselines
(``compare.compare``), sensitivity studies (``sensitivity.sensitivity``) and the published runs of the same
model and GPU (``published.published_for``).

Spaces too large to sweep on the machine in a report's time (``SWEEP_LIMIT``) are searched instead
(evolution, the `sax search` default strategy), also at each sensitivity value (``sensitivity.searched_points``):
the page then says so and has no exhaustive Pareto fronts.
"""
from __future__ import annotations

import dataclasses
import math

from . import compare as compare_mod
from . import uncertainty
from .engine import DEFAULT_ENGINE
from .published import published_for
from .search.baselines import baseline_costs, speedups
from .sensitivity import SEARCH_BUDGET, Vary, check_vary, sensitivity
from .space import AXES
from .specs import RANGES
from .trust import feasible_mfu, warnings_for

# Designs swept exhaustively for one report (each sensitivity value sweeps again): ~2.5 s per sweep at the
# ~4e7 designs/s of 2 CPU cores (benchmarks/throughput.py). Larger spaces are searched.
SWEEP_LIMIT = 1e8
DEFAULT_TOP = 20
# default sensitivity studies of the outermost level, as multiples of its nominal value: latency from a tenth
# (same campus) to 30x (another continent), bandwidth per GPU from an eighth to twice
LATENCY_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
BANDWIDTH_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0)


def _round3(x: float) -> float:
    """Three significant digits: axis values a reader can type back into --vary."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.3g}")


def default_varies(scenario) -> list:
    """Latency and bandwidth of the outermost level (the cross-building link where there is one) around their
    nominal values, clipped to each field's range."""
    level = scenario.system.levels[-1]
    out = []
    for field, factors in (("latency_us", LATENCY_FACTORS), ("bandwidth_GBps", BANDWIDTH_FACTORS)):
        nominal = getattr(level, field)
        rng = RANGES["level"][field]
        values = sorted({_round3(nominal * f) for f in factors} | {nominal})
        values = tuple(v for v in values if rng.ok(v))
        if nominal > 0 and len(values) > 1:
            out.append(Vary(level.name, field, values))
    return out


def scenario_summary(scenario) -> dict:
    sys_ = scenario.system
    model = {k: v for k, v in dataclasses.asdict(scenario.model).items()
             if v is not None and not isinstance(v, dict) and k != "source"}
    if scenario.model.moe is not None:
        model["moe"] = dataclasses.asdict(scenario.model.moe)
    training = {k: v for k, v in dataclasses.asdict(scenario.training).items()
                if isinstance(v, (int, float, str, bool))}
    if scenario.training.framework is not None:
        training["framework"] = scenario.training.framework.name
    return {
        "name": scenario.name,
        "description": getattr(scenario, "description", "") or "",
        "objective": scenario.objective,
        "model": model,
        "model_source": scenario.model.source,
        "system": {"name": sys_.name, "gpu": sys_.gpu.name, "n_gpus": sys_.n_gpus,
                   "levels": [dataclasses.asdict(lv) for lv in sys_.levels]},
        "training": training,
        "space": {ax: [str(v) for v in scenario.space.option_names(ax)] for ax in AXES},
        "space_size": scenario.space.size,
        "baselines": {name: scenario.space.to_dict(scenario.baseline_design(name)) for name in scenario.baselines},
    }


def _varied_axes(scenario) -> list:
    return [ax for ax, r in zip(AXES, scenario.space.radices) if r > 1]


def _search_best(scenario, budget: int, seed: int, engine) -> dict:
    """The evolution search's best design as a one-entry top list (as a sweep's records)."""
    from .search.runner import run_search
    rec = run_search(scenario, "evolution", budget=budget, seed=seed)
    best = rec["best"]
    if best.get("step_time_s") is None:
        return {"top": [], "search": rec}
    cost = compare_mod.evaluate_designs(scenario, [scenario.space.design(best["design"])], engine)[0]
    top = [{"design": best["design"], "step_time_s": cost["step_time_s"], "tokens_per_s": cost["tokens_per_s"],
            "mfu": cost["mfu"], "memory_bytes": cost["memory_bytes"],
            "cross_building_bytes": cost["cross_building_bytes"],
            **{k: cost[k] for k in ("goodput_tokens_per_s", "ettr", "interruptions_per_hour", "checkpoint_interval_s")
               if k in cost}}]
    return {"top": top, "search": {k: rec[k] for k in ("method", "strategy", "seed", "budget", "evaluations",
                                                        "space_size", "fraction_of_space", "seconds")}}


def fixed_curves(scenario, vary: Vary, designs: dict, engine) -> dict:
    """Step time of each named design (held fixed) at each value of ``vary``: {name: [seconds or None]}; one
    batched model call per value."""
    names = list(designs)
    points = [scenario.space.design(designs[n]) for n in names]
    curves = {n: [] for n in names}
    for sc in check_vary(scenario, vary):
        costs = compare_mod.evaluate_designs(sc, points, engine)
        for n, c in zip(names, costs):
            curves[n].append(c["step_time_s"] if c["feasible"] else None)
    return curves


def _record(rec: dict) -> dict:
    keep = ("index", "design", "step_time_s", "tokens_per_s", "mfu", "memory_bytes", "cross_building_bytes",
            "goodput_tokens_per_s", "ettr", "interruptions_per_hour", "checkpoint_interval_s")
    return {k: rec[k] for k in keep if k in rec}


def collect(scenario, top_k: int = DEFAULT_TOP, varies=None, engine=None, progress: bool = False,
            search_budget: int = SEARCH_BUDGET, seed: int = 0, sweep_limit: float = SWEEP_LIMIT) -> dict:
    """The report's data. ``varies``: Vary studies (None: ``default_varies``; [] for none)."""
    engine = engine or DEFAULT_ENGINE
    varies = default_varies(scenario) if varies is None else list(varies)
    for v in varies:
        check_vary(scenario, v)  # every value valid before anything is compiled
    size = scenario.space.size
    exhaustive = size <= sweep_limit
    if exhaustive:
        from .search.exhaustive import sweep
        result = sweep(scenario, top_k=top_k, progress=progress, engine=engine)
        top = [_record(r) for r in result.top]
        pareto = {name: [_record(r) for r in recs] for name, recs in result.pareto.items()}
        method = {"method": "sweep", "n_designs": result.n_designs, "n_feasible": result.n_feasible,
                  "seconds": result.seconds, "compile_s": result.compile_s, "designs_per_s": result.designs_per_s,
                  "device_kind": result.device_kind, "pareto_truncated": result.truncated}
    else:
        found = _search_best(scenario, search_budget, seed, engine)
        top, pareto = found["top"], {}
        method = {**found["search"], "algorithm": found["search"]["method"], "method": "search",
                  "why": f"the space has {size:.3g} designs, more than the {sweep_limit:.0e} a report sweeps "
                         "exhaustively; the best design is the evolution search's"}
    base = baseline_costs(scenario)
    best_s = top[0]["step_time_s"] if top else None
    speedup_vs = speedups(base, best_s)
    b = uncertainty.bands()
    bands = (uncertainty.for_sweep(b, scenario, top, speedup_vs, _varied_axes(scenario))
             if b is not None and top else {})
    if not exhaustive:
        bands.pop("near_optimal", None)  # a search returns one design: no set of ties to speak of

    # the best design beside every baseline: breakdowns and the terms that explain the differences
    labels = (["best"] if top else []) + list(scenario.baselines)
    designs = ([top[0]["design"]] if top else []) + [scenario.space.to_dict(scenario.baseline_design(n))
                                                     for n in scenario.baselines]
    side_by_side = compare_mod.compare(scenario, designs, labels, engine) if designs else None

    studies = []
    for v in varies:
        study = {"level": v.target, "field": v.field, "values": list(v.values),
                 "nominal": getattr(next(lv for lv in scenario.system.levels if lv.name == v.target), v.field, None)
                 if v.target != "training" else getattr(scenario.training, v.field)}
        full = sensitivity(scenario, v, top_k=1, engine=engine, progress=progress, sweep_limit=sweep_limit,
                           search_budget=search_budget, seed=seed)
        study["method"] = full["method"]
        study["best_s"] = [p["best"]["step_time_s"] if p["best"] else None for p in full["points"]]
        study["best_designs"] = [p["best"]["design"] if p["best"] else None for p in full["points"]]
        study["crossovers"] = full["crossovers"]
        # the sensitivity study evaluated every baseline at each value already; only the nominal best is added
        held = fixed_curves(scenario, v, {"best": top[0]["design"]}, engine) if top else {}
        study["fixed_s"] = {**held, **{n: [p["baselines"][n]["step_time_s"] for p in full["points"]]
                                       for n in scenario.baselines}}
        studies.append(study)

    return {
        "scenario": scenario_summary(scenario),
        "method": method,
        "top": top,
        "baselines": {n: {k: x[k] for k in ("design", "step_time_s", "feasible", "memory_bytes", "cross_building_bytes")}
                      for n, x in base.items()},
        "speedup_vs": speedup_vs,
        **bands,
        "compare": side_by_side,
        "pareto": pareto,
        "sensitivity": studies,
        "published": published_for(scenario, top[0]["design"]) if top else None,
        "warnings": warnings_for(scenario, [r["design"] for r in top], feasible_mfu(top[0] if top else None)),
    }

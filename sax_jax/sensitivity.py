"""Sensitivity of the best design to one system or training number (``sax sensitivity``).

For each value of one field (a level's latency, bandwidth, loss, ..., its size, or a training field such as the
global batch) the scenario is rebuilt with that value (``dataclasses.replace`` on the frozen specs, validated
like a YAML input), swept exhaustively and compared with its baselines under the same system. Between two
consecutive values where the best design changes, the axes that change are crossovers; for a continuous field
the value where the two designs swap is refined by bisection on those two designs alone.

Only parameter values change from one point to the next, so every sweep reuses one compiled program
(``engine.Engine`` keys programs by shapes and options); a study over N latencies compiles once.
"""
from __future__ import annotations

import dataclasses
import itertools
import math

from .config import _check_factoring, check_axis_value
from .engine import DEFAULT_ENGINE
from .evaluate import evaluate_one
from .search.baselines import baseline_costs, speedup
from .search.exhaustive import sweep
from .space import AXES, NUMERIC_AXES
from .specs import RANGES, ConfigError
from .trust import warnings_for

FLAG = "--vary"
TRAINING = "training"  # the target name of training fields; any other target names a level of the system
# the previous best within this of the new best at the next value is a tie (designs differing in a knob without
# effect there, broken by the lowest index in the sweep), not a crossover; float32 rounding is ~1e-7
TIE_REL = 1e-6
BISECT_REL_TOL = 1e-3  # stop when the crossover bracket is narrower than 0.1 % of its upper end
# bound on bisection steps (two evaluations each): a bracket from 0 halves linearly and may never reach the
# relative tolerance when the crossover sits at 0
BISECT_MAX_STEPS = 40
# Spaces above this many designs are searched at each value instead of swept: one sweep of 1e9 designs takes
# ~25 s on 2 CPU cores (~4e7 designs/s, benchmarks/throughput.py) and well under a second on a GPU.
SWEEP_LIMIT = 1e9
SEARCH_BUDGET = 20_000  # evaluations of the evolution search per value on larger spaces


def _ranges(target: str) -> dict:
    """The variable fields of a target and their ranges: every numeric field of specs.Training or specs.Level."""
    return RANGES[TRAINING if target == TRAINING else "level"]


@dataclasses.dataclass(frozen=True)
class Vary:
    """One field and the values it takes: ``target`` is a level name or "training"."""
    target: str
    field: str
    values: tuple

    @property
    def name(self) -> str:
        return f"{self.target}.{self.field}"

    @property
    def range(self):
        return _ranges(self.target)[self.field]

    @property
    def continuous(self) -> bool:
        """A crossover between two values can be refined only where every value between them is valid: whole
        numbers (a level's size, the batch) change divisibility, hence feasibility, between any two of them."""
        return not self.range.integer


def _error(value, problem: str, hint: str = "") -> ConfigError:
    return ConfigError(None, FLAG, value, problem, hint)


def parse_vary(text: str) -> Vary:
    """``LEVEL.FIELD=V1,V2,...`` or ``training.FIELD=...`` -> Vary, values sorted ascending; syntax and ranges
    only (whether the level exists and the values suit the scenario is checked by ``with_value``)."""
    example = "e.g. --vary region.latency_us=1000,5000,20000 or --vary training.global_batch_sequences=1024,2048"
    if not isinstance(text, str) or "=" not in text:
        raise _error(text, "expected LEVEL.FIELD=V1,V2,...", example)
    lhs, rhs = (s.strip() for s in text.split("=", 1))
    target, dot, field = lhs.partition(".")
    if not dot or not target or not field:
        raise _error(text, f"'{lhs}' does not name LEVEL.FIELD", example)
    fields = _ranges(target)
    if field not in fields:
        where = "training" if target == TRAINING else "a level"
        raise _error(text, f"unknown field '{field}' of {where}", f"fields are: {', '.join(fields)}")
    items = [s.strip() for s in rhs.split(",")]
    if not rhs or any(s == "" for s in items):
        raise _error(text, "needs a comma-separated list of values with none empty", example)
    rng = fields[field]
    values = []
    for item in items:
        try:
            v = float(item)
        except ValueError:
            raise _error(item, f"{lhs}: not a number", f"{lhs} must be {rng.describe()}") from None
        if rng.integer and math.isfinite(v) and v.is_integer():
            v = int(v)
        if not rng.ok(v):
            raise _error(item, f"{lhs} must be {rng.describe()}" + (f" ({rng.why})" if rng.why else ""))
        if v in values:
            raise _error(item, f"{lhs}: value listed twice", "give each value once")
        values.append(v)
    return Vary(target, field, tuple(sorted(values)))


def _check_target(scenario, vary: Vary) -> None:
    names = [lv.name for lv in scenario.system.levels]
    if vary.target != TRAINING and vary.target not in names:
        raise _error(vary.name, f"system '{scenario.system.name}' has no level '{vary.target}'",
                     f"its levels are: {', '.join(names)} (inner to outer); or vary training.FIELD")


def with_value(scenario, vary: Vary, value):
    """The scenario with ``vary``'s field set to ``value``, checked as if read from YAML; pure."""
    _check_target(scenario, vary)
    try:
        if vary.target == TRAINING:
            training = dataclasses.replace(scenario.training, **{vary.field: value})
            training.validate()
            new = dataclasses.replace(scenario, training=training)
        else:
            levels = tuple(dataclasses.replace(lv, **{vary.field: value}) if lv.name == vary.target else lv
                           for lv in scenario.system.levels)
            system = dataclasses.replace(scenario.system, levels=levels)
            system.validate()
            new = dataclasses.replace(scenario, system=system)
        # the space's options must still make sense (as load_scenario checks): some tp x cp x pp (x dp) factors
        # the GPU count, and no option exceeds the GPUs or the batch
        _check_factoring(new.space, new.system, None)
        for axis in NUMERIC_AXES:
            for v in new.space.option_names(axis):
                check_axis_value(axis, v, new.model, new.system, new.training, None, f"space.{axis}")
    except ConfigError as err:
        raise _error(value, f"with {vary.name}={value:g}, {err.key}={err.value!r} is invalid: {err.problem}",
                     err.hint) from None
    return new


def check_vary(scenario, vary: Vary) -> list:
    """Every value builds a valid scenario (before anything is compiled): the scenarios, in value order."""
    return [with_value(scenario, vary, v) for v in vary.values]


def _best_record(rec: dict) -> dict:
    return {"design": rec["design"], "step_time_s": rec["step_time_s"], "tokens_per_s": rec["tokens_per_s"],
            "mfu": rec["mfu"], "memory_bytes": rec["memory_bytes"], "breakdown": rec["breakdown"]}


def run_point(scenario, value, top_k: int = 1, engine=None, progress: bool = False) -> dict:
    """One value: the exhaustive sweep's best (and top_k) designs and every baseline under the same system."""
    result = sweep(scenario, top_k=top_k, progress=progress, engine=engine)
    best = _best_record(result.top[0]) if result.top else None
    best_s = best["step_time_s"] if best else None
    base = baseline_costs(scenario)
    return {"value": value, "best": best, "n_feasible": result.n_feasible,
            "top": [{k: r[k] for k in ("design", "step_time_s", "mfu")} for r in result.top],
            "baselines": {name: {"step_time_s": b["step_time_s"], "speedup": speedup(b["step_time_s"], best_s)}
                          for name, b in base.items()}}


def searched_points(scenarios: list, values: tuple, budget: int, seed: int, engine=None) -> list:
    """Points as ``run_point`` gives them, for spaces too large to sweep: an evolution search at each value, then
    every design found at any value evaluated at every value (one batched call each) and the fastest kept, so a
    search that missed at one value is not reported as a crossover the designs do not make."""
    from .compare import evaluate_designs
    from .search.runner import run_search
    found = []
    for sc in scenarios:
        d = run_search(sc, "evolution", budget=budget, seed=seed)["best"]
        if d.get("step_time_s") is not None and d["design"] not in found:
            found.append(d["design"])
    points = []
    for sc, value in zip(scenarios, values):
        costs = evaluate_designs(sc, [sc.space.design(d) for d in found], engine) if found else []
        ok = [(c["step_time_s"], i) for i, c in enumerate(costs) if c["feasible"]]
        best = None
        if ok:
            t, i = min(ok)
            c = costs[i]
            best = {"design": found[i], "step_time_s": t, "tokens_per_s": c["tokens_per_s"], "mfu": c["mfu"],
                    "memory_bytes": c["memory_bytes"], "breakdown": c["breakdown"]}
        base = baseline_costs(sc)
        best_s = best["step_time_s"] if best else None
        points.append({"value": value, "best": best, "n_feasible": None,
                       "top": [{k: best[k] for k in ("design", "step_time_s", "mfu")}] if best else [],
                       "baselines": {name: {"step_time_s": b["step_time_s"],
                                            "speedup": speedup(b["step_time_s"], best_s)}
                                     for name, b in base.items()}})
    return points


def _time_s(scenario, design: dict, engine) -> float:
    """Step time of a design (a dict of option names), +inf when infeasible; what ``sax eval`` computes."""
    cost = evaluate_one(scenario, scenario.space.design(design), engine)
    return cost["step_time_s"] if cost["feasible"] else math.inf


def _mid(lo, hi):
    return math.sqrt(lo * hi) if lo > 0 else 0.5 * (lo + hi)


def bisect_crossover(scenario, vary: Vary, design_a: dict, design_b: dict, lo, hi, engine=None):
    """[lo', hi'] within [lo, hi] where ``design_a`` (best at lo) stops being faster than ``design_b`` (best at
    hi): t_a <= t_b at lo' and t_a >= t_b at hi'. Midpoints are geometric on a positive range (latencies and
    bandwidths span decades), arithmetic from 0. None when the ends do not bracket a swap (a tie)."""
    engine = engine or DEFAULT_ENGINE

    def gap_s(v):  # t_a - t_b; NaN when both are infeasible
        sc = with_value(scenario, vary, v)
        return _time_s(sc, design_a, engine) - _time_s(sc, design_b, engine)

    g_lo, g_hi = gap_s(lo), gap_s(hi)
    if not (g_lo <= 0 <= g_hi):
        return None
    for _ in range(BISECT_MAX_STEPS):
        if hi - lo <= BISECT_REL_TOL * abs(hi):
            break
        mid = _mid(lo, hi)
        g = gap_s(mid)
        if math.isnan(g):
            return None
        if g <= 0:
            lo = mid
        else:
            hi = mid
    return [lo, hi]


def find_crossovers(scenario, vary: Vary, points: list, refine: bool = True, engine=None) -> list:
    """Per pair of consecutive values whose best designs differ (and the first is no longer as fast as the second
    at the second value): one record per axis that changes, with the
    bisected crossover value ``at`` (continuous fields; else None) and the step time of the two designs there,
    shared by the axes of that pair."""
    out = []
    for a, b in itertools.pairwise(points):
        if a["best"] is None or b["best"] is None:
            continue  # no feasible design on one side: nothing to cross over from
        da, db = a["best"]["design"], b["best"]["design"]
        changed = [ax for ax in AXES if da[ax] != db[ax]]
        t_b = b["best"]["step_time_s"]
        if not changed or _time_s(with_value(scenario, vary, b["value"]), da, engine) <= t_b * (1 + TIE_REL):
            continue
        bracket = (bisect_crossover(scenario, vary, da, db, a["value"], b["value"], engine)
                   if refine and vary.continuous else None)
        at = t_at = None
        if bracket is not None:
            at = _mid(*bracket)
            sc = with_value(scenario, vary, at)
            t_at = min(_time_s(sc, da, engine), _time_s(sc, db, engine))
        for ax in changed:
            out.append({"axis": ax, "from": da[ax], "to": db[ax], "between": [a["value"], b["value"]], "at": at,
                        "bracket": bracket, "step_time_s": t_at})
    return out


def sensitivity(scenario, vary: Vary, top_k: int = 1, refine: bool = True, engine=None,
                progress: bool = False, sweep_limit: float = SWEEP_LIMIT, search_budget: int = SEARCH_BUDGET,
                seed: int = 0) -> dict:
    """The whole study as one JSON-ready dict (the shape ``sax sensitivity --json`` prints). Spaces above
    ``sweep_limit`` designs are searched at each value (``searched_points``; "method": "search")."""
    engine = engine or DEFAULT_ENGINE
    scenarios = check_vary(scenario, vary)
    exhaustive = scenario.space.size <= sweep_limit
    points = ([run_point(sc, v, top_k, engine, progress) for sc, v in zip(scenarios, vary.values)] if exhaustive
              else searched_points(scenarios, vary.values, search_budget, seed, engine))
    warnings = []
    for sc, p in zip(scenarios, points):
        for w in warnings_for(sc, [p["best"]["design"]] if p["best"] else []):
            if w not in warnings:
                warnings.append(w)
    return {"scenario": scenario.name, "objective": scenario.objective,
            "method": "sweep" if exhaustive else "search",
            "search": None if exhaustive else {"algorithm": "evolution", "budget": search_budget, "seed": seed},
            "vary": {"level": vary.target, "field": vary.field, "values": list(vary.values)},
            "points": points, "crossovers": find_crossovers(scenario, vary, points, refine, engine),
            "warnings": warnings}

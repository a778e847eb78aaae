"""The seed paper's characterization as one run (``sax study``): over a grid of cross-building latency, bandwidth
and number of buildings, per model, sax's best design against the production layout and the best prior baseline.

A study config (YAML) names base scenarios and grid axes::

    name: default
    grid: {campus.latency_us: [100, 1000], campus.bandwidth_GBps: [50, 12.5]}
    models:
      - scenario: four-buildings
      - scenario: mixtral-moe
        system: two-buildings-h100         # optional: another bundled system (name) or a YAML path
        set: {building.size: 512}          # optional: fixed LEVEL.FIELD values before the grid
        grid: {...}                        # optional: this model's own grid (another outer level)

Each grid point rebuilds the scenario with ``sensitivity.with_value`` (validated as a YAML input) and is swept
exhaustively by ``sensitivity.run_point``; every sweep shares one engine, so points that change only parameter
values compile once. A point whose values do not suit the scenario (e.g. a building count that no longer factors
the space) is skipped with a note; a grid value out of its field's range is a config error.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import statistics

from .config import _check_factoring, load_scenario, load_system, read_yaml, static_design_errors
from .engine import DEFAULT_ENGINE
from .evaluate import evaluate_one
from .resources import bundled, find_scenario
from .search.baselines import best_baseline
from .sensitivity import TRAINING, Vary, parse_vary, run_point, with_value
from .specs import ConfigError

PRODUCTION = "production"
SOTA = "crosspipe"  # CrossPipe (Chen et al. 2025): the latency-aware pipeline the paper compares against
DECISIONS = ("placement", "schedule", "transport")  # the cross-building decisions reported per point
STUDY_KEYS = ("name", "description", "grid", "models")
MODEL_KEYS = ("scenario", "system", "set", "grid", "label")


def find_study(name_or_path) -> str:
    """Path of a study config: a file, or a bundled name (``default``) under configs/studies."""
    path = os.fspath(name_or_path)
    if os.path.isfile(path):
        return path
    stem = path[:-5] if path.endswith(".yaml") else path
    cand = bundled("studies", stem + ".yaml")
    if "/" not in path and os.path.isfile(cand):
        return cand
    names = sorted(f[:-5] for f in os.listdir(bundled("studies"))) if os.path.isdir(bundled("studies")) else []
    raise ConfigError(None, "study", path, "file not found, and no bundled study has that name",
                      f"bundled studies: {', '.join(names) or '(none)'}")


@dataclasses.dataclass(frozen=True)
class ModelStudy:
    """One base scenario (system override and fixed values applied) and its grid axes, in config order."""
    label: str
    scenario: object
    axes: tuple  # of Vary


def _parse_field(file, key: str, name, values) -> Vary:
    """LEVEL.FIELD and its values, checked by sensitivity.parse_vary (syntax, field, range), blamed on ``key``."""
    if not isinstance(values, list) or not values:
        raise ConfigError(file, key, values, "needs a non-empty list of values", "e.g. [100, 1000, 5000]")
    try:  # values ascending: the rows and columns of the tables and heatmaps
        return parse_vary(f"{name}=" + ",".join(str(v) for v in values))
    except ConfigError as err:
        raise ConfigError(file, key, err.value, err.problem, err.hint) from None


def _check_level(file, key: str, scenario, vary: Vary) -> None:
    names = [lv.name for lv in scenario.system.levels]
    if vary.target != TRAINING and vary.target not in names:
        raise ConfigError(file, key, vary.name, f"system '{scenario.system.name}' has no level '{vary.target}'",
                          f"its levels are: {', '.join(names)} (inner to outer)")


def _mapping(file, key: str, data) -> dict:
    if not isinstance(data, dict):
        raise ConfigError(file, key, data, "must be a mapping")
    return data


def _with_system(file, key: str, scenario, ref):
    """The scenario on another system (a bundled name or a path relative to the study); its space and baselines
    must still make sense there (as load_scenario checks)."""
    if not isinstance(ref, str) or not ref:
        raise ConfigError(file, key, ref, "must name a bundled system or a YAML path")
    path = ref if os.path.isabs(ref) else os.path.join(os.path.dirname(os.path.abspath(file)), ref)
    if not os.path.isfile(path):
        path = bundled("systems", ref + ".yaml")
    if not os.path.isfile(path):
        raise ConfigError(file, key, ref, "no such system file or bundled system")
    return dataclasses.replace(scenario, system=load_system(path))


def _check_baselines(file, key: str, scenario) -> None:
    """The baselines must still be valid designs after the system override and fixed values."""
    _check_factoring(scenario.space, scenario.system, file)
    for name in scenario.baselines:
        d = scenario.space.to_dict(scenario.baseline_design(name))
        for axis, value, problem, hint in static_design_errors(scenario.model, scenario.system, scenario.training, d):
            raise ConfigError(file, key, f"baselines.{name}.{axis}={value}", problem, hint)


def load_study(path: str) -> tuple[dict, list]:
    """(the config's header {name, description, path}, [ModelStudy]) with every key checked before any sweep."""
    file = find_study(path)
    data = read_yaml(file)
    for k in data:
        if k not in STUDY_KEYS:
            raise ConfigError(file, k, data[k], "unknown key", f"study keys: {', '.join(STUDY_KEYS)}")
    models = data.get("models")
    if not isinstance(models, list) or not models:
        raise ConfigError(file, "models", models, "needs a non-empty list of {scenario: NAME, ...}")
    default_grid = data.get("grid")
    out = []
    for i, m in enumerate(models):
        where = f"models[{i}]"
        m = _mapping(file, where, m)
        for k in m:
            if k not in MODEL_KEYS:
                raise ConfigError(file, f"{where}.{k}", m[k], "unknown key", f"model keys: {', '.join(MODEL_KEYS)}")
        try:
            scenario_path = find_scenario(m.get("scenario"))
        except ConfigError as err:
            raise ConfigError(file, f"{where}.scenario", m.get("scenario"), err.problem, err.hint) from None
        scenario = load_scenario(scenario_path)
        if "system" in m:
            scenario = _with_system(file, f"{where}.system", scenario, m["system"])
        for name, value in _mapping(file, f"{where}.set", m.get("set", {})).items():
            key = f"{where}.set.{name}"
            vary = _parse_field(file, key, name, [value])
            _check_level(file, key, scenario, vary)
            try:
                scenario = with_value(scenario, vary, vary.values[0])
            except ConfigError as err:
                raise ConfigError(file, key, err.value, err.problem, err.hint) from None
        _check_baselines(file, where, scenario)
        grid = m.get("grid", default_grid)
        gkey = f"{where}.grid" if "grid" in m else "grid"
        if not _mapping(file, gkey, grid):
            raise ConfigError(file, gkey, grid, "needs at least one LEVEL.FIELD: [values]")
        axes = []
        for name, values in grid.items():
            vary = _parse_field(file, f"{gkey}.{name}", name, values)
            _check_level(file, f"{gkey}.{name}", scenario, vary)
            axes.append(vary)
        out.append(ModelStudy(str(m.get("label", scenario.name)), scenario, tuple(axes)))
    labels = [ms.label for ms in out]
    if len(set(labels)) != len(labels):
        raise ConfigError(file, "models", labels, "two models have the same label", "give each a distinct label:")
    header = {"name": str(data.get("name", os.path.splitext(os.path.basename(file))[0])),
              "description": str(data.get("description", "")), "path": file}
    return header, out


def point_scenario(scenario, axes: tuple, values: tuple):
    """The scenario with every axis set to its value, each step validated (ConfigError when one does not suit)."""
    for vary, v in zip(axes, values):
        scenario = with_value(scenario, vary, v)
    return scenario


def _baseline_breakdown(scenario, name: str) -> dict | None:
    cost = evaluate_one(scenario, scenario.baseline_design(name))
    return cost["breakdown"] if cost["feasible"] else None


def _sota(baselines: dict):
    """(name, step time) of the state of the art: CrossPipe where the scenario has it, else the fastest of the
    baselines other than production; (None, None) when there is none."""
    if SOTA in baselines:
        return SOTA, baselines[SOTA]["step_time_s"]
    return best_baseline({n: b for n, b in baselines.items() if n != PRODUCTION})


def _ratio(baseline_s, best_s):
    return None if baseline_s is None or best_s is None else baseline_s / best_s


def study_point(label: str, scenario, axes: tuple, values: tuple, engine) -> dict:
    """One grid point: production, SOTA and sax's best step times (None = infeasible) and the speedups."""
    p = run_point(scenario, None, 1, engine)
    best = p["best"]
    best_s = best["step_time_s"] if best else None
    prod_name = PRODUCTION if PRODUCTION in p["baselines"] else scenario.default_baseline
    prod_s = p["baselines"][prod_name]["step_time_s"]
    sota_name, sota_s = _sota(p["baselines"])
    return {"model": label, "scenario": scenario.name, "values": {v.name: x for v, x in zip(axes, values)},
            "production": prod_name, "production_s": prod_s, "sota": sota_name, "sota_s": sota_s,
            "best_s": best_s, "speedup_vs_production": _ratio(prod_s, best_s),
            "speedup_vs_sota": _ratio(sota_s, best_s), "best": best["design"] if best else None,
            "decisions": {d: best["design"][d] for d in DECISIONS} if best else None,
            "best_breakdown": best["breakdown"] if best else None,
            "production_breakdown": _baseline_breakdown(scenario, prod_name) if prod_s is not None else None,
            "n_feasible": p["n_feasible"]}


def _stats(xs: list) -> dict:
    xs = [x for x in xs if x is not None]
    return {"max": max(xs), "median": statistics.median(xs), "n": len(xs)} if xs else {"max": None,
                                                                                        "median": None, "n": 0}


def summarize(points: list) -> dict:
    """Per model: max / median speedup over production and over SOTA (points where both sides are feasible), and
    the decisions every best design of the model shares (the rest vary over the grid)."""
    out = {}
    for label in dict.fromkeys(p["model"] for p in points):
        ps = [p for p in points if p["model"] == label]
        ds = [p["decisions"] for p in ps if p["decisions"]]
        shared = {d: ds[0][d] for d in DECISIONS if ds and all(x[d] == ds[0][d] for x in ds)}
        out[label] = {"vs_production": _stats([p["speedup_vs_production"] for p in ps]),
                      "vs_sota": _stats([p["speedup_vs_sota"] for p in ps]),
                      "sota": next((p["sota"] for p in ps if p["sota"]), None), "shared_decisions": shared}
    return out


def run_study(header: dict, models: list, engine=None, on_point=None) -> dict:
    """The whole study as one JSON-ready dict: {study, points, skipped, summary}. ``on_point(point)`` is called
    after each point (progress)."""
    engine = engine or DEFAULT_ENGINE
    points, skipped = [], []
    for ms in models:
        for values in itertools.product(*(v.values for v in ms.axes)):
            try:
                sc = point_scenario(ms.scenario, ms.axes, values)
            except ConfigError as err:  # e.g. a building count that no longer factors the space: not a crash
                skipped.append({"model": ms.label, "values": {v.name: x for v, x in zip(ms.axes, values)},
                                "reason": err.problem})
                continue
            points.append(study_point(ms.label, sc, ms.axes, values, engine))
            if on_point:
                on_point(points[-1])
    return {"study": header, "models": {ms.label: {"scenario": ms.scenario.name, "system": ms.scenario.system.name,
                                                   "axes": [v.name for v in ms.axes]} for ms in models},
            "points": points, "skipped": skipped, "summary": summarize(points)}

"""Infrastructure co-design answers on top of a sweep: the single-building reference and the cheapest network.

"The cheapest network that reaches X % of the single-building step time": the reference is the best step time
of the same job if its buildings were one (every cross-building level given the building level's bandwidth,
latency, oversubscription, loss, paths, MTU and planes: buildings.FABRIC_OVERRIDE_KEYS; the co-design axes fixed
to them), found by an exhaustive sweep of that variant. A design reaches X % when its throughput is at least X %
of the reference's, i.e. its step time is at most reference / (X / 100). The cheapest such design lies on the
sweep's time-vs-cost Pareto front (any design that meets the limit at the least cost is either on the front or
dominated by a front point that also meets it at no more cost), so it is read off that front: exact, no second
search, as long as the front is whole: the answer says ``exact: false`` when a sweep covered only part of its
space (--max-designs) or the front held more than FRONT_SIZE points (search/exhaustive.py) and was truncated.
"""
from __future__ import annotations

import dataclasses

from .buildings import FABRIC_OVERRIDE_KEYS, inside_levels
from .params import CROSS_BUILDING_LEVELS
from .space import AUTO, AXES
from .specs import ConfigError

XB_AXES = ("xb_bandwidth_GBps", "xb_planes", "xb_oversub")


def single_building(scenario):
    """The scenario as if its buildings were one: cross-building levels copy the building level's network."""
    levels = scenario.system.levels
    ref = inside_levels(levels)[-1]
    new_levels = tuple(dataclasses.replace(lv, **{k: getattr(ref, k) for k in FABRIC_OVERRIDE_KEYS})
                       if lv.name in CROSS_BUILDING_LEVELS else lv for lv in levels)
    system = dataclasses.replace(scenario.system, name=scenario.system.name + "-as-one-building", levels=new_levels)
    options = tuple((AUTO,) if ax in XB_AXES else opts for ax, opts in zip(AXES, scenario.space.options))
    space = dataclasses.replace(scenario.space, options=options)
    return dataclasses.replace(scenario, name=scenario.name + "-as-one-building", system=system, space=space,
                               objective="step_time_s", prices=None)


def cheapest_from_front(front: list, reference_s: float, percent: float):
    """The least-cost record of a time-vs-cost front whose step time is within reference / (percent / 100);
    ties in cost: the faster, then the lower index. None when no front point reaches it."""
    limit = reference_s / (percent / 100.0)
    ok = [r for r in front if r["feasible"] and r["step_time_s"] <= limit]
    if not ok:
        return None
    return min(ok, key=lambda r: (r["cost_usd_per_hour"], r["step_time_s"], r["index"]))


def check_percent(percent, key="--cheapest"):
    if not (isinstance(percent, (int, float)) and 0 < percent <= 100):
        raise ConfigError(None, key, percent, "must be a percentage in (0, 100]",
                          "e.g. --cheapest 90: the cheapest network within 90% of the single-building throughput")


def check_prices(scenario):
    """A co-design answer needs the scenario's prices: checked before any sweep runs."""
    if scenario.prices is None:
        raise ConfigError(scenario.path, "prices", None, "a co-design answer needs infrastructure prices",
                          "add 'prices: ../prices/example.yaml' (or your own) to the scenario")


def cheapest_network(scenario, percent: float, result=None, **sweep_kw) -> dict:
    """{"percent", "reference_step_time_s", "limit_s", "best": record | None, "front_points", "exact",
    "caveats"}.

    result: a finished sweep of ``scenario`` (its time_vs_cost front is used); swept here when None.
    exact: False when a sweep covered part of its space or the time_vs_cost front was truncated; ``caveats`` says
    which.
    """
    from .search.exhaustive import sweep
    check_percent(percent)
    check_prices(scenario)
    ref = sweep(single_building(scenario), top_k=1, progress=False, **sweep_kw)
    if not ref.top:
        raise ConfigError(scenario.path, "space", None, "no feasible design even in one building",
                          "widen the space (tp, pp, ...)")
    result = result if result is not None else sweep(scenario, top_k=1, progress=False, **sweep_kw)
    front = result.pareto.get("time_vs_cost", [])
    ref_s = ref.top[0]["step_time_s"]
    caveats = []
    if not result.complete:
        caveats.append(f"the sweep covered {result.n_designs:,} of {result.space_size:,} designs")
    if result.truncated.get("time_vs_cost"):
        caveats.append(f"the time-vs-cost front was truncated to {len(front):,} points")
    if not ref.complete:
        caveats.append(f"the single-building reference covered {ref.n_designs:,} of {ref.space_size:,} designs")
    return {"percent": float(percent), "reference_step_time_s": ref_s, "reference_design": ref.top[0]["design"],
            "limit_s": ref_s / (percent / 100.0), "best": cheapest_from_front(front, ref_s, percent),
            "front_points": len(front), "exact": not caveats, "caveats": caveats}

"""Designs named on the command line: a scenario baseline overridden by ``axis=value`` pairs.

Shared by `sax eval` (``--baseline NAME --set axis=value``) and `sax compare` (``production:tp=4,pp=16``).
Every error is a ConfigError whose key names the command-line spelling (``key(axis)``, ``baseline_key``), so
a user sees the flag or argument they typed rather than the scenario file's ``space.*`` / ``baselines.*`` keys.
"""
from __future__ import annotations

from .config import check_axis_value
from .moe.traces import NEEDS_TRACE
from .space import AXES, CATEGORICAL_AXES, Design
from .specs import ConfigError


def set_flag(axis: str | None = None) -> str:
    """Key of `sax eval`'s --set: the flag alone for a malformed item, with the axis once it is known."""
    return f"--set {axis}" if axis else "--set"


def parse_sets(items, file=None, key=set_flag, example: str = "e.g. --set placement=tp-cp-pp-dp") -> dict:
    """{axis: value} from 'axis=value' strings; numbers become int or float, names stay strings."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(file, key(), item, "expected axis=value", example)
        k, v = item.split("=", 1)
        k, v = k.strip(), v.strip()
        if k not in AXES:
            raise ConfigError(file, key(), item, "unknown design axis", f"axes are: {', '.join(AXES)}")
        if k in out:
            raise ConfigError(file, key(k), item, "axis set twice", "give each axis once")
        try:
            v = int(v)
        except ValueError:
            try:
                v = float(v)
            except ValueError:
                pass
        out[k] = v
    return out


def resolve_design(scenario, baseline: str | None, sets: dict, key=set_flag, baseline_key: str = "--baseline"
                   ) -> Design:
    """The design ``baseline`` (None: the scenario's default) with ``sets`` applied, each value checked."""
    from .params import provisions
    for k, v in sets.items():
        if k.startswith("xb_") and v != "auto" and not provisions(scenario):
            raise ConfigError(None, key(k), v, "the scenario does not provision its cross-building network per design",
                              f"list {k} options in the scenario's space (see configs/scenarios/codesign.yaml)")
        if k in CATEGORICAL_AXES and not isinstance(v, str):
            raise ConfigError(None, key(k), v, f"must be the name of a {k} option",
                              "see `sax space SCENARIO` for the names")
        if k == "expert_placement" and v != "contiguous" and scenario.expert_trace is None:
            # without a trace there are no placement tables: the policy would silently evaluate as contiguous
            raise ConfigError(None, key(k), v, *NEEDS_TRACE)
        check_axis_value(k, v, scenario.model, scenario.system, scenario.training, None, key(k))
    try:
        return scenario.baseline_design(baseline, sets)
    except ConfigError as err:  # blamed on what the user typed, not on the scenario file's keys
        where = err.key or ""
        if where.startswith("space."):
            raise ConfigError(None, key(where.split(".")[-1]), err.value, err.problem, err.hint) from None
        if where.startswith("baselines."):
            raise ConfigError(None, baseline_key, err.value, err.problem, err.hint) from None
        raise

"""Heterogeneous systems: buildings with their own GPU type and fabric (issue #16 item 1).

A system file may list ``buildings:`` in rank order (building b holds ranks b N/B .. (b+1) N/B - 1), each with
its GPU (a configs/hardware file), its GPU count (``gpus`` or ``nodes``) and optionally its own values for the
levels inside a building (``levels: {node: {bandwidth_GBps: 900}}``). The system's ``levels`` give the shape
(the building level's size is the nodes per building, the cross-building levels how many buildings) and the
cross-building links every building shares. Buildings with the same GPU and fabric form one *GPU type*; the
step model evaluates each type once and combines them (cost/hetero.py), so a type's count, not the building
count, sets the work, and at most MAX_GPU_TYPES types keep the jitted program small.

Every building holds the same number of GPUs: the rank layout (placement.py) assumes equal units per level.
"""
from __future__ import annotations

import dataclasses

from . import specs as S
from .params import CROSS_BUILDING_LEVELS

MAX_GPU_TYPES = 4
BUILDING_KEYS = ("gpu", "gpus", "nodes", "levels")
FABRIC_OVERRIDE_KEYS = ("bandwidth_GBps", "latency_us", "oversubscription", "loss_rate", "paths", "mtu_bytes",
                        "planes")


def inside_levels(levels) -> tuple:
    """The levels inside one building (node .. building), inner to outer."""
    return tuple(lv for lv in levels if lv.name not in CROSS_BUILDING_LEVELS)


def n_buildings(levels) -> int:
    out = 1
    for lv in levels:
        if lv.name in CROSS_BUILDING_LEVELS:
            out *= lv.size
    return out


def load_buildings(raw, file: str, levels: tuple, load_gpu, level_values) -> tuple:
    """``buildings:`` of a system file -> tuple of BuildingSpec (() when absent); ``levels`` are the system's,
    already validated. ``load_gpu(ref, file, key)`` reads one GPU file (config.load_gpu) and
    ``level_values(mapping, file, key_prefix)`` reads a building's level values as ``levels:`` reads them
    (numbers, whole counts); both are passed in to keep the import one-way."""
    if raw is None:
        return ()
    n = n_buildings(levels)
    inside = inside_levels(levels)
    per_building = 1
    for lv in inside:
        per_building *= lv.size
    if not isinstance(raw, list) or len(raw) != n:
        raise S.ConfigError(file, "buildings", raw if not isinstance(raw, list) else f"{len(raw)} entries",
                            f"must list one entry per building: the cross-building levels make {n}",
                            "one {gpu: ..., gpus: ...} per building, in rank order")
    out = []
    for i, b in enumerate(raw):
        key = f"buildings[{i}]"
        if not isinstance(b, dict) or "gpu" not in b:
            raise S.ConfigError(file, key, b, "each building needs a mapping with a 'gpu'",
                                "e.g. {gpu: ../hardware/B200.yaml, gpus: 8192}")
        unknown = sorted(set(b) - set(BUILDING_KEYS))
        if unknown:
            raise S.ConfigError(file, f"{key}.{unknown[0]}", b[unknown[0]], "unknown key",
                                f"building keys: {', '.join(BUILDING_KEYS)}")
        gpu = load_gpu(b["gpu"], file, f"{key}.gpu")
        nodes_gpus = inside[0].size
        for k, scale in (("gpus", 1), ("nodes", nodes_gpus)):
            if k in b and (isinstance(b[k], bool) or not isinstance(b[k], int) or b[k] * scale != per_building):
                raise S.ConfigError(file, f"{key}.{k}", b[k],
                                    f"every building must hold the system's {per_building:,} GPUs "
                                    f"({per_building // nodes_gpus:,} nodes of {nodes_gpus})",
                                    "buildings of different sizes are not modelled; adjust the levels' sizes")
        out.append(S.BuildingSpec(gpu=gpu, levels=_building_levels(b.get("levels") or {}, inside, file, key,
                                                                   level_values)))
    types = {_type_key(b) for b in out}
    if len(types) > MAX_GPU_TYPES:
        raise S.ConfigError(file, "buildings", f"{len(types)} GPU types", f"at most {MAX_GPU_TYPES} distinct "
                            "(GPU, fabric) combinations", "merge buildings of the same kind")
    return tuple(out)


def _building_levels(override: dict, inside: tuple, file: str, key: str, level_values) -> tuple:
    names = [lv.name for lv in inside]
    if not isinstance(override, dict):
        raise S.ConfigError(file, f"{key}.levels", override, "must map a level name to its values",
                            "e.g. levels: {node: {bandwidth_GBps: 900}}")
    for name, fields in override.items():
        if name not in names:
            raise S.ConfigError(file, f"{key}.levels.{name}", fields, "not a level inside a building",
                                f"levels inside a building: {', '.join(names)}")
        bad = sorted(set(fields or {}) - set(FABRIC_OVERRIDE_KEYS)) if isinstance(fields, dict) else ["?"]
        if bad:
            raise S.ConfigError(file, f"{key}.levels.{name}.{bad[0]}", fields, "cannot be set per building",
                                f"per-building keys: {', '.join(FABRIC_OVERRIDE_KEYS)}")
    out = []
    for lv in inside:
        values = level_values(override.get(lv.name) or {}, file, f"{key}.levels.{lv.name}.")
        new = dataclasses.replace(lv, **values)
        new.validate(file, prefix=f"{key}.")
        out.append(new)
    return tuple(out)


def _type_key(b: S.BuildingSpec) -> str:
    return repr(b)  # GpuSpec holds dicts (unhashable); its repr is its value


def building_types(system: S.SystemSpec) -> list:
    """[(BuildingSpec, [building indices])] of the distinct GPU types, in order of first appearance."""
    types: dict = {}
    for i, b in enumerate(system.buildings):
        types.setdefault(_type_key(b), (b, []))[1].append(i)
    return list(types.values())


def paced_label(system: S.SystemSpec, paced_by) -> str:
    """The GPU type a Cost's ``paced_by`` names, with its buildings: 'B200 (building 1)'."""
    b, indices = building_types(system)[int(paced_by)]
    return f"{b.gpu.name} (building{'s' if len(indices) > 1 else ''} {', '.join(map(str, indices))})"


def building_system(system: S.SystemSpec, b: S.BuildingSpec) -> S.SystemSpec:
    """The system as one building of type ``b`` sees it: its GPU, its inner levels, the shared outer levels."""
    levels = tuple(b.levels) + tuple(lv for lv in system.levels if lv.name in CROSS_BUILDING_LEVELS)
    return dataclasses.replace(system, gpu=b.gpu, levels=levels, buildings=())

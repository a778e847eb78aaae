"""YAML -> frozen specs. Host-only, eager, with errors that name the file, the key and the value.

A scenario file names its model, system and transports by relative path (or inlines them); a system
names its GPU the same way. Paths resolve relative to the file that mentions them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from typing import Any

import yaml

from . import specs as S
from .buildings import load_buildings
from .resources import bundled, find_scenario
from .moe.traces import scenario_trace
from .space import AUTO_AXES, AXES, CATEGORICAL_AXES, NUMERIC_AXES, REAL_AXES, DesignSpace

OBJECTIVES = ("step_time_s", "tokens_per_s", "mfu", "goodput_tokens_per_s", "effective_tokens_per_s",
              "time_to_target_s", "train_cost_usd")
MAX_SYNC_EVERY = 1_000_000  # inner steps between outer synchronizations (DiLoCo's H)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    model: S.ModelSpec
    system: S.SystemSpec
    training: S.Training
    transports: tuple  # of TransportSpec
    space: DesignSpace
    objective: str
    baselines: dict  # name -> {axis: value}
    default_baseline: str
    description: str = ""
    prices: S.PriceSpec | None = None  # infrastructure prices (co-design: cost/provision.py)
    expert_trace: Any = None  # MoE activation trace (sax_jax/moe/traces.Trace) for the expert_placement axis

    @property
    def fingerprint(self) -> str:
        """Hash of everything that changes results; a sweep refuses to resume across a change."""
        blob = json.dumps([dataclasses.asdict(self.model), dataclasses.asdict(self.system),
                           dataclasses.asdict(self.training), [dataclasses.asdict(t) for t in self.transports],
                           [list(o) for o in self.space.options], self.objective]
                          + ([dataclasses.asdict(self.prices)] if self.prices is not None else [])
                          + ([self.expert_trace.digest] if self.expert_trace is not None else []),
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def baseline_design(self, name: str | None = None, overrides: dict | None = None):
        name = name or self.default_baseline
        if name not in self.baselines:
            raise S.ConfigError(self.path, f"baselines.{name}", name, "no such baseline",
                                f"baselines are: {', '.join(self.baselines) or '(none)'}")
        return self.space.design(overrides, base=self.baselines[name], file=self.path)


# ---------------------------------------------------------------------------------------------- reading
class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML would keep the last one silently)."""


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # SafeLoader reports unhashable keys itself
        if key in seen:
            mark = key_node.start_mark
            raise _DuplicateKey(key, seen[key], mark.line + 1)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key, first_line, line):
        super().__init__(key)
        self.key, self.first_line, self.line = key, first_line, line


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _key_path(path: str, key, line: int) -> str | None:
    """Dotted path (``space.tp``) of the mapping key ``key`` written on ``line`` (1-based), for messages."""
    def walk(node, prefix):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = f"{prefix}.{k.value}" if prefix else str(k.value)
                if k.start_mark.line + 1 == line and k.value == str(key):
                    return name
                found = walk(v, name)
                if found:
                    return found
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                found = walk(v, f"{prefix}[{i}]")
                if found:
                    return found
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return walk(yaml.compose(fh, Loader=yaml.SafeLoader), "")
    except yaml.YAMLError:
        return None


def read_yaml(path: str) -> dict:
    """A YAML mapping from a file: plain YAML only (no tags that build Python objects), no duplicate keys."""
    if not os.path.exists(path):
        raise S.ConfigError(path, None, path, "file not found", "paths in a config are relative to that config")
    if os.path.isdir(path):
        raise S.ConfigError(path, None, path, "is a directory, not a YAML file", "give the path of a .yaml file")
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except _DuplicateKey as dup:
        raise S.ConfigError(path, _key_path(path, dup.key, dup.line) or str(dup.key), dup.key,
                            f"duplicate key (lines {dup.first_line} and {dup.line})",
                            "YAML would silently keep only the last one; remove one of them") from None
    except yaml.constructor.ConstructorError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        found = re.search(r"tag '([^']*)'", str(err.problem or ""))
        tag = found.group(1).replace("tag:yaml.org,2002:", "!!") if found else str(err.problem)
        raise S.ConfigError(path, None, where, f"unsafe or unknown YAML tag {tag!r} refused",
                            "configs are plain YAML: mappings, lists, numbers and strings; remove the '!!' tag") \
            from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(err, "problem", None) or str(err)
        raise S.ConfigError(path, None, where, f"YAML syntax error: {problem}",
                            "check indentation and the ':' after each key") from None
    except (OSError, UnicodeDecodeError) as err:
        raise S.ConfigError(path, None, path, f"cannot read the file: {err.__class__.__name__}",
                            "give a readable UTF-8 YAML file") from None
    if not isinstance(data, dict):
        raise S.ConfigError(path, None, type(data).__name__, "expected a mapping at the top level")
    return data


def _resolve(ref: Any, base_file: str | None, key: str) -> tuple[dict, str]:
    """A reference is a relative path (str) or an inline mapping."""
    if isinstance(ref, dict):
        return ref, base_file or "<inline>"
    if base_file is None and isinstance(ref, str):
        return read_yaml(ref), ref
    if not isinstance(ref, str):
        raise S.ConfigError(base_file, key, ref, "must be a path to a YAML file or an inline mapping")
    path = resolve_path(ref, base_file, key)
    return read_yaml(path), path


def resolve_path(ref: str, base_file: str, key: str) -> str:
    """The existing file that ``ref``, written under ``key`` of ``base_file``, names (relative to that file)."""
    path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(base_file)), ref))
    if not os.path.exists(path):
        raise S.ConfigError(base_file, key, ref, "referenced file not found",
                            f"looked for {path}; paths are relative to {base_file}")
    return path


def _build(cls, data: dict, file: str, prefix: str = "", exclude: tuple = (), partial: bool = False):
    """Dataclass from a mapping; unknown and missing keys are errors (no silent typos). ``partial``: only the
    keys given (overrides of an existing spec's values), so missing keys are not errors."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in exclude}
    for k in data:
        if k not in fields:
            close = [f for f in fields if f.startswith(k[:3])]
            raise S.ConfigError(file, prefix + k, data[k], "unknown key",
                                f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = data[name]
        elif not partial and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise S.ConfigError(file, prefix + name, None, "required key is missing")
    bools = {n for names in S.BOOL_FIELDS.values() for n in names}
    for name, v in kwargs.items():
        if isinstance(v, str) and name in bools:
            raise S.ConfigError(file, prefix + name, v, "must be true or false")
        if isinstance(v, str) and name not in ("name", "status", "source", "load_balancing", "loss_recovery",
                                               "precision", "framework", "attention_kernel", "description",
                                               "pattern", "diloco_workers", "hsdp_shard", "hsdp_outer",
                                               "dp_calls", "fp8_scaling",
                                               "backward_prefetch", "tp_overlap"):
            try:  # PyYAML reads 1e10 (no sign in exponent) as a string
                kwargs[name] = float(v)
            except ValueError:
                raise S.ConfigError(file, prefix + name, v, "must be a number") from None
    return kwargs


def _whole(kwargs: dict, kind: str) -> dict:
    """Counts given as 8.0 become 8; 8.5 stays and fails validation with the key named."""
    for name, rng in S.ranges_of(kind).items():
        v = kwargs.get(name)
        if rng.integer and isinstance(v, float) and v.is_integer() and abs(v) < 2**62:
            kwargs[name] = int(v)
    return kwargs


def load_model(ref, base_file: str | None = None, key: str = "model") -> S.ModelSpec:
    data, file = _resolve(ref, base_file, key)
    data = dict(data)
    moe = data.pop("moe", None)
    mla = data.pop("mla", None)
    window = data.pop("sliding_window", None)
    hybrid = data.pop("hybrid", None)
    compressed = data.pop("compressed_attention", None)
    data.setdefault("head_dim", None)
    if data["head_dim"] is None and all(isinstance(data.get(k), int) and not isinstance(data.get(k), bool)
                                        and data[k] > 0 for k in ("hidden", "heads")):
        data["head_dim"] = data["hidden"] // data["heads"]
    data.setdefault("kv_heads", data.get("heads"))
    kwargs = _build(S.ModelSpec, data, file, exclude=("moe", "mla", "sliding_window", "hybrid", "compressed_attention"))
    if moe is not None and not isinstance(moe, dict):
        raise S.ConfigError(file, "moe", moe, "must be a mapping of MoE settings")
    moe_spec = S.MoESpec(**_whole(_build(S.MoESpec, moe, file, "moe."), "moe")) if moe else None
    if mla is not None and not isinstance(mla, dict):
        raise S.ConfigError(file, "mla", mla, "must be a mapping of multi-head latent attention widths",
                            "q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim "
                            "(and shared_kv, o_lora_rank, o_groups)")
    mla_spec = S.MLASpec(**_whole(_build(S.MLASpec, mla, file, "mla."), "mla")) if mla else None
    if window is not None and not isinstance(window, dict):
        raise S.ConfigError(file, "sliding_window", window, "must be a mapping", "window, layers, sinks")
    window_spec = (S.SlidingWindowSpec(**_whole(_build(S.SlidingWindowSpec, window, file, "sliding_window."),
                                                "sliding_window")) if window else None)
    if hybrid is not None and not isinstance(hybrid, dict):
        raise S.ConfigError(file, "hybrid", hybrid, "must be a mapping",
                            "pattern, mamba_heads, mamba_head_dim, mamba_groups, mamba_state, mamba_conv, mamba_chunk")
    if hybrid is not None and not isinstance(hybrid.get("pattern"), str):
        raise S.ConfigError(file, "hybrid.pattern", hybrid.get("pattern"), "must be a string of blocks",
                            "e.g. \"MEMEM*E\": M Mamba-2, * attention, - MLP, E MoE")
    hybrid_spec = (S.HybridSpec(**_whole(_build(S.HybridSpec, hybrid, file, "hybrid."), "hybrid"))
                   if hybrid else None)
    if compressed is not None and not isinstance(compressed, dict):
        raise S.ConfigError(file, "compressed_attention", compressed, "must be a mapping",
                            "window, csa_layers, csa_ratio, hca_layers, hca_ratio, index_topk, index_heads, "
                            "index_head_dim")
    compressed_spec = (S.CompressedAttentionSpec(**_whole(_build(S.CompressedAttentionSpec, compressed, file,
                                                                 "compressed_attention."), "compressed_attention"))
                       if compressed else None)
    for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"):
        v = kwargs.get(k)
        if not (isinstance(v, (int, float)) and float(v).is_integer()):
            raise S.ConfigError(file, k, v, "must be a whole number")
        kwargs[k] = int(v)
    spec = S.ModelSpec(moe=moe_spec, mla=mla_spec, sliding_window=window_spec, hybrid=hybrid_spec,
                       compressed_attention=compressed_spec, **kwargs)
    spec.validate(file)
    return spec


def _tflops_map(value, key: str, file: str, precisions: tuple, what: str) -> dict:
    """A GPU file's {precision: TFLOP/s} mapping as floats (peak_tflops, mamf_tflops); which precisions it may or
    must name is GpuSpec.validate's to check."""
    if not isinstance(value, dict):
        raise S.ConfigError(file, key, value, what, f"precisions: {', '.join(precisions)}")
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise S.ConfigError(file, f"{key}.{k}", v, "must be a number (TFLOP/s)")
        try:
            float(v)
        except ValueError:
            raise S.ConfigError(file, f"{key}.{k}", v, "must be a number (TFLOP/s)") from None
    return {k: float(v) for k, v in value.items()}


def load_gpu(ref, base_file: str | None = None, key: str = "gpu") -> S.GpuSpec:
    data, file = _resolve(ref, base_file, key)
    data = dict(data)
    eff = data.pop("efficiency", None)
    if not isinstance(eff, dict):
        raise S.ConfigError(file, "efficiency", eff, "required mapping is missing")
    kwargs = _whole(_build(S.GpuSpec, data, file, exclude=("efficiency",)), "gpu")
    kwargs["peak_tflops"] = _tflops_map(kwargs.get("peak_tflops"), "peak_tflops", file, S.PRECISIONS,
                                        "must map each precision to TFLOP/s")
    if "mamf_tflops" in kwargs:
        kwargs["mamf_tflops"] = _tflops_map(kwargs["mamf_tflops"], "mamf_tflops", file, S.MAMF_PRECISIONS,
                                            "must map a precision to the measured matmul TFLOP/s")
    spec = S.GpuSpec(efficiency=S.Efficiency(**_build(S.Efficiency, eff, file, "efficiency.")), **kwargs)
    spec.validate(file)
    return spec


FRAMEWORKS_FILE = "frameworks.yaml"


def load_frameworks(path: str | None = None) -> dict:
    """{name: Framework} from the bundled ``frameworks.yaml`` (or ``path``)."""
    path = path or bundled(FRAMEWORKS_FILE)
    data = read_yaml(path)
    table = data.get("frameworks") if isinstance(data, dict) else None
    if not isinstance(table, dict) or not table:
        raise S.ConfigError(path, "frameworks", table, "must map a framework name to its settings")
    out = {}
    for name, fields in table.items():
        if not isinstance(fields, dict):
            raise S.ConfigError(path, f"frameworks.{name}", fields, "must be a mapping of framework settings")
        fw = S.Framework(name=str(name), **_build(S.Framework, fields, path, f"frameworks.{name}.", exclude=("name",)))
        fw.validate(path)
        out[str(name)] = fw
    return out


def load_framework(name: Any, file: str | None, key: str = "training.framework") -> S.Framework:
    """A framework by its name in the bundled frameworks.yaml; an unknown name names the known ones."""
    known = load_frameworks()
    if not isinstance(name, str) or name not in known:
        raise S.ConfigError(file, key, name, "unknown framework", f"known: {', '.join(sorted(known))} "
                            f"(configs/{FRAMEWORKS_FILE})")
    return known[name]


def _level_values(data: dict, file: str, prefix: str) -> dict:
    """Some values of a Level (a building's overrides), numbers read as in ``levels:``; errors name ``prefix``."""
    return _whole(_build(S.Level, data, file, prefix, partial=True), "level")


def load_system(ref, base_file: str | None = None, key: str = "system") -> S.SystemSpec:
    data, file = _resolve(ref, base_file, key)
    data = dict(data)
    raw_buildings = data.get("buildings")
    has_buildings = isinstance(raw_buildings, list) and len(raw_buildings) > 0
    if "buildings" in data and not has_buildings and "gpu" not in data:
        raise S.ConfigError(file, "buildings", raw_buildings, "must list one entry per building",
                            "one {gpu: ..., gpus: ...} per building, in rank order; or drop it and give the "
                            "system a gpu")
    for k in ("name", "levels") + (() if has_buildings else ("gpu",)):
        if k not in data:
            raise S.ConfigError(file, k, None, "required key is missing")
    unknown = set(data) - {"name", "gpu", "levels", "description", "buildings"}
    if unknown:
        k = sorted(unknown)[0]
        raise S.ConfigError(file, k, data[k], "unknown key", "system keys: name, gpu, levels, description, buildings")
    if not isinstance(data["levels"], list):
        raise S.ConfigError(file, "levels", data["levels"], "must be a list of levels, inner to outer")
    levels = []
    for i, lv in enumerate(data["levels"]):
        if not isinstance(lv, dict) or "name" not in lv:
            raise S.ConfigError(file, f"levels[{i}]", lv, "each level needs a mapping with a 'name'")
        levels.append(S.Level(**_whole(_build(S.Level, lv, file, f"levels.{lv['name']}."), "level")))
    if has_buildings and "gpu" in data:
        raise S.ConfigError(file, "gpu", data["gpu"], "a system with buildings gives each building its gpu",
                            "drop the system-level gpu")
    gpu = None if has_buildings else load_gpu(data["gpu"], file)  # a heterogeneous system's: its first building's
    spec = S.SystemSpec(name=str(data["name"]), gpu=gpu, levels=tuple(levels))
    spec.validate(file)  # the levels' names, order and sizes before the buildings are read against them
    if raw_buildings is None:
        return spec
    buildings = load_buildings(raw_buildings, file, spec.levels, load_gpu, _level_values)  # heterogeneous
    return dataclasses.replace(spec, gpu=buildings[0].gpu, buildings=buildings)


def load_transports(ref, base_file: str | None = None, key: str = "transports") -> tuple:
    data, file = _resolve(ref, base_file, key)
    out = []
    for name, t in data.items():
        if not isinstance(name, str) or not name:
            raise S.ConfigError(file, f"transports.{name}", name, "a transport name must be a non-empty string")
        if not isinstance(t, dict):
            raise S.ConfigError(file, f"transports.{name}", t, "must be a mapping of transport settings")
        kwargs = _whole(_build(S.TransportSpec, t, file, f"transports.{name}.", exclude=("name",)), "transport")
        sched = kwargs.get("loss_schedule")
        if isinstance(sched, list):  # frozen spec: tuples (a malformed entry stays as it is and fails validation)
            kwargs["loss_schedule"] = tuple(tuple(ph) if isinstance(ph, list) else ph for ph in sched)
        spec = S.TransportSpec(name=name, **kwargs)
        spec.validate(file)
        out.append(spec)
    if not out:
        raise S.ConfigError(file, key, data, "needs at least one transport")
    return tuple(out)


def _check_factoring(space: DesignSpace, system: S.SystemSpec, path: str):
    """At least one tp x cp x pp (x dp) of the space must factor the GPU count, or every point is infeasible."""
    n = system.n_gpus
    opts = {ax: [v for v in space.options[AXES.index(ax)]] for ax in ("tp", "cp", "pp", "dp")}
    for tp in opts["tp"]:
        for cp in opts["cp"]:
            for pp in opts["pp"]:
                for dp in opts["dp"]:
                    prod = tp * cp * pp
                    if (dp == 0 and n % prod == 0) or (dp > 0 and prod * dp == n):
                        return
    raise S.ConfigError(path, "space.tp/cp/pp/dp", {k: list(v) for k, v in opts.items()},
                        f"no combination factors the {n} GPUs of system '{system.name}'",
                        "list options whose product divides the GPU count (dp 'auto' takes the rest)")


def _check_categorical(axis: str, value, file, key):
    """Categorical axes take names (schedule: 1f1b), not integer codes that would silently pick an option."""
    if axis in CATEGORICAL_AXES and not isinstance(value, str):
        raise S.ConfigError(file, key, value, f"must be the name of a {axis} option",
                            "names such as 1f1b, zero1, ring, tp-cp-dp-pp; see `sax space SCENARIO`")


def axis_limit(axis: str, model: S.ModelSpec, system: S.SystemSpec, training: S.Training) -> int:
    """Largest meaningful value of a numeric design axis (parallel degrees cannot exceed the GPUs, ...)."""
    if axis in ("tp", "cp", "pp", "dp", "ep"):
        return system.n_gpus
    if axis == "vpp":
        return model.layers
    if axis == "mbs":
        return training.global_batch_sequences
    if axis == "sync_every":
        return MAX_SYNC_EVERY
    if axis in ("xb_bandwidth_GBps", "xb_planes"):
        return S.RANGES["level"]["bandwidth_GBps" if axis == "xb_bandwidth_GBps" else "planes"].hi
    if axis == "xb_oversub":
        return S.RANGES["level"]["oversubscription"].hi
    return S.RANGES["transport"][axis].hi  # qps, channels


def check_axis_value(axis: str, value, model, system, training, file, key):
    """A numeric axis value (or 'auto') must be a whole number in [1, axis_limit]."""
    if axis not in NUMERIC_AXES or value == "auto":
        return
    hi = axis_limit(axis, model, system, training)
    whole = axis not in REAL_AXES
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (float(value).is_integer() or not whole) and 1 <= value <= hi
    if not ok:
        what = {"vpp": "the model's layers", "mbs": "the global batch", "qps": "the transport limit",
                "sync_every": "inner steps per outer sync", "xb_bandwidth_GBps": "GB/s per GPU",
                "xb_planes": "NIC planes", "xb_oversub": "the x of 1:x",
                "channels": "the transport limit"}.get(axis, "the system's GPUs")
        raise S.ConfigError(file, key, value, f"must be a {'whole ' if whole else ''}number in [1, {hi:,}] ({what})",
                            "'auto' is also allowed" if axis in AUTO_AXES else "")


def _check_system_factors_baselines(designs: dict, system: S.SystemSpec, system_file: str):
    """When no baseline's tp x cp x pp divides the GPU count, the system's level sizes are the likely typo."""
    auto = {n: d for n, d in designs.items() if d["dp"] == "auto"}
    if not auto or len(auto) != len(designs):
        return
    n = system.n_gpus
    if any(n % (d["tp"] * d["cp"] * d["pp"]) == 0 for d in auto.values()):
        return
    twos = lambda k: (k & -k).bit_length()  # noqa: E731  (factors of two: GPU counts are powers of two mostly)
    levels = [lv for lv in system.levels if lv.size > 1] or list(system.levels)
    lv = min(levels, key=lambda lv: twos(int(lv.size)))
    shape = " x ".join(f"{x.name} {x.size}" for x in system.levels)
    prods = ", ".join(f"{name}: {d['tp'] * d['cp'] * d['pp']}" for name, d in auto.items())
    raise S.ConfigError(system_file, f"levels.{lv.name}.size", lv.size,
                        f"the system's {n:,} GPUs ({shape}) are not divisible by tp x cp x pp of any baseline "
                        f"({prods})", f"check the level sizes of system '{system.name}'")


def static_design_errors(model: S.ModelSpec, system: S.SystemSpec, training: S.Training, d: dict) -> list:
    """Shape rules a named design (a baseline) must satisfy: (axis, value, problem, hint) per broken rule.

    Sweeps flag the same rules in-band (cost.step VIOLATIONS); a hand-written baseline that breaks one is a
    typo in a file, so it is reported at load time with the numbers involved.
    """
    out = []
    n = system.n_gpus
    tp, cp, pp = d["tp"], d["cp"], d["pp"]
    dp = n / (tp * cp * pp) if d["dp"] == "auto" else d["dp"]
    if (d["dp"] == "auto" and n % (tp * cp * pp)) or tp * cp * pp * dp != n:
        out.append(("dp" if d["dp"] != "auto" else "tp", {"tp": tp, "cp": cp, "pp": pp, "dp": d["dp"]},
                    f"tp x cp x pp x dp does not factor the {n} GPUs", "dp 'auto' takes n_gpus / (tp cp pp)"))
    for what, size in (("heads", model.heads), ("kv_heads", model.kv_heads), ("ffn", model.ffn)):
        if size % tp:
            out.append(("tp", tp, f"does not divide the model's {what}={size}", "Megatron splits these by tp"))
    if pp * d["vpp"] > model.layers:
        out.append(("pp", pp, f"pp x vpp exceeds the {model.layers} layers", ""))
    if float(dp).is_integer() and training.global_batch_sequences % (dp * d["mbs"]):
        out.append(("mbs", d["mbs"], f"dp x mbs = {dp * d['mbs']:g} does not divide the global batch "
                                     f"{training.global_batch_sequences}", ""))
    if cp > 1 and training.seq_len % (2 * cp):
        out.append(("cp", cp, f"2 x cp does not divide seq_len={training.seq_len}", ""))
    if model.moe is None and d["ep"] > 1:
        out.append(("ep", d["ep"], "expert parallelism needs an MoE model", "set ep: 1"))
    return out


SCENARIO_KEYS = ("name", "description", "model", "system", "training", "transports", "space", "objective",
                 "baselines", "default_baseline", "prices", "expert_trace")


def load_prices(ref, base_file: str | None = None, key: str = "prices") -> S.PriceSpec:
    """Prices for co-design: a path to a prices YAML (configs/prices/) or an inline mapping."""
    data, file = _resolve(ref, base_file, key)
    spec = S.PriceSpec(**_build(S.PriceSpec, data, file, "" if file != base_file else "prices."))
    spec.validate(file)
    return spec


def load_scenario(path: str) -> Scenario:
    """Read, resolve and validate a scenario (a path or a bundled name such as ``default``); every error names
    file, key and value."""
    path = find_scenario(path)
    data = read_yaml(path)
    for k in data:
        if k not in SCENARIO_KEYS:
            raise S.ConfigError(path, k, data[k], "unknown key", f"scenario keys: {', '.join(SCENARIO_KEYS)}")
    for k in ("model", "system", "training", "space"):
        if k not in data:
            raise S.ConfigError(path, k, None, "required key is missing")
    for k in ("name", "description"):
        if k in data and not isinstance(data[k], str):
            raise S.ConfigError(path, k, data[k], "must be a string")
    model = load_model(data["model"], path)
    system = load_system(data["system"], path)
    system_file = (os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), data["system"]))
                   if isinstance(data["system"], str) else path)
    if not isinstance(data["training"], dict):
        raise S.ConfigError(path, "training", data["training"], "must be a mapping of training settings",
                            "e.g. training: {global_batch_sequences: 2048, seq_len: 8192}")
    rm = data["training"].get("recompute_modules")
    if rm is not None and not (isinstance(rm, list) and all(isinstance(m, str) for m in rm)):
        raise S.ConfigError(path, "training.recompute_modules", rm, "must be a list of module names",
                            f"e.g. [core_attn, moe_act]; modules: {', '.join(S.RECOMPUTE_MODULES)}")
    tkw = _whole(_build(S.Training, data["training"], path, "training."), "training")
    tkw["framework"] = load_framework(tkw.get("framework", "megatron-te"), path)
    training = S.Training(**tkw)
    training.validate(path)
    if training.offload_layers > 0 and system.gpu.host_GBps <= 0:
        raise S.ConfigError(path, "training.offload_layers", training.offload_layers,
                            f"offloading activations needs the GPU's host link bandwidth; GPU {system.gpu.name} "
                            "has no host_GBps", "add host_GBps (GB/s per GPU per direction) to its hardware YAML, "
                            "or set offload_layers: 0")
    transports = load_transports(data.get("transports", "../network/transports.yaml"), path)
    names = tuple(t.name for t in transports)
    if not isinstance(data["space"], dict):
        raise S.ConfigError(path, "space", data["space"], "must be a mapping axis -> list of options")
    for axis, raw in data["space"].items():
        opts = raw if isinstance(raw, (list, tuple)) else [raw]
        for v in opts:
            if isinstance(v, (dict, list)):
                raise S.ConfigError(path, f"space.{axis}", v, "options must be plain values", "e.g. tp: [1, 2, 4]")
            _check_categorical(axis, v, path, f"space.{axis}")
        if len({str(v) for v in opts}) != len(opts):
            dup = next(v for i, v in enumerate(opts) if str(v) in {str(w) for w in opts[:i]})
            raise S.ConfigError(path, f"space.{axis}", dup, "option listed twice",
                                "each option once (a repeat would count its designs twice)")
    space = DesignSpace.from_dict(data["space"], names, path)
    for axis in NUMERIC_AXES:
        for v in space.option_names(axis):
            check_axis_value(axis, v, model, system, training, path, f"space.{axis}")
    objective = data.get("objective", "step_time_s")
    if objective not in OBJECTIVES:
        raise S.ConfigError(path, "objective", objective, "unknown objective", f"use one of {', '.join(OBJECTIVES)}")
    baselines = data.get("baselines")
    baselines = {} if baselines is None else baselines
    if not isinstance(baselines, dict):
        raise S.ConfigError(path, "baselines", baselines, "must map a name to {axis: value}")
    _check_factoring(space, system, path)
    designs = {}
    for bname, b in baselines.items():
        if not isinstance(b, dict):
            raise S.ConfigError(path, f"baselines.{bname}", b, "must be a mapping {axis: value}")
        for axis, v in b.items():
            _check_categorical(axis, v, path, f"baselines.{bname}.{axis}")
        try:  # validates names and values now, not mid-sweep
            designs[bname] = space.to_dict(space.design(b, file=path))
        except S.ConfigError as err:  # blamed on the baseline's key, not on the space's axis
            axis = (err.key or "").split(".")[-1]
            raise S.ConfigError(path, f"baselines.{bname}.{axis}", err.value, err.problem, err.hint) from None
        for axis in NUMERIC_AXES:
            check_axis_value(axis, designs[bname][axis], model, system, training, path, f"baselines.{bname}.{axis}")
    _check_system_factors_baselines(designs, system, system_file)
    for bname, d in designs.items():
        for axis, value, problem, hint in static_design_errors(model, system, training, d):
            raise S.ConfigError(path, f"baselines.{bname}.{axis}", value, problem, hint)
    default = data.get("default_baseline", next(iter(baselines), None))
    if "default_baseline" in data and not isinstance(default, str):
        raise S.ConfigError(path, "default_baseline", default, "must be the name of one of the baselines",
                            f"baselines are: {', '.join(map(str, baselines)) or '(none)'}")
    if baselines and default not in baselines:
        raise S.ConfigError(path, "default_baseline", default, "is not one of the baselines",
                            f"baselines are: {', '.join(baselines)}")
    if not baselines:
        first = {ax: space.option_names(ax)[0] for ax in AXES}
        baselines, default = {"first-options": first}, "first-options"
    prices = load_prices(data["prices"], path) if data.get("prices") is not None else None
    scen = Scenario(name=str(data.get("name", os.path.splitext(os.path.basename(path))[0])), path=path,
                    model=model, system=system, training=training, transports=transports, space=space,
                    objective=objective, baselines=dict(baselines), default_baseline=default,
                    description=str(data.get("description", "")), prices=prices,
                    expert_trace=scenario_trace(data.get("expert_trace"), path, model, space, baselines))
    return scen

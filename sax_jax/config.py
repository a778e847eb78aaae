"""YAML -> frozen specs. Host-only, eager, with errors that name the file, the key and the value.

A scenario file names its model, system and transports by relative path (or inlines them); a system
names its GPU the same way. Paths resolve relative to the file that mentions them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any

import yaml

from . import specs as S
from .resources import find_scenario
from .space import AXES, DesignSpace

OBJECTIVES = ("step_time_s", "tokens_per_s", "mfu")


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

    @property
    def fingerprint(self) -> str:
        """Hash of everything that changes results; a sweep refuses to resume across a change."""
        blob = json.dumps([dataclasses.asdict(self.model), dataclasses.asdict(self.system),
                           dataclasses.asdict(self.training), [dataclasses.asdict(t) for t in self.transports],
                           [list(o) for o in self.space.options], self.objective], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def baseline_design(self, name: str | None = None, overrides: dict | None = None):
        name = name or self.default_baseline
        if name not in self.baselines:
            raise S.ConfigError(self.path, f"baselines.{name}", name, "no such baseline",
                                f"baselines are: {', '.join(self.baselines) or '(none)'}")
        return self.space.design(overrides, base=self.baselines[name], file=self.path)


# ---------------------------------------------------------------------------------------------- reading
def read_yaml(path: str) -> dict:
    if not os.path.exists(path):
        raise S.ConfigError(path, None, path, "file not found", "paths in a config are relative to that config")
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(err, "problem", None) or str(err)
        raise S.ConfigError(path, None, where, f"YAML syntax error: {problem}",
                            "check indentation and the ':' after each key") from None
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
    path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(base_file)), ref))
    if not os.path.exists(path):
        raise S.ConfigError(base_file, key, ref, "referenced file not found",
                            f"looked for {path}; paths are relative to {base_file}")
    return read_yaml(path), path


def _build(cls, data: dict, file: str, prefix: str = "", exclude: tuple = ()):
    """Dataclass from a mapping; unknown and missing keys are errors (no silent typos)."""
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
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise S.ConfigError(file, prefix + name, None, "required key is missing")
    for name, v in kwargs.items():
        if isinstance(v, str) and name not in ("name", "status", "source", "load_balancing", "loss_recovery",
                                               "precision"):
            try:  # PyYAML reads 1e10 (no sign in exponent) as a string
                kwargs[name] = float(v)
            except ValueError:
                raise S.ConfigError(file, prefix + name, v, "must be a number") from None
    return kwargs


def load_model(ref, base_file: str | None = None, key: str = "model") -> S.ModelSpec:
    data, file = _resolve(ref, base_file, key)
    data = dict(data)
    moe = data.pop("moe", None)
    data.setdefault("head_dim", None)
    if data["head_dim"] is None and "hidden" in data and "heads" in data:
        data["head_dim"] = data["hidden"] // data["heads"]
    data.setdefault("kv_heads", data.get("heads"))
    kwargs = _build(S.ModelSpec, data, file, exclude=("moe",))
    moe_spec = S.MoESpec(**_build(S.MoESpec, moe, file, "moe.")) if moe else None
    for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"):
        v = kwargs.get(k)
        if not (isinstance(v, (int, float)) and float(v).is_integer()):
            raise S.ConfigError(file, k, v, "must be a whole number")
        kwargs[k] = int(v)
    spec = S.ModelSpec(moe=moe_spec, **kwargs)
    spec.validate(file)
    return spec


def load_gpu(ref, base_file: str | None = None, key: str = "gpu") -> S.GpuSpec:
    data, file = _resolve(ref, base_file, key)
    data = dict(data)
    eff = data.pop("efficiency", None)
    if not isinstance(eff, dict):
        raise S.ConfigError(file, "efficiency", eff, "required mapping is missing")
    kwargs = _build(S.GpuSpec, data, file, exclude=("efficiency",))
    kwargs["peak_tflops"] = {k: float(v) for k, v in dict(kwargs.get("peak_tflops") or {}).items()}
    spec = S.GpuSpec(efficiency=S.Efficiency(**_build(S.Efficiency, eff, file, "efficiency.")), **kwargs)
    spec.validate(file)
    return spec


def load_system(ref, base_file: str | None = None, key: str = "system") -> S.SystemSpec:
    data, file = _resolve(ref, base_file, key)
    data = dict(data)
    for k in ("name", "gpu", "levels"):
        if k not in data:
            raise S.ConfigError(file, k, None, "required key is missing")
    unknown = set(data) - {"name", "gpu", "levels", "description"}
    if unknown:
        k = sorted(unknown)[0]
        raise S.ConfigError(file, k, data[k], "unknown key", "system keys: name, gpu, levels, description")
    gpu = load_gpu(data["gpu"], file)
    if not isinstance(data["levels"], list):
        raise S.ConfigError(file, "levels", data["levels"], "must be a list of levels, inner to outer")
    levels = []
    for i, lv in enumerate(data["levels"]):
        if not isinstance(lv, dict) or "name" not in lv:
            raise S.ConfigError(file, f"levels[{i}]", lv, "each level needs a mapping with a 'name'")
        levels.append(S.Level(**_build(S.Level, lv, file, f"levels.{lv['name']}.")))
    spec = S.SystemSpec(name=str(data["name"]), gpu=gpu, levels=tuple(levels))
    spec.validate(file)
    return spec


def load_transports(ref, base_file: str | None = None, key: str = "transports") -> tuple:
    data, file = _resolve(ref, base_file, key)
    out = []
    for name, t in data.items():
        if not isinstance(t, dict):
            raise S.ConfigError(file, f"transports.{name}", t, "must be a mapping of transport settings")
        spec = S.TransportSpec(name=name, **_build(S.TransportSpec, t, file, f"transports.{name}.",
                                                   exclude=("name",)))
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
                 "baselines", "default_baseline")


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
    model = load_model(data["model"], path)
    system = load_system(data["system"], path)
    training = S.Training(**_build(S.Training, data["training"] or {}, path, "training."))
    training.validate(path)
    transports = load_transports(data.get("transports", "../network/transports.yaml"), path)
    names = tuple(t.name for t in transports)
    if not isinstance(data["space"], dict):
        raise S.ConfigError(path, "space", data["space"], "must be a mapping axis -> list of options")
    space = DesignSpace.from_dict(data["space"], names, path)
    objective = data.get("objective", "step_time_s")
    if objective not in OBJECTIVES:
        raise S.ConfigError(path, "objective", objective, "unknown objective", f"use one of {', '.join(OBJECTIVES)}")
    baselines = data.get("baselines") or {}
    if not isinstance(baselines, dict):
        raise S.ConfigError(path, "baselines", baselines, "must map a name to {axis: value}")
    _check_factoring(space, system, path)
    for bname, b in baselines.items():
        if not isinstance(b, dict):
            raise S.ConfigError(path, f"baselines.{bname}", b, "must be a mapping {axis: value}")
        d = space.to_dict(space.design(b, file=path))  # validates names and values now, not mid-sweep
        for axis, value, problem, hint in static_design_errors(model, system, training, d):
            raise S.ConfigError(path, f"baselines.{bname}.{axis}", value, problem, hint)
    default = data.get("default_baseline", next(iter(baselines), None))
    if baselines and default not in baselines:
        raise S.ConfigError(path, "default_baseline", default, "is not one of the baselines",
                            f"baselines are: {', '.join(baselines)}")
    if not baselines:
        first = {ax: space.option_names(ax)[0] for ax in AXES}
        baselines, default = {"first-options": first}, "first-options"
    scen = Scenario(name=str(data.get("name", os.path.splitext(os.path.basename(path))[0])), path=path,
                    model=model, system=system, training=training, transports=transports, space=space,
                    objective=objective, baselines=dict(baselines), default_baseline=default,
                    description=str(data.get("description", "")))
    return scen

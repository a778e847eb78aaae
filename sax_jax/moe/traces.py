"""Aggregated MoE activation traces: per MoE layer, per domain, per expert, how many token selections.

Format (one file, ``.npz`` (numpy's compressed archive) or ``.json`` with the same fields; see
configs/traces/README.md):

    model     str                      the model's name as in configs/models/*.yaml (``name:``)
    experts   int                      routed experts per MoE layer
    top_k     int                      experts each token selects
    domains   [D] str                  workload domains (code, math, chat, general, ...)
    tokens    [D] int                  tokens profiled per domain (each token selects top_k experts per layer)
    layers    [N] int                  the model's MoE layer indices the counts belong to (0-based, one per MoE layer)
    counts    [N, D, E] int            token selections of expert e in MoE layer n by tokens of domain d
    affinity  [N-1, E, E] int          optional: tokens that selected expert i in MoE layer n and j in layer n+1
    source    str                      optional: where the trace came from (a command, a paper)

Invariants checked on load (each failure is a ``ConfigError`` naming the file and the field): counts >= 0, no
count above the domain's tokens (a token selects an expert at most once), each (layer, domain) row sums to at most
top_k x tokens (dropped tokens make it less), one row per MoE layer of the model, the model's name, experts and
top_k. The seed paper (Scaling Multi-Node MoE Inference Using Expert Activation Patterns) aggregates its 100k+
traces the same way: expert popularity per layer and per domain.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile

import numpy as np

from ..specs import ConfigError

REQUIRED = ("model", "experts", "top_k", "domains", "tokens", "layers", "counts")
OPTIONAL = ("affinity", "source")


@dataclasses.dataclass(frozen=True, eq=False)
class Trace:
    model: str
    experts: int
    top_k: int
    domains: tuple
    tokens: np.ndarray  # [D]
    layers: np.ndarray  # [N]
    counts: np.ndarray  # [N, D, E]
    affinity: np.ndarray | None = None  # [N-1, E, E]
    source: str = ""
    path: str = ""

    @property
    def probabilities(self) -> np.ndarray:
        """[N, D, E] selections per token of the domain: P(a token of domain d routes to expert e in layer n)."""
        return self.counts / self.tokens[None, :, None]

    @property
    def domain_share(self) -> np.ndarray:
        """[D] share of the profiled tokens per domain (the workload mix the placement serves)."""
        return self.tokens / self.tokens.sum()

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for a in (self.tokens, self.layers, self.counts) + ((self.affinity,) if self.affinity is not None else ()):
            h.update(np.ascontiguousarray(a, np.int64).tobytes())
        h.update(json.dumps([self.model, self.experts, self.top_k, list(self.domains)]).encode())
        return h.hexdigest()[:16]


def _fields_of(path: str) -> dict:
    if not os.path.exists(path):
        raise ConfigError(path, None, path, "trace file not found", "paths are relative to the scenario file")
    if path.endswith(".json"):
        try:
            with open(path) as f:
                data = json.load(f)
        except ValueError as err:  # JSONDecodeError, or UnicodeDecodeError of a binary file
            raise ConfigError(path, None, str(err), "not valid JSON") from None
        except OSError as err:
            raise ConfigError(path, None, path, f"cannot read the file: {err.__class__.__name__}") from None
        if not isinstance(data, dict):
            raise ConfigError(path, None, type(data).__name__, "a trace must be a mapping of fields")
        return data
    if path.endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: (z[k].item() if z[k].ndim == 0 else z[k]) for k in z.files}
        except (ValueError, OSError, zipfile.BadZipFile) as err:  # not an archive, truncated, or pickled objects
            raise ConfigError(path, None, path, f"cannot read the .npz archive ({err.__class__.__name__}: {err})",
                              "write traces with sax_jax.moe.traces.save_trace (plain arrays, no pickled objects) "
                              "(configs/traces/README.md)") from None
    raise ConfigError(path, None, path, "unknown trace file type", "use .npz or .json (configs/traces/README.md)")


def _int_array(path, key, value, ndim) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(path, key, value, "must be an array of numbers") from None
    if arr.ndim != ndim:
        raise ConfigError(path, key, f"shape {arr.shape}", f"must have {ndim} dimensions")
    if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
        raise ConfigError(path, key, "non-integer entries", "must hold whole counts")
    if np.any(arr < 0):
        idx = tuple(int(i) for i in np.argwhere(arr < 0)[0])
        raise ConfigError(path, f"{key}{list(idx)}", float(arr[idx]), "counts cannot be negative")
    return arr.astype(np.int64)


def _int_field(path, key, value, hint="") -> int:
    """A whole-number scalar field (8, 8.0 or "8"); anything else (4.5, "abc", [4], true) names file and key."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(path, key, value, "must be a whole number", hint) from None
    whole = (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float)
                                                                        and value.is_integer())
    if not whole:
        raise ConfigError(path, key, value, "must be a whole number", hint)
    return int(value)


def from_fields(data: dict, path: str = "<trace>") -> Trace:
    """A validated ``Trace`` from its fields (the file's content)."""
    for k in REQUIRED:
        if k not in data:
            raise ConfigError(path, k, None, "required trace field is missing", f"fields: {', '.join(REQUIRED)}")
    unknown = set(data) - set(REQUIRED) - set(OPTIONAL)
    if unknown:
        k = sorted(unknown)[0]
        raise ConfigError(path, k, None, "unknown trace field", f"fields: {', '.join(REQUIRED + OPTIONAL)}")
    experts = _int_field(path, "experts", data["experts"], "routed experts per MoE layer, e.g. 8")
    top_k = _int_field(path, "top_k", data["top_k"], "experts each token selects, e.g. 2")
    if experts < 1 or not 1 <= top_k <= experts:
        raise ConfigError(path, "top_k", top_k, f"must be between 1 and experts={experts}")
    domains = tuple(str(d) for d in np.asarray(data["domains"]).reshape(-1))
    tokens = _int_array(path, "tokens", data["tokens"], 1)
    layers = _int_array(path, "layers", data["layers"], 1)
    counts = _int_array(path, "counts", data["counts"], 3)
    if len(tokens) != len(domains) or np.any(tokens < 1):
        raise ConfigError(path, "tokens", tokens.tolist(), f"needs one positive count per domain ({len(domains)})")
    n, d, e = counts.shape
    if n != len(layers):
        raise ConfigError(path, "counts", f"shape {counts.shape}", f"needs one row per listed layer ({len(layers)})")
    if d != len(domains):
        raise ConfigError(path, "counts", f"shape {counts.shape}", f"needs one column per domain ({len(domains)})")
    if e != experts:
        raise ConfigError(path, "counts", f"{e} experts", f"expert count differs from experts={experts}")
    over = counts > tokens[None, :, None]
    if np.any(over):
        i, j, k = (int(x) for x in np.argwhere(over)[0])
        raise ConfigError(path, f"counts[{i}][{j}][{k}]", int(counts[i, j, k]),
                          f"exceeds the {tokens[j]} tokens of domain {domains[j]} (a token picks an expert once)")
    row = counts.sum(-1)
    bad = row > top_k * tokens[None, :]
    if np.any(bad):
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise ConfigError(path, f"counts[{i}][{j}]", int(row[i, j]),
                          f"sums above top_k x tokens = {top_k * tokens[j]}")
    affinity = data.get("affinity")
    if affinity is not None:
        affinity = _int_array(path, "affinity", affinity, 3)
        if affinity.shape != (max(n - 1, 0), experts, experts):
            raise ConfigError(path, "affinity", f"shape {affinity.shape}", f"must be [{n - 1}, {experts}, {experts}]")
    return Trace(model=str(data["model"]), experts=experts, top_k=top_k, domains=domains, tokens=tokens,
                 layers=layers, counts=counts, affinity=affinity, source=str(data.get("source", "")), path=path)


def load_trace(path: str) -> Trace:
    return from_fields(_fields_of(path), path)


def moe_layer_indices(model) -> list:
    """0-based indices of a model's MoE layers (specs.ModelSpec): after first_dense_layers, every layer_interval-th
    (the last of each interval, Llama 4's interleave_moe_layer_step) or the hybrid pattern's 'E' blocks."""
    moe = model.moe
    if model.hybrid is not None:
        return [i for i, c in enumerate(model.hybrid.pattern) if c == "E"]
    start, step = moe.first_dense_layers, moe.layer_interval
    return [start + i * step + step - 1 for i in range(model.n_moe_layers)]


def check_against_model(trace: Trace, model, path: str | None = None) -> Trace:
    """The trace must describe this model: its name, experts, top_k and every MoE layer exactly once."""
    path = path or trace.path
    if trace.model != model.name:
        raise ConfigError(path, "model", trace.model, f"the trace is of another model than {model.name!r}",
                          "profile this model or pick its trace")
    if trace.experts != model.moe.experts:
        raise ConfigError(path, "experts", trace.experts, f"the model has {model.moe.experts} routed experts")
    if trace.top_k != model.moe.top_k:
        raise ConfigError(path, "top_k", trace.top_k, f"the model routes each token to top_k={model.moe.top_k}")
    want = moe_layer_indices(model)
    have = trace.layers.tolist()
    if have != want:
        missing = sorted(set(want) - set(have))
        extra = sorted(set(have) - set(want))
        problem = (f"MoE layer {missing[0]} is missing" if missing else
                   f"layer {extra[0]} is not a MoE layer of the model" if extra else "layers out of order")
        raise ConfigError(path, "layers", have if len(have) < 12 else f"{len(have)} layers", problem,
                          f"the model's MoE layers: {want if len(want) < 12 else f'{want[0]}..{want[-1]}'}")
    return trace


def save_trace(trace_fields: dict, path: str) -> None:
    """Write a trace's fields (validated first) as .npz (compressed) or .json."""
    t = from_fields(trace_fields, path)
    out = dict(model=t.model, experts=t.experts, top_k=t.top_k, domains=list(t.domains), tokens=t.tokens,
               layers=t.layers, counts=t.counts, source=t.source)
    if t.affinity is not None:
        out["affinity"] = t.affinity
    if path.endswith(".json"):
        with open(path, "w") as f:
            json.dump({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items()}, f)
    else:
        np.savez_compressed(path, **{k: np.asarray(v) for k, v in out.items()})


NEEDS_TRACE = ("needs an activation trace", "add expert_trace: ../traces/MODEL.npz to the scenario "
               "(see configs/scenarios/deepseek-v3-two-buildings.yaml)")


def scenario_trace(ref, scenario_path: str, model, space, baselines: dict) -> Trace | None:
    """A scenario's ``expert_trace:`` (a path relative to the scenario file) checked against its model; without
    one, an expert_placement other than contiguous is an error (it would silently equal contiguous)."""
    if ref is None:
        named = [v for v in space.option_names("expert_placement")] + [
            b.get("expert_placement", "contiguous") for b in baselines.values()]
        other = [v for v in named if v != "contiguous"]
        if other:
            raise ConfigError(scenario_path, "space.expert_placement", other[0], *NEEDS_TRACE)
        return None
    if model.moe is None:
        raise ConfigError(scenario_path, "expert_trace", ref, f"model {model.name!r} has no MoE layers")
    if not isinstance(ref, str):
        raise ConfigError(scenario_path, "expert_trace", ref, "must be a path to a trace file (.npz or .json)")
    from ..config import resolve_path  # config imports this module: resolved at call time
    path = resolve_path(ref, scenario_path, "expert_trace")
    return check_against_model(load_trace(path), model, path)

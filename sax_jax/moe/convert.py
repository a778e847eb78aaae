"""Converters from what users already have to the aggregated trace format (traces.py).

* vLLM's returned routed experts (``return_routed_experts``, used by RL rollouts): per request one integer array
  [tokens, MoE layers, top_k] of expert ids, beside the request's domain. ``from_routed_experts`` aggregates such
  arrays; ``read_vllm_jsonl`` reads them from JSONL lines ``{"domain": "code", "routed_experts": [[[...]]]}``.
  Per-token arrays give the cross-layer affinity too.
* Megatron-LM's routing trace (``--moe-routing-trace-path``, JSONL). We could not find its exact schema in the
  sources we could search, so this reads the format we ASSUME it has: one line per (iteration, MoE layer) with
  ``layer_number`` (Megatron's 1-based transformer layer number), ``topk_indices`` ([tokens, top_k] expert ids)
  and an optional ``domain`` (default "general"); ``iteration`` is ignored. A line in another shape is a
  ConfigError naming the line and the field, so a mismatch shows at once. Per-layer lines carry no token identity,
  so no affinity.
"""
from __future__ import annotations

import json

import numpy as np

from ..specs import ConfigError


class _Counts:
    """Selections per (layer, domain, expert) and tokens per domain, accumulated."""

    def __init__(self, experts: int, top_k: int, layers: list):
        self.experts, self.top_k, self.layers = experts, top_k, list(layers)
        self.domains: list = []
        self.counts: list = []  # per domain [N, E]
        self.tokens: list = []
        self.affinity = np.zeros((max(len(layers) - 1, 0), experts, experts), np.int64)

    def domain(self, name: str) -> int:
        if name not in self.domains:
            self.domains.append(name)
            self.counts.append(np.zeros((len(self.layers), self.experts), np.int64))
            self.tokens.append(0)
        return self.domains.index(name)

    def fields(self, model: str, source: str, affinity: bool) -> dict:
        out = dict(model=model, experts=self.experts, top_k=self.top_k, domains=list(self.domains),
                   tokens=np.asarray(self.tokens, np.int64), layers=np.asarray(self.layers, np.int64),
                   counts=np.stack(self.counts, axis=1), source=source)
        if affinity:
            out["affinity"] = self.affinity
        return out


def _ids(arr, experts, where, key, path):
    a = np.asarray(arr)
    if a.size and (a.dtype.kind not in "iu" or a.min() < 0 or a.max() >= experts):
        bad = a.reshape(-1)[0] if a.dtype.kind not in "iu" else (a.min() if a.min() < 0 else a.max())
        raise ConfigError(path, f"{where}.{key}", bad.item() if hasattr(bad, "item") else bad,
                          f"expert ids must be integers in [0, {experts})")
    return a.astype(np.int64)


def from_routed_experts(requests, model: str, experts: int, top_k: int, layers: list, path: str = "<vllm>",
                        affinity: bool = True) -> dict:
    """requests: iterable of (domain, int array [tokens, MoE layers, top_k]) -> trace fields (traces.from_fields)."""
    acc = _Counts(experts, top_k, layers)
    n = len(layers)
    for i, (domain, arr) in enumerate(requests):
        a = _ids(arr, experts, f"request[{i}]", "routed_experts", path)
        if a.ndim != 3 or a.shape[1:] != (n, top_k):
            raise ConfigError(path, f"request[{i}].routed_experts", f"shape {a.shape}",
                              f"must be [tokens, {n} MoE layers, top_k={top_k}]")
        d = acc.domain(str(domain))
        acc.tokens[d] += a.shape[0]
        for layer in range(n):
            acc.counts[d][layer] += np.bincount(a[:, layer].reshape(-1), minlength=experts)
        if affinity and n > 1:
            for layer in range(n - 1):
                src = np.repeat(a[:, layer], top_k, axis=1).reshape(-1)  # each pair (i at n, j at n+1) once
                dst = np.tile(a[:, layer + 1], (1, top_k)).reshape(-1)
                np.add.at(acc.affinity[layer], (src, dst), 1)
    if not acc.domains:
        raise ConfigError(path, None, 0, "no requests with routed experts")
    return acc.fields(model, f"vLLM routed experts ({path})", affinity and n > 1)


def read_vllm_jsonl(path: str, model: str, experts: int, top_k: int, layers: list) -> dict:
    def requests():
        with open(path) as f:
            for no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                rec = _record(line, no, path)
                if "routed_experts" not in rec:
                    raise ConfigError(path, f"line {no}.routed_experts", None, "missing",
                                      'each line: {"domain": "...", "routed_experts": [[[ids]]]}')
                yield rec.get("domain", "general"), np.asarray(rec["routed_experts"])
    return from_routed_experts(requests(), model, experts, top_k, layers, path)


def _record(line: str, no: int, path: str) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as err:
        raise ConfigError(path, f"line {no}", line[:40], f"not JSON ({err.msg})") from None
    if not isinstance(rec, dict):
        raise ConfigError(path, f"line {no}", line[:40], "each line must be a JSON object")
    return rec


def read_megatron_jsonl(path: str, model: str, experts: int, top_k: int, layers: list) -> dict:
    """Megatron-LM routing trace (assumed format, module docstring) -> trace fields. Tokens per domain are counted
    at the first MoE layer's lines."""
    acc = _Counts(experts, top_k, layers)
    with open(path) as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            rec = _record(line, no, path)
            for key in ("layer_number", "topk_indices"):
                if key not in rec:
                    raise ConfigError(path, f"line {no}.{key}", None, "missing",
                                      '(assumed format) {"layer_number": 4, "topk_indices": [[ids]], "domain": "code"}')
            layer = int(rec["layer_number"]) - 1  # Megatron numbers layers from 1
            if layer not in acc.layers:
                raise ConfigError(path, f"line {no}.layer_number", rec["layer_number"],
                                  "not a MoE layer of the model (1-based)")
            a = _ids(rec["topk_indices"], experts, f"line {no}", "topk_indices", path)
            if a.ndim != 2 or a.shape[1] != top_k:
                raise ConfigError(path, f"line {no}.topk_indices", f"shape {a.shape}", f"must be [tokens, {top_k}]")
            d = acc.domain(str(rec.get("domain", "general")))
            row = acc.layers.index(layer)
            acc.counts[d][row] += np.bincount(a.reshape(-1), minlength=experts)
            if row == 0:
                acc.tokens[d] += a.shape[0]
    if not acc.domains:
        raise ConfigError(path, None, 0, "no routing records")
    return acc.fields(model, f"Megatron-LM routing trace ({path})", False)

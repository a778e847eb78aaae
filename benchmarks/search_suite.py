"""The search-quality suites: scenario variants generated from configs/ models and systems, and the exact
optimum of each.

``SUITE`` (small): every variant shares one space *shape* (12 axes, 1,244,160 points) so a search compiles once
per system shape (number of levels), while option values follow the model's size (big models get wider tp/pp);
the exact optimum comes from a brute-force pass (seconds).

``hard`` (``HARD`` axes, the same 22 model/system/batch entries): every space widened to 1.26e9 designs
(14 axes), the exact optimum and the exact Pareto fronts from the streaming sweep (``search.exhaustive``,
~30 s per scenario on 2 CPU cores), cached on disk under ``sweeps/search_suite/`` (gitignored) by the
scenario's fingerprint (model, system, training, transports, options, objective), so the suite is built once
and a changed scenario or model is swept again.

Each variant is written as an ordinary scenario YAML (in a temporary directory) and read back with
``load_scenario``, so the suites exercise exactly what users load.
"""
from __future__ import annotations

import functools
import json
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from sax_jax import load_scenario
from sax_jax.search.genome import scenario_problem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "configs")

COMMON = {
    "cp": [1, 2],
    "vpp": [1, 2],
    "mbs": [1, 2, 4],
    "qps": ["auto", 2, 8],
    "schedule": ["1f1b", "interleaved", "zb-h2", "latency-aware"],
    "recompute": ["none", "selective", "full"],
    "sharding": ["zero1", "fsdp", "hsdp"],
    "placement": ["tp-cp-dp-pp", "tp-cp-pp-dp", "tp-pp-cp-dp", "cp-tp-dp-pp"],
    "transport": ["ecmp_gbn", "ecmp_qp4", "spray_sr"],
    "dp_algo": ["ring", "hierarchical"],
    "overlap": ["dp", "dp+tp"],
}
SMALL = {"tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8, 16]}  # models up to ~40B
LARGE = {"tp": [2, 4, 8, 16], "pp": [4, 8, 16, 32, 64]}  # bigger ones

# (name, model, system, global batch sequences, sequence length, tp/pp template)
SUITE = (
    ("h100-llama8b", "llama3-8B", "h100-building", 1024, 8192, SMALL),
    ("h100-llama70b", "llama3-70B", "h100-building", 2048, 8192, SMALL),
    ("h100-llama405b", "llama3-405B", "h100-building", 2048, 8192, LARGE),
    ("h100-mixtral", "mixtral-8x7B", "h100-building", 2048, 4096, SMALL),
    ("h100-gpt18b", "gpt-18B", "h100-building", 1024, 4096, SMALL),
    ("selene-gpt18b", "gpt-18B", "selene-a100", 1024, 2048, SMALL),
    ("selene-gpt39b", "gpt-39B", "selene-a100", 1536, 2048, SMALL),
    ("selene-gpt76b", "gpt-76B", "selene-a100", 1792, 2048, LARGE),
    ("selene-gpt175b", "gpt3-175B", "selene-a100", 1536, 2048, LARGE),
    ("selene-megatron22b", "megatron-22B", "selene-a100", 512, 2048, SMALL),
    ("2b-llama405b", "llama3-405B", "two-buildings-h100", 2048, 8192, LARGE),
    ("2b-llama70b", "llama3-70B", "two-buildings-h100", 2048, 8192, SMALL),
    ("2b-gpt175b", "gpt3-175B", "two-buildings-h100", 2048, 2048, LARGE),
    ("2b-turing530b", "turing-530B", "two-buildings-h100", 2048, 2048, LARGE),
    ("4b-llama405b", "llama3-405B", "four-buildings-h100", 2048, 8192, LARGE),
    ("4b-llama70b", "llama3-70B", "four-buildings-h100", 4096, 4096, SMALL),
    ("4b-gpt310b", "gpt-310B", "four-buildings-h100", 2048, 2048, LARGE),
    ("2r-llama70b", "llama3-70B", "two-regions-h100", 4096, 8192, SMALL),
    ("2r-llama405b", "llama3-405B", "two-regions-h100", 2048, 8192, LARGE),
    ("2r-gpt175b", "gpt3-175B", "two-regions-h100", 4096, 2048, LARGE),
    ("2r-llama8b", "llama3-8B", "two-regions-h100", 2048, 8192, SMALL),
    ("2r-gpt39b", "gpt-39B", "two-regions-h100", 4096, 2048, SMALL),
)


# The hard suite: the same entries, every axis widened (tp 5 x cp 4 x pp 6 x vpp 3 x mbs 4 x recompute 3 x
# placement 12 x transport 3 x qps 5 x channels 6 x schedule 6 x sharding 5 x dp_algo 3 x overlap 3 =
# 1,259,712,000 designs). tp/pp templates as above, one option more each.
HARD = {
    "cp": [1, 2, 4, 8],
    "vpp": [1, 2, 4],
    "mbs": [1, 2, 4, 8],
    "qps": ["auto", 1, 2, 4, 8],
    "channels": ["auto", 2, 4, 8, 16, 64],
    "schedule": ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "latency-aware"],
    "recompute": ["none", "selective", "full"],
    "sharding": ["zero0", "zero1", "zero2", "fsdp", "hsdp"],
    "placement": ["tp-cp-dp-pp", "tp-cp-pp-dp", "tp-pp-cp-dp", "tp-dp-cp-pp", "cp-tp-dp-pp", "tp-pp-dp-cp",
                  "pp-tp-cp-dp", "dp-tp-cp-pp", "cp-dp-tp-pp", "tp-dp-pp-cp", "pp-dp-tp-cp", "dp-pp-tp-cp"],
    "transport": ["ecmp_gbn", "ecmp_qp4", "spray_sr"],
    "dp_algo": ["ring", "tree", "hierarchical"],
    "overlap": ["none", "dp", "dp+tp"],
}
HARD_SMALL = {"tp": [1, 2, 4, 8, 16], "pp": [1, 2, 4, 8, 16, 32]}
HARD_LARGE = {"tp": [1, 2, 4, 8, 16], "pp": [2, 4, 8, 16, 32, 64]}


def scenario_dict(name, model, system, gbs, seq, template, hard: bool = False) -> dict:
    if hard:
        space = {**(HARD_LARGE if template is LARGE else HARD_SMALL), **HARD}
        name = name + "-hard"
    else:
        space = {**template, **COMMON}
    return {
        "name": name,
        "description": f"search-quality suite: {model} on {system}, {gbs} x {seq}-token sequences",
        "model": os.path.join(CONFIGS, "models", model + ".yaml"),
        "system": os.path.join(CONFIGS, "systems", system + ".yaml"),
        "transports": os.path.join(CONFIGS, "network", "transports.yaml"),
        "training": {"global_batch_sequences": gbs, "seq_len": seq, "precision": "bf16"},
        "space": space,
        "objective": "step_time_s",
    }


@functools.lru_cache(maxsize=1)
def _dir() -> str:
    return tempfile.mkdtemp(prefix="sax-search-suite-")


def load_suite(names=None, hard: bool = False) -> list:
    """Scenarios of the suite (optionally only those named; names without the ``-hard`` suffix)."""
    out = []
    for entry in SUITE:
        if names and entry[0] not in names:
            continue
        data = scenario_dict(*entry, hard=hard)
        path = os.path.join(_dir(), data["name"] + ".yaml")
        with open(path, "w") as fh:
            yaml.safe_dump(data, fh, sort_keys=False)
        out.append(load_scenario(path))
    return out


CACHE_DIR = os.path.join(ROOT, "sweeps", "search_suite")


def exact_optimum(scenario, cache_dir: str = CACHE_DIR, log=None) -> dict:
    """The exact optimum and Pareto fronts of a scenario from the streaming sweep, cached by fingerprint.

    Returns {"fingerprint", "value" (step time of the best design), "index", "design", "n_feasible",
    "space_size", "pareto" ({front: [[t, y], ...]}), "sweep_seconds", "sweep_designs_per_s"}."""
    from sax_jax.search.exhaustive import sweep
    path = os.path.join(cache_dir, f"{scenario.name}-{scenario.fingerprint}.json")
    if os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    t = time.perf_counter()
    r = sweep(scenario, top_k=1, progress=False)
    best = r.top[0] if r.top else None
    fronts = {name: [[p["step_time_s"], p[key]] for p in pts]
              for (name, pts), key in zip(r.pareto.items(), ("memory_bytes", "cross_building_bytes"))}
    out = {"fingerprint": scenario.fingerprint, "scenario": scenario.name, "space_size": scenario.space.size,
           "value": best["step_time_s"] if best else None, "index": best["index"] if best else None,
           "design": best["design"] if best else None, "n_feasible": r.n_feasible, "pareto": fronts,
           "truncated": r.truncated, "sweep_seconds": time.perf_counter() - t, "compile_s": r.compile_s,
           "sweep_designs_per_s": r.designs_per_s, "device_kind": r.device_kind}
    os.makedirs(cache_dir, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(out, fh)
    os.replace(tmp, path)  # a killed build leaves no half-written entry
    if log:
        log(f"swept {scenario.name}: {scenario.space.size:.3g} designs in {out['sweep_seconds']:.1f} s, "
            f"optimum {out['value']}")
    return out


@functools.partial(jax.jit, static_argnames=("fitness_fn", "radices", "chunk"))
def _chunk_best(aux, start, size, *, fitness_fn, radices, chunk):
    idx = start + jnp.arange(chunk, dtype=jnp.int32)
    digits, rest = [], jnp.minimum(idx, size - 1)
    for r in reversed(radices):
        digits.append(rest % r)
        rest = rest // r
    digits = jnp.stack(digits[::-1], axis=-1)
    _, v = fitness_fn(aux, digits)
    v = jnp.where(idx < size, v, jnp.inf)
    i = jnp.argmin(v)
    return v[i], digits[i], jnp.sum(jnp.isfinite(v))


def brute_force(problem, chunk: int = 1 << 16) -> dict:
    """Exact optimum of a problem by evaluating every point (spaces up to ~10^8 on one device)."""
    size = problem.size
    if size >= 2 ** 31:
        raise ValueError(f"space of {size:.3g} points is too large to brute-force")
    best, best_digits, feasible = np.inf, None, 0
    for start in range(0, size, chunk):
        v, d, nf = _chunk_best(problem.aux, jnp.int32(start), jnp.int32(size), fitness_fn=problem.fitness_fn,
                               radices=tuple(problem.radices), chunk=chunk)
        feasible += int(nf)
        if float(v) < best:
            best, best_digits = float(v), np.asarray(d)
    return {"value": best, "digits": best_digits, "n_feasible": feasible, "size": size}


def problems(names=None):
    return [(sc, scenario_problem(sc)) for sc in load_suite(names)]


if __name__ == "__main__":  # build (or check) the hard suite's cache: python benchmarks/search_suite.py [names]
    import sys
    for sc in load_suite(sys.argv[1:] or None, hard=True):
        exact_optimum(sc, log=lambda m: print(m, flush=True))

"""The search-quality suite: scenario variants generated from configs/ models and systems, and the exact
optimum of each by brute force.

Every variant shares one space *shape* (12 axes, 1,244,160 points) so a search compiles once per system shape
(number of levels), while option values follow the model's size (big models get wider tp/pp). Each variant is
written as an ordinary scenario YAML (in a temporary directory) and read back with ``load_scenario``, so the
suite exercises exactly what users load.
"""
from __future__ import annotations

import functools
import os
import tempfile

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


def scenario_dict(name, model, system, gbs, seq, template) -> dict:
    return {
        "name": name,
        "description": f"search-quality suite: {model} on {system}, {gbs} x {seq}-token sequences",
        "model": os.path.join(CONFIGS, "models", model + ".yaml"),
        "system": os.path.join(CONFIGS, "systems", system + ".yaml"),
        "transports": os.path.join(CONFIGS, "network", "transports.yaml"),
        "training": {"global_batch_sequences": gbs, "seq_len": seq, "precision": "bf16"},
        "space": {**template, **COMMON},
        "objective": "step_time_s",
    }


@functools.lru_cache(maxsize=1)
def _dir() -> str:
    return tempfile.mkdtemp(prefix="sax-search-suite-")


def load_suite(names=None) -> list:
    """Scenarios of the suite (optionally only those named)."""
    out = []
    for entry in SUITE:
        if names and entry[0] not in names:
            continue
        path = os.path.join(_dir(), entry[0] + ".yaml")
        with open(path, "w") as fh:
            yaml.safe_dump(scenario_dict(*entry), fh, sort_keys=False)
        out.append(load_scenario(path))
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

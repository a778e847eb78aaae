"""Synthetic activation traces with the seed paper's properties, for models nobody has profiled for us.

Scaling Multi-Node MoE Inference Using Expert Activation Patterns reports: skewed (Zipf-like) expert popularity,
different per layer and per domain (code, math, chat, general), and cross-layer affinity. The generator:

* each domain has ``clusters`` topics; a token draws its domain, then a topic of it;
* expert popularity in layer n for topic z is (r_n(e) + 1)^-s_layer x (r_nz(e) + 1)^-s_topic, with r_n a random
  ranking of the experts per layer (what every domain shares) and r_nz one per (layer, topic) (what makes domains
  differ); a topic keeps its ranking's seed correlated across layers (r_{n+1,z} starts from r_nz with ``carry``
  of its experts kept in place) so tokens of a topic that meet an expert in layer n meet related ones in n + 1;
* each token selects top_k distinct experts by sampling without replacement in proportion to the popularity
  (Gumbel top-k), so a count never exceeds the tokens and each row sums to exactly top_k x tokens.

Fixed seed, fixed numbers: the bundled traces are reproducible with the command in configs/traces/README.md:

    python3 -m sax_jax.moe.synthetic configs/models/deepseek-v3.yaml configs/traces/deepseek-v3.npz
"""
from __future__ import annotations

import argparse

import numpy as np

from .traces import moe_layer_indices, save_trace

DOMAINS = ("code", "math", "chat", "general")
DOMAIN_SHARE = (0.25, 0.15, 0.25, 0.35)  # tokens per domain (a mix like the seed's prompt sets)


def synthetic_fields(model_name: str, experts: int, top_k: int, layers: list, tokens_per_domain: int = 2048,
                     seed: int = 0, s_layer: float = 0.3, s_topic: float = 0.8, clusters: int = 3,
                     carry: float = 0.5, affinity: bool | None = None) -> dict:
    """Trace fields (traces.from_fields) of a synthetic profile."""
    rng = np.random.default_rng(seed)
    n, d = len(layers), len(DOMAINS)
    tokens = np.maximum(np.round(np.asarray(DOMAIN_SHARE) * tokens_per_domain * d), 1).astype(np.int64)
    affinity = experts <= 64 if affinity is None else affinity
    counts = np.zeros((n, d, experts), np.int64)
    aff = np.zeros((max(n - 1, 0), experts, experts), np.int64)
    topic_rank = rng.permuted(np.tile(np.arange(experts), (d * clusters, 1)), axis=1)  # [topics, E] rank of expert
    topic_of = [rng.integers(0, clusters, tokens[c]) + c * clusters for c in range(d)]
    prev = [None] * d
    for layer in range(n):
        layer_rank = rng.permutation(experts)
        if layer:  # keep `carry` of each topic's ranking, reshuffle the rest: correlated across layers
            for z in range(d * clusters):
                move = rng.random(experts) >= carry
                topic_rank[z, move] = rng.permutation(topic_rank[z, move])
        log_pop = -s_layer * np.log1p(layer_rank)[None, :] - s_topic * np.log1p(topic_rank)  # [topics, E]
        for c in range(d):
            g = rng.gumbel(size=(tokens[c], experts))
            chosen = np.argpartition(-(log_pop[topic_of[c]] + g), top_k - 1, axis=1)[:, :top_k]
            counts[layer, c] = np.bincount(chosen.reshape(-1), minlength=experts)
            if affinity and layer:
                src = np.repeat(prev[c], top_k, axis=1).reshape(-1)
                np.add.at(aff[layer - 1], (src, np.tile(chosen, (1, top_k)).reshape(-1)), 1)
            prev[c] = chosen
    out = dict(model=model_name, experts=experts, top_k=top_k, domains=list(DOMAINS), tokens=tokens,
               layers=np.asarray(layers, np.int64), counts=counts,
               source=f"synthetic (sax_jax.moe.synthetic, seed {seed}, s_layer {s_layer}, s_topic {s_topic}, "
                      f"clusters {clusters}, carry {carry}, {tokens_per_domain} tokens per domain on average)")
    if affinity:
        out["affinity"] = aff
    return out


def main(argv=None) -> None:
    from ..config import load_model
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="model YAML (configs/models/...)")
    ap.add_argument("out", help="trace file to write (.npz or .json)")
    ap.add_argument("--tokens", type=int, default=2048, help="tokens per domain on average")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    m = load_model(a.model)
    save_trace(synthetic_fields(m.name, m.moe.experts, m.moe.top_k, moe_layer_indices(m), a.tokens, a.seed), a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

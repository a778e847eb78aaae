"""Placement tables for the jitted model, computed once per scenario from the trace and the topology.

For every expert_placement policy p and every ep option e of the scenario (cost/expert_placement.py indexes them by
the design's codes):

* ``outside[p, e, a, b]``: expected number of distinct 2^a-rank blocks outside the source rank's own 2^b-rank block
  that one token is dispatched to, divided by top_k (so 1 - locality in the model's no-trace formula), averaged over
  the source ranks and the MoE layers. EP ranks sit in consecutive blocks in the hierarchy (EP is the innermost part
  of dp), so a level-L unit holding m_L EP members is a 2^b block with b = log2 m_L. a = 0 counts destination GPUs
  (NVLink: DeepEP sends a token once per destination GPU); a = log2 m_node counts destination nodes: DeepEP's
  internode dispatch sends a token ONCE per destination node over RDMA and forwards it over NVLink there (DeepEP,
  "normal kernels"), and its combine mirrors that. The experts a token picks are taken as independent
  (P(block hit) = 1 - prod_e (1 - p_e share_e,block)): an aggregated trace has no joint top-k.
* ``imbalance[p, e]``: max/mean rank load per layer (the slowest receiver, and the expert compute of the busiest
  GPU), averaged over the MoE layers.
* ``slots[p, e]``: expert slots per rank relative to experts/ep (redundant EPLB replicas: memory, gradients).

node-limited (DeepSeek-V3 section 2.1.2: a token reaches at most M nodes) keeps the contiguous layout and caps a
token's expected distinct nodes at M (model ``moe.node_limit``), scaling every node-granularity row by
min(1, M / distinct nodes); the re-routing it forces is not modelled (load as contiguous). Without M it is
contiguous.
"""
from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ..space import EXPERT_PLACEMENTS, ExpertPlacement
from . import placement as P


def _blocks(share: np.ndarray, size: int) -> np.ndarray:
    """[E, B] share of each expert served inside each consecutive block of ``size`` ranks."""
    ep = share.shape[1]
    nb = math.ceil(ep / size)
    pad = np.zeros((share.shape[0], nb * size))
    pad[:, :ep] = share
    return pad.reshape(share.shape[0], nb, size).sum(-1)


def outside_table(probs, share, source, top_k: int, n_gran: int, n_block: int, node_limit: int = 0):
    """[1 + n_gran, n_block] for one layer (see the module docstring): row 0 counts destination GPUs, row 1 + a
    destination nodes of 2^a EP ranks; node_limit caps the node rows."""
    ep = share.shape[1]
    out = np.zeros((1 + n_gran, n_block))
    ranks = np.arange(ep)
    for row in range(1 + n_gran):
        a = max(row - 1, 0)
        gran = 2 ** a
        blk = _blocks(share, gran)  # [E, B]
        # P(a token of domain d hits block B) under independent picks
        hit = 1.0 - np.exp(np.log1p(-np.minimum(probs[:, :, None] * blk[None], 1.0 - 1e-12)).sum(1))  # [D, B]
        hit_rank = source @ hit  # [G, B] from each source rank's mix
        if node_limit > 0 and row > 0:
            total = hit_rank.sum(1, keepdims=True)
            hit_rank = hit_rank * np.minimum(1.0, node_limit / np.maximum(total, 1e-12))
        for b in range(a, n_block):
            own = ranks // 2 ** b  # source's own 2^b block, in units of 2^a blocks: [own * 2^(b-a), ...)
            first, last = own * 2 ** (b - a), (own + 1) * 2 ** (b - a)
            idx = np.arange(hit_rank.shape[1])[None, :]
            inside = (idx >= first[:, None]) & (idx < last[:, None])
            out[row, b] = np.where(inside, 0.0, hit_rank).sum(1).mean() / top_k
        out[row, :a] = out[row, a]  # a block smaller than the granularity: every other 2^a block is outside
    return out


def layer_plan(policy: int, probs, domain_share, ep: int, ranks_per_node: int):
    """(share, source, slots) of one layer under one policy."""
    experts = probs.shape[-1]
    mixed = P.mixed_sources(domain_share, ep)
    if policy == ExpertPlacement.EPLB:
        share, slots = P.eplb(probs, domain_share, ep, ranks_per_node)
        return share, mixed, slots
    if policy == ExpertPlacement.LOCALITY:
        share, source = P.locality(probs, domain_share, ep)
        return share, source, P.slots_per_rank(experts, ep)
    return P.contiguous(experts, ep), mixed, P.slots_per_rank(experts, ep)


def ep_tables(trace, ep: int, ranks_per_node: int, node_limit: int, n_gran: int, n_block: int):
    """(outside [P, 1 + n_gran, n_block], imbalance [P], slots [P]) for one ep, averaged over the trace's layers."""
    probs, w = trace.probabilities, trace.domain_share
    n_pol = len(EXPERT_PLACEMENTS)
    outside, imb, slots = np.zeros((n_pol, 1 + n_gran, n_block)), np.zeros(n_pol), np.zeros(n_pol)
    base = trace.experts / ep
    for p in range(n_pol):
        limit = node_limit if p == ExpertPlacement.NODE_LIMITED else 0
        for layer in range(probs.shape[0]):
            share, source, s = layer_plan(p, probs[layer], w, ep, ranks_per_node)
            outside[p] += outside_table(probs[layer], share, source, trace.top_k, n_gran, n_block, limit)
            imb[p] += P.imbalance(P.rank_load(share, probs[layer], w))
            slots[p] += max(s / base, 1.0)
    n = probs.shape[0]
    return outside / n, imb / n, slots / n


_CACHE: OrderedDict = OrderedDict()  # (trace digest, ep_values, gpus_per_node, node_limit) -> tables, LRU
_CACHE_SIZE = 16


def _tables(trace, ep_values: tuple, gpus_per_node: int, node_limit: int):
    n_gran = int(math.log2(max(1, gpus_per_node))) + 1
    n_block = int(math.ceil(math.log2(max(ep_values)))) + 1 if max(ep_values) > 1 else 1
    per_ep = [ep_tables(trace, int(ep), min(int(ep), gpus_per_node), node_limit, n_gran, n_block)
              for ep in ep_values]
    outside = np.stack([t[0] for t in per_ep], axis=1)  # [P, E, 1 + n_gran, n_block]
    imb = np.stack([t[1] for t in per_ep], axis=1)
    slots = np.stack([t[2] for t in per_ep], axis=1)
    return np.asarray(ep_values, np.float64), outside, imb, slots


def placement_tables(trace, ep_values, gpus_per_node: int, node_limit: int = 0):
    """(ep_values [E], outside [P, E, 1 + n_gran, n_block], imbalance [P, E], slots [P, E]); cached by the trace's
    content (its digest, not the Trace object: a trace loaded twice is computed once) and the other arguments."""
    ep_values = tuple(sorted({int(round(v)) for v in ep_values} | {1}))
    key = (trace.digest, ep_values, int(gpus_per_node), int(node_limit))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    out = _CACHE[key] = _tables(trace, *key[1:])
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def scenario_tables(scenario):
    """Tables for a scenario with an activation trace: every ep option of its space and baselines, the system's
    GPUs per node and the model's node limit."""
    from ..space import AXES
    eps = [float(v) for v in scenario.space.options[AXES.index("ep")]]
    eps += [float(b["ep"]) for b in (scenario.baselines or {}).values() if "ep" in b]
    return placement_tables(scenario.expert_trace, eps, scenario.system.gpus_per_node,
                            scenario.model.moe.node_limit)

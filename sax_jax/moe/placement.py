"""Expert placement policies for one MoE layer of one EP group (host, numpy; once per scenario).

A placement is two matrices:

* ``share`` [E experts, G EP ranks]: the fraction of expert e's tokens that rank g serves (rows sum to 1; an expert
  with r replicas has r entries of 1/r: the dispatcher spreads its tokens evenly over the replicas, as EPLB's
  inference path does);
* ``source`` [G, D domains]: the domain mix of the tokens rank g holds (rows sum to 1). Ranks see the workload's
  mix unless the policy groups micro-batches by domain.

and ``slots``, the expert slots per rank (experts / ep without replicas). The traffic and load they imply are
computed in tables.py; the cost model reads those (cost/expert_placement.py).
"""
from __future__ import annotations

import math

import numpy as np

EPLB_TARGET = 1.1  # max/mean rank load EPLB stops at (the done-when; DeepSeek does not publish one)


def interval_overlap(n_items: int, n_bins: int) -> np.ndarray:
    """[n_items, n_bins]: item i covers [i n_bins / n_items, (i + 1) n_bins / n_items) of the bin line, as a share
    of its length per bin. Contiguous blocks when n_items >= n_bins, an item split over bins otherwise."""
    lo = np.arange(n_items)[:, None] * n_bins / n_items
    hi = lo + n_bins / n_items
    g = np.arange(n_bins)[None, :]
    return np.clip(np.minimum(hi, g + 1) - np.maximum(lo, g), 0.0, None) * n_items / n_bins


def contiguous(experts: int, ep: int) -> np.ndarray:
    """Megatron-Core's layout: expert e on rank floor(e ep / E) (an expert over E/ep... ranks when ep > E)."""
    return interval_overlap(experts, ep)


def mixed_sources(domain_share: np.ndarray, ep: int) -> np.ndarray:
    """Every rank holds the workload's mix of domains (ordinary data loading)."""
    return np.tile(domain_share[None, :], (ep, 1))


def grouped_sources(domain_share: np.ndarray, ep: int) -> np.ndarray:
    """Domain-grouped micro-batches (the seed's workload-aware grouping): the ranks are split into consecutive runs,
    one per domain, as long as its share (a rank on a boundary holds both), so neighbouring ranks (a node) hold
    tokens of one domain and the group as a whole still sees the workload's mix."""
    edges = np.concatenate([[0.0], np.cumsum(domain_share)]) * ep
    g = np.arange(ep)[:, None]
    return np.clip(np.minimum(edges[None, 1:], g + 1) - np.maximum(edges[None, :-1], g), 0.0, None)


def slots_per_rank(experts: int, ep: int) -> int:
    return max(1, math.ceil(experts / ep))


def _replicate(load: np.ndarray, n_slots: int) -> np.ndarray:
    """Replicas per expert: each extra slot to the expert whose per-replica load is highest (EPLB's replicate)."""
    reps = np.ones(len(load), np.int64)
    for _ in range(n_slots - len(load)):
        reps[np.argmax(load / reps)] += 1
    return reps


def _pack(weights: np.ndarray, n_bins: int, capacity: int) -> np.ndarray:
    """Bin of each item: heaviest first onto the lightest bin with room (EPLB's balanced packing)."""
    fill, count = np.zeros(n_bins), np.zeros(n_bins, np.int64)
    where = np.empty(len(weights), np.int64)
    for i in np.argsort(-weights, kind="stable"):
        b = int(np.argmin(np.where(count < capacity, fill, np.inf)))
        where[i], fill[b], count[b] = b, fill[b] + weights[i], count[b] + 1
    return where


def _eplb_share(load: np.ndarray, ep: int, slots: int, ranks_per_node: int) -> np.ndarray:
    """share [E, ep] of one EPLB plan with ``slots`` per rank. Hierarchical (DeepSeek EPLB rebalance_experts with
    one expert per group) when the EP group spans several nodes: experts packed into nodes by load first, then
    replicated inside their node and the replicas packed onto its ranks, so replicas never add cross-node
    traffic; global otherwise (one node)."""
    experts = len(load)
    nodes = max(1, ep // ranks_per_node) if ep % ranks_per_node == 0 else 1
    share = np.zeros((experts, ep))
    if nodes > 1 and experts % nodes == 0:
        node_of = _pack(load, nodes, experts // nodes)
    else:
        nodes, node_of = 1, np.zeros(experts, np.int64)
    per_node = ep // nodes
    for n in range(nodes):
        idx = np.flatnonzero(node_of == n)
        reps = _replicate(load[idx], per_node * slots)
        items = np.repeat(np.arange(len(idx)), reps)
        rank = _pack(load[idx][items] / reps[items], per_node, slots) + n * per_node
        np.add.at(share, (idx[items], rank), 1.0 / reps[items])
    return share


def rank_load(share: np.ndarray, probs: np.ndarray, domain_share: np.ndarray) -> np.ndarray:
    """[G] selections per token each rank serves (the group's tokens carry the workload's mix)."""
    return (domain_share @ probs) @ share


def imbalance(load: np.ndarray) -> float:
    return float(load.max() / load.mean()) if load.mean() > 0 else 1.0


def eplb(probs: np.ndarray, domain_share: np.ndarray, ep: int, ranks_per_node: int,
         target: float = EPLB_TARGET) -> tuple:
    """(share, slots): the fewest extra slots per rank (0 .. max(experts/ep, 3): at most doubling the experts held,
    or 3 replicas a rank where a rank holds one or two experts) whose EPLB plan brings max/mean rank load to
    ``target``; the last plan tried when none does."""
    experts = probs.shape[-1]
    load = domain_share @ probs
    base = slots_per_rank(experts, ep)
    if ep * base < experts or ep > experts:  # uneven or split experts: EPLB's plan needs whole slots
        return contiguous(experts, ep), base
    for extra in range(max(base, 3) + 1):
        share = _eplb_share(load, ep, base + extra, ranks_per_node)
        if imbalance(rank_load(share, probs, domain_share)) <= target:
            break
    return share, base + extra


def locality(probs: np.ndarray, domain_share: np.ndarray, ep: int) -> tuple:
    """(share, source): domain-grouped micro-batches, then each expert on the rank that sends it the most tokens
    (the seed's locality-maximizing placement), most-wanted experts first, ties to the least-loaded rank, ranks
    filled to experts/ep slots. Co-selected experts of a domain end up on the neighbouring ranks of that domain."""
    experts = probs.shape[-1]
    source = grouped_sources(domain_share, ep)
    if ep > experts or experts % ep:
        return contiguous(experts, ep), source
    demand = source @ probs  # [G, E] selections per token from rank g to expert e
    slots = experts // ep
    count, load = np.zeros(ep, np.int64), np.zeros(ep)
    share = np.zeros((experts, ep))
    for e in np.argsort(-demand.max(0), kind="stable"):
        free = count < slots
        best = np.where(free, demand[:, e], -np.inf)
        tied = free & (best >= best.max() - 1e-12)
        g = int(np.argmin(np.where(tied, load, np.inf)))
        share[e, g], count[g], load[g] = 1.0, count[g] + 1, load[g] + demand[:, e].sum()
    return share, source

"""Alpha-beta collective costs over the hierarchy (Thakur, Rabenseifner & Gropp 2005; NCCL's tuning model).

Every function takes the group's participants per level k [L], the message size S in bytes per GPU, and
per-level latency alpha_s [L] (s) and per-GPU bandwidth B [L] (bytes/s), and returns seconds. n = prod(k).
A flat algorithm over a multi-level group runs at its slowest spanned level (bottleneck bandwidth, worst
latency); the hierarchical one pays each level for its own share.
"""
import jax.numpy as jnp

from .nccl_protocol import level_rings_s, ring_s, tree_s
from .placement import ring_hop_weights, spans

_BIG = 1e30
# NCCL's tuning model charges every collective a fixed latency besides its per-step hop latencies (which alpha
# carries): baseLat[Ring][Simple] = 8.4 us (NCCL src/graph/tuning.cc, 2.1x releases; LL and LL128, used for
# small messages, 6.6 and 14 us). A term that issues `calls` collectives adds `launch_s(k, calls)`.
NCCL_BASE_LATENCY_S = 8.4e-6


def launch_s(k, calls):
    """Fixed latency of ``calls`` NCCL collectives over a group with participants k [L] (none for one GPU)."""
    return jnp.where(jnp.prod(k) > 1.0 + 1e-6, calls * NCCL_BASE_LATENCY_S, 0.0)


def bottleneck(k, alpha_s, bw_Bps):
    """Worst latency and bandwidth among the levels the group spans (neutral values if it spans none)."""
    s = spans(k) > 0
    any_span = jnp.any(s)
    a = jnp.where(any_span, jnp.max(jnp.where(s, alpha_s, 0.0)), 0.0)
    b = jnp.where(any_span, jnp.min(jnp.where(s, bw_Bps, _BIG)), _BIG)
    return a, b


def ring_hop_latency_s(k, alpha_s):
    """Mean latency of one hop of a ring laid out level by level.

    A chunk of a pipelined ring crosses the hops one after the other, so the ring pays the sum of its hops'
    latencies, not its slowest hop's on every step: NCCL's tuning model charges a ring all-reduce 2(nNodes - 1)
    inter-node steps at the network latency and the remaining steps at the intra-node one (src/graph/tuning.cc);
    the hops per level are placement.ring_hops_per_level's."""
    return jnp.sum(ring_hop_weights(k) * alpha_s)


def ring_allreduce_s(k, size_bytes, alpha_s, bw_Bps):
    """2(n-1) alpha_hop + 2 (n-1)/n S/B: the mean hop latency (ring_hop_latency_s), the slowest level's bandwidth,
    under the fastest of NCCL's protocols (nccl_protocol.ring_s; alpha_s and B as Simple's; Simple with the
    multi-node ring plateau)."""
    n = jnp.prod(k)
    _, b = bottleneck(k, alpha_s, bw_Bps)
    return ring_s(k, 2.0 * (n - 1.0), size_bytes, 2.0 * (n - 1.0) / n * size_bytes / b, alpha_s, allreduce=True)


def ring_reduce_scatter_s(k, size_bytes, alpha_s, bw_Bps):
    """(n-1) alpha_hop + (n-1)/n S/B under the fastest protocol; all-gather costs the same."""
    n = jnp.prod(k)
    _, b = bottleneck(k, alpha_s, bw_Bps)
    return ring_s(k, n - 1.0, size_bytes, (n - 1.0) / n * size_bytes / b, alpha_s)


def tree_allreduce_s(k, size_bytes, alpha_s, bw_Bps):
    """Double binary tree: 2 sum_L log2(k_L) alpha_L + max_L 2 S / (m_(L-1) B_L) over the spanned levels (pipelined
    reduce then broadcast), under the fastest of NCCL's protocols (nccl_protocol.tree_s). A unit of level L-1 sends
    and receives S once through level L, spread over its m_(L-1) GPUs' links (NCCL's channels over a node's NICs):
    NCCL gives the tree the ring's bus bandwidth (tuning.cc: busBw = nChannels x bw, x0.92, algorithm bandwidth
    half of it), so across nodes it is multi-rail as the ring is, not one NIC's 2 S / B."""
    return tree_s(k, size_bytes, multirail_wire_s(k, 2.0 * size_bytes, bw_Bps), alpha_s)


def multirail_wire_s(k, level_bytes, bw_Bps):
    """Seconds to move level_bytes per unit of each level below through every spanned level L, spread over the
    links of the m_(L-1) = prod(k below L) GPUs of that unit (NCCL's channels over a node's NICs): the slowest level's
    level_bytes / (m_(L-1) B_L)."""
    inner = jnp.cumprod(jnp.concatenate([jnp.ones_like(k[:1]), k[:-1]]))
    return jnp.max(jnp.where(spans(k) > 0, level_bytes / (inner * bw_Bps), 0.0))


def hierarchical_allreduce_s(k, size_bytes, alpha_s, bw_Bps, allreduce=True):
    """Reduce-scatter inside, all-reduce across, all-gather inside: level L moves 2(k_L-1)/k_L S/prod(k_<L) in
    2(k_L-1) steps at its own latency, each stage under its fastest protocol (nccl_protocol.level_rings_s).
    allreduce=False (static): without the outermost stage's all-reduce plateau, for callers that take half of this
    as a hierarchical reduce-scatter or all-gather."""
    inner = jnp.cumprod(jnp.concatenate([jnp.ones_like(k[:1]), k[:-1]]))
    level_bytes = size_bytes / inner
    bandwidth_s = 2.0 * (k - 1.0) / k * level_bytes / bw_Bps
    return jnp.sum(level_rings_s(k, 2.0 * (k - 1.0), level_bytes, bandwidth_s, alpha_s, allreduce))


def ps_reduce_scatter_s(k, size_bytes, alpha_s, bw_Bps):
    """Sharded parameter server, push round (a reduce-scatter by direct exchange; the pull round, an all-gather,
    costs the same): every GPU sends S/n to each of its n-1 peers, so (m_L - m_(L-1))/n of S leaves through level L
    (m_L = prod(k[:L+1]) group members share its unit of level L). The messages are in flight together: the round
    waits for the last one, issued (n-2) per-message latencies after the first (the innermost level's alpha, a GPU's
    cost of one more message: 3 us on NVLink, NCCL's ring/Simple step 3.4 us in src/graph/tuning.cc hwLat) and
    arriving one latency of the slowest spanned level later, not after a ring's n-1 hops each at its level's
    latency: an all-reduce is two latency rounds (Li et al. 2014, "Scaling distributed machine learning with the
    parameter server", OSDI; BytePS, Jiang et al. 2020, OSDI). Bandwidth as the all-to-all's (all_to_all_s: the
    levels' bytes one after the other). A multi-rail ring sends only (n-1)/n S / m_(L-1) per GPU across a slow level
    L, so across slow levels shared by many GPUs the exchange pays in bandwidth what it saves in latency (it runs
    over the whole group, as 'ring' and 'tree'; 'hierarchical' reduces inside first)."""
    m = jnp.cumprod(k)
    n = m[-1]
    below = jnp.concatenate([jnp.ones_like(m[:1]), m[:-1]])
    alpha, _ = bottleneck(k, alpha_s, bw_Bps)
    latency = alpha + jnp.maximum(n - 2.0, 0.0) * alpha_s[0]
    return jnp.where(n > 1.0 + 1e-6, latency + jnp.sum((m - below) / n * size_bytes / bw_Bps), 0.0)


def all_to_all_s(m, k, size_bytes, alpha_s, bw_Bps):
    """Each GPU sends S/n to every member; (m_L - m_(L-1))/n of S leaves through level L.

    Two-level form of DESIGN.md: (G-1) a_nvl + (G-1)/G S/B_nvl + (N-1) a_net + (N-1)/N S/B_net.
    """
    n = m[-1]
    m_below = jnp.concatenate([jnp.ones_like(m[:1]), m[:-1]])
    return all_to_all_levels_s(k, (m - m_below) / n * size_bytes, alpha_s, bw_Bps)


def all_to_all_levels_s(k, level_bytes, alpha_s, bw_Bps):
    """An all-to-all whose bytes leaving through each level [L] are given (an uneven spread: MoE expert placement
    from a trace, cost/expert_placement.py): k_L - 1 latencies and level_bytes_L / B_L per level."""
    return jnp.sum((k - 1.0) * alpha_s + level_bytes / bw_Bps)


def bytes_per_level_allreduce(k, size_bytes):
    """Bytes one GPU sends through each level in a hierarchical all-reduce (used for traffic accounting)."""
    inner = jnp.cumprod(jnp.concatenate([jnp.ones_like(k[:1]), k[:-1]]))
    return 2.0 * (k - 1.0) / k * size_bytes / inner


def ps_bytes_per_level_allreduce(k, size_bytes):
    """Bytes one GPU sends through each level in a sharded parameter server's all-reduce (push and pull:
    ps_reduce_scatter_s), for traffic accounting: 2 (m_L - m_(L-1))/n S."""
    m = jnp.cumprod(k)
    below = jnp.concatenate([jnp.ones_like(m[:1]), m[:-1]])
    return 2.0 * (m - below) / m[-1] * size_bytes

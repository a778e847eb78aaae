"""NCCL's three wire protocols for ring and tree collectives, and the per-call choice between them.

NCCL predicts, for every call, each protocol's time as a fixed latency plus per-step hop latencies plus bytes over
the protocol's bandwidth, and runs the fastest (src/graph/tuning.cc, ncclTopoTuneModel / ncclTopoGetAlgoTime):
  LL      8-byte stores of 4 data bytes and a flag: no memory fence per step, the lowest hop latency, a quarter
          of the bus bandwidth and an absolute cap;
  LL128   128-byte lines with 8 flag bytes: a low hop latency at 0.92 of the bandwidth (0.7 with one GPU per
          node), enabled on NVLink + GPUDirect systems from Volta on;
  Simple  plain stores, then a fence and a flag per chunk: the full bandwidth, the highest hop latency.
A ring over thousands of ranks is latency-bound for messages of tens to hundreds of MB, where LL128 wins.
A multi-node ring all-reduce under Simple pays its latency 1.4 times (NCCL's "plateau effect of ring").

The levels' configured latencies (alpha_s) are a Simple ring's hop. A protocol saves NCCL's difference between its
hop latency and Simple's on the level's kind (the fence and flag round trip), but never more than NCCL's share
of the hop (its ratio) on a level configured below NCCL's own Simple figure: propagation over a campus or
regional link is not a protocol's to save.
"""
import jax.numpy as jnp

from .placement import ring_hop_weights

# NCCL 2.19 src/graph/tuning.cc, ring algorithm, protocols (LL, LL128, Simple): baseLat, and hwLat for NVLink and
# NET hops, in seconds
BASE_LATENCY_S = (6.6e-6, 14.0e-6, 8.4e-6)
NVLINK_HOP_S = (0.6e-6, 1.9e-6, 3.4e-6)
NET_HOP_S = (2.7e-6, 4.0e-6, 14.0e-6)
# on a multi-node ring an NVLink hop still pays the proxy's network post overhead (getNetOverhead: 1 us on x86;
# tripled for Simple, 3 us, under its 3.4 us): intraLat = max(intraLat, netOverhead)
NET_OVERHEAD_S = 1.0e-6
# bus-bandwidth factors: LL carries 4 data bytes per 8 and NCCL charges it a quarter on an all-reduce or any
# multi-node ring; LL128 120 of 128 bytes (0.92; 0.7 when a node holds fewer than 2 of the ring's ranks)
LL_BUS = 0.25
LL128_BUS = 0.92
LL128_BUS_ONE_PER_NODE = 0.7
# the tree's (tuning.cc): LL 1/3.8; LL128 120/128 across nodes, 7/9 inside one
TREE_LL_BUS = 1.0 / 3.8
TREE_LL128_BUS = 120.0 / 128.0
TREE_LL128_BUS_ONE_NODE = 7.0 / 9.0
# LL's absolute bus-bandwidth cap per GPU (llMaxBws, Hopper row for one node, x86 Intel rows for 2 and more nodes)
LL_MAX_BPS = (87.7e9, 39.0e9, 20.4e9)
# ncclTopoGetAlgoTime multiplies a ring all-reduce's Simple latency (baseLat and every hop) by 1.4 on sm_80 and later
# when the communicator spans nodes and each rank's share per channel reaches 64 bytes: "Plateau effect of ring"
# (src/graph/tuning.cc, unchanged from 2.19 to 2.29; 1.9 on Volta, which no caller here tells apart: every bundled GPU
# but the V100 is sm_80+). The threshold is taken at one channel, its lowest: below it LL or LL128 wins anyway.
RING_ALLREDUCE_PLATEAU = 1.4
PLATEAU_MIN_BYTES_PER_RANK = 64.0


def _protocol_hop_s(alpha_s, hop_s, simple_hop_s):
    """A protocol's hop latency on a level: Simple's (alpha_s) less NCCL's saving, at most its share."""
    saving = jnp.minimum(simple_hop_s - hop_s, alpha_s * (1.0 - hop_s / simple_hop_s))
    return alpha_s - saving


def _level_hops_s(alpha_s, nvlink, multi_node):
    """Per protocol (LL, LL128, Simple), the hop latency of each level (elementwise over alpha_s, nvlink and
    multi_node); Simple's is alpha_s itself."""
    hops = []
    for p in range(2):
        # the proxy's post overhead bounds an NVLink hop of a multi-node ring (Simple: 3 us, under its 3.4 us)
        nvl_hop = jnp.where(multi_node, max(NVLINK_HOP_S[p], NET_OVERHEAD_S), NVLINK_HOP_S[p])
        hops.append(jnp.where(nvlink, _protocol_hop_s(alpha_s, nvl_hop, NVLINK_HOP_S[2]),
                              _protocol_hop_s(alpha_s, NET_HOP_S[p], NET_HOP_S[2])))
    return hops + [alpha_s]


def _plateau_s(latency_nccl_s, multi_node, size_bytes, ranks):
    """What NCCL's ring plateau adds to a Simple all-reduce of ``ranks`` ranks across nodes (elementwise): 0.4 of
    its latency once each rank's share reaches PLATEAU_MIN_BYTES_PER_RANK. latency_nccl_s: the ring's Simple hop
    latencies, each at most NCCL's own hop on its kind of level (_nccl_share_s): the factor is NCCL's measured ring
    overhead, not a multiple of a long link's propagation."""
    plateau = multi_node & (size_bytes >= PLATEAU_MIN_BYTES_PER_RANK * ranks)
    return jnp.where(plateau, (RING_ALLREDUCE_PLATEAU - 1.0) * (BASE_LATENCY_S[2] + latency_nccl_s), 0.0)


def _nccl_share_s(alpha_s, nvlink):
    """A level's Simple hop capped at NCCL's own Simple hop for its kind (NVLink or network)."""
    return jnp.minimum(alpha_s, jnp.where(nvlink, NVLINK_HOP_S[2], NET_HOP_S[2]))


def _fastest_s(n, latency_s, bandwidth_s, bus_bytes, nodes, one_per_node, ll_bus, ll128_bus, simple_extra_s=0.0):
    """Elementwise: the fastest protocol's (baseLat_p - baseLat_Simple) + latency_s[p] + its wire time for a
    collective of n ranks over ``nodes`` nodes; bandwidth_s is Simple's wire time, bus_bytes the bytes each rank
    moves at the bus bandwidth (for LL's cap); simple_extra_s what Simple alone pays on top (the ring plateau);
    0 for one rank."""
    ll_cap_Bps = jnp.where(nodes > 2.0 + 1e-6, LL_MAX_BPS[2], jnp.where(nodes > 1.0 + 1e-6, LL_MAX_BPS[1],
                                                                         LL_MAX_BPS[0]))
    wire = (jnp.maximum(bandwidth_s / ll_bus, bus_bytes / ll_cap_Bps),
            bandwidth_s / jnp.where(one_per_node, LL128_BUS_ONE_PER_NODE, ll128_bus),
            bandwidth_s + simple_extra_s)
    t = [(BASE_LATENCY_S[p] - BASE_LATENCY_S[2]) + latency_s[p] + wire[p] for p in range(3)]
    return jnp.where(n > 1.0 + 1e-6, jnp.minimum(jnp.minimum(t[0], t[1]), t[2]), 0.0)


def _nodes(k, nvlink):
    nodes = jnp.prod(jnp.where(nvlink, 1.0, k))
    return nodes, nodes > 1.0 + 1e-6


def ring_s(k, steps, size_bytes, bandwidth_s, alpha_s, allreduce=False):
    """Seconds of one ring collective over levels with k [L] participants (level 0 the NVLink domain, context.py)
    under the fastest protocol, less Simple's base latency (the caller charges it per call: collectives.launch_s).

    steps: each rank's steps (n-1 for a reduce-scatter or all-gather, 2(n-1) for an all-reduce); bandwidth_s:
    Simple's wire time for size_bytes; alpha_s [L]: a Simple ring's hop latency per level. A protocol's mean hop
    is its levels' hops weighted as the ring's hops are (placement.ring_hop_weights). allreduce (static): the call
    is an all-reduce, whose Simple latency a multi-node ring stretches (RING_ALLREDUCE_PLATEAU)."""
    nvlink = jnp.arange(alpha_s.shape[-1]) == 0
    nodes, multi_node = _nodes(k, nvlink)
    n = jnp.prod(k)
    weights = ring_hop_weights(k)
    latency_s = [steps * jnp.sum(weights * h) for h in _level_hops_s(alpha_s, nvlink, multi_node)]
    extra_s = 0.0
    if allreduce:
        extra_s = _plateau_s(steps * jnp.sum(weights * _nccl_share_s(alpha_s, nvlink)), multi_node, size_bytes, n)
    return _fastest_s(n, latency_s, bandwidth_s, steps / jnp.maximum(n, 1.0) * size_bytes, nodes,
                      multi_node & (k[0] < 2.0 - 1e-6), LL_BUS, LL128_BUS, extra_s)


def level_rings_s(k, steps, size_bytes, bandwidth_s, alpha_s, allreduce=False):
    """[L] ring_s for one ring per level, each of k[L] ranks over that level only (a hierarchical collective's
    stages; above the NVLink level every rank of a stage's ring is in its own node). allreduce (static): the
    stages make a hierarchical all-reduce, whose outermost spanned stage is an NCCL all-reduce (the ring plateau
    under Simple) and whose stages below it are a reduce-scatter and an all-gather (none)."""
    nvlink = jnp.arange(alpha_s.shape[-1]) == 0
    multi_node = ~nvlink & (k > 1.0 + 1e-6)
    latency_s = [steps * h for h in _level_hops_s(alpha_s, nvlink, multi_node)]
    extra_s = 0.0
    if allreduce:
        ranks_above = jnp.cumprod(k[::-1])[::-1] / k  # product of the participants of the levels above each
        outermost = multi_node & (ranks_above < 1.0 + 1e-6)
        extra_s = _plateau_s(steps * _nccl_share_s(alpha_s, nvlink), outermost, size_bytes, k)
    return _fastest_s(k, latency_s, bandwidth_s, steps / jnp.maximum(k, 1.0) * size_bytes, jnp.where(nvlink, 1.0, k),
                      multi_node, LL_BUS, LL128_BUS, extra_s)


def tree_s(k, size_bytes, bandwidth_s, alpha_s):
    """A double-binary-tree all-reduce, up and down 2 sum_L log2(k_L) hops, under the fastest protocol, less
    Simple's base latency. Its hops are a ring's (the levels' alpha_s and the same per-protocol savings); NCCL's
    tree bandwidth factors: LL 1/3.8, LL128 120/128 across nodes and 7/9 inside one (tuning.cc)."""
    nvlink = jnp.arange(alpha_s.shape[-1]) == 0
    nodes, multi_node = _nodes(k, nvlink)
    depth = 2.0 * jnp.log2(jnp.maximum(k, 1.0))
    latency_s = [jnp.sum(depth * h) for h in _level_hops_s(alpha_s, nvlink, multi_node)]
    return _fastest_s(jnp.prod(k), latency_s, bandwidth_s, 2.0 * size_bytes, nodes, jnp.zeros_like(multi_node),
                      TREE_LL_BUS, jnp.where(multi_node, TREE_LL128_BUS, TREE_LL128_BUS_ONE_NODE))

"""NCCL's protocol choice (cost/nccl_protocol.py): golden values from NCCL's tuning model (src/graph/tuning.cc,
2.19: ring baseLat LL/LL128/Simple 6.6/14/8.4 us, hwLat NVLink 0.6/1.9/3.4 us and NET 2.7/4.0/14 us, LL at a quarter
of the bus bandwidth capped at llMaxBw, LL128 at 0.92) and the invariants a minimum over protocols must keep."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import f32 as F
from sax_jax.cost import collectives as coll
from sax_jax.cost.dp import multirail_ring_allreduce_s, multirail_ring_reduce_scatter_s

US = 1e-6
NCCL_NVL, NCCL_NET = 3.4 * US, 14.0 * US  # NCCL's own Simple hops: its model exactly


def simple_allreduce_s(k, size, alpha, bw):
    """The ring before protocols: Simple only (alpha-beta with the mean hop)."""
    n = float(np.prod(k))
    _, b = coll.bottleneck(k, alpha, bw)
    return 2 * (n - 1) * float(coll.ring_hop_latency_s(k, alpha)) + 2 * (n - 1) / n * size / float(b)


def test_empty_message_in_one_node_runs_ll_at_nccls_latency():
    # NCCL: ring LL all-reduce over 8 GPUs of one node = baseLat 6.6 + 14 steps x 0.6 us = 15.0 us; Simple's base
    # 8.4 us is the caller's (collectives.launch_s), so the function returns 6.6 us
    k, alpha, bw = F([8.0, 1.0]), F([NCCL_NVL, NCCL_NET]), F([386e9, 46e9])
    assert float(coll.ring_allreduce_s(k, F(0.0), alpha, bw)) == pytest.approx(15.0 * US - 8.4 * US, rel=1e-5)


def test_empty_message_across_nodes_pays_the_proxy_overhead_on_nvlink_hops():
    # 2 nodes x 8 GPUs: per lap 14 NVLink hops at max(0.6, netOverhead 1.0) us and 2 NET hops at 2.7 us; 30 steps.
    # (NCCL 2.19 counts 2 nNodes = 4 of the 30 steps as network ones, the laid-out ring 30 x 2/16 = 3.75)
    k, alpha, bw = F([8.0, 2.0]), F([NCCL_NVL, NCCL_NET]), F([386e9, 46e9])
    expected = (6.6 - 8.4) * US + 30 * (14 * 1.0 + 2 * 2.7) * US / 16
    assert float(coll.ring_allreduce_s(k, F(0.0), alpha, bw)) == pytest.approx(expected, rel=1e-5)


def test_protocol_goes_ll_then_ll128_then_simple_as_the_message_grows():
    # 8 GPUs in one node, NVLink 3.4 us per hop and 386 GB/s: an all-reduce moves 1.75 S per GPU
    k, alpha, bw = F([8.0, 1.0]), F([NCCL_NVL, NCCL_NET]), F([386e9, 46e9])
    wire = lambda s: 1.75 * s / 386e9  # noqa: E731
    ll = lambda s: (6.6 - 8.4) * US + 14 * 0.6 * US + max(wire(s) / 0.25, 1.75 * s / 87.7e9)  # noqa: E731
    ll128 = lambda s: (14.0 - 8.4) * US + 14 * 1.9 * US + wire(s) / 0.92  # noqa: E731
    simple = lambda s: 14 * 3.4 * US + wire(s)  # noqa: E731
    for size, winner in ((64e3, ll), (8e6, ll128), (1e9, simple)):
        got = float(coll.ring_allreduce_s(k, F(size), alpha, bw))
        assert got == pytest.approx(winner(size), rel=1e-5)
        assert got == pytest.approx(min(ll(size), ll128(size), simple(size)), rel=1e-5)
    # 8 MB: LL128 71.6 us where Simple took 83.9 us
    assert ll128(8e6) == pytest.approx(71.6e-6, abs=0.1e-6) and simple(8e6) == pytest.approx(83.9e-6, abs=0.1e-6)


def test_ll_is_capped_at_nccls_absolute_bandwidth():
    # with a 10 TB/s link a quarter of it would be 2.5 TB/s; NCCL caps LL at 87.7 GB/s in one node, 20.4 GB/s across
    # more than 2 nodes (llMaxBws); at 2 MB over 8 GPUs the capped LL loses to LL128, the uncapped would win
    k, alpha, bw = F([8.0, 1.0]), F([NCCL_NVL, NCCL_NET]), F([1e13, 1e13])
    s = 2e6
    ll = (6.6 - 8.4) * US + 14 * 0.6 * US + 1.75 * s / 87.7e9
    ll128 = (14.0 - 8.4) * US + 14 * 1.9 * US + 1.75 * s / 1e13 / 0.92
    assert float(coll.ring_allreduce_s(k, F(s), alpha, bw)) == pytest.approx(min(ll, ll128), rel=1e-5)
    assert ll128 < ll
    assert (6.6 - 8.4) * US + 14 * 0.6 * US + 1.75 * s / 1e13 / 0.25 < ll128


def test_one_gpu_per_node_pays_ll128s_discount():
    # 64 nodes of one rank each (ppn < 2): LL128 at 0.7 of the bandwidth (tuning.cc); NET hops at NCCL's 14 us
    k, alpha, bw = F([1.0, 64.0]), F([NCCL_NVL, NCCL_NET]), F([386e9, 46e9])
    s = 4e7
    wire = 63 / 64 * s / 46e9
    ll128 = (14.0 - 8.4) * US + 63 * 4.0 * US + wire / 0.7
    simple = 63 * 14.0 * US + wire
    got = float(coll.ring_reduce_scatter_s(k, F(s), alpha, bw))
    assert got == pytest.approx(min(ll128, simple), rel=1e-5)
    assert got == pytest.approx(ll128, rel=1e-5)  # 40 MB: 1.43 ms against Simple's 1.74 ms


def test_a_protocol_saves_nccls_software_latency_not_propagation():
    # a cross-building level of 250 us: LL128 saves NCCL's 14 - 4 = 10 us per hop, not 250 x (1 - 4/14);
    # a network level configured at 8 us (below NCCL's 14) keeps NCCL's ratio: 8 x 4/14
    k, bw = F([1.0, 1.0, 2.0]), F([386e9, 46e9, 46e9])
    alpha = F([3e-6, 8e-6, 250e-6])
    s = 5e8
    wire = 2 * 1 / 2 * s / 46e9
    ll128 = (14.0 - 8.4) * US + 2 * (250 - 10) * US + wire / 0.7
    # Simple's ring plateau stretches NCCL's share of the hops, 14 us each, not the 250 us of propagation
    simple = 2 * 250 * US + wire + 0.4 * (8.4 + 2 * 14.0) * US
    assert float(coll.ring_allreduce_s(k, F(s), alpha, bw)) == pytest.approx(min(ll128, simple), rel=1e-5)
    k2 = F([1.0, 16.0, 1.0])
    got = float(coll.ring_allreduce_s(k2, F(0.0), alpha, bw))
    ll = (6.6 - 8.4) * US + 30 * 8e-6 * 2.7 / 14
    assert got == pytest.approx(ll, rel=1e-5)


def test_simple_still_wins_bandwidth_bound_calls_with_the_ring_plateau():
    # a 1 GB all-reduce over 4 nodes x 8 GPUs is the alpha-beta ring under Simple, whose latency (base and hops)
    # NCCL stretches 1.4x on a multi-node ring all-reduce (tuning.cc, "Plateau effect of ring"); both levels sit
    # below NCCL's own Simple hops (3.4, 14 us), so all of their latency is NCCL's share
    k, alpha, bw = F([8.0, 4.0]), F([3e-6, 8e-6]), F([386e9, 46e9])
    lat = 62 * (28 * 3.0 + 4 * 8.0) / 32 * US  # 2(n-1) = 62 steps, 28 NVLink and 4 network hops per lap
    assert float(coll.ring_allreduce_s(k, F(1e9), alpha, bw)) == pytest.approx(
        simple_allreduce_s(k, 1e9, alpha, bw) + 0.4 * (8.4 * US + lat), rel=1e-5)
    # one node: no plateau; a reduce-scatter: none either
    one = F([8.0, 1.0])
    assert float(coll.ring_allreduce_s(one, F(1e9), alpha, bw)) == pytest.approx(
        simple_allreduce_s(one, 1e9, alpha, bw), rel=1e-5)
    assert float(coll.ring_reduce_scatter_s(k, F(1e9), alpha, bw)) == pytest.approx(
        0.5 * simple_allreduce_s(k, 1e9, alpha, bw), rel=1e-5)


def test_ring_plateau_golden_at_nccls_own_hops():
    # NCCL's model for a 1 GB ring all-reduce, 4 nodes x 8 GPUs, Simple at its own hops (3.4 us NVLink, 14 us NET):
    # lat = 1.4 x (8.4 + 62 x (28 x 3.4 + 4 x 14) / 32) us = 1.4 x 301.35 = 421.89 us; the function leaves out the
    # 8.4 us base the caller charges
    k, alpha, bw = F([8.0, 4.0]), F([NCCL_NVL, NCCL_NET]), F([386e9, 46e9])
    wire = 2 * 31 / 32 * 1e9 / 46e9
    assert float(coll.ring_allreduce_s(k, F(1e9), alpha, bw)) == pytest.approx(421.89e-6 - 8.4e-6 + wire, rel=1e-5)
    # the data-parallel multi-rail ring all-reduce pays the same latency over its 8 rails
    assert float(multirail_ring_allreduce_s(k, F(1e9), alpha, bw)) == pytest.approx(
        421.89e-6 - 8.4e-6 + wire / 8, rel=1e-5)


def test_hierarchical_stages_each_pick_their_protocol():
    # each stage is a ring of k_L ranks over level L alone, on S / prod(k below L) bytes, under its own fastest
    # protocol: at 30 MB the node stage (3.75 MB) runs LL128, the building stage (234 KB per rank, ranks in distinct
    # nodes) LL, the cross-building one Simple or LL128 on 250 us hops
    k, alpha, bw = F([8.0, 16.0, 2.0]), F([3e-6, 8e-6, 250e-6]), F([386e9, 46e9, 20e9])
    s = 3e7
    inner = (1.0, 8.0, 128.0)
    stages = []
    for level in range(3):
        one = [1.0, 1.0, 1.0]
        one[level] = float(k[level])
        stages.append(float(coll.ring_allreduce_s(F(one), F(s / inner[level]), alpha, bw)))
    assert float(coll.hierarchical_allreduce_s(k, F(s), alpha, bw)) == pytest.approx(sum(stages), rel=1e-5)
    plain = [2 * (kl - 1) * a + 2 * (kl - 1) / kl * s / m / b
             for kl, a, b, m in zip((8.0, 16.0, 2.0), (3e-6, 8e-6, 250e-6), (386e9, 46e9, 20e9), inner)]
    assert sum(stages) < sum(plain)
    assert all(st_ <= p_ * (1 + 1e-5) for st_, p_ in zip(stages, plain))


def test_tree_runs_ll_for_an_empty_message():
    # 2 nodes x 8 GPUs: up and down 2 log2(8) = 6 NVLink hops at 1.0 us and 2 NET hops at 2.7 us
    k, alpha, bw = F([8.0, 2.0]), F([NCCL_NVL, NCCL_NET]), F([386e9, 46e9])
    expected = (6.6 - 8.4) * US + 6 * 1.0 * US + 2 * 2.7 * US
    assert float(coll.tree_allreduce_s(k, F(0.0), alpha, bw)) == pytest.approx(expected, rel=1e-5)


levels = st.lists(st.sampled_from([1.0, 2.0, 4.0, 8.0, 16.0, 64.0]), min_size=3, max_size=3)
sizes = st.floats(1e3, 4e9)
latencies = st.tuples(st.floats(0.3e-6, 20e-6), st.floats(1e-6, 50e-6), st.floats(1e-6, 20e-3))
bandwidths = st.tuples(st.floats(50e9, 900e9), st.floats(5e9, 100e9), st.floats(1e9, 100e9))


@settings(max_examples=60, deadline=None)
@given(levels, sizes, latencies, bandwidths, st.floats(1.1, 4.0))
def test_invariants_never_slower_than_simple_monotone_in_size_latency_bandwidth(k, size, lat, bws, grow):
    k, alpha, bw = F(k), F(list(lat)), F(list(bws))
    for fn in (coll.ring_allreduce_s, coll.ring_reduce_scatter_s, coll.tree_allreduce_s,
               coll.hierarchical_allreduce_s, multirail_ring_reduce_scatter_s, multirail_ring_allreduce_s):
        t = float(fn(k, F(size), alpha, bw))
        assert np.isfinite(t) and t >= -2e-6 * 3  # LL's base is 1.8 us under Simple's (charged by the caller)
        tol = abs(t) * 1e-5 + 1e-12  # float32 rounding, relative to |t| (t < 0 where LL's base undercuts Simple's)
        assert float(fn(k, F(size * grow), alpha, bw)) >= t - tol
        assert float(fn(k, F(size), alpha * grow, bw)) >= t - tol
        assert float(fn(k, F(size), alpha, bw * grow)) <= t + tol
    # never slower than the Simple ring with the plateau at its most (all of its latency NCCL's share)
    n = float(np.prod(k))
    lat = 2 * (n - 1) * float(coll.ring_hop_latency_s(k, alpha))
    bound = simple_allreduce_s(k, size, alpha, bw) + 0.4 * (lat + 8.4 * US)
    assert float(coll.ring_allreduce_s(k, F(size), alpha, bw)) <= bound * (1 + 1e-5) + 1e-12


def test_hierarchical_plateau_only_on_its_outermost_stage():
    # 1 GB over 2 buildings x 4 nodes of one GPU, every stage under Simple: the node-level stage is a reduce-scatter
    # and an all-gather (no plateau), the building-level stage the NCCL all-reduce: + 0.4 (8.4 + 2 x 8) us
    k, alpha, bw = F([1.0, 4.0, 2.0]), F([3e-6, 8e-6, 8e-6]), F([386e9, 46e9, 20e9])
    s = 1e9
    inner = 2 * 3 * 8 * US + 2 * 3 / 4 * s / 46e9
    outer = 2 * 1 * 8 * US + 2 * 1 / 2 * (s / 4) / 20e9 + 0.4 * (8.4 + 16.0) * US
    assert float(coll.hierarchical_allreduce_s(k, F(s), alpha, bw)) == pytest.approx(inner + outer, rel=1e-5)

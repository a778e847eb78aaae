"""The sharded parameter server (dp_algo ps): golden values of its two latency rounds, the flows and windows it
opens, its cross-building bytes, and where it beats a ring (one GPU per site over a WAN) and where it does not
(a multi-level group whose ring crosses the slow level from every NIC of a node at once)."""
import dataclasses
import os

import jax.numpy as jnp
import pytest
from hypothesis import given, settings, strategies as st

import sax_jax as sx
from sax_jax.cost import collectives as coll
from sax_jax.cost.bursts import all_to_all_flows_per_level, ring_flows_per_level
from sax_jax.cost.context import context
from sax_jax.cost.dp import _allreduce_s, _cross_bytes, dp_step_comm_s, fsdp_microbatch_comm_s, server_paths
from sax_jax.evaluate import evaluate
from sax_jax.params import build_params
from sax_jax.space import DpAlgo, Sharding

from conftest import CONFIGS, f32 as F

K = F([8, 4, 1])  # 8 GPUs per node, 4 nodes: m = 8, 32, 32
ALPHA = F([1e-6, 1e-5, 1e-4])
BW = F([1e11, 1e10, 1e9])
S = 1e9


def allreduce(algo, k, size, alpha, bw, **kw):
    """dp._allreduce_s in a program with a parameter server, whose connections see the levels as the ring's."""
    return _allreduce_s(algo, k, size, alpha, bw, ps=(alpha, bw), **kw)


def server_params(sc):
    """The scenario's params with the server's paths in the program (its space has no ps; evaluate() would add
    them for a design that asks)."""
    params = build_params(sc)
    return params._replace(topology=dataclasses.replace(params.topology, parameter_server=True))


def test_push_round_golden():
    # every GPU sends S/32 to each of 31 peers: 7/32 of S over NVLink, 24/32 over the building network; the last
    # message leaves 30 NVLink latencies (1e-6) after the first and takes the building's latency (1e-5; the region
    # level is not spanned)
    expected = 30 * 1e-6 + 1e-5 + 7 / 32 * 1e9 / 1e11 + 24 / 32 * 1e9 / 1e10
    assert float(coll.ps_reduce_scatter_s(K, S, ALPHA, BW)) == pytest.approx(expected, rel=1e-5)
    # the all-reduce is the push and the pull: two latency rounds
    assert float(allreduce(DpAlgo.PS, K, S, ALPHA, BW)) == pytest.approx(2 * expected, rel=1e-5)
    assert float(coll.ps_reduce_scatter_s(F([1, 1, 1]), S, ALPHA, BW)) == 0.0


def test_one_gpu_per_region_pays_two_latencies_where_a_ring_pays_2_n_minus_1():
    # 8 regions of one GPU each, 50 ms one way, 10 GB/s, a 1 GB gradient: the ring pays 2 x 7 hops of 50 ms, the
    # server two rounds (each 6 x 1 us of message issue + 50 ms); both move 2 x 7/8 of the gradient per GPU
    k, alpha, bw = F([1, 1, 8]), F([1e-6, 5e-6, 0.05]), F([450e9, 50e9, 10e9])
    ring = float(allreduce(DpAlgo.RING, k, S, alpha, bw))
    ps = float(allreduce(DpAlgo.PS, k, S, alpha, bw))
    # 0.875 s, and Simple's ring plateau on NCCL's share of the hops: 0.4 (8.4 + 14 x 14) us
    assert ring == pytest.approx(2 * 7 * 0.05 + 2 * 7 / 8 * 0.1 + 0.4 * (8.4e-6 + 14 * 14e-6), rel=1e-6)
    assert ps == pytest.approx(2 * (0.05 + 6e-6) + 2 * 7 / 8 * 0.1, rel=1e-5)  # 0.275 s
    # issued as 25 buckets, each bucket is its own push and pull: 25 x 2 latencies
    assert float(allreduce(DpAlgo.PS, k, S, alpha, bw, calls=F(25.0))) == pytest.approx(
        25 * 2 * (0.05 + 6e-6) + 2 * 7 / 8 * 0.1, rel=1e-5)


def test_a_ring_wins_where_every_nic_of_a_node_crosses_the_slow_level():
    # 2 buildings x 16 nodes x 8 GPUs: a multi-rail ring sends (n-1)/n S / 128 per GPU over the 5 ms link, the
    # server S/2 from every GPU; the hierarchical all-reduce is faster still
    k, alpha, bw = F([8, 16, 2]), F([1e-6, 5e-6, 5e-3]), F([450e9, 50e9, 50e9])
    ring, ps, hier = (float(allreduce(a, k, S, alpha, bw)) for a in (DpAlgo.RING, DpAlgo.PS, DpAlgo.HIERARCHICAL))
    assert hier < ring < ps
    assert ps == pytest.approx(2 * (5e-3 + 254 * 1e-6 + 7 / 256 * 1e9 / 450e9 + 120 / 256 * 1e9 / 50e9
                                    + 128 / 256 * 1e9 / 50e9), rel=1e-5)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 64), alpha=st.floats(1e-6, 0.1), gbps=st.floats(1.0, 400.0), mb=st.floats(1.0, 4e3))
def test_on_one_level_the_server_moves_what_a_ring_moves_with_fewer_latencies(n, alpha, gbps, mb):
    """A group spanning one level: the same 2 (n-1)/n S per GPU, 2 latencies (and 2 (n-2) message issues of the
    innermost level's 1 us) instead of a Simple ring's 2 (n-1) latencies; more latency or less bandwidth never makes
    it faster. (The ring may still win where NCCL runs it under LL or LL128, whose hops are shorter: nccl_protocol.)"""
    k, a, b, s = F([1, float(n)]), F([1e-6, alpha]), F([450e9, gbps * 1e9]), mb * 1e6
    ps = float(allreduce(DpAlgo.PS, k, s, a, b))
    ring = float(allreduce(DpAlgo.RING, k, s, a, b))
    simple_ring = 2 * (n - 1) * alpha + 2 * (n - 1) / n * s / (gbps * 1e9)
    assert ps <= simple_ring * (1 + 1e-6)
    # the ring: at most Simple with NCCL's plateau on its share of the hops (nccl_protocol.RING_ALLREDUCE_PLATEAU)
    assert ring <= (simple_ring + 0.4 * (8.4e-6 + 2 * (n - 1) * min(alpha, 14e-6))) * (1 + 1e-6)
    assert ps == pytest.approx(2 * (alpha + (n - 2) * 1e-6) + 2 * (n - 1) / n * s / (gbps * 1e9), rel=1e-4)
    assert float(allreduce(DpAlgo.PS, k, s, a * 2, b)) >= ps
    assert float(allreduce(DpAlgo.PS, k, s, a, b / 2)) >= ps


def test_distributed_optimizer_and_zero3_use_the_push_and_pull_rounds():
    k = F([8.0, 4.0])
    alpha, bw = F([1e-6, 1e-5]), F([1e11, 1e10])
    one_round = lambda size: float(coll.ps_reduce_scatter_s(k, size, alpha, bw))  # noqa: E731
    grad, param = dp_step_comm_s(Sharding.ZERO1, DpAlgo.PS, k, k, F([1.0, 1.0]), F(4e9), F(2e9), alpha, bw,
                                 ps_path=(alpha, bw, alpha, bw))
    assert (float(grad), float(param)) == pytest.approx((one_round(4e9), one_round(2e9)), rel=1e-6)
    fwd, bwd = fsdp_microbatch_comm_s(Sharding.FSDP, k, k, F(1e9), F(2e9), alpha, bw, calls=F(1.0),
                                      algo=DpAlgo.PS, ps_path=(alpha, bw, alpha, bw))
    assert float(fwd) == pytest.approx(one_round(1e9), rel=1e-6)  # a pull of the layer's weights
    assert float(bwd) == pytest.approx(one_round(1e9) + one_round(2e9), rel=1e-6)  # pull again, push gradients


def _two_regions(transport):
    sc = sx.load_scenario(os.path.join(CONFIGS, "scenarios", "two-regions.yaml"))
    return sc, {"tp": 8, "cp": 1, "pp": 4, "vpp": 1, "mbs": 1, "schedule": "1f1b", "recompute": "full",
                "sharding": "zero1", "placement": "tp-cp-pp-dp", "transport": transport, "overlap": "dp+tp"}


def test_each_peer_is_a_connection_with_its_own_window():
    """Over a window-limited WAN (NCCL's TCP sockets across regions: transports.yaml tcp_wan) the server's gradient
    traffic opens one connection to each peer, and a GPU's bandwidth across the level is that many windows, where
    the ring has one; its rounds wait for the slowest of the all-to-all's flows."""
    sc, over = _two_regions("tcp_wan")
    params = server_params(sc)
    ctx = context(params, sc.baseline_design("production", over | {"dp_algo": "ps"}))
    k = ctx.grad_k
    peers = all_to_all_flows_per_level(k) / jnp.prod(k)
    region = int(jnp.argmax(params.net.latency_s))  # the cross-region level (50 ms)
    assert float(ctx.xb[region]) > 0 and float(k[region]) == 2.0 and float(peers[region]) > 1.0
    # the ring's one connection is window-limited there (TCP across 50 ms): its rate is the cap
    link = float(params.net.bw_Bps[region] * ctx.gradient.factor[region]
                 * jnp.minimum(1.0, 1.0 / params.net.oversub[region]))
    assert float(ctx.bw_grad_Bps[region]) < 0.5 * link
    # the server has peers x the windows, up to what the (oversubscribed) link gives one GPU
    expected = min(float(peers[region]) * float(ctx.bw_grad_Bps[region]), link)
    assert float(ctx.ps_bw_grad_Bps[region]) == pytest.approx(expected, rel=1e-5)
    assert float(ctx.ps_net.bw_Bps[region]) > float(ctx.dp_net.bw_Bps[region])
    # more flows per round: a round waits at least as long for its slowest flow
    assert jnp.all(all_to_all_flows_per_level(k) >= ring_flows_per_level(k))
    assert jnp.all(ctx.ps_alpha_grad_s >= ctx.alpha_grad_s)
    # the dp term's reductions read those paths: with the ring's one window the server's all-reduce of 1 GB over
    # this gradient group would take longer
    one = F(1e9)
    ring = (ctx.dp_net.alpha_s, ctx.dp_net.bw_Bps, ctx.alpha_grad_s, ctx.bw_grad_Bps)
    ring_windows, _ = dp_step_comm_s(Sharding.ZERO0, DpAlgo.PS, k, k, F([1.0] * len(k)), one, one, *ring,
                                     ps_path=ring)
    own_windows, _ = dp_step_comm_s(Sharding.ZERO0, DpAlgo.PS, k, k, F([1.0] * len(k)), one, one, *ring,
                                    ps_path=server_paths(ctx))
    assert float(own_windows) < float(ring_windows)


def test_cross_region_bytes_are_every_gpus_share_for_remote_servers():
    sc, over = _two_regions("ecmp_gbn")
    params = server_params(sc)
    d = sc.baseline_design("production", over | {"dp_algo": "ps", "sharding": "zero0"})
    ctx = context(params, d)
    k = ctx.grad_k
    got = float(_cross_bytes(ctx, d, params.train, k, ctx.grad_k_building, ctx.grad_k_across, F(1.0), F(1.0)))
    m = jnp.cumprod(k)
    below = jnp.concatenate([jnp.ones(1), m[:-1]])
    per_gpu = float(jnp.sum(ctx.xb * 2.0 * (m - below) / m[-1])) * float(params.train.grad_reduce_bytes)
    assert got == pytest.approx(per_gpu * float(params.train.n_gpus), rel=1e-5)
    ring_d = d._replace(dp_algo=jnp.int32(int(DpAlgo.RING)))
    ring = float(_cross_bytes(ctx, ring_d, params.train, k, ctx.grad_k_building, ctx.grad_k_across, F(1.0), F(1.0)))
    assert got > ring  # every GPU sends its remote share across, not one ring edge per NIC


def test_only_a_program_that_may_meet_a_server_carries_it():
    """The server's paths and branches are static (params.Topology.parameter_server): absent from a scenario whose
    space and baselines have no ps (its sweep computes nothing for them), added by evaluate() for a design that asks,
    and the same numbers either way for every other design."""
    sc, over = _two_regions("tcp_wan")
    params = build_params(sc)
    assert not params.topology.parameter_server
    ring_d, ps_d = (sc.baseline_design("production", over | {"dp_algo": a}) for a in ("ring", "ps"))
    assert context(params, ring_d).ps_net is None
    assert evaluate(sc, ring_d).step_time_s[0] == evaluate(sc, ring_d, server_params(sc)).step_time_s[0]
    ps, ring = evaluate(sc, ps_d), evaluate(sc, ring_d)
    assert float(ps.step_time_s[0]) == float(evaluate(sc, ps_d, server_params(sc)).step_time_s[0])
    assert float(ps.breakdown.dp_exposed[0]) != float(ring.breakdown.dp_exposed[0])

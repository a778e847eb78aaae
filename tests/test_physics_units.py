"""Hand-derived golden values for the formula kernels (one physical concern each)."""
import math

import numpy as np
import pytest

from sax_jax.cost import collectives as coll
from sax_jax.cost.compute import layer_flops, model_flops_per_sequence
from sax_jax.cost.memory import activation_bytes_per_layer
from sax_jax.cost.pipeline import pipeline_time_s
from sax_jax.cost.transport import ecmp_efficiency, expected_extra_rounds, spray_efficiency

from conftest import f32 as F, hand_train


def train(sp=1.0, flash=0.0):
    return hand_train(sp, flash)


# ---------------------------------------------------------------------------------------------- compute
def test_layer_flops_match_narayanan_24bsh2(m22):
    b, s, h = 4, 2048, 6144
    qkv, proj, mlp, attn = layer_flops(F(b), F(s), m22, 0.0)
    assert float(qkv + proj + mlp) == pytest.approx(24 * b * s * h**2, rel=1e-6)
    assert float(attn) == pytest.approx(4 * b * s**2 * h, rel=1e-6)


def test_model_flops_per_sequence_narayanan_formula(m22):
    s, L, h, V = 2048, 48, 6144, 51200
    expected = 72 * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))
    assert float(model_flops_per_sequence(F(s), m22)) == pytest.approx(expected, rel=1e-5)


# ---------------------------------------------------------------------------------------------- memory
# Korthikanti et al. 2022, Table 2, MHA with f = 4h: bytes per layer per microbatch.
@pytest.mark.parametrize("t", [1, 2, 8])
def test_activation_memory_korthikanti(m22, t):
    s, b, h, a = 2048, 4, 6144, 64
    sbh = s * b * h
    act = lambda rec, sp, flash=0.0: float(activation_bytes_per_layer(  # noqa: E731
        F(b), F(s), F(t), F(1), rec, m22, train(sp, flash)))
    assert act(0, 1.0) == pytest.approx(sbh * (34 + 5 * a * s / h) / t, rel=1e-6)  # TP + SP
    assert act(0, 0.0) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)), rel=1e-6)  # TP only
    assert act(1, 1.0) == pytest.approx(34 * sbh / t, rel=1e-6)  # selective + SP
    assert act(2, 0.0) == pytest.approx(2 * sbh, rel=1e-6)  # full, no SP
    assert act(0, 1.0, flash=1.0) == pytest.approx(34 * sbh / t, rel=1e-6)  # flash drops the 5as/h term


def test_context_parallel_divides_sequence(m22):
    one = activation_bytes_per_layer(F(1), F(4096), F(8), F(1), 1, m22, train())
    two = activation_bytes_per_layer(F(1), F(4096), F(8), F(2), 1, m22, train())
    assert float(two) == pytest.approx(float(one) / 2, rel=1e-6)


# ---------------------------------------------------------------------------------------------- collectives
K = F([8, 4, 1])
M = F([8, 32, 32])
ALPHA = F([1e-6, 1e-5, 1e-4])
BW = F([1e11, 1e10, 1e9])
S = 1e9


def test_ring_allreduce_golden():
    # n = 32; per lap 28 hops inside nodes (1e-6) and 4 across them (1e-5): mean hop 6.8e-5/32 = 2.125e-6;
    # bandwidth bottleneck = building (1e10 B/s): 2*31*2.125e-6 + 2*31/32*1e9/1e10. The all-reduce spans nodes, so
    # NCCL's ring plateau stretches Simple's latency, base 8.4e-6 included, by 1.4 (both hops sit under NCCL's own)
    assert float(coll.ring_allreduce_s(K, S, ALPHA, BW)) == pytest.approx(
        1.3175e-4 + 0.19375 + 0.4 * (8.4e-6 + 1.3175e-4), rel=1e-5)
    assert float(coll.ring_reduce_scatter_s(K, S, ALPHA, BW)) == pytest.approx((1.3175e-4 + 0.19375) / 2, rel=1e-5)


def test_tree_allreduce_golden():
    # latency 2 (3 * 1e-6 + 2 * 1e-5); bytes: S up and down through each level, spread over the links of the GPUs
    # below it: max(2 * 1e9 / 1e11, 2 * 1e9 / (8 * 1e10)) = 0.025 (one NIC's 2 * 1e9 / 1e10 = 0.2 before)
    assert float(coll.tree_allreduce_s(K, S, ALPHA, BW)) == pytest.approx(0.025046, rel=1e-5)


def test_tree_across_nodes_uses_every_nic_of_a_node_as_the_ring_does():
    # 64 nodes x 8 GPUs, 1 GB: a node sends and receives S once through the network over its 8 NICs, 2e9 / (8 x 46e9)
    # = 5.43 ms, about the multi-rail ring's 2 x 511/512 of it; latency 2 (3 x 3 us + 6 x 8 us) = 114 us (Simple)
    k, alpha, bw = F([8.0, 64.0]), F([3e-6, 8e-6]), F([386e9, 46e9])
    tree = float(coll.tree_allreduce_s(k, 1e9, alpha, bw))
    assert tree == pytest.approx(2e9 / (8 * 46e9) + 114e-6, rel=1e-5)
    ring_bytes_s = 2 * 511 / 512 * 1e9 / (8 * 46e9)
    assert tree < 1.05 * ring_bytes_s


def test_hierarchical_allreduce_golden():
    # node: 2*7*1e-6 + 2*7/8*1e9/1e11; building: 2*3*1e-5 + 2*3/4*(1e9/8)/1e10, a ring all-reduce across nodes
    # under Simple, so with NCCL's plateau: 0.4 (8.4e-6 + 6e-5)
    expected = 1.4e-5 + 0.0175 + 6e-5 + 0.01875 + 0.4 * (8.4e-6 + 6e-5)
    assert float(coll.hierarchical_allreduce_s(K, S, ALPHA, BW)) == pytest.approx(expected, rel=1e-5)


def test_all_to_all_golden():
    # node: 7*1e-6 + 7/32*1e9/1e11; building: 3*1e-5 + 24/32*1e9/1e10
    expected = 7e-6 + 7 / 32 * 1e-2 + 3e-5 + 0.075
    assert float(coll.all_to_all_s(M, K, S, ALPHA, BW)) == pytest.approx(expected, rel=1e-5)


def test_single_member_groups_cost_nothing():
    one = F([1, 1, 1])
    for fn in (coll.ring_allreduce_s, coll.tree_allreduce_s, coll.hierarchical_allreduce_s):
        assert float(fn(one, S, ALPHA, BW)) == 0.0


# ---------------------------------------------------------------------------------------------- transport
def test_ecmp_eight_flows_on_eight_paths():
    # E[max] of 8 Poisson(1) loads, computed independently by direct summation of the max's tail
    p = np.array([math.exp(-1) / math.factorial(k) for k in range(40)])
    cdf = np.cumsum(p)
    e_max = np.sum(1 - cdf**8)
    assert float(ecmp_efficiency(F(8), F(8))) == pytest.approx(1 / e_max, rel=1e-4)
    assert 0.38 < 1 / e_max < 0.40  # DESIGN.md: ~0.39


def test_ecmp_one_path_and_many_qps():
    assert float(ecmp_efficiency(F(4), F(1))) == pytest.approx(1.0, rel=1e-5)
    effs = [float(ecmp_efficiency(F(8 * q), F(8))) for q in (1, 2, 4, 16)]
    assert effs == sorted(effs) and effs[-1] > 0.7  # more QPs -> more flows -> better balance


def test_spray_efficiency_golden():
    assert float(spray_efficiency(F(8), F(1e4))) == pytest.approx(1 - math.sqrt(2 * 8 * math.log(8) / 1e4), rel=1e-5)
    assert float(spray_efficiency(F(1), F(10))) == pytest.approx(1.0)


def test_selective_repeat_tail_rounds():
    # n p small: E[R] ~ n p + n p^2 + ...
    p, n = 1e-5, 1000
    expected = sum(1 - (1 - p**r) ** n for r in range(1, 9))
    assert float(expected_extra_rounds(F(p), F(n))) == pytest.approx(expected, rel=1e-3)


# ---------------------------------------------------------------------------------------------- pipeline
def pipe(schedule, p=4, m=8, v=1, hop=(0.0, 0.0), hops=None, m_pp=None, k_pp=None):
    m_pp = F(m_pp if m_pp is not None else [2, 4])
    k_pp = F(k_pp if k_pp is not None else [2, 2])
    hops = F(hops if hops is not None else [2, 1])
    total, base, extra = pipeline_time_s(schedule, F(p), F(m), F(v), F(1.0), F(2.0), F(1.0), F(hop), hops,
                                         m_pp, k_pp)
    return float(total), float(base), float(extra)


@pytest.mark.parametrize("schedule,expected", [
    (0, (8 + 3) * 3),  # GPipe: (m + p - 1)(tF + tB)
    (1, (8 + 3) * 3),  # 1F1B
    (2, 8 * 3 + 3 * 3 / 2),  # interleaved v=2: (p-1)(tF+tB)/v
    (3, 8 * 3 + 3 * (1 + 1 - 1)),  # ZB-H1: (p-1)(F + B - W), B = tB - tW = 1
    (4, 8 * 3 + 0),  # ZB-H2: (p-1)(F + B - 2W) = 0
    (5, (8 + 3) * 3),  # latency-aware without slow hops = 1F1B
])
def test_bubbles_without_hops(schedule, expected):
    total, base, _ = pipe(schedule, v=2 if schedule == 2 else 1)
    assert total == pytest.approx(expected, rel=1e-6) and base == pytest.approx(expected, rel=1e-6)


def test_one_slow_hop_stretches_every_1f1b_cycle_by_c():
    # p = 2, the only hop crosses a building (c = 0.3): the first stage keeps 2 microbatches in flight,
    # a round trip takes 2 (tF + tB) + 2c, so each steady cycle is tF + tB + c (DESIGN.md section 5).
    kw = dict(p=2, m=8, hop=(0.0, 0.3), hops=(0, 1), m_pp=(1, 2), k_pp=(1, 2))
    total, base, _ = pipe(1, **kw)
    assert base == pytest.approx(9 * 3)
    assert total == pytest.approx(27 + 2 * 0.3 + 7 * 0.3, rel=1e-6)
    # latency-aware recovers (m + p - 1)(tF + tB) + 2 sum c, paying ceil(2c/T0) extra warm-up microbatches
    total_la, _, extra = pipe(5, **kw)
    assert total_la == pytest.approx(27 + 0.6, rel=1e-6)
    assert extra == 1.0


def test_stretch_of_a_middle_hop():
    # p = 4 in two units of 2; the middle hop costs c. Stage 1 keeps 3 in flight (a round trip's bound: cycle
    # 3 + 2c/3), but stages 1 and 2 differ by one microbatch of warm-up, so every cycle after stage 1's warm-up of
    # 2 lasts T0 + c: m - 2 = 6 of them (pipeline.pair_stretch; a discrete-event replay of the order pays the same
    # 2.4, tests/test_pipeline_slow_hop.py)
    total, _, _ = pipe(1, hop=(0.0, 0.3))
    assert total == pytest.approx(33 + 0.6 + 6 * 0.3, rel=1e-6)
    gpipe, _, _ = pipe(0, hop=(0.0, 0.3))
    assert gpipe == pytest.approx(33 + 0.6, rel=1e-6)  # GPipe keeps all m in flight: fill/drain only


def test_zero_bubble_cannot_beat_the_critical_path_with_few_microbatches():
    # m = 1: nothing to fill the bubble with; the microbatch walks F and B through all 4 stages, then one W
    for schedule in (3, 4):
        total, _, _ = pipe(schedule, m=1)
        assert total == pytest.approx(4 * (1 + 1) + 1, rel=1e-6)
    # many microbatches: the steady-state formulas hold
    assert pipe(4, m=64)[0] == pytest.approx(64 * 3, rel=1e-6)

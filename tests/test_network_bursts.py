"""Microbursts, per-round tails, bounded loss by training phase, plane switches and second failures (issue #13 items
3-4): each formula against a hand calculation from its source, invariants, no NaN over wide inputs (hypothesis), the
new Cost fields in `sax eval --json`, `sax sweep --objective goodput`, and config errors."""
import json
import math
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sax_jax.config import load_scenario
from sax_jax.cost import bursts
from sax_jax.cost.goodput import second_failure_probability
from sax_jax.evaluate import evaluate, evaluate_one
from sax_jax.params import build_params
from sax_jax.specs import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def f64(x):
    return float(np.asarray(x, np.float64))


# ------------------------------------------------------------------------------------- burst model, by hand
# a 100 Gb/s port (12.5e9 B/s), 512 KiB buffer, bursts at 3x lasting 50 us on average, 200 per second
C, Q, RHO, D, LAM = 12.5e9, 524288.0, 3.0, 50e-6, 200.0


def test_overflow_probability_is_exp_of_fill_time_over_duration():
    # t_f = Q / ((rho - 1) C) = 524288 / 25e9 = 20.97 us; p = exp(-20.97 / 50) = 0.65742 (fluid queue, exp. durations)
    t_f = Q / ((RHO - 1) * C)
    assert t_f == pytest.approx(20.97152e-6)
    assert f64(bursts.overflow_probability(Q, RHO, C, D)) == pytest.approx(math.exp(-t_f / D), rel=1e-6)
    assert f64(bursts.overflow_probability(Q, RHO, C, D)) == pytest.approx(0.65742, abs=1e-5)
    assert f64(bursts.overflow_probability(Q, 1.0, C, D)) == 0.0  # no overload, no overflow
    assert f64(bursts.overflow_probability(0.0, RHO, C, D)) == pytest.approx(1.0)  # no buffer: every burst


def test_per_round_loss_probability_golden():
    # a 1 MiB round: T = 2^20 / 12.5e9 + 20 us = 103.886 us; pi = 1 - exp(-200 x 0.65742 x (T + 50 us)) = 0.020030
    t = 2**20 / C + 20e-6
    p_ovf = math.exp(-Q / ((RHO - 1) * C * D))
    want = 1 - math.exp(-LAM * p_ovf * (t + D))
    assert want == pytest.approx(0.020030, abs=2e-6)
    b = bursts.burst_round(LAM, D, RHO, Q, C, t)
    assert f64(b.pi) == pytest.approx(want, rel=1e-5)
    # hit round: overlap o = D (1 - e^(-T/D)) = 43.74 us, lost f = (2/3) o / T = 0.2807, tail o / T = 0.4211
    o = D * (1 - math.exp(-t / D))
    assert f64(b.overlap_s) == pytest.approx(o, rel=1e-5)
    assert f64(b.tail_lost) == pytest.approx(o / t, rel=1e-5)
    assert f64(b.lost_fraction) == pytest.approx((1 - 1 / RHO) * o / t, rel=1e-5)
    assert f64(b.queue_s) == pytest.approx(Q / C, rel=1e-6)


def test_recovery_delays_golden():
    t = 2**20 / C + 20e-6
    b = bursts.burst_round(LAM, D, RHO, Q, C, t)
    o = D * (1 - math.exp(-t / D))
    f, tail, r, n, tau = (1 - 1 / RHO) * o / t, o / t, 20e-6, 2**20 / 4096, 4096 / C
    w = min(n, C * r / 4096)  # 61.04 packets in flight
    sr = Q / C + r + f * n * tau + tail * 100e-6
    gbn = Q / C + o + r + w * tau + tail * 1e-3
    assert f64(bursts.selective_repeat_delay_s(b, r, n, tau, 100e-6)) == pytest.approx(sr, rel=1e-5)
    assert f64(bursts.go_back_n_delay_s(b, r, w, tau, 1e-3)) == pytest.approx(gbn, rel=1e-5)
    # by hand: SR = 41.94 + 20 + 23.55 + 42.10 = 127.6 us; GBN = 41.94 + 43.74 + 20 + 20 + 421.0 = 546.7 us
    assert sr == pytest.approx(127.59e-6, rel=1e-3) and gbn == pytest.approx(546.71e-6, rel=1e-3)
    # bounded loss: within the tolerance the round ends at Q/C + deadline and drops f; beyond it, SR
    d, dropped = bursts.bounded_loss_delay_s(b, jnp.float32(sr), 20e-6, 0.3)
    assert f64(d) == pytest.approx(Q / C + 20e-6, rel=1e-5) and f64(dropped) == pytest.approx(f, rel=1e-5)
    d, dropped = bursts.bounded_loss_delay_s(b, jnp.float32(sr), 20e-6, 0.02)
    assert f64(d) == pytest.approx(sr, rel=1e-5) and f64(dropped) == 0.0


def test_expected_max_over_flows_is_the_two_point_extreme_value():
    # max of n iid {0 w.p. 1-pi, d w.p. pi} is d w.p. 1 - (1-pi)^n (F_max = F^n)
    for pi, n in ((0.02, 1), (0.02, 256), (0.5, 3), (1e-6, 1e5)):
        assert f64(bursts.expected_max_delay_s(jnp.float32(pi), 1.0, jnp.float32(n))) == \
            pytest.approx(1 - (1 - pi) ** n, rel=1e-4)
    # Monte Carlo check of the same law
    rng = np.random.default_rng(0)
    hits = rng.random((20000, 64)) < 0.03
    assert hits.any(axis=1).mean() == pytest.approx(f64(bursts.expected_max_delay_s(0.03, 1.0, 64.0)), abs=0.01)


def test_ring_flows_and_variance_formulas():
    k = jnp.asarray([8.0, 256.0, 2.0])  # 2 buildings x 256 nodes x 8 GPUs: 3584 hops in nodes, 510, 2
    np.testing.assert_allclose(np.asarray(bursts.ring_flows_per_level(k)), [3584, 510, 2])
    assert f64(bursts.tolerated_loss_cap(0.05)) == pytest.approx(0.05 / 1.05)
    assert f64(bursts.variance_increase(0.05 / 1.05)) == pytest.approx(0.05, rel=1e-5)
    # unbiased rescaling of a Bernoulli keep mask: Var = g^2 d / (1 - d), Monte Carlo
    d = 0.1
    m = (np.random.default_rng(1).random(400_000) > d) / (1 - d)
    assert m.mean() == pytest.approx(1.0, abs=5e-3) and m.var() == pytest.approx(d / (1 - d), rel=0.02)


# ------------------------------------------------------------------------------------- invariants
@settings(max_examples=200, deadline=None)
@given(rate=st.floats(0, 1e7), dur=st.floats(1e-9, 10.0), rho=st.floats(1.0, 1000.0), buf=st.floats(0, 1e12),
       port=st.floats(1e6, 1e12), round_s=st.floats(1e-9, 100.0), flows=st.floats(0, 1e8),
       q=st.floats(0, 0.999), deadline=st.floats(0, 100.0))
def test_no_nan_and_more_buffer_never_more_loss(rate, dur, rho, buf, port, round_s, flows, q, deadline):
    b = bursts.burst_round(rate, dur, rho, buf, port, round_s)
    b2 = bursts.burst_round(rate, dur, rho, buf * 2 + 1e3, port, round_s)
    sr = bursts.selective_repeat_delay_s(b, 1e-5, 100.0, 1e-7, 1e-4)
    vals = [*b, sr, bursts.go_back_n_delay_s(b, 1e-5, 50.0, 1e-7, 1e-3), *bursts.bounded_loss_delay_s(b, sr, deadline, q),
            bursts.expected_max_delay_s(b.pi, sr, flows)]
    assert all(np.all(np.isfinite(np.asarray(v))) for v in vals)
    assert 0.0 <= f64(b.pi) <= 1.0 and 0.0 <= f64(b.lost_fraction) < 1.0
    assert f64(b2.pi) <= f64(b.pi) + 1e-7  # more buffer never more loss
    assert f64(bursts.bounded_loss_delay_s(b, sr, deadline, q)[0]) <= f64(sr) + 1e-9  # never slower than SR


def test_recovery_order_gbn_ge_sr_ge_bounded():
    for rate in (10.0, 200.0, 5000.0):
        for size in (2**19, 2**22, 2**26):
            t = size / C + 20e-6
            b = bursts.burst_round(rate, D, RHO, Q, C, t)
            n = size / 4096
            sr = f64(bursts.selective_repeat_delay_s(b, 20e-6, n, 4096 / C, 1e-3))
            gbn = f64(bursts.go_back_n_delay_s(b, 20e-6, min(n, C * 20e-6 / 4096), 4096 / C, 1e-3))
            bl = f64(bursts.bounded_loss_delay_s(b, jnp.float32(sr), 20e-6, 0.5)[0])
            assert gbn >= sr >= bl


@pytest.fixture(scope="module")
def dblp():
    return load_scenario("dblp-microbursts")


def test_bursts_slow_every_transport_and_more_buffer_never_slows_roce(dblp):
    p0 = build_params(dblp)
    calm = p0._replace(net=p0.net._replace(burst_rate_per_s=jnp.zeros_like(p0.net.burst_rate_per_s)))
    for t in ("ecmp_gbn", "spray_sr", "dblp"):
        d = dblp.baseline_design("roce", {"transport": t, "overlap": "none"})
        assert float(evaluate(dblp, d, calm).step_time_s[0]) < float(evaluate(dblp, d, p0).step_time_s[0])
    d = dblp.baseline_design("roce", {"overlap": "none", "channels": 4})
    loss = [float(evaluate(dblp, d, p0._replace(net=p0.net._replace(buffer_bytes=p0.net.buffer_bytes * 0 + q))
                           ).burst_round_loss[0]) for q in (2**16, 2**18, 2**20, 2**22)]
    assert all(b <= a for a, b in zip(loss, loss[1:])) and loss[0] > loss[-1]


def test_bounded_loss_drops_only_gradient_traffic(dblp):
    """A bounded-loss transport delivers activations, pipeline and parameter traffic by selective repeat: its
    non-gradient latency and bandwidth equal spray_sr's; only the gradient path differs."""
    from sax_jax.cost.context import context
    import jax
    p = build_params(dblp)

    def ctx(t):
        d = dblp.baseline_design("roce", {"transport": t})
        return context(p, jax.tree_util.tree_map(lambda x: jnp.asarray(x).reshape(()), d))

    sr, bl = ctx("spray_sr"), ctx("dblp")
    np.testing.assert_allclose(np.asarray(bl.alpha_s), np.asarray(sr.alpha_s), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(bl.bw_Bps), np.asarray(sr.bw_Bps), rtol=1e-6)
    assert float(bl.alpha_grad_s[1]) < float(sr.alpha_grad_s[1])
    assert float(bl.gradient.dropped) > 0 and float(sr.gradient.dropped) == 0


def test_all_to_all_flows_per_level_by_hand():
    # EP 16 = 4 GPUs x 2 nodes x 2 buildings: each GPU reaches 3 peers in its node, 4 through the node level and 8
    # through the building level; 16 GPUs send at once
    k = jnp.asarray([4.0, 2.0, 2.0])
    np.testing.assert_allclose(np.asarray(bursts.all_to_all_flows_per_level(k)), [16 * 3, 16 * 4, 16 * 8])
    np.testing.assert_allclose(np.asarray(bursts.all_to_all_flows_per_level(jnp.asarray([8.0, 1.0, 1.0]))),
                               [56, 0, 0])  # inside one node nothing crosses a network level


def _ctx(scen, p, **axes):
    from sax_jax.cost.context import context
    import jax
    d = scen.baseline_design("roce", axes)
    return context(p, jax.tree_util.tree_map(lambda x: jnp.asarray(x).reshape(()), d))


def test_collectives_wait_for_their_slowest_flow(dblp):
    """A synchronous collective's round waits for the slowest flow it sends across a level (cost/bursts.py): TP, CP
    and EP rounds across nodes pay d (1 - (1 - pi)^F) per round, a pipeline hop (one flow) pi d; without bursts
    every path is the one-flow path exactly."""
    from sax_jax.cost.bursts import ring_flows_per_level
    from sax_jax.cost.transport import ecmp_table, reliable_parts
    p = build_params(dblp)
    c = _ctx(dblp, p, tp=8, cp=2, pp=1, transport="spray_sr")
    t = int(dblp.baseline_design("roce", {"transport": "spray_sr"}).transport)
    rel = reliable_parts(p.net, p.transport, ecmp_table(p.net), t, jnp.float32(0), jnp.float32(0))
    net = int(np.argmax(np.asarray(c.is_network)))  # the first network level
    pi, delay, lat = (float(np.asarray(x)[net]) for x in (rel.pi, rel.delay_s, p.net.latency_s))
    assert 0 < pi < 1 and delay > 0
    for path, flows in ((c.cp_net, ring_flows_per_level(c.cp.participants)),
                        (c.dp_net, ring_flows_per_level(c.grad_k))):
        f = float(np.asarray(flows)[net])
        assert f > 1
        want = lat + float(np.asarray(rel.tail_s)[net]) + delay * (1 - (1 - pi) ** f)
        assert float(path.alpha_s[net]) == pytest.approx(want, rel=1e-5)
        assert float(path.alpha_s[net]) > float(c.alpha_s[net])  # more than one flow's pi d
        assert float(path.bw_Bps[net]) < float(c.bw_Bps[net])
    assert float(c.alpha_s[net]) == pytest.approx(lat + float(np.asarray(rel.tail_s)[net]) + pi * delay, rel=1e-5)
    calm = p._replace(net=p.net._replace(burst_rate_per_s=jnp.zeros_like(p.net.burst_rate_per_s)))
    c0 = _ctx(dblp, calm, tp=8, cp=2, pp=1, transport="spray_sr")
    for path in (c0.tp_net, c0.cp_net, c0.ep_net, c0.dp_net):
        np.testing.assert_array_equal(np.asarray(path.alpha_s), np.asarray(c0.alpha_s))
        np.testing.assert_array_equal(np.asarray(path.bw_Bps), np.asarray(c0.bw_Bps))
    # the step: a CP ring across nodes costs more under bursts than under the one-flow charge it had
    d = dblp.baseline_design("roce", {"tp": 8, "cp": 2, "pp": 1, "transport": "spray_sr"})
    assert float(evaluate(dblp, d, p).breakdown.cp[0]) > float(evaluate(dblp, d, calm).breakdown.cp[0])


def test_dblp_follows_its_phase_schedule_and_the_variance_tolerance(dblp):
    t = next(x for x in dblp.transports if x.name == "dblp")
    np.testing.assert_allclose(np.asarray(t.phases()), [[0.1, 0.0], [0.8, 0.02], [0.1, 0.005]], rtol=1e-9)
    p = build_params(dblp)
    i = [x.name for x in dblp.transports].index("dblp")
    np.testing.assert_allclose(np.asarray(p.transport.phase_weight[i]), [0.1, 0.8, 0.1, 0.0], rtol=1e-6)
    d = dblp.baseline_design("dblp")
    c = evaluate_one(dblp, d)
    tol = dblp.training.gradient_variance_tolerance
    assert 0 < c["gradient_variance_increase"] <= tol
    assert c["gradient_variance_increase"] == pytest.approx(c["gradient_drop_fraction"], rel=0.05)  # d/(1-d) ~ d
    # a tighter tolerance drops less and never runs faster
    tight = p._replace(train=p.train._replace(grad_var_tol=jnp.float32(1e-4)))
    ct = evaluate(dblp, d, tight)
    assert float(ct.gradient_variance_increase[0]) <= 1e-4 * 1.001
    assert float(ct.step_time_s[0]) >= c["step_time_s"] * (1 - 1e-6)
    # no drops in the first phase: a schedule of only that phase drops nothing
    none = p._replace(transport=p.transport._replace(
        phase_weight=p.transport.phase_weight.at[i].set(jnp.asarray([1.0, 0, 0, 0]))))
    assert float(evaluate(dblp, d, none).gradient_drop_fraction[0]) == 0.0


# ------------------------------------------------------------------------------------- plane switches, f = 2
@pytest.fixture(scope="module")
def mrc():
    return load_scenario("mrc-fabric")


def _good(sc, params, design):
    return float(np.asarray(evaluate(sc, design, params).goodput_tokens_per_s)[0])


def _net(params, **kw):
    return params._replace(net=params.net._replace(**{k: jnp.asarray(v, jnp.float32) for k, v in kw.items()}))


def test_second_failure_probability_golden():
    # nu = 1e-6/s, P = 8, R = 4 h: 1 - exp(-1e-6 x 7/8 x 14400) = 0.012521
    assert f64(second_failure_probability(1e-6, 8.0, 14400.0)) == pytest.approx(0.012521, rel=1e-4)
    assert f64(second_failure_probability(1e-6, 1.0, 14400.0)) == 0.0  # one plane: no second one to lose


def test_switch_failures_interrupt_roce_and_degrade_mrc(mrc):
    p0 = build_params(mrc)
    roce, mrc_d = mrc.baseline_design("roce"), mrc.baseline_design("mrc")
    base = evaluate_one(mrc, roce)
    # by hand: 16,384 NICs x 8 planes / 256 per switch = 512 switches x 5.7e-6/h + 16,384 x 1.47e-6/h + GPUs
    want = 16384 * mrc.training.gpu_failures_per_gpu_hour + 512 * 5.7e-6 + 16384 * 1.47e-6
    assert base["interruptions_per_hour"] == pytest.approx(want, rel=1e-3)
    m = evaluate_one(mrc, mrc_d)
    assert m["interruptions_per_hour"] == pytest.approx(16384 * mrc.training.gpu_failures_per_gpu_hour, rel=1e-4)  # MRC survives both
    # higher switch failure rate never higher goodput; a longer repair never helps
    for d in (roce, mrc_d):
        g = [_good(mrc, _net(p0, switch_fail_per_s=np.asarray([0, r / 3600])), d) for r in (0, 1e-6, 1e-4, 1e-2)]
        assert all(b <= a * (1 + 1e-6) for a, b in zip(g, g[1:]))
        g = [_good(mrc, _net(p0, repair_s=np.asarray([rep, rep]), switch_fail_per_s=np.asarray([0, 1e-3 / 3600])), d)
             for rep in (60, 600, 3600, 14400, 1e6)]
        assert all(b <= a * (1 + 1e-6) for a, b in zip(g, g[1:]))


def test_more_planes_never_lower_goodput_with_switches_and_second_failures(mrc):
    """For the spraying MRC transport, with link and plane-switch failures (switch radix in ports scaling with the
    planes, as a fixed-bandwidth ASIC does) and second failures; two planes go dark on a second failure."""
    p0 = build_params(mrc)
    d = mrc.baseline_design("mrc")
    for repair in (600.0, 3600.0, 14400.0):
        for link, sw in ((1.47e-6, 5.7e-6), (1e-4, 1e-3)):
            got = []
            for planes in (1, 2, 3, 4, 8, 16):
                p = _net(p0, planes=np.asarray([1, planes]), repair_s=np.asarray([repair, repair]),
                         link_fail_per_s=np.asarray([0, link / 3600]), switch_fail_per_s=np.asarray([0, sw / 3600]),
                         gpus_per_switch=np.asarray([64, 32 * planes]))
                got.append(_good(mrc, p, d))
            assert all(b >= a * (1 - 1e-6) for a, b in zip(got, got[1:])), (repair, link, got)


def test_two_planes_go_dark_on_a_second_failure(mrc):
    p0 = build_params(mrc)
    d = mrc.baseline_design("mrc")
    kw = dict(repair_s=np.asarray([600.0, 600.0]), link_fail_per_s=np.asarray([0, 1e-3 / 3600]),
              switch_fail_per_s=np.asarray([0, 0.0]))
    two = evaluate(mrc, d, _net(p0, planes=np.asarray([1, 2]), **kw))
    three = evaluate(mrc, d, _net(p0, planes=np.asarray([1, 3]), **kw))
    gpu = 16384 * mrc.training.gpu_failures_per_gpu_hour
    # P = 2: NICs degraded at 16384 x 1e-3/h, each meets a second failure w.p. 1 - exp(-1e-3/3600 x 1/2 x 600)
    p2 = 1 - math.exp(-1e-3 / 3600 * 0.5 * 600)
    assert float(two.interruptions_per_hour[0]) == pytest.approx(gpu + 16384 * 1e-3 * p2, rel=1e-3)
    assert float(three.interruptions_per_hour[0]) == pytest.approx(gpu, rel=1e-4)


# ------------------------------------------------------------------------------------- CLI, config


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "sax_jax.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_eval_json_carries_every_new_cost_field():
    r = _cli("eval", "dblp-microbursts", "--baseline", "dblp", "--json")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    for k in ("burst_round_loss", "gradient_drop_fraction", "gradient_variance_increase", "goodput_tokens_per_s",
              "ettr", "interruptions_per_hour", "degraded_fraction", "checkpoint_interval_s"):
        assert isinstance(rec[k], float), k
    assert rec["gradient_drop_fraction"] > 0
    r = _cli("eval", "dblp-microbursts", "--baseline", "dblp")
    assert r.returncode == 0 and "microbursts, bounded loss" in r.stdout


def test_sweep_objective_goodput_on_the_command_line():
    r = _cli("sweep", "mrc-fabric", "--objective", "goodput", "--top", "3", "--json", "--no-progress",
             "--max-designs", "20000")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["objective"] == "goodput_tokens_per_s"
    goods = [t["goodput_tokens_per_s"] for t in out["top"]]
    assert goods == sorted(goods, reverse=True) and goods[0] > 0
    bad = _cli("sweep", "mrc-fabric", "--objective", "speed")
    assert bad.returncode == 2 and "--objective" in bad.stderr


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("patch, key", [
    ("loss_schedule: [[0.1, 0.0], [0.9, 2.0e-2], [1.0, 5.0e-3]]", None),
    ("loss_schedule: [[0.5, 0.0], [0.4, 2.0e-2], [1.0, 5.0e-3]]", "transports.dblp.loss_schedule[1]"),
    ("loss_schedule: [[0.5, 0.0], [0.9, 2.0e-2]]", "transports.dblp.loss_schedule"),
    ("loss_schedule: [[0.5, 0.0], [1.0, 1.5]]", "transports.dblp.loss_schedule[1]"),
    ("loss_schedule: [0.5, 1.0]", "transports.dblp.loss_schedule[0]"),
    ("loss_schedule: [[0.1, 0.0], [0.9, 2.0e-2], [1.0, 5.0e-3]]\n  survives_link_failure: false\n  rto_us: 0\n  "
     "deadline_us: 20\nx_unused:", "transports.dblp.rto_us"),
])
def test_bad_loss_schedule_names_file_and_key(tmp_path, patch, key):
    src = open(os.path.join(ROOT, "configs", "network", "transports.yaml")).read()
    orig = "loss_schedule: [[0.1, 0.0], [0.9, 2.0e-2], [1.0, 5.0e-3]]"
    assert orig in src
    if "x_unused" in patch:  # replace dblp's last keys (rto_us, deadline_us) instead of adding duplicates
        head = src[:src.index(orig)]
        text = head + patch.replace("\nx_unused:", "\n")
    else:
        text = src.replace(orig, patch)
    trp = _write(tmp_path, "tr.yaml", text)
    scen = open(os.path.join(ROOT, "configs", "scenarios", "dblp-microbursts.yaml")).read()
    scen = scen.replace("../network/transports.yaml", trp)
    for ref in ("../models/llama3-8B.yaml", "../systems/h100-cloud-100g-bursty.yaml"):
        scen = scen.replace(ref, os.path.join(ROOT, "configs", ref[3:]))
    path = _write(tmp_path, "s.yaml", scen)
    if key is None:
        load_scenario(path)
        return
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert key in str(err.value)


def test_bad_burst_and_switch_keys_name_the_key(tmp_path):
    sysrc = open(os.path.join(ROOT, "configs", "systems", "h100-cloud-100g-bursty.yaml")).read()
    sysrc = sysrc.replace("../hardware/H100-SXM-80GB.yaml", os.path.join(ROOT, "configs", "hardware", "H100-SXM-80GB.yaml"))
    from sax_jax.config import load_system
    for old, new, key in (("burst_overload: 3", "burst_overload: 0.5", "levels.building.burst_overload"),
                          ("burst_duration_us: 50", "burst_duration_us: 0", "levels.building.burst_duration_us"),
                          ("buffer_bytes: 524288", "buffer_bytes: -1", "levels.building.buffer_bytes"),
                          ("paths: 8", "paths: 8\n    gpus_per_switch: 2.5", "levels.building.gpus_per_switch"),
                          ("paths: 8", "paths: 8\n    switch_failures_per_switch_hour: 3",
                           "levels.building.switch_failures_per_switch_hour")):
        p = _write(tmp_path, "sys.yaml", sysrc.replace(old, new))
        with pytest.raises(ConfigError) as err:
            load_system(p)
        assert key in str(err.value), (key, str(err.value))


def test_network_studies_benchmark_runs():
    """benchmarks/network_studies.py: the cheap studies run and keep the seeds' ordering."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import network_studies as ns
    lb = ns.load_balancing()
    eff = lb["ecmp_efficiency_by_qps"]
    assert eff[1] < eff[4] < eff[16] < lb["spray_efficiency"] <= 1.0
    steps = lb["step_time_llama405b_tp8_cp2_pp8"]
    assert (steps["roce_ecmp_1qp"]["step_time_s"] > steps["roce_ecmp_4qp"]["step_time_s"]
            > steps["spray_selective_repeat"]["step_time_s"])
    mb = ns.microburst_round()
    assert mb["max_gbn_over_bounded"]["ratio"] > 2.0 and mb["max_sr_over_bounded"] >= 1.0
    gm = ns.goodput_month()
    assert gm["rows"]["mrc_8plane"]["interruptions_30_days"] < gm["rows"]["roce_ecmp_8plane"]["interruptions_30_days"]
    ck = ns.checkpoint_interval()
    assert ck["numeric_optimum_s"] == pytest.approx(ck["daly_interval_s"], rel=0.01)
    assert ck["ettr_at_daly"] >= ck["ettr_grid_max"] - 1e-5

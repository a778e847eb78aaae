"""Goodput (cost/goodput.py): each formula against its source, the Llama 3 interruption count, invariants over
planes, failure rates and repair time, no NaN over random designs, batch == single, and the goodput sweep."""
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from sax_jax.config import OBJECTIVES, load_scenario
from sax_jax.cost.goodput import (daly_interval_s, degradation_slowdown, useful_fraction, young_interval_s)
from sax_jax.evaluate import evaluate, evaluate_one
from sax_jax.params import build_params
from sax_jax.specs import ConfigError, Training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOURS_54_DAYS = 54 * 24


@pytest.fixture(scope="module")
def sc():
    return load_scenario("goodput")


def f64(x):
    return float(np.asarray(x, np.float64))


# ------------------------------------------------------------------------------------- formulas vs sources
def test_young_interval_is_sqrt_2_c_mtbf():
    # Young 1974: tau = sqrt(2 C M); C = 30 s, M = 3 h -> sqrt(648000) = 804.98 s
    assert f64(young_interval_s(jnp.float32(30.0), jnp.float32(10800.0))) == pytest.approx(804.984, rel=1e-5)


def test_daly_interval_higher_order_form():
    c, m = 30.0, 10800.0
    x = c / (2 * m)
    want = math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c  # Daly 2006, C < 2M
    assert f64(daly_interval_s(jnp.float32(c), jnp.float32(m))) == pytest.approx(want, rel=1e-5)
    assert want == pytest.approx(785.11, abs=0.01)  # by hand: 804.984 x (1 + 0.037268/3 + 0.0013889/9) - 30
    # C >= 2M: the interval is the MTBF
    assert f64(daly_interval_s(jnp.float32(500.0), jnp.float32(200.0))) == pytest.approx(200.0)


def test_useful_fraction_is_dalys_wall_time_model():
    tau, c, r, m = 800.0, 30.0, 600.0, 10800.0
    wall_per_solve = m * math.exp(r / m) * (math.exp((tau + c) / m) - 1) / tau  # Daly 2006: T_w / T_s
    got = f64(useful_fraction(jnp.float32(tau), jnp.float32(c), jnp.float32(r), jnp.float32(1 / m)))
    assert got == pytest.approx(1 / wall_per_solve, rel=1e-5)
    # by hand: 800 / (10800 x e^(600/10800) x (e^(830/10800) - 1)) = 800 / (10800 x 1.05713 x 0.079882) = 0.8772
    assert got == pytest.approx(0.8772, abs=1e-4)
    # no failures: only the checkpoint overhead is left, tau / (tau + C)
    assert f64(useful_fraction(jnp.float32(tau), jnp.float32(c), jnp.float32(r), jnp.float32(0.0))) == \
        pytest.approx(tau / (tau + c), rel=1e-5)


def test_daly_optimum_is_the_best_interval():
    c, r, lam = 30.0, 600.0, 1 / 10800.0
    best = f64(daly_interval_s(jnp.float32(c), jnp.float32(1 / lam)))
    taus = np.linspace(100.0, 4000.0, 400)
    fr = np.asarray(useful_fraction(jnp.asarray(taus, jnp.float32), c, r, lam))
    assert abs(taus[np.argmax(fr)] - best) < 30.0
    assert f64(useful_fraction(jnp.float32(best), c, r, lam)) >= fr.max() - 1e-6


def test_degradation_is_p_over_p_minus_f():
    assert f64(degradation_slowdown(jnp.float32(8.0))) == pytest.approx(8 / 7)
    assert f64(degradation_slowdown(jnp.float32(4.0), 2.0)) == pytest.approx(2.0)
    assert f64(degradation_slowdown(jnp.float32(2.0))) == pytest.approx(2.0)


def test_llama3_run_interruption_count(sc):
    """The defaults reproduce the Llama 3 405B run: 419 unexpected interruptions in 54 days on 16,384 GPUs (384
    non-network + 35 network switch/cable) for RoCE, which dies on a link failure; MRC on 4 planes survives the 35."""
    assert sc.system.n_gpus == 16384
    train_default = Training(global_batch_sequences=1, seq_len=1)
    assert train_default.gpu_failures_per_gpu_hour * 16384 * HOURS_54_DAYS == pytest.approx(384.0)
    roce = evaluate_one(sc, sc.baseline_design("production"))
    mrc = evaluate_one(sc, sc.baseline_design("production-mrc"))
    assert roce["interruptions_per_hour"] * HOURS_54_DAYS == pytest.approx(419.0, abs=1.0)
    assert mrc["interruptions_per_hour"] * HOURS_54_DAYS == pytest.approx(384.0, abs=1.0)
    for c in (roce, mrc):
        assert c["goodput_tokens_per_s"] == pytest.approx(c["tokens_per_s"] * c["ettr"], rel=1e-6)
        assert 0.8 < c["ettr"] < 0.95  # Meta reports > 90% effective training time with its faster restarts
    assert mrc["ettr"] > roce["ettr"]


def test_ettr_golden_value(sc):
    """ETTR of the RoCE baseline by hand: lambda = 16384 (1.81e-5 + 1.65e-6) / 3600 per s, Daly interval, no
    degraded time (the transport dies instead)."""
    c = evaluate_one(sc, sc.baseline_design("production"))
    lam = 16384 * (1.81e-5 + 1.65e-6) / 3600
    m, cw, r = 1 / lam, 30.0, 600.0
    x = cw / (2 * m)
    tau = math.sqrt(2 * cw * m) * (1 + math.sqrt(x) / 3 + x / 9) - cw
    want = tau / (m * math.exp(r / m) * (math.exp((tau + cw) / m) - 1))
    assert c["checkpoint_interval_s"] == pytest.approx(tau, rel=1e-4)
    assert c["ettr"] == pytest.approx(want, rel=1e-4)
    assert c["degraded_fraction"] == 0.0


# ------------------------------------------------------------------------------------- invariants
def _with(params, **net):
    return params._replace(net=params.net._replace(**{k: jnp.asarray(v, params.net.bw_Bps.dtype)
                                                      for k, v in net.items()}))


def _goodput(sc, params, design):
    return float(np.asarray(evaluate(sc, design, params).goodput_tokens_per_s)[0])


def _designs(sc):
    return [sc.baseline_design("production-mrc"), sc.baseline_design("production"),
            sc.baseline_design("production", {"transport": "spray_sr"})]


def test_more_planes_never_lower_goodput_for_a_spraying_transport(sc):
    p0 = build_params(sc)
    d = sc.baseline_design("production-mrc")
    for repair in (600.0, 14400.0, 1e6):
        for rate in (1.65e-6, 1e-4):
            got = []
            for planes in (1, 2, 3, 4, 8, 16):
                p = _with(p0, planes=np.where(np.arange(3) == 1, planes, 1.0),
                          repair_s=np.full(3, repair), link_fail_per_s=np.asarray([0, rate / 3600, 0]))
                got.append(_goodput(sc, p, d))
            assert all(b >= a * (1 - 1e-6) for a, b in zip(got, got[1:])), (repair, rate, got)
            assert got[-1] > got[0]  # one plane: a link failure kills; more: degraded or swapped


def test_higher_failure_rate_never_higher_goodput(sc):
    p0 = build_params(sc)
    for d in _designs(sc):
        prev = None
        for rate in (0.0, 1e-7, 1.65e-6, 1e-5, 1e-4):
            g = _goodput(sc, _with(p0, link_fail_per_s=np.asarray([0, rate / 3600, 0])), d)
            assert prev is None or g <= prev * (1 + 1e-6)
            prev = g
        prev = None
        for rate in (0.0, 1e-6, 1.81e-5, 1e-4):
            p = p0._replace(train=p0.train._replace(gpu_fail_per_s=jnp.float32(rate / 3600)))
            g = _goodput(sc, p, d)
            assert prev is None or g <= prev * (1 + 1e-6)
            prev = g


def test_longer_repair_never_helps(sc):
    p0 = build_params(sc)
    for d in _designs(sc):
        prev = None
        for repair in (60.0, 600.0, 1800.0, 3600.0, 14400.0, 1e6):
            g = _goodput(sc, _with(p0, repair_s=np.full(3, repair)), d)
            assert prev is None or g <= prev * (1 + 1e-6)
            prev = g


def test_flaps_stall_the_step_for_the_reroute_time(sc):
    p0 = build_params(sc)
    d = sc.baseline_design("production")
    base = evaluate(sc, d, p0)
    flap = 1e-5  # per link-hour: 16384 links -> 0.16384 flaps/h, 1 s reroute each
    c = evaluate(sc, d, _with(p0, link_flap_per_s=np.asarray([0, flap / 3600, 0])))
    work = float(base.step_time_s[0]) - float(base.breakdown.stall[0])
    stall_per_s = 16384 * flap / 3600 * 1.0 + 0.5 / 3600 * 1.0  # the campus level's routed-around failures
    assert float(c.breakdown.stall[0]) == pytest.approx(work * stall_per_s, rel=1e-3)


# ------------------------------------------------------------------------------------- batches
@pytest.mark.parametrize("name, n", [("default", 100_000), ("goodput", 100_000), ("dblp-microbursts", 20_000),
                                     ("mrc-fabric", 20_000)])
def test_no_nan_over_a_large_random_batch(name, n):
    s = load_scenario(name)
    idx = np.random.default_rng(0).integers(0, s.space.size, n)
    c = jax.device_get(evaluate(s, s.space.decode(jnp.asarray(idx, jnp.int32))))
    for field in ("goodput_tokens_per_s", "ettr", "interruptions_per_hour", "degraded_fraction",
                  "checkpoint_interval_s", "burst_round_loss", "gradient_drop_fraction",
                  "gradient_variance_increase", "raw_step_time_s"):
        assert np.all(np.isfinite(getattr(c, field))), field
    assert np.all((c.burst_round_loss >= 0) & (c.burst_round_loss <= 1))
    assert np.all(c.gradient_variance_increase <= s.training.gradient_variance_tolerance * 1.001)
    assert np.all((c.ettr > 0) & (c.ettr <= 1))
    assert np.all(c.goodput_tokens_per_s <= c.tokens_per_s * (1 + 1e-6))
    assert np.all((c.goodput_tokens_per_s > 0) == c.feasible)


def test_batch_equals_single(sc):
    idx = np.random.default_rng(1).integers(0, sc.space.size, 64)
    batch = jax.device_get(evaluate(sc, sc.space.decode(jnp.asarray(idx, jnp.int32))))
    for j in (0, 7, 31, 63):
        one = evaluate_one(sc, sc.space.decode(jnp.asarray(idx[j:j + 1], jnp.int32)))
        for field in ("goodput_tokens_per_s", "ettr", "interruptions_per_hour", "checkpoint_interval_s"):
            assert one[field] == pytest.approx(float(getattr(batch, field)[j]), rel=1e-6, abs=1e-12), field


# ------------------------------------------------------------------------------------- sweep, config, report
def test_goodput_is_a_sweep_objective(sc):
    assert "goodput_tokens_per_s" in OBJECTIVES and sc.objective == "goodput_tokens_per_s"
    res = sx.sweep(sc, top_k=5, max_designs=200_000, start=5_000_000, progress=False)
    goods = [r["goodput_tokens_per_s"] for r in res.top]
    assert goods == sorted(goods, reverse=True) and goods[0] > 0
    # brute force over the same range agrees on the best goodput
    idx = np.arange(5_000_000, 5_200_000)
    c = jax.device_get(evaluate(sc, sc.space.decode(jnp.asarray(idx, jnp.int32))))
    assert goods[0] == pytest.approx(float(np.max(c.goodput_tokens_per_s)), rel=1e-6)
    best = evaluate_one(sc, sc.space.decode(jnp.asarray([res.top[0]["index"]], jnp.int32)))
    assert best["goodput_tokens_per_s"] == pytest.approx(goods[0], rel=1e-6)


def _write(tmp_path, text, name):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_bad_goodput_keys_name_file_and_key(tmp_path):
    src = open(os.path.join(ROOT, "configs", "scenarios", "goodput.yaml")).read()
    sysrc = open(os.path.join(ROOT, "configs", "systems", "two-buildings-h100-4plane.yaml")).read()
    trsrc = open(os.path.join(ROOT, "configs", "network", "transports.yaml")).read()
    gpu = os.path.join(ROOT, "configs", "hardware", "H100-SXM-80GB.yaml")
    model = os.path.join(ROOT, "configs", "models", "llama3-405B.yaml")
    sysrc = sysrc.replace("../hardware/H100-SXM-80GB.yaml", gpu)
    base = src.replace("../models/llama3-405B.yaml", model)
    cases = [
        (base.replace("restart_s: 600", "restart_s: -5"), sysrc, trsrc, "training.restart_s"),
        (base.replace("checkpoint_write_s: 30", "checkpoint_write_s: 0"), sysrc, trsrc, "training.checkpoint_write_s"),
        (base, sysrc.replace("link_failures_per_link_hour: 1.65e-6", "link_failures_per_link_hour: 2"), trsrc,
         "levels.building.link_failures_per_link_hour"),
        (base, sysrc.replace("repair_s: 14400", "repair_s: 0"), trsrc, "levels.building.repair_s"),
        (base, sysrc, trsrc.replace("survives_link_failure: true", "survives_link_failure: yes please"),
         "transports.mrc_srv6.survives_link_failure"),
    ]
    for i, (scen, system, tr, key) in enumerate(cases):
        sp = _write(tmp_path, system, f"sys{i}.yaml")
        tp = _write(tmp_path, tr, f"tr{i}.yaml")
        text = scen.replace("../systems/two-buildings-h100-4plane.yaml", sp).replace("../network/transports.yaml", tp)
        path = _write(tmp_path, text, f"scen{i}.yaml")
        with pytest.raises(ConfigError) as err:
            load_scenario(path)
        assert key in str(err.value), (key, str(err.value))


def test_eval_record_carries_goodput(sc):
    from sax_jax.report import eval_record
    design = sc.baseline_design("production")
    rec = eval_record(sc, sc.space.to_dict(design), evaluate_one(sc, design))
    for k in ("goodput_tokens_per_s", "ettr", "interruptions_per_hour", "degraded_fraction", "checkpoint_interval_s"):
        assert isinstance(rec[k], float)


def test_searches_rank_by_goodput_under_that_objective(sc):
    """Evolution minimizes log(step / ETTR) under the goodput objective: its best beats every baseline's goodput."""
    rec = sx.search(sc, "evolution", strategy="de", budget=1500, seed=0)
    best = evaluate_one(sc, sc.space.design(rec["best"]["design"]))
    for name in sc.baselines:
        assert best["goodput_tokens_per_s"] >= evaluate_one(sc, sc.baseline_design(name))["goodput_tokens_per_s"]

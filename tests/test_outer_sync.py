"""DiLoCo and streaming DiLoCo (cost/outer_sync.py): H = 1 is synchronous data parallelism, the outer sync is
amortized as 1/H, more cross-region bandwidth is never slower, and one configuration's outer sync by hand."""
import math
import os

import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from sax_jax.cost.collectives import NCCL_BASE_LATENCY_S
from sax_jax.cost.context import context
from sax_jax.evaluate import evaluate, evaluate_one
from sax_jax.params import build_params
from sax_jax.specs import ConfigError

from conftest import CONFIGS, scaled

DILOCO = os.path.join(CONFIGS, "scenarios", "two-regions-diloco.yaml")


@pytest.fixture(scope="module")
def sc():
    return sx.load_scenario(DILOCO)


def _cost(sc, params=None, **sets):
    return evaluate(sc, sc.baseline_design("dp-across", sets), params)


def _leaves(cost):
    return {k: np.asarray(v) for k, v in zip(cost._fields, cost) if k != "breakdown"} | {
        f"breakdown.{k}": np.asarray(v) for k, v in cost.breakdown._asdict().items()}


@pytest.mark.parametrize("sync", ["diloco", "streaming"])
def test_diloco_with_h_1_is_synchronous_data_parallelism_exactly(sc, sync):
    ref = _leaves(_cost(sc))
    got = _leaves(_cost(sc, dp_sync=sync, sync_every=1, outer_precision="fp4"))
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
    assert float(ref["tokens_multiplier"][0]) == 1.0


def test_diloco_without_a_second_worker_is_synchronous(sc):
    """The production layout keeps dp inside each region (the pipeline crosses): nothing to sync across workers."""
    d0 = sc.baseline_design("production")
    d1 = sc.baseline_design("production", {"dp_sync": "diloco", "sync_every": 100})
    a, b = _leaves(evaluate(sc, d0)), _leaves(evaluate(sc, d1))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_outer_sync_falls_as_one_over_h(sc):
    per_h = [float(_cost(sc, dp_sync="diloco", sync_every=h).breakdown.outer_sync[0]) * h for h in (10, 30, 100, 1000)]
    assert per_h[0] > 0
    np.testing.assert_allclose(per_h, per_h[0], rtol=1e-5)
    xb = [float(_cost(sc, dp_sync="diloco", sync_every=h).cross_building_bytes[0]) for h in (10, 100)]
    # the inner steps cross nothing: cross-region bytes are the outer sync's, / H
    assert xb[0] == pytest.approx(10 * xb[1], rel=1e-5)


def test_inner_steps_cross_no_worker_boundary(sc):
    c = evaluate_one(sc, sc.baseline_design("diloco"))
    sync = evaluate_one(sc, sc.baseline_design("dp-across"))
    assert c["breakdown"]["dp_exposed"] < 0.1 * sync["breakdown"]["dp_exposed"]
    assert c["cross_building_bytes"] < 0.05 * sync["cross_building_bytes"]


@pytest.mark.parametrize("sync, h", [("every_step", 1), ("diloco", 30), ("streaming", 100), ("diloco", 1000)])
def test_more_cross_region_bandwidth_is_never_slower(sc, sync, h):
    params = build_params(sc)
    region = np.asarray(params.net.cross_building) > 0
    times = []
    for s in (0.25, 0.5, 1.0, 2.0, 8.0):
        p = scaled(params, bw_Bps=jnp.where(region, s, 1.0))
        times.append(float(_cost(sc, p, dp_sync=sync, sync_every=h).step_time_s[0]))
    assert all(b <= a * (1 + 1e-6) for a, b in zip(times, times[1:])), times


def test_streaming_and_compression_never_cost_more_than_blocking_fp32(sc):
    for h in (10, 100, 1000):
        block = float(_cost(sc, dp_sync="diloco", sync_every=h).step_time_s[0])
        stream = float(_cost(sc, dp_sync="streaming", sync_every=h).step_time_s[0])
        fp4 = float(_cost(sc, dp_sync="diloco", sync_every=h, outer_precision="fp4").step_time_s[0])
        assert stream <= block and fp4 <= block


def test_tokens_multiplier_interpolates_the_table_in_log_h(sc):
    m = lambda h: float(_cost(sc, dp_sync="diloco", sync_every=h).tokens_multiplier[0])  # noqa: E731
    # specs.DEFAULT_DILOCO_TOKENS (example values): (100, 1.02), (300, 1.04); clamped past the last point
    assert m(100) == pytest.approx(1.02, rel=1e-6)
    assert m(200) == pytest.approx(1.02 + 0.02 * math.log(2) / math.log(3), rel=1e-6)
    assert m(100_000) == pytest.approx(1.15, rel=1e-6)
    c = evaluate_one(sc, sc.baseline_design("diloco"))
    assert c["effective_tokens_per_s"] == pytest.approx(c["goodput_tokens_per_s"] / 1.02, rel=1e-6)
    assert c["time_to_target_s"] == pytest.approx(15e12 / c["effective_tokens_per_s"], rel=1e-6)


def test_outer_sync_golden_by_hand(sc):
    """two-regions-diloco, baseline diloco (tp 4, pp 8, dp 256 outermost over 2 regions, ring, fp32, H = 100).

    Worker = region: inner group k = [1, 128, 1] (dp 128 inside the building), outer k = [1, 1, 2].
      slice  S = P x 4 B / 128                                 (each GPU's 1/128 of the outer gradient)
      AR     = 2 [(2 - 1) a_region + (1/2) S / B_region]        (multi-rail ring, 2 workers)
      AG     = 0.5 x 2 [127 a_bldg + 127/128 x 2P / B_bldg]      (updated 16-bit parameters inside the worker)
      calls  = 2 max(P / 4e7, 1) x NCCL base latency
      outer_sync = (AR + AG + calls) / 100
    P, a and B are the model's own (first-stage parameters; transport-adjusted level latency and per-GPU
    bandwidth), read from the context; the composition is checked here (numpy float64).
    """
    d = sc.baseline_design("diloco")
    ctx = context(build_params(sc), d)
    p = float(ctx.params_dense + ctx.params_expert)
    a, b = np.asarray(ctx.alpha_s, np.float64), np.asarray(ctx.bw_Bps, np.float64)
    np.testing.assert_array_equal(np.asarray(ctx.grad_k), [1, 128, 1])
    np.testing.assert_array_equal(np.asarray(ctx.grad_k_outer), [1, 1, 2])
    s = p * 4.0 / 128
    ar = 2.0 * (a[2] + 0.5 * s / b[2])
    ag = 127 * a[1] + 127 / 128 * 2.0 * p / b[1]
    calls = 2.0 * max(p / 4e7, 1.0) * NCCL_BASE_LATENCY_S
    expected = (ar + ag + calls) / 100
    got = evaluate_one(sc, d)["breakdown"]["outer_sync"]
    assert got == pytest.approx(expected, rel=2e-5)
    assert 0.02 < got < 0.04  # ~28.6 ms per step: the 50 ms WAN's share of a 2.3 s step


@pytest.mark.parametrize("field, value, hint", [
    ("diloco_workers", "campus", "building, region"),
    ("diloco_token_multiplier", [[10, 1.0], [100, 1.1]], "[1, 1.0]"),
    ("diloco_token_multiplier", [[1, 1.0], [1, 1.1]], "H must increase"),
    ("streaming_fragments", 0, "streaming DiLoCo"),
])
def test_bad_diloco_inputs_name_file_key_and_value(tmp_path, field, value, hint):
    import yaml
    data = yaml.safe_load(open(DILOCO))
    for k in ("model", "system", "transports"):
        data[k] = os.path.join(CONFIGS, "scenarios", data[k])
    data["training"][field] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        sx.load_scenario(str(path))
    msg = str(err.value)
    assert str(path) in msg and f"training.{field}" in msg and hint in msg

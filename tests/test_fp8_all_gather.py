"""The parameter all-gathers move the bytes the framework gathers in (training.param_gather_bytes; cost/dp.py): FSDP2
with torchao's float8 all-gather gathers one byte per weight. Linear in the bytes, 0 means the weights' own bytes,
the validation rows whose configs turn it on get it, and bad values name the key."""
import dataclasses
import os

import numpy as np
import pytest

import sax_jax as sx
import sax_jax.validation as V

from conftest import CONFIGS


@pytest.fixture(scope="module")
def fsdp_case(default_scenario):
    """The default scenario's production layout under ZeRO-3 without overlap, so its FSDP traffic is all exposed."""
    return default_scenario.baseline_design("production", {"sharding": "fsdp", "overlap": "none"})


def _cost(scenario, design, gather_bytes):
    sc = dataclasses.replace(scenario, training=dataclasses.replace(scenario.training, param_gather_bytes=gather_bytes))
    return sx.evaluate(sc, design)


def test_gathers_are_linear_in_their_bytes(default_scenario, fsdp_case):
    """Exposed ZeRO-3 gathers: halving the gathered bytes twice takes off the same bandwidth time twice (the ring's
    hop latencies and the gradient reduce-scatter do not depend on it), and the two gather buffers shrink by the
    bytes of two layers' weights each time."""
    costs = [_cost(default_scenario, fsdp_case, b) for b in (2.0, 1.0, 0.5)]
    dp = [float(c.breakdown.dp_exposed[0]) for c in costs]
    mem = [float(c.memory_bytes[0]) for c in costs]
    assert dp[0] > dp[1] > dp[2] > 0
    assert (dp[0] - dp[1]) == pytest.approx(2.0 * (dp[1] - dp[2]), rel=1e-4)
    assert (mem[0] - mem[1]) == pytest.approx(2.0 * (mem[1] - mem[2]), rel=1e-4)
    # the kernels and the TP traffic do not move (the bubble does: exposed FSDP traffic lengthens every stage)
    for name in ("compute", "tp"):
        assert float(getattr(costs[1].breakdown, name)[0]) == float(getattr(costs[0].breakdown, name)[0])


def test_zero_means_the_weights_own_bytes(default_scenario, fsdp_case):
    a, b = _cost(default_scenario, fsdp_case, 0.0), _cost(default_scenario, fsdp_case, 2.0)
    assert default_scenario.training.param_bytes == 2.0
    np.testing.assert_array_equal(np.asarray(a.raw_step_time_s), np.asarray(b.raw_step_time_s))
    np.testing.assert_array_equal(np.asarray(a.memory_bytes), np.asarray(b.memory_bytes))


def test_fp8_gathers_never_slower(default_scenario, sample_batch):
    """Over 512 designs of the default space: gathering in one byte is never slower than in two."""
    designs, _ = sample_batch
    t2 = np.asarray(_cost(default_scenario, designs, 2.0).raw_step_time_s)
    t1 = np.asarray(_cost(default_scenario, designs, 1.0).raw_step_time_s)
    ok = np.isfinite(t2)
    assert ok.sum() > 50
    assert np.all(t1[ok] <= t2[ok] * (1 + 1e-6))
    assert np.any(t1[ok] < t2[ok])


def test_rows_whose_configs_gather_in_fp8():
    """torchtitan's llama3_405b.toml turns on enable_fsdp_float8_all_gather (its 2024-08 and 2024-12 FP8 rows); the
    H200 rows' source says so; the 8B/70B tables and the Async-TP table (configs: false) gather in 16 bits, and so
    does the 405B BF16 row."""
    cases, _ = V.load_cases([os.path.join(CONFIGS, "validation", "data", "other.csv")])
    got = {c.id: c.scenario.training.param_gather_bytes for c in cases if c.dataset.startswith("torchtitan")}
    fp8 = {i for i, b in got.items() if b == 1.0}
    assert {"tt-h100-2408-405b-fp8", "tt-h100-2408-405b-fp8-asynctp", "tt-h100-t5-405b-1f1b",
            "tt-h100-t6-405b-fsdp8-cp1", "tt-h200-8b-32gpu", "tt-h200-8b-64gpu"} <= fp8
    assert len(fp8) == 10
    assert got["tt-h100-2408-405b-none"] == 0.0 and got["tt-h100-atp-70b-fp8tw-tp"] == 0.0
    assert got["tt-h100-t1-8b-fsdp-compile-fp8"] == 0.0


@pytest.mark.parametrize("value", ["-1", "17", "lots", "0.05"])
def test_bad_value_names_the_key(tmp_path, value):
    text = open(os.path.join(CONFIGS, "scenarios", "default.yaml")).read().replace(
        "  grad_reduce_bytes: 2\n", f"  grad_reduce_bytes: 2\n  param_gather_bytes: {value}\n", 1)
    # the scenario's references are relative to its own folder: point them at the bundled files
    text = text.replace("../", os.path.join(CONFIGS, ""))
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(sx.ConfigError) as err:
        sx.load_scenario(str(path))
    assert "training.param_gather_bytes" in str(err.value) and str(path) in str(err.value)

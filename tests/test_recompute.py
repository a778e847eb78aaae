"""Recompute "half" (every 2nd layer recomputed from its input: torchtitan's layer-level selective activation
checkpointing at frequency 2): each recompute-dependent term lies exactly halfway between none and full, with
FlashAttention (no stored scores) the stored activations are the mean of a stored and a recomputed layer, and the
existing options keep their numbers (tests/test_golden.py)."""
import pytest

import sax_jax as sx
from sax_jax.cost.memory import activation_bytes_per_layer
from sax_jax.evaluate import evaluate_one
from sax_jax.params import build_params
from sax_jax.space import RECOMPUTE, Recompute, full_recompute_share

REL = 1e-6


@pytest.fixture(scope="module")
def scenario():
    return sx.load_scenario("h100-building")


def _cost(sc, recompute, **axes):
    return evaluate_one(sc, sc.space.design({"recompute": recompute, **axes}))


def test_half_is_an_option_with_its_share():
    assert "half" in RECOMPUTE and Recompute.HALF.label == "half"
    assert [full_recompute_share(r) for r in Recompute] == [0.0, 0.0, 1.0, 0.5]


@pytest.mark.parametrize("axes", [{}, {"tp": 8, "pp": 4, "cp": 2}, {"tp": 2, "pp": 8, "vpp": 2}])
def test_half_lies_halfway_between_none_and_full(scenario, axes):
    none, half, full = (_cost(scenario, r, **axes) for r in ("none", "half", "full"))
    for term in ("compute", "tp", "cp", "ep"):  # the terms a recomputed forward repeats
        mid = 0.5 * (none["breakdown"][term] + full["breakdown"][term])
        assert half["breakdown"][term] == pytest.approx(mid, rel=REL, abs=1e-9)
    assert none["raw_step_time_s"] < half["raw_step_time_s"] < full["raw_step_time_s"]
    assert full["memory_bytes"] < half["memory_bytes"] < none["memory_bytes"]


def test_half_stores_the_mean_activation_of_a_stored_and_a_recomputed_layer(scenario):
    p = build_params(scenario)
    args = (2.0, 8192.0, 4.0, 1.0)
    none, half, full = (float(activation_bytes_per_layer(*args, r, p.model, p.train))
                        for r in (Recompute.NONE, Recompute.HALF, Recompute.FULL))
    assert half == pytest.approx(0.5 * (none + full), rel=REL)
    # golden, Korthikanti et al. 2022 with flash attention (no scores): full keeps the layer input, 2 s b h / tp
    # with sequence parallelism: 2 x 8192 x 2 x 8192 / 4 bytes for llama3-70B's hidden 8192
    assert full == pytest.approx(2.0 * 8192 * 2 * 8192 / 4, rel=REL)


def _block(sc, n):
    import dataclasses
    return dataclasses.replace(sc, training=dataclasses.replace(sc.training, recompute_layers=n))


@pytest.mark.parametrize("axes, chunk", [({"pp": 8}, 10.0), ({"tp": 2, "pp": 8, "vpp": 2}, 5.0)])
def test_block_recomputes_n_of_each_chunks_layers(scenario, axes, chunk):
    # Megatron-Core --recompute-method block --recompute-num-layers N: of each pipeline chunk's layers (llama3-70B's
    # 80 over pp x vpp chunks) N run their forward twice and N store only their input, the rest store everything:
    # every recompute-dependent term at N/chunk of the way from none to full
    assert scenario.model.layers == 80
    none, full = (_cost(scenario, r, **axes) for r in ("none", "full"))
    for n in (1, 3):
        blk = _cost(_block(scenario, n), "full", **axes)
        for term in ("compute", "tp", "cp", "ep"):
            want = none["breakdown"][term] + n / chunk * (full["breakdown"][term] - none["breakdown"][term])
            assert blk["breakdown"][term] == pytest.approx(want, rel=REL, abs=1e-9)
        assert none["raw_step_time_s"] < blk["raw_step_time_s"] < full["raw_step_time_s"]
    # N covering the whole chunk is full recompute; N leaves other options alone
    assert _cost(_block(scenario, 50), "full", **axes)["raw_step_time_s"] == full["raw_step_time_s"]
    assert _cost(_block(scenario, 3), "none", **axes)["raw_step_time_s"] == none["raw_step_time_s"]


def test_block_stores_the_layer_weighted_mean_activation(scenario):
    p = build_params(scenario)
    args = (2.0, 8192.0, 4.0, 1.0)
    none, full = (float(activation_bytes_per_layer(*args, r, p.model, p.train)) for r in (Recompute.NONE, Recompute.FULL))
    blk = float(activation_bytes_per_layer(*args, Recompute.FULL, p.model, p.train, 2.0, 0.25))
    assert blk == pytest.approx(0.25 * full + 0.75 * none, rel=REL)


def test_the_block_recipe_row_gets_its_layers():
    from sax_jax import validation as V
    cases, _ = V.load_cases(dataset="megatron-bridge-h100")
    c = next(c for c in cases if c.id.startswith("mb-25.11-h100-llama3-8B"))
    assert c.scenario.training.recompute_layers == 5 and c.design["recompute"] == "full"
    assert not any("recompute_method" in a for a in c.approximations)

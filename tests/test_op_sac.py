"""Op-level selective recompute (torchtitan's op SAC): recompute "selective" with the modules elementwise and
linear, the share of the linear-layer FLOPs given by Training.recompute_linear_share. Golden values are counted
by hand from the block's matmuls; the invariants tie the new modules to the forward pieces they rerun."""
import dataclasses

import pytest

import sax_jax as sx
from sax_jax import specs as S
from sax_jax.cost.compute import layer_times
from sax_jax.evaluate import evaluate_one
from sax_jax.params import build_params
from sax_jax.validation import load_cases, sac_op_linear_share

OP_SAC = ("elementwise", "linear")


def _llama(**over):
    v = {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "gated_mlp": True}
    return {**v, **over}


def test_llama3_8b_share_is_wk_wo_and_w3():
    """Llama 3 8B: wk (4096 x 1024), wo (4096^2) and w3 (4096 x 14336) of wq, wk, wv, wo, w1, w3, w2:
    (4.194 + 16.777 + 58.720) M / 218.104 M weights = 0.36538."""
    assert sac_op_linear_share(_llama()) == pytest.approx(79_691_776 / 218_103_808, rel=1e-12)
    assert sac_op_linear_share(_llama()) == pytest.approx(0.36538, abs=1e-5)


def test_mha_ungated_share_counts_w2():
    """GPT-style MHA (k = v = q widths) with a 2-matrix MLP of 4h: wk, wo and w2 (h x 4h) of wq, wk, wv, wo, w1, w2:
    (h^2 + h^2 + 4h^2) / (3h^2 + h^2 + 8h^2) = 6/12."""
    v = {"hidden": 1024, "heads": 16, "kv_heads": 16, "ffn": 4096, "gated_mlp": False}
    assert sac_op_linear_share(v) == pytest.approx(0.5, rel=1e-12)


def test_float8_runs_recompute_the_same_matmuls():
    """torchao's Float8 linear calls torch.mm on Float8Tensor operands, so op-level SAC counts and saves its
    aten.mm as it does a 16-bit one: torchtitan's FP8 Llama 3 8B rows (H200, Grand Teton) rerun wk, wo and w3."""
    (case,) = [c for c in load_cases(dataset="torchtitan-h200")[0] if c.id == "tt-h200-8b-32gpu"]
    t = case.scenario.training
    assert t.precision == "fp8" and set(t.recompute_modules) == set(OP_SAC)
    assert t.recompute_linear_share == pytest.approx(79_691_776 / 218_103_808, rel=1e-12)


@pytest.fixture(scope="module")
def sc():
    return sx.load_scenario("default")


def _with(sc, **training):
    return dataclasses.replace(sc, training=dataclasses.replace(sc.training, **training))


def _lt(sc):
    p = build_params(sc)
    return layer_times(2.0, 1.0, 1.0, float(sc.training.seq_len), p.model, p.gpu, p.train)


def test_linear_module_reruns_its_share_of_the_linear_forward(sc):
    base = _lt(_with(sc, recompute_modules=("elementwise",)))
    full = _lt(_with(sc, recompute_modules=OP_SAC, recompute_linear_share=1.0))
    part = _lt(_with(sc, recompute_modules=OP_SAC, recompute_linear_share=0.25))
    added = float(full.recompute_selective_s) - float(base.recompute_selective_s)
    # in BF16 there is no input cast: the share of the linear layers' forward GEMM time exactly
    assert added == pytest.approx(float(full.linear_fwd_s), rel=1e-5)
    assert float(part.recompute_selective_s) - float(base.recompute_selective_s) == pytest.approx(0.25 * added,
                                                                                                  rel=1e-5)
    # rerunning every linear and elementwise kernel costs less than the whole forward (attention is saved)
    assert float(full.recompute_selective_s) < float(full.fwd_s)


def test_op_sac_costs_time_saves_memory_and_sits_between_none_and_full(sc):
    d = {"tp": 8, "pp": 8, "dp": 8, "cp": 1, "mbs": 1}
    op = _with(sc, recompute_modules=OP_SAC, recompute_linear_share=0.5)
    costs = {rc: evaluate_one(op, op.space.design({**d, "recompute": rc}))
             for rc in ("none", "selective", "full")}
    assert costs["none"]["breakdown"]["compute"] < costs["selective"]["breakdown"]["compute"] \
        < costs["full"]["breakdown"]["compute"]
    assert costs["none"]["memory_bytes"] > costs["selective"]["memory_bytes"] >= costs["full"]["memory_bytes"]
    # the sequence-parallel all-gathers rerun with the elementwise kernels: TP time grows by half the forward's
    plain = _with(sc, recompute_modules=("linear",), recompute_linear_share=0.5)
    tp_plain = evaluate_one(plain, plain.space.design({**d, "recompute": "selective"}))["breakdown"]["tp"]
    assert costs["selective"]["breakdown"]["tp"] > tp_plain


def test_elementwise_and_layernorm_together_is_refused():
    with pytest.raises(S.ConfigError) as e:
        S.Training(1, 1, recompute_modules=("elementwise", "layernorm")).validate("x.yaml")
    assert "training.recompute_modules" in str(e.value) and "not both" in str(e.value)


@pytest.mark.parametrize("bad", [0.0, 1.5, -0.1])
def test_linear_share_out_of_range_names_the_key(bad):
    with pytest.raises(S.ConfigError) as e:
        S.Training(1, 1, recompute_modules=OP_SAC, recompute_linear_share=bad).validate("x.yaml")
    assert "recompute_linear_share" in str(e.value)


def test_torchtitan_op_sac_rows_load_as_selective_with_the_counted_share():
    cases, _ = load_cases(dataset="torchtitan-h100")
    by_id = {c.id: c for c in cases}
    bf16, fp8 = by_id["tt-h100-t1-8b-fsdp-compile"], by_id["tt-h100-t1-8b-fsdp-compile-fp8"]
    for c in (bf16, fp8):
        assert c.design["recompute"] == "selective"
        assert c.scenario.training.recompute_modules == OP_SAC
    for c in (bf16, fp8):
        assert c.scenario.training.recompute_linear_share == pytest.approx(0.36538, abs=1e-5)

"""Packed sequences (Training.packed_doc_tokens): the fused attention core works within each example only. Golden
values derived by hand from the efficiency curve eff(s) = eff_max s / (s + half) (cost/compute.py)."""
import dataclasses

import pytest

from sax_jax import validation as V
from sax_jax.cost.compute import layer_times
from sax_jax.specs import ConfigError, Training

from conftest import f32 as F, hand_train
from test_quantize import gpu


def packed(L, flash=1.0):
    return hand_train(1.0, flash)._replace(doc_tokens=F(L))


def test_packed_attention_golden(m22):
    # 22B layer, one 2,048-token sequence, TP 2. Packed into examples of L = 256 tokens, the kernel does L/S of the
    # causal work at eff(L) instead of eff(S): time ratio (L/S) x eff(S)/eff(L) = (L + half)/(S + half)
    # = (256 + 512)/(2048 + 512) = 0.3 exactly (gpu(): attention_half_seq 512)
    args = (F(2), F(1), F(1), F(2048), m22, gpu())
    full, pk = layer_times(*args, hand_train(1.0, 1.0)), layer_times(*args, packed(256))
    assert float(pk.attn_fwd_s / full.attn_fwd_s) == pytest.approx(0.3, rel=1e-5)
    # the backward's attention (2.5x the forward, FLASH_BWD_RATIO) shrinks with it; the GEMMs do not move
    saved = float(full.attn_fwd_s - pk.attn_fwd_s)
    assert float(full.fwd_s - pk.fwd_s) == pytest.approx(saved, rel=1e-4)
    assert float(full.bwd_s - pk.bwd_s) == pytest.approx(2.5 * saved, rel=1e-4)
    assert float(pk.linear_fwd_s) == float(full.linear_fwd_s)


def test_examples_as_long_as_the_sequence_are_unpacked(m22):
    args = (F(2), F(1), F(1), F(2048), m22, gpu())
    full = layer_times(*args, hand_train(1.0, 1.0))
    for L in (2048, 8192):
        assert float(layer_times(*args, packed(L)).fwd_s) == pytest.approx(float(full.fwd_s), rel=1e-6)


def test_shorter_examples_never_cost_more(m22):
    args = (F(2), F(1), F(1), F(2048), m22, gpu())
    times = [float(layer_times(*args, packed(L)).attn_fwd_s) for L in (64, 128, 256, 512, 1024, 2048)]
    assert times == sorted(times)


def test_unfused_attention_gains_nothing(m22):
    # without a fused varlen kernel the whole score matrix is computed and masked
    args = (F(2), F(1), F(1), F(2048), m22, gpu())
    assert float(layer_times(*args, packed(256, flash=0.0)).fwd_s) == float(layer_times(*args, hand_train(1.0)).fwd_s)


def test_negative_doc_tokens_is_a_named_error():
    with pytest.raises(ConfigError, match="packed_doc_tokens"):
        Training(global_batch_sequences=8, seq_len=4096, packed_doc_tokens=-1).validate()


def test_finetuning_rows_run_packed():
    cases, _ = V.load_cases(dataset="nvidia-finetune")
    assert len(cases) >= 10
    for c in cases:
        assert c.scenario.training.packed_doc_tokens == 250
        assert any(f.startswith("packed_doc_tokens=250") for f in c.filled)
    # pre-training rows are not packed
    pre, _ = V.load_cases(dataset="korthikanti2022")
    assert all(c.scenario.training.packed_doc_tokens == 0 for c in pre)
    assert dataclasses.replace(pre[0].scenario.training).packed_doc_tokens == 0

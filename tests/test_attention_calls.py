"""Attention kernel calls with and without a causal diagonal (compute.attention_call_efficiency): golden values by
hand, the Blackwell constants against the cuDNN sweep they were read from, and the step's use of each curve."""
import dataclasses
import os

import numpy as np
import pytest

import sax_jax as sx
from conftest import CONFIGS
from sax_jax.config import load_gpu
from sax_jax.cost.compute import attention_call_efficiency, attention_efficiency, layer_times
from sax_jax.params import build_params

BLACKWELL = ("B200", "GB200", "B300", "GB300")
HOPPER = ("H100-SXM-80GB", "H100-GT-96GB", "H200")

# cuDNN's SDPA training benchmark, GB200, BF16, batch 2, 64 query / 8 key-value heads of 128, forward + backward
# at 2.5x the forward's FLOPs, as a fraction of the 2.5 PFLOP/s BF16 peak (NVIDIA/cudnn-frontend
# benchmark/sdpa_benchmark_training/results/llama3.1/gb200/llama3.1_20260424_100750.csv, computed from its
# time_ms and tflops columns): keys -> efficiency
GB200_CAUSAL = {2048: 0.373, 4096: 0.485, 8192: 0.557, 16384: 0.567}
GB200_NO_MASK = {2048: 0.480, 4096: 0.565, 8192: 0.597, 16384: 0.581}


def _gpu(name):
    return load_gpu(os.path.join(CONFIGS, "hardware", f"{name}.yaml"))


def test_one_rank_is_the_causal_call_and_a_ring_mixes_by_work_share():
    # c = 1: the whole causal call
    assert float(attention_call_efficiency(4096.0, 1.0, 0.5, 1200.0, 450.0)) == pytest.approx(
        0.5 * 4096 / 5296, rel=1e-6)
    # c = 4 over 2048-key chunks: 1/4 of the causal work on the diagonal at 0.5 x 2048/3248, 3/4 in full blocks at
    # 0.5 x 2048/2498; harmonic mix 1 / (0.25/0.315271 + 0.75/0.409928) = 0.381307
    got = float(attention_call_efficiency(2048.0, 4.0, 0.5, 1200.0, 450.0))
    assert got == pytest.approx(0.381307, rel=1e-5)
    # equal halves: the mix is the one curve, whatever the ring
    assert float(attention_call_efficiency(2048.0, 8.0, 0.5, 512.0, 512.0)) == pytest.approx(
        float(attention_efficiency(2048.0, 0.5, 512.0)), rel=1e-6)


@pytest.mark.parametrize("name", BLACKWELL)
def test_blackwell_halves_follow_the_cudnn_sweep(name):
    e = _gpu(name).efficiency
    assert e.attention_half_seq == 1200 and e.attention_half_seq_full == 450
    # the curves' shapes against the measured ones, each relative to its 16k-key point: within 6%
    for measured, half in ((GB200_CAUSAL, e.attention_half_seq), (GB200_NO_MASK, e.attention_half_seq_full)):
        ref = 16384 / (16384 + half)
        for s, eff in measured.items():
            assert s / (s + half) / ref == pytest.approx(eff / measured[16384], rel=0.06), (name, s, half)
    # the causal call saturates later: at 2k keys it runs at 0.66 of its 16k speed, an unmasked call at 0.83
    assert GB200_CAUSAL[2048] / GB200_CAUSAL[16384] < 0.7 < GB200_NO_MASK[2048] / GB200_NO_MASK[16384]


@pytest.mark.parametrize("name", HOPPER)
def test_hopper_keeps_one_curve(name):
    # unset in the file: every call runs on attention_half_seq (the H200 sweep's split is not adopted; see the YAML)
    assert _gpu(name).efficiency.attention_half_seq_full == 0.0
    g = build_params(sx.load_scenario(os.path.join(CONFIGS, "scenarios", "default.yaml"))).gpu
    assert float(g.attention_half_seq_full) == float(g.attention_half_seq) == 512.0


def _blackwell_scenario(seq=16384):
    """The default scenario on GB200 at a long sequence."""
    sc = sx.load_scenario(os.path.join(CONFIGS, "scenarios", "default.yaml"))
    system = dataclasses.replace(sc.system, gpu=_gpu("GB200"))
    return dataclasses.replace(sc, system=system, training=dataclasses.replace(sc.training, seq_len=seq))


def test_context_parallel_attention_uses_the_ring_mix():
    p = build_params(_blackwell_scenario())
    g, m, t = p.gpu, p.model, p.train
    times = lambda cp: layer_times(1.0, float(cp), 1.0, t.seq, m, g, t)  # noqa: E731
    one, four = times(1), times(4)
    s = float(t.seq)
    assert float(g.attention_half_seq) == 1200 and float(g.attention_half_seq_full) == 450
    # the causal work per GPU drops 4x; the efficiency goes from the 16k causal call to the 4k-key ring mix
    e1 = float(attention_call_efficiency(s, 1.0, g.attention_max, 1200.0, 450.0))
    e4 = float(attention_call_efficiency(s / 4, 4.0, g.attention_max, 1200.0, 450.0))
    np.testing.assert_allclose(float(four.attn_fwd_s) / float(one.attn_fwd_s), 0.25 * e1 / e4, rtol=1e-5)  # float32
    # with one curve (Hopper's way) the ring's chunks would run at the causal call's 4k-key speed: slower
    e4_one_curve = float(attention_efficiency(s / 4, g.attention_max, 1200.0))
    assert e4 > e4_one_curve


def test_the_half_seq_full_range_is_checked(tmp_path):
    text = open(os.path.join(CONFIGS, "hardware", "GB200.yaml")).read()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("attention_half_seq_full: 450", "attention_half_seq_full: -3"))
    with pytest.raises(sx.specs.ConfigError) as e:
        load_gpu(str(bad))
    assert "bad.yaml" in str(e.value) and "attention_half_seq_full" in str(e.value) and "-3" in str(e.value)

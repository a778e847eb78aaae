"""Layer kinds beyond GQA transformer layers: multi-head latent attention (DeepSeek-V3 / Kimi-K2), leading dense
layers in MoE models. Golden values are hand-derived from the published configs (comments show the sums)."""
import os

import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax.validation as V
from conftest import bundled_model, hand_train
from sax_jax import specs as S
from sax_jax.config import load_model
from sax_jax.cost.compute import layer_flops, replicated_qkv_flops
from sax_jax.cost.memory import activation_bytes_per_layer, params_per_gpu
from sax_jax.params import model_params
from sax_jax.resources import configs_dir
from sax_jax.space import Recompute

MODELS = os.path.join(configs_dir(), "models")
pytestmark = pytest.mark.usefixtures("x64")


# ---------------------------------------------------------------------------------------------------- MLA
def test_deepseek_v3_parameter_counts_match_the_paper():
    m = bundled_model("deepseek-v3")
    # one MLA layer: W_DQ 7168*1536 + q norm 1536 + W_DKV 7168*(512+64) + kv norm 512 + W_UQ 1536*128*192
    # + W_UKV 512*128*(128+128) + W_O 128*128*7168
    assert m.attention_params() == 11_010_048 + 1_536 + 4_128_768 + 512 + 37_748_736 + 16_777_216 + 117_440_512
    assert m.n_moe_layers == 58  # 61 layers, first 3 dense
    # arXiv 2412.19437: 671B total, 37B activated per token (main model, without the MTP module)
    assert m.n_params == pytest.approx(671e9, rel=0.002)
    assert m.n_active_params == pytest.approx(37e9, rel=0.02)
    # the tech report's 36.6B "activated" excludes the input embedding (0.93B) and counts the output head
    assert m.n_active_params - m.vocab * m.hidden == pytest.approx(36.6e9, rel=0.002)


def test_kimi_k2_parameter_counts_near_the_paper():
    m = bundled_model("kimi-k2")
    assert m.n_moe_layers == 60
    # Kimi K2 (arXiv 2507.20534): 1.04T total, 32B activated; our count 1.026T (router biases and other small
    # tensors of the release are not modelled)
    assert m.n_params == pytest.approx(1.04e12, rel=0.02)
    assert m.n_active_params == pytest.approx(32e9, rel=0.03)


def test_mla_gemm_and_attention_flops_hand_derived():
    p = model_params(bundled_model("deepseek-v3"), jnp.float64)
    qkv, proj, _, attn = (float(x) for x in layer_flops(1.0, 4096.0, p, 0.0))
    down = 7168 * (1536 + 512 + 64)  # W_DQ + W_DKV MACs per token
    up = 1536 * 128 * 192 + 512 * 128 * 256  # W_UQ + W_UKV MACs per token
    assert qkv == 2 * 4096 * (down + up) == 2 * 4096 * 69_664_768
    assert proj == 2 * 4096 * 128 * 128 * 7168
    # QK^T over nope + rope = 192 dims, PV over v_head_dim = 128: 2 s^2 a (192 + 128) (non-causal count)
    assert attn == 2 * 4096**2 * 128 * (192 + 128)
    assert float(replicated_qkv_flops(1.0, 4096.0, p)) == 2 * 4096 * down


def test_gqa_flops_unchanged_by_the_mla_fields():
    p = model_params(bundled_model("llama3-8B"), jnp.float64)
    qkv, proj, _, attn = (float(x) for x in layer_flops(1.0, 8192.0, p, 0.0))
    assert qkv == 2 * 8192 * 4096 * (32 * 128 + 2 * 8 * 128)
    assert proj == 2 * 8192 * 32 * 128 * 4096
    assert attn == 4 * 8192**2 * 32 * 128
    assert float(replicated_qkv_flops(1.0, 8192.0, p)) == 0.0


def test_mla_activation_bytes_hand_derived():
    p = model_params(bundled_model("deepseek-v3"), jnp.float64)  # no dropout
    s = 4096
    got = float(activation_bytes_per_layer(1.0, float(s), 1.0, 1.0, Recompute.NONE, p, hand_train(1.0, 1.0), 2.0))
    sp_part = (4 + 2 * 2) * s * 7168  # norm inputs + QKV and fc1 inputs
    qkv = 2 * s * 128 * (2 * 192 + 128)  # Q, K (192 wide per head) and V (128)
    proj_in = 2 * s * 128 * 128
    mlp = s * 18432 * (2 * 2 + 2)  # fc1 output (2 x f, 16-bit) + fc2 input
    latent = (2 + 2) * s * (1536 + 512 + 64)  # latent norm inputs + up-projection inputs
    assert got == sp_part + qkv + proj_in + mlp + latent


def test_mla_params_per_gpu_keep_down_projections_whole_under_tp():
    m = bundled_model("deepseek-v3")
    p = model_params(m, jnp.float64)
    dense1, _ = params_per_gpu(1.0, 2.0, 1.0, p, 1.0)
    dense2, _ = params_per_gpu(2.0, 2.0, 1.0, p, 1.0)
    rep = m.mla.replicated_params(m.hidden)
    # tp = 2 halves everything but the duplicated down projections
    assert float(dense2) == pytest.approx((float(dense1) - rep) / 2 + rep, rel=1e-12)


def test_mla_tp_message_shrinks_with_sequence_parallel():
    from sax_jax.cost.tensor_parallel import tp_term
    import sax_jax as sx
    from sax_jax.cost.context import context
    from sax_jax.params import build_params
    sc = sx.load_scenario(os.path.join(configs_dir(), "scenarios", "default.yaml"))
    d = sc.space.decode(jnp.asarray(0, jnp.int32))
    import dataclasses
    p_gqa = build_params(sc)
    mla = dataclasses.replace(sc.model, mla=S.MLASpec(1536, 512, 128, 64, 128))
    p_mla = build_params(dataclasses.replace(sc, model=mla))
    d = d._replace(tp=jnp.float32(8.0))
    t_gqa = tp_term(context(p_gqa, d), d, p_gqa.train, p_gqa.gpu, p_gqa.model)[0]
    t_mla = tp_term(context(p_mla, d), d, p_mla.train, p_mla.gpu, p_mla.model)[0]
    r = 2112 / sc.model.hidden
    assert sc.training.sequence_parallel
    assert float(t_gqa.stage_s) > 0
    np.testing.assert_allclose(float(t_mla.cross_bytes), float(t_gqa.cross_bytes) * (3 + r) / 4, rtol=1e-5)


def test_bad_mla_yaml_names_file_key_value(tmp_path):
    base = open(os.path.join(MODELS, "deepseek-v3.yaml")).read()
    bad = tmp_path / "m.yaml"
    bad.write_text(base.replace("kv_lora_rank: 512", "kv_lora_rank: -512"))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "m.yaml" in str(e.value) and "mla.kv_lora_rank" in str(e.value) and "-512" in str(e.value)
    bad.write_text(base.replace("kv_lora_rank: 512", "kv_lora: 512"))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "mla.kv_lora" in str(e.value) and "kv_lora_rank" in str(e.value)
    bad.write_text(base.replace("first_dense_layers: 3", "first_dense_layers: 61"))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "moe.first_dense_layers" in str(e.value) and "61" in str(e.value)


def test_validation_maps_mla_rows_to_the_model_files():
    loaded = V.load_all()
    mla = [c for c in loaded.cases if c.scenario.model.name in ("deepseek-v3", "kimi-k2")]
    # 39 MLA rows; one (ep=64 > dp=32: MoE parallel folding) stays unsupported for that reason
    assert len(mla) == 38 and all(c.scenario.model.mla is not None for c in mla)
    ds = next(c for c in mla if c.scenario.model.name == "deepseek-v3").scenario.model
    assert ds.mla == bundled_model("deepseek-v3").mla and ds.moe.first_dense_layers == 3
    assert not any("latent attention" in u.reason for u in loaded.unsupported)


def test_validation_row_disagreeing_with_the_model_file_is_a_bad_row(tmp_path):
    import csv
    path = os.path.join(configs_dir(), "validation", "data", "nvidia_perf.csv")
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["model"] == "deepseek-v3"][:1]
    rows[0]["layers"] = "60"
    out = tmp_path / "x.csv"
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = V.validate([str(out)])
    assert len(res["errors"]) == 1 and "'layers'" in res["errors"][0] and "deepseek-v3.yaml" in res["errors"][0]


# --------------------------------------------------------------------------------------- sliding window
def test_gpt_oss_parameter_counts_match_the_model_card():
    # gpt-oss model card: 116.8B total / 5.1B active (120b), 20.9B / 3.6B (20b); "active" there leaves out the
    # input embedding (it is a lookup, not a matmul)
    for name, total, active in (("gpt-oss-120b", 116.8e9, 5.13e9), ("gpt-oss-20b", 20.9e9, 3.61e9)):
        m = bundled_model(name)
        assert m.sliding_window == S.SlidingWindowSpec(window=128, layers=m.layers // 2, sinks=True)
        assert m.n_params == pytest.approx(total, rel=0.002)
        assert m.n_active_params - m.vocab * m.hidden == pytest.approx(active, rel=0.005)


def test_window_layer_attention_flops_hand_derived():
    from sax_jax.cost.compute import window_keys_ratio
    p = model_params(bundled_model("gpt-oss-120b"), jnp.float64)
    s, w = 4096, 128
    # (2 s W - W^2) / s^2: 1,032,192 / 16,777,216
    assert float(window_keys_ratio(float(s), p)) == 0.0615234375
    *_, attn = layer_flops(1.0, float(s), p, 1.0)
    full_causal = 4 * 64 * 64 * s * s / 2  # QK^T + PV over s^2/2 keys, a = 64 heads of d = 64
    window_causal = 4 * 64 * 64 * (s * w - w * w / 2)  # s W - W^2/2 keys: 8,455,716,864 FLOPs
    assert window_causal == 8_455_716_864
    # half the layers of each kind; layer_flops reports twice the causal work (the kernel halves it)
    assert float(attn) == 2 * (full_causal + window_causal) / 2 == 145_894_670_336


def test_window_wider_than_the_sequence_is_full_attention_and_sinks_cost_nothing():
    import dataclasses
    from sax_jax.cost.compute import layer_times
    import sax_jax as sx
    from sax_jax.params import build_params
    sc = sx.load_scenario(os.path.join(configs_dir(), "scenarios", "default.yaml"))
    seq = sc.training.seq_len

    def times(window):
        m = dataclasses.replace(sc.model, sliding_window=window)
        p = build_params(dataclasses.replace(sc, model=m), jnp.float64)
        return layer_times(1.0, 1.0, 1.0, p.train.seq, p.model, p.gpu, p.train), p

    base, p = times(None)
    wide, _ = times(S.SlidingWindowSpec(window=seq, layers=sc.model.layers))
    np.testing.assert_allclose(float(wide.attn_fwd_s), float(base.attn_fwd_s), rtol=1e-12)
    half, _ = times(S.SlidingWindowSpec(window=128, layers=sc.model.layers // 2))
    sinks, _ = times(S.SlidingWindowSpec(window=128, layers=sc.model.layers // 2, sinks=True))
    assert float(sinks.fwd_s) == float(half.fwd_s)
    # hand: 0.5 x full FLOPs / peak16 x ((1 - f)/eta(s) + f r / eta(W)), eta(k) = max k / (k + half)
    g, m = p.gpu, sc.model
    # (the window's call has no causal diagonal: attention_half_seq_full)
    eta = lambda k, h: float(g.attention_max) * k / (k + float(h))  # noqa: E731
    full = 4.0 * seq * seq * m.heads * m.head_dim
    r = (2 * seq * 128 - 128**2) / seq**2
    f = (m.layers // 2) / m.layers
    want = 0.5 * full / float(g.peak_flops_16bit) * ((1 - f) / eta(seq, g.attention_half_seq)
                                                      + f * r / eta(128, g.attention_half_seq_full))
    np.testing.assert_allclose(float(half.attn_fwd_s), want, rtol=1e-9)
    assert float(half.attn_fwd_s) < float(base.attn_fwd_s)



def test_fp8_attention_backward_sweeps_a_window_layers_whole_causal_triangle():
    """cuDNN's FP8 SDPA backward does not skip the key blocks outside a sliding window (NVIDIA/cudnn-frontend
    benchmark/sdpa_benchmark_training/results/gpt_oss/gb200, 128-key window, d 64: FP8 backward 1.731 ms at 4k keys,
    6.176 at 8k, x3.57 like full causal work; BF16 0.465 and 0.911 ms, x1.96 like the window's); its forward and a
    full layer's attention run as at 16 bits (Training.fp8_attention)."""
    import dataclasses
    from sax_jax.cost.compute import FLASH_BWD_RATIO, layer_times
    import sax_jax as sx
    from sax_jax.config import load_gpu
    from sax_jax.params import build_params
    sc = sx.load_scenario(os.path.join(configs_dir(), "scenarios", "default.yaml"))
    gpu = load_gpu(os.path.join(configs_dir(), "hardware", "GB200.yaml"))
    oss = bundled_model("gpt-oss-120b")
    every = S.SlidingWindowSpec(window=128, layers=oss.layers)  # every layer windowed: the backward's scaling alone

    def times(seq, fp8, window=oss.sliding_window):
        train = dataclasses.replace(sc.training, seq_len=seq, fp8_attention=fp8)
        m = dataclasses.replace(oss, sliding_window=window)
        scn = dataclasses.replace(sc, model=m, training=train, system=dataclasses.replace(sc.system, gpu=gpu))
        p = build_params(scn, jnp.float64)
        return layer_times(1.0, 1.0, 1.0, float(seq), p.model, p.gpu, p.train)

    mixed16, mixed8, full = times(4096, False), times(4096, True), times(4096, False, None)
    # the forward is the 16-bit kernel's, window skipped; full-attention models see no change at all
    assert float(mixed8.fwd_s) == float(mixed16.fwd_s)
    assert float(times(4096, True, None).bwd_s) == float(full.bwd_s)
    # the backward's attention is a full causal layer's for every layer: 2.5 x the unwindowed forward
    extra = float(mixed8.bwd_s) - float(mixed16.bwd_s)
    np.testing.assert_allclose(extra, FLASH_BWD_RATIO * (float(full.attn_fwd_s) - float(mixed16.attn_fwd_s)),
                               rtol=1e-9)
    assert extra > 0.0
    # 4k -> 8k keys, every layer windowed: FP8's backward attention grows like full causal work (benchmark x3.57),
    # BF16's like the window's (x1.96)

    def bwd_attention(seq, fp8):
        """The backward's attention core: the layer's backward less its other work (the 16-bit backward less its
        2.5x-forward attention core)."""
        bf16 = times(seq, False, every)
        other = float(bf16.bwd_s) - FLASH_BWD_RATIO * float(bf16.attn_fwd_s)
        return float(times(seq, fp8, every).bwd_s) - other
    grow8 = bwd_attention(8192, True) / bwd_attention(4096, True)
    grow16 = bwd_attention(8192, False) / bwd_attention(4096, False)
    assert grow8 == pytest.approx(6.176 / 1.731, rel=0.1)
    assert grow16 == pytest.approx(0.911 / 0.465, rel=0.05)

def test_bad_sliding_window_yaml_names_file_key_value(tmp_path):
    base = open(os.path.join(MODELS, "gpt-oss-120b.yaml")).read()
    bad = tmp_path / "w.yaml"
    bad.write_text(base.replace("  layers: 18", "  layers: 40"))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "w.yaml" in str(e.value) and "sliding_window.layers" in str(e.value) and "40" in str(e.value)
    bad.write_text(base.replace("window: 128", "window: 0"))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "sliding_window.window" in str(e.value)
    bad.write_text(base.replace("sinks: true", "sinks: maybe"))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "sliding_window.sinks" in str(e.value) and "true or false" in str(e.value)


def test_validation_maps_sliding_window_rows_to_the_model_files():
    loaded = V.load_all()
    oss = [c for c in loaded.cases if c.scenario.model.name == "gpt-oss-120b"]
    # 31 rows: one excluded (contradictory batch in its table), two the source footnotes as a known regression
    assert len(oss) == 28
    assert all(c.scenario.model.sliding_window == bundled_model("gpt-oss-120b").sliding_window for c in oss)
    assert not any("sliding-window" in u.reason or "window" in u.reason for u in loaded.unsupported)


def _scenario_with(model=None, framework=None):
    import dataclasses
    import sax_jax as sx
    from sax_jax.config import load_frameworks
    sc = sx.load_scenario(os.path.join(configs_dir(), "scenarios", "default.yaml"))
    if model is not None:
        sc = dataclasses.replace(sc, model=model)
    if framework is not None:
        fw = load_frameworks()[framework]
        sc = dataclasses.replace(sc, training=dataclasses.replace(sc.training, framework=fw))
    return sc


def test_yarn_scaled_rope_runs_eager_under_megatron_hand_derived():
    """GPT-OSS's YaRN factor (0.1 ln 32 + 1) makes Megatron-Core run the eager RoPE: 24 bytes per rotated query/key
    element forward (compute.ROPE_EAGER_BYTES_PER_ELEMENT), 1.2x that backward, on top of the same layer with
    plain RoPE; torchtitan (torch.compile) fuses it."""
    import dataclasses
    from sax_jax.cost.compute import MEMORY_BWD_RATIO, layer_times
    from sax_jax.params import build_params
    oss = bundled_model("gpt-oss-120b")
    assert oss.rope_attention_factor == pytest.approx(0.1 * np.log(32.0) + 1.0, abs=5e-4)
    plain = dataclasses.replace(oss, rope_attention_factor=1.0)

    def times(model, framework=None, tp=1.0):
        p = build_params(_scenario_with(model, framework), jnp.float64)
        return layer_times(tp, 1.0, 2.0, p.train.seq, p.model, p.gpu, p.train), p

    for tp, kv_per_rank in ((1.0, 8.0), (16.0, 1.0)):  # 8 key heads: at TP 16 each rank keeps one whole
        yarn, p = times(oss, tp=tp)
        base, _ = times(plain, tp=tp)
        seq = float(p.train.seq)
        rotated = (64.0 / tp + kv_per_rank) * 64.0  # query heads + key heads on the rank, 64 wide
        want_s = 24.0 * 2.0 * seq * rotated / (float(p.gpu.hbm_Bps) * float(p.gpu.memory_bound))
        np.testing.assert_allclose(float(yarn.fwd_s - base.fwd_s), want_s, rtol=1e-9)
        np.testing.assert_allclose(float(yarn.bwd_s - base.bwd_s), MEMORY_BWD_RATIO * want_s, rtol=1e-9)
        assert float(yarn.linear_fwd_s) == float(base.linear_fwd_s)  # no GEMM work
    fused, _ = times(oss, "torchtitan")
    fused_plain, _ = times(plain, "torchtitan")
    assert float(fused.fwd_s) == float(fused_plain.fwd_s) and float(fused.bwd_s) == float(fused_plain.bwd_s)


def test_validation_rows_take_the_rope_factor_from_the_model_file_and_mla_refuses_one(tmp_path):
    loaded = V.load_all()
    oss = [c for c in loaded.cases if c.scenario.model.name == "gpt-oss-120b"]
    assert oss and all(c.scenario.model.rope_attention_factor == 1.347 for c in oss)
    assert all(c.scenario.model.rope_attention_factor == 1.0 for c in loaded.cases
               if c.scenario.model.name != "gpt-oss-120b")
    base = open(os.path.join(MODELS, "deepseek-v3.yaml")).read()
    bad = tmp_path / "mla.yaml"
    bad.write_text(base + "\nrope_attention_factor: 1.3\n")
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "mla.yaml" in str(e.value) and "rope_attention_factor" in str(e.value) and "1.3" in str(e.value)
    bad.write_text(open(os.path.join(MODELS, "gpt-oss-120b.yaml")).read().replace("rope_attention_factor: 1.347",
                                                                                   "rope_attention_factor: 0"))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "rope_attention_factor" in str(e.value)


# ------------------------------------------------------------------------------------------------- LoRA
def _lora_scenario(rank):
    import dataclasses
    import sax_jax as sx
    sc = sx.load_scenario(os.path.join(configs_dir(), "scenarios", "default.yaml"))
    return dataclasses.replace(sc, training=dataclasses.replace(sc.training, lora_rank=rank))


def test_lora_adapter_params_hand_derived():
    from sax_jax.cost.lora import adapter_params_per_layer
    from sax_jax.params import train_params
    sc = _lora_scenario(32)
    m = bundled_model("llama3-70B")
    p = model_params(m, jnp.float64)
    t = train_params(sc.training, sc.system, jnp.float64)
    # r (4h + 2ad + 2gd + 3f) = 32 (32768 + 16384 + 2048 + 86016): QKV 8192 -> 10240, proj 8192 -> 8192,
    # fc1 8192 -> 57344, fc2 28672 -> 8192, each r (in + out)
    assert float(adapter_params_per_layer(p, t)) == 32 * 137_216 == 4_390_912
    t0 = train_params(_lora_scenario(0).training, sc.system, jnp.float64)
    assert float(adapter_params_per_layer(p, t0)) == 0.0


def test_lora_backward_has_no_base_weight_gradients():
    from sax_jax.cost.compute import gemm_rate, gemm_time_s, layer_times
    from sax_jax.cost.lora import adapter_params_per_layer
    from sax_jax.params import build_params
    full = build_params(_lora_scenario(0), jnp.float64)
    lora = build_params(_lora_scenario(16), jnp.float64)
    tp, mbs, seq = 8.0, 1.0, full.train.seq
    lt0 = layer_times(tp, 1.0, mbs, seq, full.model, full.gpu, full.train)
    lt1 = layer_times(tp, 1.0, mbs, seq, lora.model, lora.gpu, lora.train)
    g = lora.gpu
    adapter = float(gemm_time_s(2.0 * mbs * seq * adapter_params_per_layer(lora.model, lora.train) / tp,
                                gemm_rate(g.peak_flops_16bit, g.gemm_max, g.gemm_cap_16bit), g.gemm_half_flops))
    lin = float(lt0.linear_fwd_s)
    assert adapter > 0 and adapter < 0.01 * lin
    np.testing.assert_allclose(float(lt1.fwd_s) - float(lt0.fwd_s), adapter, rtol=1e-9)
    # backward: 2x the linear forward -> 1x (input gradients only) + the adapters' 2x
    np.testing.assert_allclose(float(lt0.bwd_s) - float(lt1.bwd_s), lin - 2 * adapter, rtol=1e-9)
    assert float(lt0.weight_grad_s) == lin
    np.testing.assert_allclose(float(lt1.weight_grad_s), adapter, rtol=1e-12)


def test_lora_state_sync_and_optimizer_cover_only_the_adapters():
    from sax_jax.cost.context import context
    from sax_jax.cost.dp import dp_term
    from sax_jax.cost.optimizer import optimizer_term
    from sax_jax.params import build_params
    from sax_jax.space import DpAlgo, Sharding
    sc0, sc1 = _lora_scenario(0), _lora_scenario(16)
    d = sc0.space.decode(jnp.asarray(12345, jnp.int32))
    d = d._replace(sharding=jnp.int32(list(Sharding).index(Sharding.ZERO0)),
                   dp_algo=jnp.int32(list(DpAlgo).index(DpAlgo.RING)))
    out = []
    for sc in (sc0, sc1):
        p = build_params(sc, jnp.float64)
        ctx = context(p, d)
        out.append((ctx, dp_term(ctx, d, p.train, p.gpu), optimizer_term(ctx, d, p.gpu, p.train), p.train))
    (c0, dp0, op0, t), (c1, dp1, op1, _) = out
    params = float(c1.params_dense + c1.params_expert)
    adapters = float(c1.params_adapter)
    assert 0 < adapters < 0.01 * params and float(c0.params_adapter) == 0.0
    # zero0: frozen weights 16-bit only, adapters weights + grads + Adam
    w, gr, op = float(t.param_bytes), float(t.grad_bytes), float(t.opt_bytes)
    np.testing.assert_allclose(float(dp0.memory_bytes), (w + gr + op) * params, rtol=1e-9)
    np.testing.assert_allclose(float(dp1.memory_bytes), w * params + (w + gr + op) * adapters, rtol=1e-9)
    # the optimizer updates the adapters only
    np.testing.assert_allclose(float(op1.step_s) / float(op0.step_s), adapters / params, rtol=1e-9)
    # the gradient all-reduce moves the adapters' gradients only
    assert float(dp1.step_s) < float(dp0.step_s)
    if float(dp0.cross_bytes) > 0:
        np.testing.assert_allclose(float(dp1.cross_bytes) / float(dp0.cross_bytes), adapters / params, rtol=1e-6)


def test_bad_lora_rank_names_file_key_value(tmp_path):
    import sax_jax as sx
    src = os.path.join(configs_dir(), "scenarios", "default.yaml")
    text = open(src).read().replace("../", os.path.dirname(os.path.dirname(src)) + "/")
    bad = tmp_path / "lora.yaml"
    bad.write_text(text.replace("  precision: bf16\n", "  precision: bf16\n  lora_rank: -8\n"))
    with pytest.raises(S.ConfigError) as e:
        sx.load_scenario(str(bad))
    assert "lora.yaml" in str(e.value) and "training.lora_rank" in str(e.value) and "-8" in str(e.value)
    bad.write_text(text.replace("  precision: bf16\n", "  precision: bf16\n  lora_rank: 16\n"))
    assert sx.load_scenario(str(bad)).training.lora_rank == 16


def test_validation_scores_the_lora_rows_with_the_profile_rank():
    loaded = V.load_all()
    lora = [c for c in loaded.cases if c.scenario.training.lora_rank > 0]
    assert len(lora) == 8 and all(c.scenario.training.lora_rank == 32 for c in lora)
    assert all(any(f.startswith("lora_rank=32") for f in c.filled) for c in lora)
    assert not any("LoRA" in u.reason for u in loaded.unsupported)

"""DeepSeek-V4's attention (compressed sparse / heavily compressed, one shared key/value vector, grouped low-rank
output) and hyper-connections (mHC): hand-derived parameter counts, attention work and memory traffic, bad model
files named, and the two DeepSeek-V4-Flash runs scored."""
import dataclasses
import os

import jax.numpy as jnp
import pytest

import sax_jax as sx
import sax_jax.validation as V
from conftest import bundled_model
from sax_jax import specs as S
from sax_jax.config import load_model
from sax_jax.cost.compute import (HC_BYTES_PER_H_PER_STREAM, HC_BYTES_SAVED, compressed_keys_ratio,
                                  full_attention_flops, layer_flops, layer_times, window_keys_ratio)
from sax_jax.cost.memory import activation_bytes_per_layer, params_per_gpu
from sax_jax.params import build_params, model_params
from sax_jax.resources import configs_dir
from sax_jax.space import Recompute

pytestmark = pytest.mark.usefixtures("x64")
H = 4096


@pytest.fixture(scope="module")
def flash():
    return bundled_model("deepseek-v4-flash")


def _layer_parts():
    """One layer's weights by hand (DeepSeek-V4-Flash), the compressors and indexers apart."""
    down = H * 1024 + 1024 + H * (448 + 64) + 448  # W_DQ + q norm, wkv (the 512-wide shared vector) + kv norm
    up = 1024 * 64 * 512  # W_UQ: 64 heads x 512; no W_UKV
    out = 64 * 512 * 1024 + 8 * 1024 * H  # 8 groups of (8 heads x 512 -> 1024), then 8 x 1024 -> h
    routed, shared = 256 * 3 * H * 2048, 3 * H * 2048
    hc = 2 * (4 * H * 24 + 24 + 3)  # per sub-layer: 4h -> (2 + 4) x 4 mixing weights, their biases, 3 gates
    return down + up + out, routed, shared + H * 256 + 2 * H + hc  # router, two norms


def _compressors():
    # CSA: its compressor (overlapping windows: h -> 2 x 512 for keys and gates each, plus 4 x 2 x 512 position
    # biases) and the indexer (q latent 1024 -> 64 x 128, h -> 64 head weights, its own compressor at width 128)
    csa = 2 * H * 2 * 512 + 4 * 2 * 512 + 1024 * 64 * 128 + H * 64 + 2 * H * 2 * 128 + 4 * 2 * 128
    hca = 2 * H * 512 + 128 * 512  # h -> 512 keys and gates, 128 x 512 position biases
    return 21 * csa + 20 * hca


def test_flash_parameter_counts_by_hand(flash):
    attn, routed, rest = _layer_parts()
    emb = 2 * 129280 * H
    total = 43 * (attn + routed + rest) + _compressors() + emb
    assert flash.n_params == pytest.approx(total, rel=1e-12)
    assert flash.n_active_params == pytest.approx(43 * (attn + routed * 6 / 256 + rest) + _compressors() + emb,
                                                  rel=1e-12)
    # the model card: 284B total, 13B activated (without the input embedding)
    assert flash.n_params == pytest.approx(284e9, rel=0.002)
    assert flash.n_active_params - 129280 * H == pytest.approx(13.3e9, rel=0.01)
    assert flash.compressed_params() == _compressors() == 487_171_072


def test_projection_macs_per_token_by_hand(flash):
    """layer_flops: QKV = the down projections, compressors and indexers (averaged over the layers) and W_UQ; the
    output projection is the grouped low-rank pair, 4x fewer MACs than one 32768 -> 4096 matrix."""
    m = model_params(flash, jnp.float64)
    qkv, proj, _, _ = layer_flops(1.0, 1.0, m, m.moe_fraction)
    down = H * 1024 + H * 512 + _compressors() / 43
    assert float(qkv) == pytest.approx(2 * (down + 1024 * 64 * 512), rel=1e-12)
    assert float(proj) == pytest.approx(2 * (64 * 512 * 1024 + 8 * 1024 * H), rel=1e-12)
    assert float(proj) == pytest.approx(2 * 64 * 512 * H / 2, rel=1e-12)


def test_attention_work_by_hand(flash):
    """At s = 4096: the 128-key window (2sW - W^2)/s^2 = 0.0615; CSA: t/4 keys up to the top 512, sum
    2048^2/8 + 2048 x 512 = 1,572,864, x 2/s^2 = 0.1875, plus the indexer's 64 x 128 QK^T over every t/4 key:
    8192 / (64 x 1024 x 4) = 0.03125; HCA: t/128 keys, 1/128. Below s = r k = 2048 a CSA query keeps every
    compressed key: 1/r."""
    m = model_params(flash, jnp.float64)
    s = 4096.0
    window = (2 * s * 128 - 128 ** 2) / s ** 2
    want = window + 21 / 43 * (0.1875 + 0.03125) + 20 / 43 / 128
    assert float(compressed_keys_ratio(s, m)) == pytest.approx(want, rel=1e-12)
    assert float(compressed_keys_ratio(s, m, indexer=False)) == pytest.approx(want - 21 / 43 * 0.03125, rel=1e-12)
    short = 1024.0
    assert float(compressed_keys_ratio(short, m, indexer=False)) == pytest.approx(
        float(window_keys_ratio(short, m)) + 21 / 43 / 4 + 20 / 43 / 128, rel=1e-12)
    _, _, _, attn = layer_flops(1.0, s, m, m.moe_fraction)
    # the core's full count: 2 s^2 heads (d_qk + d_v) = 2 s^2 x 64 x 1024
    assert float(full_attention_flops(1.0, s, m)) == pytest.approx(2 * s * s * 64 * 1024, rel=1e-12)
    assert float(attn) == pytest.approx(2 * s * s * 64 * 1024 * want, rel=1e-12)


def test_keys_per_query_level_off_past_the_top_k(flash):
    """Mean keys per query at s = 32768 (compressed_keys_ratio x s/2): the window 128 - 128^2/(2s); CSA:
    2048^2/(8 s) + 512 (s - 2048)/s = 16 + 480 (the top 512 caps it); HCA: s/256 = 128. Full causal: s/2 = 16384."""
    m = model_params(flash, jnp.float64)
    s = 32768.0
    keys = float(compressed_keys_ratio(s, m, indexer=False)) * s / 2
    assert keys == pytest.approx(128 - 128 ** 2 / (2 * s) + 21 / 43 * (16 + 480) + 20 / 43 * 128, rel=1e-12)
    assert keys < 0.03 * s / 2


def _lt(p, model):
    return layer_times(1.0, 1.0, 1.0, 4096.0, model, p.gpu, p.train)


@pytest.fixture
def p_flash(x64):
    sc = sx.load_scenario("mixtral-moe")
    model = load_model(os.path.join(configs_dir(), "models", "deepseek-v4-flash.yaml"))
    return build_params(dataclasses.replace(sc, model=model, expert_trace=None), dtype=jnp.float64)


def test_hyper_connections_cost_their_stream_traffic(p_flash):
    """n = 4 streams move (3n + 2) h per sub-layer where a plain residual moves 3 h: 11 h x 2 bytes x 2 sub-layers
    = 44 bytes per h per layer more, in the forward at the elementwise rate and 1.2x that in the backward."""
    assert HC_BYTES_PER_H_PER_STREAM * 4 - HC_BYTES_SAVED == 44.0
    m4 = p_flash.model
    m1 = m4._replace(hc_streams=jnp.float64(1.0))
    g = p_flash.gpu
    # (TP 1: sequence parallelism splits nothing)
    extra = float(g.elementwise_factor) * 4096 * 44 * H / float(g.hbm_Bps * g.memory_bound)
    lt4, lt1 = _lt(p_flash, m4), _lt(p_flash, m1)
    assert float(lt4.fwd_s - lt1.fwd_s) == pytest.approx(extra, rel=1e-9)
    assert float(lt4.bwd_s - lt1.bwd_s) == pytest.approx(1.2 * extra, rel=1e-9)


def test_hyper_connections_store_their_streams_and_weights(p_flash):
    """Activations: 4 - 1 more h-wide 16-bit copies per sub-layer (2 per layer): 12 s b h bytes. Weights: the
    mixing projections on every GPU."""
    m4 = p_flash.model
    m1 = m4._replace(hc_streams=jnp.float64(1.0), hc_params=jnp.float64(0.0))
    t = p_flash.train

    def act(m):
        return float(activation_bytes_per_layer(1.0, 4096.0, 1.0, 1.0, Recompute.NONE, m, t))
    assert act(m4) - act(m1) == pytest.approx(12 * 4096 * H, rel=1e-12)
    d4, _ = params_per_gpu(1.0, 1.0, 64.0, m4, 43.0)
    d1, _ = params_per_gpu(1.0, 1.0, 64.0, m1, 43.0)
    assert float(d4 - d1) == pytest.approx(43 * 2 * (4 * H * 24 + 24 + 3), rel=1e-12)


def test_shared_kv_stores_one_vector_per_token(p_flash):
    """Q (64 heads x 512) and the one shared 512-wide key/value vector, 16-bit: 2 x (64 + 1) x 512 bytes per token,
    where per-head keys and values would be 2 x 64 x (2 x 512 + 512)."""
    m = p_flash.model
    per_head = m._replace(kv_shared=jnp.float64(0.0))
    t = p_flash.train

    def act(mm):
        return float(activation_bytes_per_layer(1.0, 4096.0, 1.0, 1.0, Recompute.NONE, mm, t))
    assert act(per_head) - act(m) == pytest.approx(4096 * 2 * (64 * 1536 - 65 * 512), rel=1e-12)


def test_gqa_and_v3_unchanged_by_the_new_fields():
    """Models without the new sections keep 1 stream, no compression and V3's full-rank output."""
    v3 = model_params(bundled_model("deepseek-v3"), jnp.float64)
    assert float(v3.mla_out) == 128 * 128 * 7168 and float(v3.kv_shared) == 0 and float(v3.compressed) == 0
    assert float(v3.hc_streams) == 1.0
    oss = model_params(bundled_model("gpt-oss-120b"), jnp.float64)
    assert float(oss.compressed) == 0 and float(oss.window) == 128 and float(oss.window_fraction) == 0.5


def _write(tmp_path, **over):
    data = open(os.path.join(configs_dir(), "models", "deepseek-v4-flash.yaml")).read()
    for old, new in over.items():
        data = data.replace(old, new)
    f = tmp_path / "m.yaml"
    f.write_text(data)
    return str(f)


@pytest.mark.parametrize("old,new,key", [
    ("  shared_kv: true\n", "  shared_kv: false\n", "compressed_attention"),
    ("  csa_layers: 21\n", "  csa_layers: 40\n", "compressed_attention.csa_layers"),
    ("  v_head_dim: 512\n", "  v_head_dim: 128\n", "mla.v_head_dim"),
    ("  hca_ratio: 128\n", "  hca_ratio: 0\n", "compressed_attention.hca_ratio"),
    ("hyper_connections: 4\n", "hyper_connections: 0\n", "hyper_connections"),
    ("  o_groups: 8\n", "  o_groups: two\n", "mla.o_groups"),
    ("  index_topk: 512\n", "  index_topk: 512\n  topk: 3\n", "compressed_attention.topk"),
])
def test_bad_v4_model_files_are_named(tmp_path, old, new, key):
    path = _write(tmp_path, **{old: new})
    with pytest.raises(S.ConfigError) as e:
        load_model(path)
    assert key in str(e.value) and "m.yaml" in str(e.value)


def test_flash_runs_are_scored_with_their_approximation():
    loaded = V.load_all()
    cases = [c for c in loaded.cases if "deepseek-v4-flash" in c.id]
    assert len(cases) == 2 and not any("v4" in u.id for u in loaded.unsupported)
    for c in cases:
        m = c.scenario.model
        assert m.compressed_attention is not None and m.hyper_connections == 4 and m.mla.shared_kv
        assert any("DeepSeek-V4's sparse attention" in a for a in c.approximations)
        assert any(f.startswith("mtp_layers=1") for f in c.filled)
    res = V.evaluate_cases(cases)
    for r in res:
        assert r["metrics"]["feasible"] and 0.5 < r["predicted"] / r["measured"] < 1.5

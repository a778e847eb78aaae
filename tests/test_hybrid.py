"""Hybrid Mamba-2 / attention / MoE blocks (Nemotron-H layout: Nemotron 3 Nano, Super and Ultra) and LatentMoE.
Golden values are hand-derived from the released configs; the comments show the sums."""
import dataclasses
import os

import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax.validation as V
from conftest import bundled_model, hand_train
from sax_jax import specs as S
from sax_jax.config import load_model
from sax_jax.cost.compute import activated_ffn, layer_flops, mamba_flops, model_flops_per_sequence
from sax_jax.cost.memory import activation_bytes_per_layer, params_per_gpu
from sax_jax.cost.moe import moe_alltoall_bytes
from sax_jax.params import model_params as _params
from sax_jax.resources import configs_dir
from sax_jax.space import Recompute

MODELS = os.path.join(configs_dir(), "models")
pytestmark = pytest.mark.usefixtures("x64")


def model_params(spec):
    return _params(spec, jnp.float64)


def test_nano_and_super_parameter_counts_match_their_names():
    nano, sup = bundled_model("nemotron3-nano-30b-a3b"), bundled_model("nemotron3-super-120b-a12b")
    # Nano: 23 Mamba blocks x (2688*(2*4096 + 2*1024 + 64) in_proj + (4096 + 2048)*5 conv + 3*64 + 4096 norm
    #   + 4096*2688 out_proj + 2688 norm) + 6 attention blocks x (2688*(4096 + 2*256) + 4096*2688 + 2688)
    #   + 23 MoE blocks x (128*2*2688*1856 + 2*2688*3712 + 2688*128 router + 2688) + 2 x 131072*2688 embeddings
    mamba = 2688 * (2 * 4096 + 2 * 1024 + 64) + 6144 * 5 + 3 * 64 + 4096 + 4096 * 2688 + 2688
    attn = 2688 * (4096 + 2 * 256) + 4096 * 2688 + 2688
    moe = 128 * 2 * 2688 * 1856 + 2 * 2688 * 3712 + 2688 * 128 + 2688
    emb = 2 * 131072 * 2688
    assert nano.n_params == pytest.approx(23 * mamba + 6 * attn + 23 * moe + emb, rel=1e-12)
    # the report's "31.6B total"; Megatron-Bridge's docs "3.5B active" (embeddings included)
    assert nano.n_params == pytest.approx(31.6e9, rel=0.005)
    assert nano.n_active_params == pytest.approx(3.58e9, rel=0.005)
    # Super: "120B total, 12B active"; routed experts in the 1024-wide latent: 512 x 2 x 1024 x 2688 per block
    assert 119e9 < sup.n_params < 122e9 and 12e9 < sup.n_active_params < 13e9
    no_latent = dataclasses.replace(sup, moe=dataclasses.replace(sup.moe, latent_size=0))
    assert no_latent.n_params > 3 * sup.n_params  # the latent is what keeps Super at 120B


def test_ultra_parameter_count_matches_its_name():
    ultra = bundled_model("nemotron3-ultra")
    # 48 Mamba blocks x (8192*(2*16384 + 2*8*128 + 256) in_proj + (16384 + 2048)*5 conv + 3*256 + 16384 norm
    #   + 16384*8192 out_proj + 8192 norm) + 12 attention blocks x (8192*(64*128 + 2*2*128) + 64*128*8192 + 8192)
    #   + 48 MoE blocks x (512*2*2048*5120 routed in the 2048 latent + 2*8192*10240 shared + 8192*512 router
    #   + 2*8192*2048 latent down/up + 8192) + 2 x 131072*8192 embeddings
    mamba = 8192 * (2 * 16384 + 2 * 1024 + 256) + 18432 * 5 + 3 * 256 + 16384 + 16384 * 8192 + 8192
    attn = 8192 * (8192 + 512) + 8192 * 8192 + 8192
    shared = 2 * 8192 * 10240 + 8192 * 512 + 2 * 8192 * 2048 + 8192
    emb = 2 * 131072 * 8192
    assert ultra.n_params == pytest.approx(48 * mamba + 12 * attn + 48 * (512 * 2 * 2048 * 5120 + shared) + emb,
                                           rel=1e-12)
    assert ultra.n_active_params == pytest.approx(48 * mamba + 12 * attn + 48 * (22 * 2 * 2048 * 5120 + shared) + emb,
                                                  rel=1e-12)
    # NVIDIA's "550B total, 55B active" (arXiv 2606.15007); the active count leaves out the input embedding, a lookup
    assert ultra.n_params == pytest.approx(550e9, rel=0.005)
    assert ultra.n_active_params - 131072 * 8192 == pytest.approx(55e9, rel=0.005)


def test_mamba_flops_hand_derived():
    m = model_params(bundled_model("nemotron3-nano-30b-a3b"))
    gemm, scan = (float(x) / float(m.mamba_fraction) for x in mamba_flops(1.0, 1.0, m))
    # in_proj 2*2688*(2*4096 + 2*8*128 + 64) + out_proj 2*4096*2688 per token
    assert gemm == 2 * 2688 * 10304 + 2 * 4096 * 2688 == 77_414_400
    # SSD with Q = 128: 2*(Q*G*N + Q*d_in + 2*d_in*N) = 2*(128*1024 + 128*4096 + 2*4096*128)
    assert scan == 2 * (128 * 1024 + 128 * 4096 + 2 * 4096 * 128) == 3_407_872
    assert float(m.mamba_fraction) == 23 / 52 and float(m.attn_fraction) == 6 / 52
    assert float(m.mlp_fraction) == 23 / 52 == float(m.moe_fraction)


def test_a_transformer_has_no_mamba_work():
    m = model_params(bundled_model("llama3-8B"))
    assert (float(m.attn_fraction), float(m.mlp_fraction), float(m.mamba_fraction)) == (1.0, 1.0, 0.0)
    assert all(float(x) == 0.0 for x in mamba_flops(2.0, 4096.0, m))
    assert float(activated_ffn(m)) == 14336.0


def _alternating(spec, layers):
    """The transformer `spec` written as hybrid blocks: attention, MLP, attention, MLP, ..."""
    return dataclasses.replace(spec, layers=2 * layers, hybrid=S.HybridSpec(
        pattern="*-" * layers, mamba_heads=1, mamba_head_dim=1, mamba_groups=1, mamba_state=1))


def test_attention_and_mlp_blocks_alternating_are_a_transformer():
    t = bundled_model("llama3-8B")
    h = _alternating(t, t.layers)
    h.validate()
    assert h.n_params == pytest.approx(t.n_params, rel=1e-9)  # one norm per block = two per layer
    tp_, hp = model_params(t), model_params(h)
    seq = 8192
    assert float(model_flops_per_sequence(seq, hp)) == pytest.approx(float(model_flops_per_sequence(seq, tp_)),
                                                                     rel=1e-12)
    # per stage: 2L blocks of half a layer's activations each
    a_t = activation_bytes_per_layer(1.0, seq, 2.0, 1.0, Recompute.NONE, tp_, hand_train(1.0, 1.0)) * t.layers
    a_h = activation_bytes_per_layer(1.0, seq, 2.0, 1.0, Recompute.NONE, hp, hand_train(1.0, 1.0)) * h.layers
    assert float(a_h) == pytest.approx(float(a_t), rel=1e-12)
    p_t, _ = params_per_gpu(2.0, 2.0, 1.0, tp_, t.layers / 2)
    p_h, _ = params_per_gpu(2.0, 2.0, 1.0, hp, h.layers / 2)
    assert float(p_h) == pytest.approx(float(p_t), rel=1e-6)


def test_latent_moe_dispatches_latent_rows_and_runs_narrow_experts():
    sup = bundled_model("nemotron3-super-120b-a12b")
    m = model_params(sup)
    wide = model_params(dataclasses.replace(sup, moe=dataclasses.replace(sup.moe, latent_size=0)))
    # dispatch bytes scale with the width of a routed row: 1024 / 4096
    assert float(moe_alltoall_bytes(1000.0, m)) / float(moe_alltoall_bytes(1000.0, wide)) == pytest.approx(0.25)
    # MoE FLOPs per token: 22 routed x 2 mats x 1024 x 2688 + shared 2 x 4096 x 5376 + latent down/up 2 x 4096 x 1024
    _, _, mlp, _ = layer_flops(1.0, 1.0, m, m.moe_fraction, imbalance=1.0)
    per_moe_block = float(mlp) / float(m.moe_fraction)
    assert per_moe_block == pytest.approx(2 * (22 * 2 * 1024 * 2688 + 2 * 4096 * 5376 + 2 * 4096 * 1024), rel=1e-12)


def test_moe_activation_width_counts_every_routed_expert():
    # GPT-OSS's model file sets ffn = expert_ffn (2880); a token activates top_k = 4 of them
    m = model_params(bundled_model("gpt-oss-120b"))
    assert float(activated_ffn(m)) == pytest.approx(4 * 2880)
    # DeepSeek-V3: 3 dense layers of 18432, 58 MoE layers of 8 x 2048 + 1 shared x 2048 = 18432
    assert float(activated_ffn(model_params(bundled_model("deepseek-v3")))) == pytest.approx(18432.0)


@pytest.mark.parametrize("edit, key", [
    (lambda t: t.replace('pattern: "MEMEM*', 'pattern: "MXMEM*'), "hybrid.pattern"),
    (lambda t: t.replace('pattern: "MEMEM*', 'pattern: "MEM*'), "hybrid.pattern"),
    (lambda t: t.replace("mamba_state: 128", "mamba_state: 0"), "hybrid.mamba_state"),
    (lambda t: t.replace("mamba_heads: 64", "mamba_head: 64"), "hybrid.mamba_head"),
    (lambda t: t.replace("shared_expert_ffn: 3712", "shared_expert_ffn: -1"), "moe.shared_expert_ffn"),
])
def test_bad_hybrid_yaml_names_file_and_key(tmp_path, edit, key):
    base = open(os.path.join(MODELS, "nemotron3-nano-30b-a3b.yaml")).read()
    bad = tmp_path / "h.yaml"
    bad.write_text(edit(base))
    with pytest.raises(S.ConfigError) as e:
        load_model(str(bad))
    assert "h.yaml" in str(e.value) and key in str(e.value)


def test_validation_scores_the_hybrid_runs():
    loaded = V.load_all()
    hybrid = [c for c in loaded.cases if c.scenario.model.hybrid is not None]
    # all 53 Nemotron-3 rows (the 12 Super rows with ep = 64 > dp = 32 fold their experts over tp x dp)
    assert len(hybrid) == 53
    assert not any("Mamba" in u.reason or "nemotron3" in u.id for u in loaded.unsupported)
    names = {c.scenario.model.name for c in hybrid}
    assert names == {"nemotron3-nano-30b-a3b", "nemotron3.5-lightning", "nemotron3-super-120b-a12b", "nemotron3-ultra"}
    # Ultra's two runs: the recipe's MTP passes and flex dispatcher, Megatron-FSDP's HSDP inside each NVL72 domain with
    # the optimizer state sharded across the domains
    ultra = [c for c in hybrid if c.scenario.model.name == "nemotron3-ultra"]
    assert len(ultra) == 2 and all(c.design["sharding"] == "hsdp" and c.design["ep"] == 64 for c in ultra)
    assert all(c.scenario.training.mtp_layers == 2 and c.scenario.training.ep_dedup for c in ultra)
    assert all((c.scenario.training.hsdp_shard, c.scenario.training.hsdp_outer) == ("node", "optim") for c in ultra)
    sup = next(c for c in hybrid if c.scenario.model.name == "nemotron3-super-120b-a12b")
    # the Super recipes train two MTP modules (configs/validation/recipes); a run without a recipe says so
    assert sup.scenario.model.moe.latent_size == 1024 and sup.scenario.training.mtp_layers == 2
    assert not any("multi-token" in a for a in sup.approximations)
    # a run whose notes name an MTP layer either trains it (from its recipe) or says it is left out
    for c in hybrid:
        if "MTP layer" in c.notes:
            assert (c.scenario.training.mtp_layers > 0) != any("multi-token" in a for a in c.approximations)
    results = V.evaluate_cases(hybrid)
    assert len(results) == 53
    assert all(r["metrics"]["feasible"] and np.isfinite(r["predicted"]) and r["predicted"] > 0 for r in results)

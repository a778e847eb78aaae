"""The MoE layer's host-side costs (compute.py: per local expert per grouped-GEMM pass, frameworks.yaml
expert_gemm_us, unless a full-iteration CUDA graph replays them; per MoE layer forward without a graph over the
router, moe_host_us) and the all-to-all count of its backward (moe.py): hand-derived values."""
import dataclasses
import os

import jax.numpy as jnp
import pytest

import sax_jax as sx
from sax_jax import specs as S
from sax_jax.config import load_frameworks, load_model
from sax_jax.cost import moe as M
from sax_jax.cost.compute import EXPERT_GEMMS_FWD, layer_times
from sax_jax.params import build_params
from sax_jax.resources import configs_dir
from sax_jax.validation import cuda_graphs_of

T_G = 20e-6  # a round fixed cost per expert per GEMM pass


@pytest.fixture(scope="module")
def ds():
    """DeepSeek-V3 (256 routed experts, 58 of 61 layers MoE) on the Mixtral scenario's H100 building."""
    sc = sx.load_scenario("mixtral-moe")
    model = load_model(os.path.join(configs_dir(), "models", "deepseek-v3.yaml"))
    p = build_params(dataclasses.replace(sc, model=model, expert_trace=None))
    return p._replace(gpu=p.gpu._replace(expert_gemm_s=jnp.float32(T_G)))


def _lt(p, ep, train=None):
    return layer_times(1.0, 1.0, 1.0, 4096.0, p.model, p.gpu, p.train if train is None else train, 1.0, 1.0, ep)


def test_each_local_expert_adds_its_gemm_passes(ds):
    """EP 8 -> 32 local experts, EP 64 -> 4: (32 - 4) x 58/61 MoE layers x 2 forward passes (fc1, fc2) x 20 us
    = 1.0649 ms more forward, twice that backward (dgrad and wgrad of each)."""
    lt8, lt64 = _lt(ds, 8.0), _lt(ds, 64.0)
    fwd = (256 / 8 - 256 / 64) * (58 / 61) * 2 * T_G
    assert float(lt8.fwd_s - lt64.fwd_s) == pytest.approx(fwd, rel=1e-3)
    assert float(lt8.bwd_s - lt64.bwd_s) == pytest.approx(2 * fwd, rel=1e-3)
    assert EXPERT_GEMMS_FWD == 2.0


def test_no_cost_without_experts_or_with_the_constant_at_zero(ds):
    dense = ds._replace(model=ds.model._replace(experts=jnp.float32(0.0)))
    assert float(_lt(dense, 1.0).fwd_s) == pytest.approx(float(_lt(dense, 64.0).fwd_s), rel=1e-7)
    free = ds._replace(gpu=ds.gpu._replace(expert_gemm_s=jnp.float32(0.0)))
    assert float(_lt(free, 8.0).fwd_s) == pytest.approx(float(_lt(free, 64.0).fwd_s), rel=1e-7)


def test_more_local_experts_never_faster(ds):
    times = [float(_lt(ds, ep).fwd_s + _lt(ds, ep).bwd_s) for ep in (1.0, 2.0, 8.0, 32.0, 256.0)]
    assert times == sorted(times, reverse=True)


def test_frozen_experts_skip_the_wgrad_passes(ds):
    """LoRA (base weights frozen): the backward runs only the dgrad pass per expert GEMM."""
    lora = ds.train._replace(lora=jnp.float32(1.0))
    d_fwd = float(_lt(ds, 8.0, lora).fwd_s - _lt(ds, 64.0, lora).fwd_s)
    d_bwd = float(_lt(ds, 8.0, lora).bwd_s - _lt(ds, 64.0, lora).bwd_s)
    assert d_bwd == pytest.approx(d_fwd, rel=1e-3)


def test_the_recomputed_moe_layer_runs_its_expert_gemms_again(ds):
    rc = ds.train._replace(rc_moe=jnp.float32(1.0))
    d = float(_lt(ds, 8.0, rc).recompute_selective_s - _lt(ds, 64.0, rc).recompute_selective_s)
    assert d == pytest.approx((256 / 8 - 256 / 64) * (58 / 61) * 2 * T_G, rel=1e-3)


def test_a_full_iteration_graph_replays_the_expert_gemms_without_launches(ds):
    full = ds.train._replace(graph_full=jnp.float32(1.0), graph_moe=jnp.float32(1.0))
    assert float(_lt(ds, 8.0, full).fwd_s) == pytest.approx(float(_lt(ds, 64.0, full).fwd_s), rel=1e-7)
    assert float(_lt(ds, 8.0, full).bwd_s) == pytest.approx(float(_lt(ds, 64.0, full).bwd_s), rel=1e-7)


def test_an_eager_router_waits_on_the_host_once_per_forward(ds):
    """moe_host 150 us per MoE layer forward: 58/61 x 150 us = 142.6 us more forward (and recomputed forward), no
    more backward; Transformer Engine's router/preprocess graphs (partial) remove it."""
    host = ds._replace(gpu=ds.gpu._replace(moe_host_s=jnp.float32(150e-6)))
    eager, graphed = host.train, host.train._replace(graph_moe=jnp.float32(1.0))
    assert float(_lt(host, 8.0, eager).fwd_s - _lt(host, 8.0, graphed).fwd_s) == pytest.approx(58 / 61 * 150e-6,
                                                                                                rel=1e-3)
    assert float(_lt(host, 8.0, eager).bwd_s) == pytest.approx(float(_lt(host, 8.0, graphed).bwd_s), rel=1e-6)
    rc = eager._replace(rc_moe=jnp.float32(1.0))
    rc_g = rc._replace(graph_moe=jnp.float32(1.0))
    assert float(_lt(host, 8.0, rc).recompute_selective_s - _lt(host, 8.0, rc_g).recompute_selective_s) == \
        pytest.approx(58 / 61 * 150e-6, rel=1e-3)


@pytest.mark.parametrize("recipe, graphs", [
    ("", "none"), ("full_iteration:default", "full"), ("local:full_iteration", "full"),
    ("transformer_engine:attn+moe_router+moe_preprocess", "partial"),
    ("transformer_engine:moe_router+moe_preprocess", "partial"), ("transformer_engine:default", "partial"),
    ("transformer_engine:mamba", "none"), ("local:full", "partial")])
def test_recipe_cuda_graph_scopes(recipe, graphs):
    assert cuda_graphs_of(recipe) == graphs


@pytest.mark.parametrize("recipe, graphs", [
    ("", "partial"), ("local:full", "full"), ("full_iteration:default", "full"),
    ("transformer_engine:attn+moe_router+moe_preprocess", "partial"), ("transformer_engine:mamba", "partial")])
def test_experts_padded_to_capacity_never_wait_on_the_host(recipe, graphs):
    """Drop-and-pad (token_dispatcher.py: no device-to-host copy of the token counts): the MoE forward never waits
    on the host, graphs or not; Megatron-Core's per-layer graphs then also replay the fixed-shape expert GEMMs."""
    assert cuda_graphs_of(recipe, static_experts=True) == graphs


@pytest.mark.parametrize("recipe, graphs", [
    ("", "none"), ("full_iteration:default", "full"), ("transformer_engine:attn+moe_router+moe_preprocess", "none"),
    ("transformer_engine:moe_router+moe_preprocess", "none"), ("transformer_engine:default", "none"),
    ("local:full", "none")])
def test_the_alltoall_dispatcher_waits_on_the_host_under_partial_graphs(recipe, graphs):
    """Megatron-Core's alltoall dispatcher, dropless, syncs before its all-to-all (token_dispatcher.py preprocess:
    "before_ep_alltoall", the split sizes as host values) whatever the graph scope; only a full-iteration graph
    (fixed shapes) or experts padded to capacity remove the wait."""
    assert cuda_graphs_of(recipe, alltoall_dispatcher=True) == graphs
    assert cuda_graphs_of(recipe, static_experts=True, alltoall_dispatcher=True) == \
        cuda_graphs_of(recipe, static_experts=True)


def test_recipes_on_the_alltoall_dispatcher_keep_their_host_wait():
    """GPT-OSS 120B on GB300 (26.04): TE graphs of attention, router and preprocess with the alltoall dispatcher:
    eager MoE path; Qwen3-30B-A3B on GB300 (26.04): the same graphs with the flex dispatcher (HybridEP): partial."""
    from sax_jax import validation as V
    cases, _ = V.load_cases(dataset="megatron-bridge-gb300")
    c = {x.id: x.scenario.training for x in cases}
    assert c["mb-26.04-gb300-gpt-oss-120b-pretrain-bf16-64g-gbs1280"].cuda_graphs == "none"
    gpt = next(x for x in cases if x.id == "mb-26.04-gb300-gpt-oss-120b-pretrain-bf16-64g-gbs1280")
    assert any(f.startswith("cuda_graphs=none") and "alltoall dispatcher" in f for f in gpt.filled)
    # a dense model has no dispatcher: Llama 3 8B's per-layer graphs (25.09, local:full) keep their mapping and report
    b200, _ = V.load_cases(dataset="megatron-bridge-b200")
    llama = next(x for x in b200 if x.id == "mb-25.09-b200-llama3-8B-pretrain-fp8-8g-gbs128")
    assert llama.scenario.training.cuda_graphs == "partial"
    assert not any("alltoall dispatcher" in f for f in llama.filled)
    assert c["mb-26.04-gb300-qwen3-30b-a3b-pretrain-mxfp8-8g-gbs512"].cuda_graphs == "partial"


def test_unknown_cuda_graph_scope_names_the_key():
    with pytest.raises(S.ConfigError, match="training.cuda_graphs"):
        S.Training(64, 4096, cuda_graphs="everything").validate("scenario.yaml")


def test_megatron_te_carries_the_fitted_constants():
    fw = load_frameworks()["megatron-te"]
    assert 1.0 < fw.expert_gemm_us < 100.0 and 10.0 < fw.moe_host_us < 5000.0  # calibrate.py --moe-host
    assert load_frameworks()["torchtitan"].expert_gemm_us == 0.0 == load_frameworks()["torchtitan"].moe_host_us


def test_backward_runs_the_reverse_all_to_alls_once():
    """dispatch + combine forward, their gradients (the reverse all-to-alls, same bytes) backward: 2 and 2."""
    assert (M.FWD_ALLTOALLS, M.BWD_ALLTOALLS) == (2.0, 2.0)

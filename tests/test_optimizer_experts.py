"""The optimizer step updates expert weights over their expert-data-parallel ranks, not over the whole data-parallel
group (cost/optimizer.py): Megatron-Core's distributed optimizer shards its expert buffers over the
expert-data-parallel group, dp x cp / ep ranks. At EP = DP (GPT-OSS 120B on 64 GB200s: EP 64, DP 64) no two
GPUs hold the same expert, so each GPU updates all of its experts' weights and 1/64 of the dense ones."""
import jax.numpy as jnp
import numpy as np

from sax_jax import validation as V
from sax_jax.cost.context import context
from sax_jax.cost.optimizer import ADAM_BYTES_PER_PARAM, optimizer_term
from sax_jax.params import build_params
from sax_jax.space import AXES, NUMERIC_AXES, Design

ROW = "mb-26.04-gb200-gpt-oss-120b-pretrain-bf16-64g-gbs1280"


def _ctx(case, **design):
    p = build_params(case.scenario)
    d = case.scenario.space.design({**case.design, **design})
    d = Design(*[jnp.asarray(getattr(d, ax), jnp.float32 if ax in NUMERIC_AXES else jnp.int32) for ax in AXES])
    return p, d, context(p, d)


def test_expert_weights_update_over_expert_data_parallel_ranks():
    cases, _ = V.load_cases(dataset="megatron-bridge-gb200")
    case = next(c for c in cases if c.id == ROW)
    assert (case.design["ep"], case.design["dp"], case.design["sharding"]) == (64, 64, "zero1")
    p, d, ctx = _ctx(case)
    dense, expert = float(ctx.params_dense), float(ctx.params_expert)
    # GPT-OSS 120B: 2 of 128 experts per GPU x 36 layers x 3 x 2880^2 ~ 1.8e9 expert weights beside ~2.1e9 dense
    # ones (attention, router, the two 201,088 x 2880 embeddings)
    assert 1.7e9 < expert < 1.9e9 and 2.0e9 < dense < 2.3e9
    bw = float(p.gpu.hbm_Bps * p.gpu.memory_bound)
    step_s = float(optimizer_term(ctx, d, p.gpu, p.train).step_s)
    np.testing.assert_allclose(step_s, (dense / 64 + expert) * ADAM_BYTES_PER_PARAM / bw, rtol=4e-6)
    # ~16 ms on a GB200 where sharding the experts like the dense weights had said 0.5 ms
    assert 0.010 < step_s < 0.025


def test_expert_shards_follow_ep_and_stay_at_least_one():
    """EP 8 of DP 64: 8 expert-data-parallel ranks share each expert's update; no sharding (zero0): none."""
    cases, _ = V.load_cases(dataset="megatron-bridge-gb200")
    case = next(c for c in cases if c.id == ROW)
    p, d8, ctx8 = _ctx(case, ep=8)
    dense, expert = float(ctx8.params_dense), float(ctx8.params_expert)
    bw = float(p.gpu.hbm_Bps * p.gpu.memory_bound)
    np.testing.assert_allclose(float(optimizer_term(ctx8, d8, p.gpu, p.train).step_s),
                               (dense / 64 + expert / 8) * ADAM_BYTES_PER_PARAM / bw, rtol=4e-6)
    p, d0, ctx0 = _ctx(case, sharding="zero0")
    np.testing.assert_allclose(float(optimizer_term(ctx0, d0, p.gpu, p.train).step_s),
                               (float(ctx0.params_dense) + float(ctx0.params_expert)) * ADAM_BYTES_PER_PARAM / bw,
                               rtol=4e-6)


def test_update_traffic_follows_the_optimizer_state_bytes():
    """Adam's update reads and writes its state once (2 x state bytes) plus the fp32 gradient read and the 16-bit
    weight write (6 B): fp32 master, m, v -> 30 B; Apex's bf16 state (NeMo 24.07's fine-tuning launcher, 6 B) ->
    18 B. The 70B SFT row (TP 4, PP 4, DP 1: no sharding) updates all 4.34e9 parameters of its first stage."""
    from sax_jax.cost.optimizer import adam_traffic_bytes
    assert (adam_traffic_bytes(12.0), adam_traffic_bytes(6.0)) == (30.0, 18.0)
    cases, _ = V.load_cases(dataset="nvidia-finetune")
    case = next(c for c in cases if c.id == "nemo-24.07-h100-llama2-70B-sft-fp8-16g-gbs32")
    p, d, ctx = _ctx(case)
    assert float(p.train.opt_bytes) == 6.0
    bw = float(p.gpu.hbm_Bps * p.gpu.memory_bound)
    np.testing.assert_allclose(float(optimizer_term(ctx, d, p.gpu, p.train).step_s),
                               float(ctx.params_dense) * 18.0 / bw, rtol=4e-6)

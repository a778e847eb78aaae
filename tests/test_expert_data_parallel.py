"""Expert weights synchronize over their expert-data-parallel ranks (cost/context.py edp_k, cost/dp.py): the ranks
that hold the same experts. Megatron-Core keeps expert gradients in buffers of their own on the expert-data-parallel
group (dp x cp / ep ranks; folded tp x cp x dp / (etp ep)), so where EP takes every dp rank of a node or building
there is no replica there to reduce with: the whole expert gradient leaves it."""
import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from sax_jax import validation as V
from sax_jax.cost.context import context
from sax_jax.cost.dp import dp_term, expert_shards, multirail_ring_reduce_scatter_s
from sax_jax.params import build_params
from sax_jax.space import AXES, NUMERIC_AXES, Design

from conftest import CONFIGS

ROW = "mb-26.04-b200-gpt-oss-120b-pretrain-bf16-64g-gbs1280"  # 64 B200s, 8 per node, DP 64, EP 8


def _design(space, values):
    d = space.design(values)
    return Design(*[jnp.asarray(getattr(d, ax), jnp.float32 if ax in NUMERIC_AXES else jnp.int32) for ax in AXES])


@pytest.fixture(scope="module")
def gpt_oss():
    cases, _ = V.load_cases(dataset="megatron-bridge-b200")
    case = next(c for c in cases if c.id == ROW)
    return case, build_params(case.scenario)


@pytest.mark.parametrize("ep, edp", [(8, [1, 8]), (64, [1, 1]), (1, [8, 8]), (2, [4, 8])])
def test_expert_data_parallel_ranks_per_level(gpt_oss, ep, edp):
    # dp 64 = 8 per node x 8 nodes; EP takes the inner dp ranks: EP 8 fills a node, so each expert's other holders
    # sit one per node on the 7 other nodes
    case, p = gpt_oss
    d = _design(case.scenario.space, {**case.design, "ep": ep})
    ctx = context(p, d)
    np.testing.assert_array_equal(np.asarray(ctx.grad_k), [8, 8])
    np.testing.assert_array_equal(np.asarray(ctx.edp_k), edp)
    # the same count the memory model and the optimizer shard the expert state over
    assert float(jnp.prod(ctx.edp_k)) == float(expert_shards(ctx.grad_shards, ctx, d))


def test_expert_gradient_leaves_the_node_through_one_nic(gpt_oss):
    # multi-rail ring over levels k: each GPU of a node sends over its own NIC, so a byte of a gradient spread over
    # 8 GPUs in each of 8 nodes crosses the network at 8 x the per-GPU rate (63/64 / 8 of it per GPU); an expert
    # gradient at EP 8 has one holder per node: 7/8 of it through the GPU's own NIC, 64/63 x 7/8 x 8 = 7.1x as long
    case, p = gpt_oss
    bw = p.net.bw_Bps
    size = 1e9
    dense = float(multirail_ring_reduce_scatter_s(jnp.asarray([8.0, 8.0]), size, jnp.zeros(2), bw))
    expert = float(multirail_ring_reduce_scatter_s(jnp.asarray([1.0, 8.0]), size, jnp.zeros(2), bw))
    np.testing.assert_allclose(dense, 63 / 64 * size / (8 * float(bw[1])), rtol=1e-5)
    np.testing.assert_allclose(expert, 7 / 8 * size / float(bw[1]), rtol=1e-5)
    # and the step pays for it: more exposed data-parallel time at EP 8 than if experts reduced like dense weights
    d8 = _design(case.scenario.space, {**case.design, "ep": 8})
    ctx = context(p, d8)
    as_dense = ctx._replace(edp_k=ctx.grad_k, edp_k_building=ctx.grad_k_building, edp_k_across=ctx.grad_k_across)
    assert float(dp_term(ctx, d8, p.train, p.gpu).step_s) > float(dp_term(as_dense, d8, p.train, p.gpu).step_s)


def test_expert_gradients_cross_the_campus_in_full():
    """DeepSeek-V3 on two H100 buildings with dp outermost (tp 8 x pp 16 x dp 128: 64 dp ranks a building) and EP 64
    inside the building: each expert's only other holder is in the other building. ZeRO-1 reduce-scatters the
    gradients (4 bytes) and all-gathers the 2-byte parameters; on the campus level a group of 2 carries
    2 (2 - 1)/2 = 1 message per GPU, so the expert part is 0.5 x (4 + 2) B x experts per GPU x 16,384 GPUs. The
    dense weights reduce inside each building first and only 1/64 of them crosses."""
    sc = sx.load_scenario(f"{CONFIGS}/scenarios/deepseek-v3-two-buildings.yaml")
    p = build_params(sc)
    values = {**sc.baselines["across"], "ep": 64}
    d = _design(sc.space, values)
    ctx = context(p, d)
    assert float(jnp.prod(ctx.grad_k_across)) == 2.0 and float(jnp.prod(ctx.grad_k_building)) == 64.0
    assert float(jnp.prod(ctx.edp_k_across)) == 2.0 and float(jnp.prod(ctx.edp_k_building)) == 1.0
    n = float(p.train.n_gpus)
    per_param = 0.5 * float(p.train.grad_reduce_bytes + p.train.param_gather_bytes)
    expert = per_param * float(ctx.params_expert) * n
    dense = per_param * float(ctx.params_dense) * n / 64.0
    got = float(dp_term(ctx, d, p.train, p.gpu).cross_bytes)
    np.testing.assert_allclose(got, expert + dense, rtol=1e-5)
    assert expert > 10 * dense  # experts are most of DeepSeek-V3: their gradients dominate what crosses


def test_diloco_outer_sync_sends_each_experts_whole_slice():
    """DiLoCo with one worker per building (H = 100, fp32 outer gradient) on the same layout: inside a building the
    dense weights have 64 holders, each sending 1/64 of them, the experts one holder, sending all of its experts.
    Across the campus (2 workers: 2 (2 - 1)/2 = 1 message per GPU) a step then carries
    (dense / 64 + experts) x 4 B x 16,384 GPUs / 100, and the outer optimizer state is kept for that slice."""
    from sax_jax.cost.outer_sync import outer_sync_term
    sc = sx.load_scenario(f"{CONFIGS}/scenarios/deepseek-v3-two-buildings.yaml")
    p = build_params(sc)
    d = _design(sc.space, {**sc.baselines["across"], "ep": 64, "dp_sync": "diloco", "sync_every": 100})
    ctx = context(p, d)
    assert bool(ctx.local_sync)
    np.testing.assert_array_equal(np.asarray(ctx.grad_k_outer), [1, 1, 2])
    np.testing.assert_array_equal(np.asarray(ctx.edp_k), [1, 1, 1])
    term = outer_sync_term(ctx, d, p.train, p.gpu, 1.0)
    held = float(ctx.params_dense) / 64 + float(ctx.params_expert)
    np.testing.assert_allclose(float(term.cross_bytes), held * 4 * float(p.train.n_gpus) / 100, rtol=1e-5)
    np.testing.assert_allclose(float(term.memory_bytes), held * float(p.train.outer_state_bytes), rtol=1e-5)


def test_expert_sync_is_compiled_only_for_models_with_experts():
    """Topology.expert_sync is a static switch, not physics: a dense model's program leaves the expert group out,
    and computing it anyway (validation does, to stack cases of every model) gives the same numbers."""
    import dataclasses
    from sax_jax.evaluate import evaluate
    dense_sc = sx.load_scenario(f"{CONFIGS}/scenarios/default.yaml")
    moe_sc = sx.load_scenario(f"{CONFIGS}/scenarios/deepseek-v3-two-buildings.yaml")
    p = build_params(dense_sc)
    assert not p.topology.expert_sync and build_params(moe_sc).topology.expert_sync
    idx = np.random.default_rng(1).integers(0, dense_sc.space.size, 64)
    designs = dense_sc.space.decode(jnp.asarray(idx, jnp.int32))
    off = evaluate(dense_sc, designs, p)
    on = evaluate(dense_sc, designs, p._replace(topology=dataclasses.replace(p.topology, expert_sync=True)))
    for name in ("step_time_s", "cross_building_bytes", "memory_bytes"):
        a, b = np.asarray(getattr(off, name)), np.asarray(getattr(on, name))
        np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
        np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=1e-6, err_msg=name)


def test_frozen_experts_add_no_step_reduction(gpt_oss):
    """LoRA freezes the experts: the distributed optimizer has no expert gradient to reduce nor expert update to
    gather, so ZeRO-1's per-step sync is the adapters' alone, as if the model had no experts."""
    case, p = gpt_oss
    d = _design(case.scenario.space, case.design)
    ctx = context(p, d)
    lora = p.train._replace(lora=jnp.asarray(1.0, jnp.float32))
    with_experts = float(dp_term(ctx, d, lora, p.gpu).step_s)
    without = float(dp_term(ctx._replace(params_expert=jnp.zeros_like(ctx.params_expert)), d, lora, p.gpu).step_s)
    assert with_experts == without

"""Pipeline stage split (cost/stages.py): hand-derived slowest stages and the feasibility bound it allows."""
import pytest

from sax_jax.cost.stages import SPLIT_COUNTED, SPLIT_FILLED, filled_chunks, slowest_stage, stage_layers

from conftest import f32 as F


@pytest.mark.parametrize("layers,pp,vpp,layer_s,logits_s,expected", [
    # Llama 3 405B, PP 16 x VP 8: 126 layers + embedding + loss = 128 units, one per chunk: 8 layers on a middle
    # stage and 7 + the output layer on the last; a middle stage is the slowest when logits < one layer
    (126, 16, 8, 1.0, 0.5, (8.0, 0.0)),
    # ... and the last one when the output layer costs more than a layer (huge vocabulary): 7 layers + logits
    (126, 16, 8, 1.0, 1.5, (7.0, 1.0)),
    # Llama 3 70B, PP 8 x VP 5: 80 / 40 = 2 per chunk; counting the 2 extra units would make it 3: plain split,
    # the last stage has 10 layers + logits
    (80, 8, 5, 1.0, 0.5, (10.0, 1.0)),
    # one stage holds everything
    (32, 1, 1, 1.0, 0.5, (32.0, 1.0)),
    # 96 layers, PP 8: plain 12 + logits (12.5) vs counted ceil(98/8) = 13 layers: plain wins
    (96, 8, 1, 1.0, 0.5, (12.0, 1.0)),
    # 94 layers, PP 8: plain ceil(94/8) = 12 + logits = 12.5; counted ceil(96/8) = 12 layers, no logits: 12
    (94, 8, 1, 1.0, 0.5, (12.0, 0.0)),
])
def test_slowest_stage_golden(layers, pp, vpp, layer_s, logits_s, expected):
    n, with_logits = slowest_stage(F(layers), F(pp), F(vpp), F(layer_s), F(logits_s))
    assert (float(n), float(with_logits)) == expected


@pytest.mark.parametrize("layers,pp,vpp,first,last", [
    # Megatron-Bridge's DeepSeek-V3 / Kimi-K2 layouts (recipes/deepseek/deepseek_v3.py): 61 layers, 4 per chunk
    # and the last chunk 1: PP 4 x VP 4 -> 16, 16, 16, 13; PP 8 -> 8 x 7 + 5; PP 4 x VP 2 -> stage 3 holds chunks
    # 3 and 7: 8 + 5; PP 16 -> 4 x 15 + 1; PP 4 -> 16, 16, 16, 13
    (61, 4, 4, 16, 13), (61, 8, 1, 8, 5), (61, 4, 2, 16, 13), (61, 16, 1, 4, 1), (61, 4, 1, 16, 13),
    # 61 layers on 32 chunks of 2: chunk 30 holds the last layer and chunk 31 (stage 7's) none: 8 and 6
    (61, 8, 4, 8, 6),
    # layers that divide: every stage the same
    (80, 8, 5, 10, 10), (126, 1, 1, 126, 126),
])
def test_filled_chunks_match_the_recipe_layouts(layers, pp, vpp, first, last):
    f, l_ = filled_chunks(F(layers), F(pp), F(vpp))
    assert (float(f), float(l_)) == (first, last)


def test_filled_split_puts_the_short_chunk_on_the_last_stage():
    """DeepSeek-V3 at PP 4 x VP 4 with MTP (a layer 1 s, logits 1.8 s, MTP 2.8 s): the recipe's layout runs 13 layers
    + 4.6 s = 17.6 s on the last stage against 16 s on the first; before the filled split the model charged the last
    stage 16 layers + 4.6 s = 20.6 s (DeepSeek-V3 runs came out 13-26% slow on every Blackwell part)."""
    n, with_logits, other, first = stage_layers(F(61), F(4), F(4), F(1.0), F(1.8), F(2.8), F(SPLIT_FILLED))
    assert (float(n), float(with_logits), float(other), float(first)) == (13.0, 1.0, 16.0, 16.0)
    # auto takes it too (counting 3 MTP units and 2 more would make 20 layers per stage)
    n_auto = stage_layers(F(61), F(4), F(4), F(1.0), F(1.8), F(2.8))[0]
    assert float(n_auto) == 13.0


def test_counted_split_is_what_the_405b_recipe_runs():
    """Llama 3.1 405B, PP 8 x VP 4 with heavy logits (3 layers): the recipe counts the embedding and the loss, so
    the last stage holds 3 x 4 + 3 = 15 layers + logits = 18; filling the chunks would leave it 14 + 3 = 17 (what
    auto picks), which is not the run's layout."""
    args = (F(126), F(8), F(4), F(1.0), F(3.0))
    n, _, other, first = stage_layers(*args, F(0.0), F(SPLIT_COUNTED))
    # 4 units per chunk: the first stage holds the embedding + 3 + 4 + 4 + 4 layers, a middle stage 16
    assert (float(n), float(other), float(first)) == (15.0, 16.0, 15.0)
    assert float(stage_layers(*args)[0]) == 14.0
    assert float(stage_layers(*args, F(0.0), F(SPLIT_FILLED))[0]) == 14.0


def test_pipeline_units_bound_feasibility():
    """pp x vpp may reach layers + 2 (embedding and loss as units) with pp > 1, not beyond."""
    import sax_jax as sx
    from sax_jax.cost.feasibility import VIOLATIONS
    from sax_jax.evaluate import evaluate_one
    sc = sx.load_scenario("default")  # Llama 3 405B: 126 layers
    bit = 1 << [name for name, _ in VIOLATIONS].index("LAYERS_PP")
    base = sc.space.to_dict(sc.baseline_design())
    for pp, vpp, ok in ((16, 8, True), (2, 64, True), (1, 127, False)):
        d = sc.space.design(dict(base, pp=pp, vpp=vpp, schedule="interleaved" if vpp > 1 else "1f1b"))
        assert (not evaluate_one(sc, d)["violation"] & bit) == ok, (pp, vpp)


def _deepseek_pp16():
    """DeepSeek-V3 on 256 B200 at PP 16 (Megatron-Bridge 25.09): 61 layers as 15 chunks of 4 and 1, so the first
    stage holds 4 layers and the last 1 + MTP + the output layer, with EP 8 all-to-alls in every MoE layer."""
    from sax_jax import validation as V
    from sax_jax.params import build_params
    cases, _ = V.load_cases()
    case = next(c for c in cases if c.id == "mb-25.09-b200-deepseek-v3-pretrain-fp8-256g-gbs2048")
    return build_params(case.scenario), case.scenario.space.design(case.design)


def test_slowest_stage_weighs_the_communication_each_layer_exposes():
    """The stage split is chosen on a layer's kernels and the TP/CP/EP communication it leaves exposed. On kernels
    alone a faster layer (here: each local expert's grouped-GEMM launch 2.3 us shorter) makes the last stage (1 layer
    + MTP + output layer) look the slowest, and the step then counted the EP all-to-alls of 1 layer where the first
    stage runs 4: DeepSeek-V3's step fell 1.4 s (10%) for that 2.3 us."""
    import jax.numpy as jnp
    from sax_jax.cost.context import context, restaged
    from sax_jax.cost.moe import ep_term
    from sax_jax.cost.stage_cost import last_stage_extra_s, stage_layer_s
    from sax_jax.cost.step import step_time
    params, d = _deepseek_pp16()
    for us in (32.76, 30.5):
        p = params._replace(gpu=params.gpu._replace(expert_gemm_s=jnp.float32(us * 1e-6)))
        ctx = context(p, d)
        layer_s = stage_layer_s(ctx, d, p)
        staged = restaged(ctx, p.model, p.train, d.pp, d.vpp, layer_s)
        # the first stage: 4 layers with their all-to-alls, more than 1 layer + MTP + the output layer
        assert float(4.0 * layer_s) > float(layer_s + last_stage_extra_s(staged))
        assert (float(staged.layers_stage), float(staged.with_logits)) == (4.0, 0.0)
        cost = step_time(p, d)
        # the EP term is the first stage's: 4 layers' all-to-alls per microbatch (plus EPLB's step part, 0 here)
        one = ctx._replace(layers_stage=jnp.ones_like(ctx.layers_stage))
        ep_layer_s = float(ep_term(one, d, p.model, p.train, p.gpu, p.experts)[0].stage_s)
        assert ep_layer_s > 0.0
        assert float(cost.breakdown.ep) == pytest.approx(float(ctx.microbatches) * 4.0 * ep_layer_s, rel=1e-5)
    # and the step is continuous in the launch time: 0.25 us steps move it by what 0.25 us of launches costs
    steps = []
    for us in (31.5, 31.25, 31.0, 30.75, 30.5):
        p = params._replace(gpu=params.gpu._replace(expert_gemm_s=jnp.float32(us * 1e-6)))
        steps.append(float(step_time(p, d).step_time_s))
    jumps = [abs(a - b) / a for a, b in zip(steps, steps[1:])]
    assert max(jumps) < 0.005, steps

"""What a training recipe adds beyond the layout: the modules selective recompute recomputes, layers a
low-precision recipe keeps in BF16, multi-token-prediction modules, and MoE all-to-alls overlapped with another
microbatch's compute. Each defaults to what the model did before (tests/test_golden.py keeps those numbers)."""
import dataclasses
import os

import jax.numpy as jnp
import pytest

import sax_jax as sx
from sax_jax import specs as S
from sax_jax.config import load_model
from sax_jax.cost.compute import bf16_layer_share, layer_times, logits_times
from sax_jax.cost.stages import slowest_stage
from sax_jax.evaluate import evaluate_one
from sax_jax.params import build_params
from sax_jax.resources import configs_dir

REL = 1e-6


@pytest.fixture(scope="module")
def moe():
    """Mixtral 8x7B on an H100 building, as DeepSeek-V3 (MLA, shared expert, dense first layers) in FP8."""
    sc = sx.load_scenario("mixtral-moe")
    ds = load_model(os.path.join(configs_dir(), "models", "deepseek-v3.yaml"))
    # the recipe terms under the model's constant imbalance: without the scenario's (Mixtral) activation trace
    return dataclasses.replace(sc, model=ds, training=dataclasses.replace(sc.training, precision="fp8"), expert_trace=None)


def _with(sc, **training):
    return dataclasses.replace(sc, training=dataclasses.replace(sc.training, **training))


DESIGN = {"tp": 2, "pp": 4, "ep": 8, "mbs": 1, "recompute": "selective", "schedule": "1f1b"}


def _cost(sc, **axes):
    return evaluate_one(sc, sc.space.design({**DESIGN, **axes}))


def test_default_recompute_modules_are_megatrons():
    assert S.Training(1, 1).recompute_modules == ("core_attn",)


@pytest.mark.parametrize("extra", [("mlp",), ("moe",), ("moe_act",), ("shared_experts",), ("layernorm",),
                                   ("mla_up_proj",), ("moe", "moe_act", "layernorm", "mla_up_proj")])
def test_each_recomputed_module_costs_time_and_saves_memory(moe, extra):
    base = _cost(moe)
    more = _cost(_with(moe, recompute_modules=("core_attn",) + extra))
    assert more["breakdown"]["compute"] > base["breakdown"]["compute"]
    assert more["memory_bytes"] < base["memory_bytes"]
    # nothing but the selective recompute changes
    assert _cost(_with(moe, recompute_modules=("core_attn",) + extra), recompute="none") == \
        _cost(moe, recompute="none")


def test_recomputed_modules_add_their_forward_time(moe):
    """moe + moe_act: the experts' activation is part of the MoE layer recomputed, counted once."""
    p0 = build_params(moe)
    p1 = build_params(_with(moe, recompute_modules=("core_attn", "moe")))
    p2 = build_params(_with(moe, recompute_modules=("core_attn", "moe", "moe_act", "shared_experts")))
    args = (2.0, 1.0, 1.0, 4096.0)
    lt0, lt1, lt2 = (layer_times(*args, p.model, p.gpu, p.train, 4.0, 1.0, 8.0) for p in (p0, p1, p2))
    assert float(lt1.recompute_selective_s) > float(lt0.recompute_selective_s)
    assert float(lt2.recompute_selective_s) == pytest.approx(float(lt1.recompute_selective_s), rel=1e-6)
    # recomputing everything a layer's forward has is at most that forward again
    assert float(lt2.recompute_selective_s) < float(lt0.fwd_s)


def test_unknown_recompute_module_names_the_key(tmp_path):
    text = open(os.path.join(configs_dir(), "scenarios", "mixtral-moe.yaml")).read()
    for bad, what in (("[core_attn, mpl]", "mpl"), ("mlp", "must be a list")):
        path = tmp_path / "s.yaml"
        path.write_text(text.replace("precision: bf16}", f"precision: bf16, recompute_modules: {bad}}}")
                        .replace("../", os.path.join(configs_dir(), "")))
        with pytest.raises(S.ConfigError) as e:
            sx.load_scenario(str(path))
        assert "training.recompute_modules" in str(e.value) and what in str(e.value)


class _T:
    def __init__(self, start, end):
        self.bf16_start, self.bf16_end = start, end


class _M:
    layers = 88.0


@pytest.mark.parametrize("start, end, pp, vpp, share", [
    (0, 14, 1, 1, 14 / 88),  # Nemotron 3 Super NVFP4: the last 14 of 88 layers, one stage: every GPU
    (0, 14, 4, 1, 14 / 22),  # four stages of 22: all 14 on the last
    (0, 14, 4, 2, 11 / 22),  # ... in chunks of 11: the last chunk holds 11 of them
    (1, 1, 4, 1, 1 / 22),  # first and last layer: one on each end stage
    (50, 50, 1, 1, 1.0),  # more than the model: all of them
])
def test_bf16_layer_share_on_the_fullest_gpu(start, end, pp, vpp, share):
    assert float(bf16_layer_share(_M, _T(start, end), pp, vpp)) == pytest.approx(share, rel=1e-6)


def test_bf16_layers_slow_a_low_precision_run_towards_bf16(moe):
    low = _cost(moe, pp=1)["raw_step_time_s"]
    some = _cost(_with(moe, bf16_layers_end=14), pp=1)["raw_step_time_s"]
    every = _cost(_with(moe, bf16_layers_start=61), pp=1)["raw_step_time_s"]
    bf16 = _cost(_with(moe, precision="bf16"), pp=1)["raw_step_time_s"]
    assert low < some < every
    # all layers' GEMMs in BF16 is the BF16 run up to the stored-input bytes (FP8 saves 1-byte GEMM inputs)
    assert every == pytest.approx(bf16, rel=0.02)


def test_mtp_adds_a_layer_and_an_output_layer_on_the_last_stage(moe):
    """One stage: every microbatch pays one more layer and one more output layer + loss."""
    base, mtp = _cost(moe, pp=1), _cost(_with(moe, mtp_layers=1), pp=1)
    p = build_params(moe)
    lt = layer_times(2.0, 1.0, 1.0, 4096.0, p.model, p.gpu, p.train, 1.0, 1.0, float(DESIGN["ep"]))
    lf, lb = logits_times(2.0, 1.0, 1.0, 4096.0, p.model, p.gpu)
    micro = moe.training.global_batch_sequences / (moe.system.n_gpus / 2)
    added = mtp["breakdown"]["compute"] - base["breakdown"]["compute"]
    assert added == pytest.approx(micro * float(lt.fwd_s + lt.bwd_s + lf + lb), rel=1e-4)


@pytest.mark.parametrize("mtp_s, layers_stage, with_logits", [
    # 60 layers on 4 stages, a layer 1 s, logits 0.5 s. No MTP: 15 per stage, the last one 15 + 0.5
    (0.0, 15.0, 1.0),
    # MTP 1.5 s = 2 units: plain split 15 + 0.5 + 1.5 = 17 s on the last stage; counting embedding, loss and MTP
    # as units, ceil(64 / 4) = 16 per stage and the last holds 16 - 1 - 2 = 13 layers + 2 s = 15 s: 16 s is faster
    (1.5, 16.0, 0.0),
])
def test_mtp_moves_layers_off_the_last_stage(mtp_s, layers_stage, with_logits):
    n, last = slowest_stage(60.0, 4.0, 1.0, 1.0, 0.5, mtp_s)
    assert (float(n), float(last)) == (layers_stage, with_logits)


def test_recomputing_the_moe_module_runs_its_all_to_alls_again(moe):
    """Megatron-Core checkpoints the whole MoE layer forward when selective recompute names "moe" (moe_layer.py:
    tensor_parallel.checkpoint over router, dispatch, experts, combine), so a layer's all-to-alls go from 2 forward +
    2 backward to 2 + 2 + 2: 1.5x the exposed expert-parallel time, without EP overlap. Other modules leave them."""
    base = _cost(moe)["breakdown"]["ep"]
    assert base > 0
    assert _cost(_with(moe, recompute_modules=("core_attn", "moe")))["breakdown"]["ep"] == pytest.approx(1.5 * base,
                                                                                                         rel=1e-5)
    assert _cost(_with(moe, recompute_modules=("core_attn", "moe_act", "layernorm")))["breakdown"]["ep"] == \
        pytest.approx(base, rel=REL)
    # full recompute reruns them too; no recompute does not
    assert _cost(moe, recompute="full")["breakdown"]["ep"] == pytest.approx(1.5 * base, rel=1e-5)
    assert _cost(_with(moe, recompute_modules=("core_attn", "moe")), recompute="none")["breakdown"]["ep"] == \
        pytest.approx(_cost(moe, recompute="none")["breakdown"]["ep"], rel=REL)


def test_ep_overlap_hides_all_to_alls_and_never_slows(moe):
    # 16x the scenario's batch: 16-64 microbatches per pipeline, so that the 1F1B has a steady state to pair them in
    # (test_ep_overlap_leaves_the_unpaired_passes_exposed)
    moe = _with(moe, global_batch_sequences=16 * moe.training.global_batch_sequences)
    for axes in ({}, {"ep": 4, "tp": 1}, {"mbs": 2}):
        plain, over = _cost(moe, **axes), _cost(_with(moe, ep_overlap=True), **axes)
        assert over["breakdown"]["ep"] < plain["breakdown"]["ep"]
        assert over["raw_step_time_s"] <= plain["raw_step_time_s"]
        # what stays is at least the SMs the all-to-all kernels take while they hide (overlap.exposed_s)
        g = moe.system.gpu
        assert over["breakdown"]["ep"] >= plain["breakdown"]["ep"] * g.comm_sms / g.sm_count * (1 - 1e-6)


def test_ep_overlap_needs_two_microbatches(moe):
    one = _with(moe, global_batch_sequences=moe.system.n_gpus // 8)  # dp x mbs sequences: one microbatch
    assert _cost(_with(one, ep_overlap=True))["breakdown"]["ep"] == pytest.approx(_cost(one)["breakdown"]["ep"],
                                                                                    rel=REL)


def test_unpaired_passes_of_the_combined_1f1b():
    """Megatron-Core's combined 1F1B runs the first forward and the last backward alone without pipelining (1 of m
    each way); interleaved, the first stage's warmup, 2 (pp - 1) + (vpp - 1) pp + 1 chunks, of its m vpp."""
    from sax_jax.cost.moe import unpaired_share
    assert float(unpaired_share(1.0, 1.0, 5.0)) == pytest.approx(1 / 5, rel=REL)  # GPT-OSS on 64 GB200s, MBS 4
    # Qwen3-235B on 256 GB300s (26.06): PP 4, VP 12, 8192 / (64 x 2) = 64 microbatches: (6 + 44 + 1) / 768
    assert float(unpaired_share(4.0, 12.0, 64.0)) == pytest.approx(51 / 768, rel=REL)
    assert float(unpaired_share(8.0, 4.0, 4.0)) == 1.0  # everything in warmup: nothing pairs
    assert float(unpaired_share(4.0, 1.0, 16.0)) == pytest.approx(4 / 16, rel=REL)  # plain 1F1B: pp - 1 + 1


def test_ep_overlap_leaves_the_unpaired_passes_exposed(moe):
    """At PP 1 with m microbatches the first forward's and the last backward's all-to-alls, 1/m of the step's, cannot
    hide: the rest hides and pays the SMs and contention of its kernels (overlap.nccl_price), so the EP time is
    f + s (1 - f) of the plain one with f = 1/m, and falls toward s as m grows."""
    pp1 = {"pp": 1, "tp": 8, "ep": 8}
    dp = moe.system.n_gpus // 8
    g = moe.system.gpu
    s = g.comm_sms / g.sm_count + g.efficiency.overlap_contention
    ratios = []
    for m in (2, 8):
        sc = _with(moe, global_batch_sequences=m * dp)  # MBS 1: m microbatches per pipeline
        plain, over = _cost(sc, **pp1), _cost(_with(sc, ep_overlap=True), **pp1)
        ratios.append(over["breakdown"]["ep"] / plain["breakdown"]["ep"])
        assert ratios[-1] == pytest.approx(1 / m + s * (1 - 1 / m), rel=1e-5)
    assert ratios[1] < ratios[0]


def test_node_dedup_ratio_is_the_hypergeometric_count():
    """DeepSeek-V3 (256 experts, top 8) over 4 nodes: a remote node receives a token unless all 8 experts are
    elsewhere, q = C(192, 8) / C(256, 8); 3 (1 - q) copies cross the network instead of 8 x 3/4 = 6."""
    import math
    import jax.numpy as jnp
    from sax_jax.cost.moe import node_dedup_ratio
    ds = build_params(dataclasses.replace(sx.load_scenario("mixtral-moe"), expert_trace=None,
                                          model=load_model(os.path.join(configs_dir(), "models", "deepseek-v3.yaml")))).model
    net = jnp.asarray([False, True, True])
    q = math.comb(192, 8) / math.comb(256, 8)
    assert float(node_dedup_ratio(jnp.asarray([8.0, 32.0, 32.0]), net, ds)) == pytest.approx(3 * (1 - q) / 6, rel=1e-5)
    assert float(node_dedup_ratio(jnp.asarray([8.0, 8.0, 8.0]), net, ds)) == 1.0  # one node: nothing crosses
    # never more copies than the routed experts: n (1 - q) <= k for every group size
    for n in (2, 4, 8, 16, 32, 64, 256):
        r = float(node_dedup_ratio(jnp.asarray([1.0, float(n), float(n)]), net, ds))
        assert 0.0 < r <= 1.0 + 1e-6


def test_ep_dedup_sends_less_across_nodes_and_inside_one(moe):
    across = {"ep": 16, "tp": 1}  # 16 EP ranks over two 8-GPU nodes
    plain, dedup = _cost(moe, **across), _cost(_with(moe, ep_dedup=True), **across)
    assert dedup["breakdown"]["ep"] < plain["breakdown"]["ep"]
    # inside one node the flex dispatcher still sends one copy per destination GPU, not one per routed expert
    inside = {"ep": 8, "tp": 1}
    plain, dedup = _cost(moe, **inside), _cost(_with(moe, ep_dedup=True), **inside)
    assert dedup["breakdown"]["ep"] < plain["breakdown"]["ep"]


def test_alltoall_dispatcher_sorts_the_received_rows_by_local_expert_and_back(moe):
    """Megatron-Core's alltoall dispatcher with several local experts sorts the received rows by local expert after
    the dispatch and back before the combine (token_dispatcher.py sort_chunks_by_idxs), each pass reading and
    writing the top_k rows a token sent: DeepSeek-V3 adds 2 x 2 x 8 x 7168 x 2 B per token and MoE layer (58 of 61
    layers) in the forward, charged like every memory-bound kernel (the backward MEMORY_BWD_RATIO x). The flex
    dispatcher (ep_dedup) has no second sort, nor has a GPU that holds one expert."""
    import jax
    from sax_jax.cost.compute import MEMORY_BWD_RATIO, alltoall_sort_bytes_per_token
    with jax.enable_x64(True):
        def times(sc, ep):
            p = build_params(sc, jnp.float64)
            return layer_times(1.0, 1.0, 1.0, p.train.seq, p.model, p.gpu, p.train, ep=ep), p

        (plain, p), (flex, _) = times(moe, 8.0), times(_with(moe, ep_dedup=True), 8.0)
        per_token = float(alltoall_sort_bytes_per_token(p.model))
        assert per_token == pytest.approx(58 / 61 * 2 * 2 * 8 * 7168 * 2, rel=1e-12)
        extra_fwd = float(p.gpu.elementwise_factor * p.train.seq * per_token / (p.gpu.hbm_Bps * p.gpu.memory_bound))
        assert float(plain.fwd_s - flex.fwd_s) == pytest.approx(extra_fwd, rel=1e-9)
        assert float(plain.bwd_s - flex.bwd_s) == pytest.approx(MEMORY_BWD_RATIO * extra_fwd, rel=1e-9)
        assert float(plain.recompute_selective_s) == float(flex.recompute_selective_s)  # the sort is not recomputed
        # 256 experts over 256 EP ranks: one expert per GPU, nothing to sort under either dispatcher
        (one, _), (one_flex, _) = times(moe, 256.0), times(_with(moe, ep_dedup=True), 256.0)
        assert float(one.fwd_s) == float(one_flex.fwd_s) and float(one.bwd_s) == float(one_flex.bwd_s)
    dense = build_params(_with(sx.load_scenario("mixtral-moe"), ep_dedup=False)).model._replace(moe_fraction=0.0)
    assert float(alltoall_sort_bytes_per_token(dense)) == 0.0


def test_distinct_gpu_ratio_is_the_hypergeometric_count():
    """Qwen3-30B-A3B (128 experts, top 8) at EP 8: a GPU holds 16 experts and gets the token unless all 8 picks are
    elsewhere, q = C(112, 8) / C(128, 8); 8 (1 - q) = 5.3 copies instead of 8 (HybridEP: "no redundant
    communication during data distribution"; DeepEP's dispatch layout: one row per token and destination rank)."""
    import math
    from sax_jax.cost.moe import distinct_ratio
    ds = load_model(os.path.join(configs_dir(), "models", "deepseek-v3.yaml"))
    ds = dataclasses.replace(ds, moe=dataclasses.replace(ds.moe, experts=128, top_k=8))
    qwen = build_params(dataclasses.replace(sx.load_scenario("mixtral-moe"), expert_trace=None, model=ds)).model
    q = math.comb(112, 8) / math.comb(128, 8)
    assert float(distinct_ratio(8.0, qwen)) == pytest.approx(1.0 - q, rel=1e-5)
    assert float(distinct_ratio(1.0, qwen)) == 1.0


def test_flex_dispatcher_recipes_turn_dedup_on():
    from sax_jax import validation as V
    cases, _ = V.load_cases(dataset="megatron-bridge-b200")
    c = {x.id: x for x in cases}
    assert c["mb-26.04.01-b200-deepseek-v3-pretrain-mxfp8-256g-gbs4096"].scenario.training.ep_dedup  # flex, deepep
    assert not c["mb-26.04.01-b200-gpt-oss-120b-pretrain-bf16-64g-gbs1280"].scenario.training.ep_dedup  # alltoall


def test_fp8_attention_recipes_are_read_and_reported_as_approximated():
    import csv
    from sax_jax import validation as V
    rows = list(csv.DictReader(open(os.path.join(configs_dir(), "validation", "recipes", "recipes.csv"))))
    fp8 = {r["id"] for r in rows if r["fp8_attention"] == "true"}
    # from release 26.06 (Megatron-Bridge v0.5.0): DeepSeek-V3 GB300, GPT-OSS, Qwen3 MXFP8 recipes; never a BF16 row
    assert len(fp8) == 23 and not any("-bf16-" in i for i in fp8)
    assert "mb-26.08-gb300-deepseek-v3-pretrain-mxfp8-256g-gbs4096" in fp8
    assert not any(i.startswith(("mb-25.", "mb-26.02", "mb-26.04")) for i in fp8)
    cases, _ = V.load_cases(dataset="megatron-bridge-gb300")
    note = "FP8 attention (fp8_dot_product_attention) is modelled at the 16-bit attention rate"
    for c in cases:
        assert any(x.startswith(note) for x in c.approximations) == (c.id in fp8)
        # the flag reaches the model (a window layer's backward: test_layers), with the recipe it came from
        assert c.scenario.training.fp8_attention == (c.id in fp8)
        assert any(f.startswith("fp8_attention=yes (recipe ") for f in c.filled) == (c.id in fp8)


def test_folding_with_one_tensor_rank_is_the_plain_layout(moe):
    """tp = cp = 1: the folded EP group is the one carved from dp, the experts are split the same way."""
    for axes in ({"tp": 1, "ep": 8}, {"tp": 1, "ep": 4, "pp": 2}):
        plain, folded = _cost(moe, **axes), _cost(_with(moe, expert_tensor_parallel=1), **axes)
        assert folded["raw_step_time_s"] == pytest.approx(plain["raw_step_time_s"], rel=REL)
        assert folded["memory_bytes"] == pytest.approx(plain["memory_bytes"], rel=REL)


def test_folding_lets_ep_span_the_tensor_parallel_ranks(moe):
    """DeepSeek-V3 with tp 8, pp 16 on 8,192 GPUs (dp 64): ep 128 > dp is infeasible unless the experts fold
    (etp 1: EP over tp x dp = 512 ranks); folded, a GPU holds 256/128 = 2 whole experts per MoE layer instead of
    256/ep experts split 8 ways."""
    axes = {"tp": 8, "pp": 16, "ep": 128}
    plain, folded = _cost(moe, **axes), _cost(_with(moe, expert_tensor_parallel=1), **axes)
    assert not plain["feasible"] and folded["feasible"]
    p = build_params(_with(moe, expert_tensor_parallel=1))
    from sax_jax.cost.memory import params_per_gpu
    layers_stage = 4.0
    _, experts = params_per_gpu(8.0, 16.0, 128.0, p.model, layers_stage, 1.0)
    # per MoE layer (58 of 61 layers): 2 experts x 3 matrices x 7168 x 2048
    assert float(experts) == pytest.approx(layers_stage * 58 / 61 * 2 * 3 * 7168 * 2048, rel=REL)
    # the expert tensor parallel size must divide into the stage's ranks with ep
    assert not _cost(_with(moe, expert_tensor_parallel=16), **axes)["feasible"]


def test_recipes_name_their_pipeline_split():
    """DeepSeek-V3 and Kimi-K2 recipes write explicit layouts (filled), the 405B and Qwen3-235B ones count the
    embedding and the loss (counted); rows without a recipe or with one stage keep auto."""
    from sax_jax import validation as V
    cases, _ = V.load_cases(dataset="megatron-bridge-gb200")
    c = {x.id: x for x in cases}
    split = lambda i: c[i].scenario.training.pipeline_split  # noqa: E731
    assert split("mb-26.04-gb200-deepseek-v3-pretrain-mxfp8-256g-gbs4096") == "filled"
    assert split("mb-26.04-gb200-llama3-405B-pretrain-fp8-256g-gbs1536") == "counted"
    assert split("mb-26.04-gb200-qwen3-235b-a22b-pretrain-mxfp8-256g-gbs8192") == "counted"
    assert split("mb-26.04-gb200-qwen3-30b-a3b-pretrain-mxfp8-8g-gbs512") == "auto"
    # 25.09: run_script.py passes DeepSeek-V3 the explicit layout "Et|(tt|)*30mL" (recipes.csv, read by hand)
    assert split("mb-25.09-gb200-deepseek-v3-pretrain-fp8-256g-gbs2048") == "filled"


def test_memory_is_the_first_stage_not_the_slowest(moe):
    """61 layers at PP 4 (DeepSeek-V3): the last stage (13 layers + MTP + loss) is the slowest, the first holds 16
    layers; its weights and activations are what must fit: the memory of 64 layers at PP 4 (16 on every stage; only
    the dense layers' share differs, 3 of 61 or of 64), well above 52 layers' (13 per stage)."""
    # the flex dispatcher, as DeepSeek-V3's recipes run it (the alltoall dispatcher's sort makes every layer dearer
    # and the first stage's 16 layers the slowest)
    sc = _with(moe, mtp_layers=1, pipeline_split="filled", ep_dedup=True)
    axes = {"pp": 4, "ep": 8, "tp": 2}
    filled = _cost(sc, **axes)
    p = build_params(sc)
    lt = layer_times(2.0, 1.0, 1.0, float(sc.training.seq_len), p.model, p.gpu, p.train, 4.0, 1.0, 8.0)
    lf, lb = logits_times(2.0, 1.0, 1.0, float(sc.training.seq_len), p.model, p.gpu)
    mtp = lt.fwd_s + lt.bwd_s + lf + lb
    n, last = slowest_stage(61.0, 4.0, 1.0, lt.fwd_s + lt.bwd_s, lf + lb, mtp, 1.0)
    assert (float(n), float(last)) == (13.0, 1.0)
    per_stage = lambda n: _cost(dataclasses.replace(sc, model=dataclasses.replace(sc.model, layers=4 * n)), **axes)  # noqa: E731
    assert filled["memory_bytes"] == pytest.approx(per_stage(16)["memory_bytes"], rel=2e-3)
    assert filled["memory_bytes"] > 1.1 * per_stage(13)["memory_bytes"]


def test_unknown_pipeline_split_is_refused():
    with pytest.raises(S.ConfigError, match="training.pipeline_split"):
        S.Training(64, 4096, pipeline_split="balanced").validate("scenario.yaml")

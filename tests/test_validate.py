"""`sax validate`: published runs, thresholds, Korthikanti memory formulas, bad CSV input, CLI JSON."""
import csv
import dataclasses
import glob
import io
import json
import math
import os
import re
import types
from contextlib import redirect_stdout

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sax_jax import cli
from sax_jax import validation as V
from sax_jax.config import load_gpu
from sax_jax.cost.memory import activation_bytes_per_layer, model_state_bytes, params_per_gpu
from sax_jax.params import build_params

# a copy of shared/data/published_runs.csv, so the suite runs from any checkout
RUNS_CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "published_runs.csv")
THRESHOLDS = {  # issue 3 acceptance: (MAPE, max |error|); Calculon: 3.65% / 8.87% on korthikanti2022
    "korthikanti2022": (0.03, 0.06),
    "narayanan2021": (0.08, None),
    "megatron-core-h100": (0.08, None),
}


# the 27 Megatron-LM runs of issue 3 (the default `sax validate` also runs the public-run collection)
ORIGINAL = [os.path.join(V.VALIDATION_DIR, f) for f in ("korthikanti2022.yaml", "megatron-core-h100.yaml",
                                                        "narayanan2021.yaml")]
BEFORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "validate_27_before.json")


@pytest.fixture(scope="module")
def result():
    return V.validate(ORIGINAL)


@pytest.fixture(scope="module")
def full():
    return V.validate()


@pytest.fixture(scope="module")
def kcases():
    cases, errors = V.load_cases(dataset="korthikanti2022")
    assert not errors
    return cases


def test_all_27_runs_are_cases(result):
    assert not result["errors"]
    assert {k: v["n"] for k, v in result["datasets"].items()} == {
        "korthikanti2022": 8, "narayanan2021": 10, "megatron-core-h100": 9}
    assert all(c["source"] and c["source"] != "same" for c in result["cases"])


# Today's errors plus a small margin: a change that makes any dataset less accurate fails here.
# megatron-core-h100's max is its known outlier m32b (one DP rank per node, gradient reduce-scatter exposed):
# 19.7% before overlap had a price, 21.0-21.1% since (hidden communication now costs its SM share): allowed 21.5%.
# megatron-core-h100 moved 4.9% -> 6.0% (max 21.4% -> 23.5%) deliberately: its runs have 4 microbatches per rank, and
# the distributed optimizer's ~170 bucket calls over a 48-rank ring now pay NCCL's per-call hop latency (cost/dp.py)
# megatron-core-h100's worst run (m32b, -24.7%) moved from -23.5% with TE's per-GEMM TP overlap (tensor_parallel.py)
# megatron-core-h100 moved 6.2% -> 7.2% (m32b -24.7% -> -28.1%) deliberately with the overlap contention
# (cost/overlap.nccl_price, fitted on the calibration split): its TP 8 runs (m16b-m119b) slow by 3-4 points while
# m1.7b-m7.1b and m177b-m462b come 1-3 points closer; narayanan2021 4.8% -> 4.6%
# narayanan2021's worst run (n530b, interleaved over PP 35) moved 9.42% -> 9.95% deliberately when point-to-point
# transfers began to pay their own two NCCL channels per peer instead of a collective's 16 SMs (overlap.p2p_price);
# its interleaved runs were already 6-9% fast, and they come 0.2-0.5 points faster (Megatron-LM of 2021 waited on
# each pipeline exchange, batch_isend_irecv then torch.cuda.synchronize, which the model does not charge: ~0.7% of
# n530b's step by hand, not the cause of the rest)
NOT_WORSE = {"korthikanti2022": (0.025, 0.05), "narayanan2021": (0.055, 0.10), "megatron-core-h100": (0.075, 0.29)}


@pytest.mark.parametrize("dataset", sorted(THRESHOLDS))
def test_regression_thresholds(result, dataset):
    mape, worst = THRESHOLDS[dataset]
    s = result["datasets"][dataset]
    assert s["mape"] <= mape, f"{dataset} MAPE {100 * s['mape']:.2f}% > {100 * mape}%"
    if worst is not None:
        assert s["max_abs_error"] <= worst, f"{dataset} max {100 * s['max_abs_error']:.2f}% > {100 * worst}%"


@pytest.mark.parametrize("dataset", sorted(NOT_WORSE))
def test_no_worse_than_at_calibration(result, dataset):
    """Non-regression guard on today's numbers (tighter than the issue's bar where we beat it)."""
    mape, worst = NOT_WORSE[dataset]
    s = result["datasets"][dataset]
    assert s["mape"] <= mape and s["max_abs_error"] <= worst, s


def test_errors_are_signed_relative_and_summaries_consistent(result):
    for c in result["cases"]:
        assert c["error"] == pytest.approx((c["predicted"] - c["measured"]) / c["measured"], rel=1e-9)
        assert c["metrics"][c["metric"]] == pytest.approx(c["predicted"])
    for ds, s in result["datasets"].items():
        errs = [abs(c["error"]) for c in result["cases"] if c["dataset"] == ds]
        assert s["mape"] == pytest.approx(sum(errs) / len(errs))
        assert s["max_abs_error"] == pytest.approx(max(errs))
        signed = [c["step_time_error"] for c in result["cases"] if c["dataset"] == ds]
        assert s["step_time_bias"] == pytest.approx(sum(signed) / len(signed))
        held = [abs(c["error"]) for c in result["cases"] if c["dataset"] == ds and not c["used_for_fitting"]]
        assert s["held_out"]["n"] == len(held) > 0
        assert s["held_out"]["mape"] == pytest.approx(sum(held) / len(held))


def test_step_time_error_has_one_sign_whatever_the_metric(result):
    """``step_time_error`` is the model's step time over the one the run's figure implies, minus 1: for a step-time
    row it is the error itself; for a throughput row (TFLOP/s) the implied step time is the model's iteration_s x
    predicted / measured throughput, so a model 1.5% faster in TFLOP/s is 1.48% faster in step time."""
    metrics = {c["metric"] for c in result["cases"]}
    assert {"iteration_s", "tflops_per_gpu_hw"} <= metrics  # both kinds are checked
    for c in result["cases"]:
        implied_s = c["metrics"]["iteration_s"] * (c["predicted"] / c["measured"] if c["metric"] != "iteration_s"
                                                   else c["measured"] / c["predicted"])
        assert c["step_time_error"] == pytest.approx(c["metrics"]["iteration_s"] / implied_s - 1.0, abs=1e-12)
        assert (c["step_time_error"] > 0) == ((c["error"] > 0) == (c["metric"] == "iteration_s"))
    signed = [c["step_time_error"] for c in result["cases"]]
    assert result["overall"]["step_time_bias"] == pytest.approx(sum(signed) / len(signed))
    assert V._step_time_error("tflops_per_gpu", 101.5, 100.0) == pytest.approx(100.0 / 101.5 - 1.0)
    assert V._step_time_error("iteration_s", float("nan"), 1.0) is None


def test_metrics_hand_checked(result):
    """k22-sel: 22B, 4 x 2048 tokens on 8 GPUs; model FLOPs 72 B s l h^2 (1 + s/6h + V/12lh)."""
    c = next(c for c in result["cases"] if c["id"] == "k22-sel")
    m = c["metrics"]
    b, s, l, h, v = 4, 2048, 48, 6144, 51200
    flops = 72 * b * s * l * h ** 2 * (1 + s / (6 * h) + v / (12 * l * h))
    assert m["tflops_per_gpu"] == pytest.approx(flops / m["iteration_s"] / 8 / 1e12, rel=1e-5)
    assert m["mfu"] == pytest.approx(flops / m["iteration_s"] / 8 / 312e12, rel=1e-5)
    assert m["tokens_per_s"] == pytest.approx(b * s / m["iteration_s"], rel=1e-6)
    # selective recompute adds the attention core forward: 4 b s^2 h per layer
    hw = flops + l * 4 * b * s * s * h
    assert m["tflops_per_gpu_hw"] == pytest.approx(hw / m["iteration_s"] / 8 / 1e12, rel=1e-5)
    n = next(c for c in result["cases"] if c["id"] == "n1t")["metrics"]  # Narayanan's 96 B s l h^2 (...)
    b, s, l, h = 3072, 2048, 128, 25600
    hw = 96 * b * s * l * h ** 2 * (1 + s / (6 * h) + v / (16 * l * h))
    assert n["tflops_per_gpu_hw"] == pytest.approx(hw / n["iteration_s"] / 3072 / 1e12, rel=1e-5)


def test_host_flop_counts_jit_equals_eager():
    """The FLOP counts behind the TFLOP/s and MFU metrics run as one compiled program (validation._sequence_flops);
    op by op (jax.disable_jit, as they ran before) they agree to float32 rounding, on a dense run with full
    recompute, an MoE run with a sliding window and YaRN RoPE, a hybrid Mamba-MoE run with selective recompute and
    MLA."""
    ids = {"n1t", "mb-26.04-gb300-gpt-oss-120b-pretrain-bf16-64g-gbs1280",
           "mb-26.04-h100-nemotron3-nano-30b-a3b-pretrain-fp8-16g-gbs1024",
           "mb-26.04-b200-deepseek-v3-pretrain-mxfp8-256g-gbs4096"}
    cases = [c for c in V.load_all().cases if c.id in ids]
    assert {c.id for c in cases} == ids
    for c in cases:
        jitted = V.hw_flops_per_sequence(c), V.metrics_of(c, 2.0, True)
        with jax.disable_jit():
            eager = V.hw_flops_per_sequence(c), V.metrics_of(c, 2.0, True)
        assert jitted[0] == pytest.approx(eager[0], rel=1e-6)
        assert jitted[0] > 0
        for k in ("tflops_per_gpu", "tflops_per_gpu_hw", "mfu", "tokens_per_s"):
            assert jitted[1][k] == pytest.approx(eager[1][k], rel=1e-6), (c.id, k)


def _train(case, sp, flash=False):
    t = build_params(case.scenario).train
    return t._replace(seq_parallel=jnp.float32(sp), flash=jnp.float32(flash))


@pytest.mark.parametrize("i", range(8))
def test_korthikanti_activation_memory(kcases, i):
    """Korthikanti et al. 2022 eqs. 1-2 and section 5: bytes per layer per microbatch, MHA, f = 4h."""
    c = kcases[i]
    m = build_params(c.scenario).model
    s, b, h, a = 2048, c.design["mbs"], c.scenario.model.hidden, c.scenario.model.heads
    t = c.design["tp"]
    sbh = s * b * h

    def act(rec, sp):
        return float(activation_bytes_per_layer(b, s, t, 1, rec, m, _train(c, sp)))

    assert act(0, 0) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)), rel=1e-5)  # TP only
    assert act(0, 1) == pytest.approx(sbh * (34 + 5 * a * s / h) / t, rel=1e-5)  # TP + SP
    assert act(1, 1) == pytest.approx(34 * sbh / t, rel=1e-5)  # selective + SP
    assert act(1, 0) == pytest.approx(sbh * (10 + 24 / t), rel=1e-5)  # selective, TP only
    assert act(2, 0) == pytest.approx(2 * sbh, rel=1e-5)  # full recompute keeps the layer input
    assert act(2, 1) == pytest.approx(2 * sbh / t, rel=1e-5)
    # the run's own setting
    rec = {"none": 0, "selective": 1, "full": 2}[c.design["recompute"]]
    sp = c.scenario.training.sequence_parallel
    assert act(rec, sp) == pytest.approx({(2, False): 2 * sbh, (1, True): 34 * sbh / t}[(rec, sp)], rel=1e-5)


def test_korthikanti_weight_memory(kcases):
    """Parameters: 12 l h^2 + 13 l h (no biases in this model: 2h norms) + V h; per GPU / (t p)."""
    sizes = {"k22": 22e9, "k175": 175e9, "k530": 530e9, "k1t": 1e12}
    for c in kcases:
        ms = c.scenario.model
        l, h, v = ms.layers, ms.hidden, ms.vocab
        assert ms.n_params == pytest.approx(12 * l * h * h + 2 * l * h + v * h, rel=1e-12)
        assert ms.n_params == pytest.approx(sizes[c.id.split("-")[0]], rel=0.012)
        t, p = c.design["tp"], c.design["pp"]
        m = build_params(c.scenario).model
        stage_layers = math.ceil(l / p)
        dense, experts = params_per_gpu(t, p, 1, m, stage_layers)
        first = stage_layers * (12 * h * h + 2 * h) / t + v * h / t  # first stage holds the input embedding
        assert float(dense) == pytest.approx(first, rel=1e-5) and float(experts) == 0.0
        # fp16 Megatron (2022): 2 B weights + 2 B grads + 12 B Adam (fp32 master, m, v), no sharding at dp=1
        tr = build_params(c.scenario).train
        assert float(model_state_bytes(dense, 1.0, 0, tr)) == pytest.approx(16 * first, rel=1e-5)
    k22 = kcases[0]
    assert k22.id == "k22-full"  # 22B on 8 GPUs: ~2.76e9 params -> ~44 GB of model state per GPU
    assert 16 * (48 * (12 * 6144 ** 2 + 2 * 6144) + 51200 * 6144) / 8 == pytest.approx(44.2e9, rel=0.01)


def _write_csv(path, rows, columns=V.COLUMNS):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def _good_rows():
    with open(RUNS_CSV) as fh:
        rows = list(csv.DictReader(fh))
    return [r for r in rows if r["id"] == "k22-sel"][0], [r for r in rows if r["id"] == "m70b"][0]


def test_bad_csv_rows_named_and_others_still_run(tmp_path):
    good, h100 = _good_rows()
    rows = [dict(good),
            {**good, "id": "bad-gpu", "gpu": "Z100"},
            {**good, "id": "bad-num", "layers": "forty-eight"},
            {**good, "id": "bad-empty", "value": ""},
            {**h100, "source": "own run", "gpus_per_node": "4", "link_gbps": "100", "link_latency_ms": "0.5"}]
    path = tmp_path / "runs.csv"
    _write_csv(path, rows, V.COLUMNS + V.OPTIONAL_COLUMNS)
    res = V.validate([str(path)])
    assert [c["id"] for c in res["cases"]] == ["k22-sel", "m70b"]
    errs = res["errors"]
    assert len(errs) == 3
    assert "row 3" in errs[0] and "'gpu'" in errs[0] and "Z100" in errs[0] and "unknown GPU" in errs[0]
    assert "row 4" in errs[1] and "'layers'" in errs[1] and "forty-eight" in errs[1]
    assert "row 5" in errs[2] and "'value'" in errs[2]
    # the good k22-sel row predicts what the case file does
    ref = next(c for c in V.validate(dataset="korthikanti2022")["cases"] if c["id"] == "k22-sel")
    assert res["cases"][0]["predicted"] == pytest.approx(ref["predicted"], rel=1e-6)
    # a slower, smaller-node network than the standard cluster makes m70b slower, never faster
    m70 = next(c for c in V.validate(dataset="megatron-core-h100")["cases"] if c["id"] == "m70b")
    assert res["cases"][1]["predicted"] < m70["predicted"]


def test_missing_column_named_and_other_files_run(tmp_path):
    good, _ = _good_rows()
    bad = tmp_path / "bad.csv"
    _write_csv(bad, [good], [c for c in V.COLUMNS if c != "layers"])
    ok = tmp_path / "ok.csv"
    _write_csv(ok, [good])
    res = V.validate([str(bad), str(ok)])
    assert [c["id"] for c in res["cases"]] == ["k22-sel"]
    assert any("'layers'" in e and "missing" in e and "row 1" in e for e in res["errors"])
    assert any("row 2" in e and "'layers'" in e for e in res["errors"])


def test_empty_cells_filled_with_documented_defaults_and_reported():
    cases, errors = V.load_cases([RUNS_CSV], dataset="megatron-core-h100")
    assert not errors and len(cases) == 9
    c = cases[0]
    assert c.design["mbs"] == 1 and c.design["vpp"] == 1 and c.design["recompute"] == "none"
    assert any(f.startswith("mbs=1 (Megatron-LM defaults") for f in c.filled)
    assert c.scenario.training.sequence_parallel and c.scenario.training.flash_attention
    n = {c.id: c for c in V.load_cases([RUNS_CSV], dataset="narayanan2021")[0]}
    assert n["n76b"].design["vpp"] == 3 and n["n76b"].design["mbs"] == 2
    assert any("run_table_1.sh" in f for f in n["n76b"].filled)


def test_cli_json_schema():
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = cli.main(["validate", "--json", "--dataset", "korthikanti2022"])
    assert rc == 0
    out = json.loads(buf.getvalue())
    assert set(out["datasets"]) == {"korthikanti2022"}
    assert {"n", "mape", "max_abs_error"} <= set(out["datasets"]["korthikanti2022"])
    assert len(out["cases"]) == 8
    for c in out["cases"]:
        assert {"id", "dataset", "metric", "predicted", "measured", "error"} <= set(c)
        assert c["metric"] == "iteration_s" and isinstance(c["predicted"], float)


# ------------------------------------------------------------------ issue 10: public runs, split, ranking
def test_27_predictions_unchanged(result, full):
    """The 27 original predictions are bit-identical to those recorded (first before the public-run work, again
    at each deliberate model change, see the file's recorded_from), alone and inside the full default run."""
    with open(BEFORE) as fh:
        before = json.load(fh)["predicted"]
    assert len(before) == 27
    for res in (result, full):
        got = {c["id"]: c["predicted"] for c in res["cases"] if c["id"] in before}
        assert got == before


def test_public_runs_loaded_with_sources_and_every_row_accounted(full):
    o = full["overall"]
    assert not full["errors"]
    assert o["n"] >= 150 and o["n_sources"] >= 8
    assert all(c["source"] for c in full["cases"])
    # 27 original runs + 590 rows of the collection: each is scored, unsupported or excluded, none vanishes
    assert o["n"] + o["unsupported"] + o["excluded"] == 27 + 590
    assert all(u["reason"] and u["id"] for u in full["unsupported"] + full["excluded"])
    assert sum(s["unsupported"] for s in full["datasets"].values()) == o["unsupported"]
    gpus = {c["id"].split("-")[2] for c in full["cases"] if c["id"].startswith("mb-")}
    assert {"h100", "b200", "gb200"} <= gpus
    kept_out = ("mlperf", "mlcommons", "megascale", "bloom", "mt-nlg", "yuan et al")
    assert not any(k in (c["source"] or "").lower() for c in full["cases"] for k in kept_out)
    # GB200 NVL72 jobs of 128 and 256 GPUs load (64 GPUs of each rack)
    gb = [c for c in full["cases"] if c["dataset"] == "megatron-bridge-gb200"]
    assert any("-128g-" in c["id"] for c in gb) and any("-256g-" in c["id"] for c in gb)
    # held-out numbers per dataset and overall
    for s in full["datasets"].values():
        assert "held_out" in s and s["held_out"]["n"] <= s["n"]
    assert 0 < o["held_out"]["n"] < o["n"]


def test_ranking_key(full):
    rk = full["ranking"]
    assert rk["n_groups"] >= 10 and rk["groups"]
    rhos = []
    for g in rk["groups"]:
        assert g["n"] >= 3 and g["layouts"] >= 2 and len(g["ids"]) == g["n"] and g["name"]
        if g["spearman"] is not None:
            assert -1.0 - 1e-12 <= g["spearman"] <= 1.0 + 1e-12
            rhos.append(g["spearman"])
    assert rk["mean_spearman"] == pytest.approx(sum(rhos) / len(rhos))
    # pairwise order: every pair of runs inside a group once, fewer as the measured gap required grows
    n_pairs = sum(g["n"] * (g["n"] - 1) // 2 for g in rk["groups"])
    by_gap = {c["min_gap"]: c for c in rk["pairwise"]}
    assert set(by_gap) == set(V.PAIR_GAPS) and by_gap[0.0]["pairs"] <= n_pairs
    counts = [by_gap[g]["pairs"] for g in sorted(by_gap)]
    assert counts == sorted(counts, reverse=True) and counts[-1] > 0
    assert all(0.0 <= c["concordant"] <= c["pairs"] and c["share"] == c["concordant"] / c["pairs"]
               for c in rk["pairwise"])


def test_by_feature_on_the_whole_set_matches_the_cases(full):
    """overall.by_feature over the real set: every feature's groups partition the scored runs, and each recompute
    group's MAPE is that of the cases whose design has that recompute."""
    feats = full["overall"]["by_feature"]
    assert set(feats) == set(V.FEATURES)
    for groups in feats.values():
        assert sum(g["n"] for g in groups.values()) == full["overall"]["n"]
    for mode in {c["design"]["recompute"] for c in full["cases"]}:
        errs = [abs(c["error"]) for c in full["cases"] if c["design"]["recompute"] == mode]
        assert feats["recompute"][f"recompute={mode}"]["mape"] == pytest.approx(sum(errs) / len(errs), rel=1e-12)


def test_cases_carry_the_model_class(full):
    """Each scored run says whether its model has routed experts (the uncertainty bands split on it): the MoE
    models of the set are MoE, the Llama, GPT, MPT and OPT runs dense."""
    by_id = {c["id"]: c["moe"] for c in full["cases"]}
    moe_models = ("qwen3-30b", "qwen3-235b", "deepseek-v3", "gpt-oss", "nemotron3-nano", "nemotron3-super")
    dense_models = ("llama", "mpt", "opt-175b", "nemotron4-340b")
    assert any(by_id.values()) and not all(by_id.values())
    # the overall split by class is over exactly these runs
    by_class = full["overall"]["by_class"]
    assert by_class["dense"]["n"] + by_class["MoE"]["n"] == full["overall"]["n"]
    for cls, is_moe in (("dense", False), ("MoE", True)):
        errs = [abs(c["error"]) for c in full["cases"] if c["moe"] == is_moe]
        assert by_class[cls]["n"] == len(errs)
        assert by_class[cls]["mape"] == pytest.approx(sum(errs) / len(errs), rel=1e-12)
        held = [abs(c["error"]) for c in full["cases"] if c["moe"] == is_moe and not c["calibration_split"]]
        assert by_class[cls]["held_out"]["n"] == len(held)
        assert by_class[cls]["held_out"]["mape"] == pytest.approx(sum(held) / len(held), rel=1e-12)
    for id_, moe in by_id.items():
        if any(m in id_.lower() for m in moe_models):
            assert moe, id_
        elif any(m in id_.lower() for m in dense_models):
            assert not moe, id_


def test_hardware_pairs_are_the_same_run_on_two_gpu_types(full):
    """Each pair is one row of a table run on two GPU types (ids equal but for the GPU token; same layout, GPU count
    and batch), and its speedups are the two rows' own numbers: same model and batch on the same GPU count, so the
    measured speedup of the second part is t_first / t_second and the predicted one likewise."""
    hp = full["hardware_pairs"]
    cases = {c["id"]: c for c in full["cases"]}
    assert hp["n_pairs"] >= 4 and hp["n_runs"] == sum(p["n"] for p in hp["pairs"])
    for p in hp["pairs"]:
        a, b = p["gpus"]
        assert a < b and p["n"] == len(p["runs"])
        for run in p["runs"]:
            ca, cb = (cases[i] for i in run["ids"])
            assert (ca["gpu"], cb["gpu"]) == (a, b) and ca["n_gpus"] == cb["n_gpus"] and ca["design"] == cb["design"]
            ta, tb = (V._gpu_token(g) for g in (a, b))
            assert ca["id"].replace(f"-{ta}-", "-*-", 1) == cb["id"].replace(f"-{tb}-", "-*-", 1)
            if ca["metric"] == cb["metric"] == "iteration_s":
                assert run["measured_speedup"] == pytest.approx(ca["measured"] / cb["measured"], rel=1e-9)
                assert run["predicted_speedup"] == pytest.approx(ca["predicted"] / cb["predicted"], rel=1e-9)
        speedups = sorted(r["predicted_speedup"] / r["measured_speedup"] for r in p["runs"])
        assert p["ratio_error_median"] == pytest.approx(float(np.median(speedups)) - 1.0)
    # Megatron-Bridge ran 12 recipes on both B200 and GB200 (same release, layout and batch)
    pair = next(p for p in hp["pairs"] if p["gpus"] == ["B200", "GB200"])
    assert pair["n"] >= 10


def test_hardware_pairs_need_the_same_layout_count_and_batch():
    def case(rid, gpu, tp=1, n=8, gbs=128):
        system = types.SimpleNamespace(gpu=types.SimpleNamespace(name=gpu), n_gpus=n)
        return types.SimpleNamespace(id=rid, design={"tp": tp}, scenario=types.SimpleNamespace(
            system=system, training=types.SimpleNamespace(global_batch_sequences=gbs)))

    def res(rid, pred, meas):
        return {"id": rid, "predicted": pred, "measured": meas, "metric": "iteration_s",
                "metrics": {"tflops_per_gpu": 100.0 / pred}}

    cs = [case("mb-1-b200-m-8g", "B200"), case("mb-1-gb200-m-8g", "GB200"),
          case("mb-2-b200-m-8g", "B200"), case("mb-2-gb200-m-8g", "GB200", tp=2),  # another layout
          case("mb-3-b200-m-8g", "B200"), case("mb-3-gb200-m-8g", "GB200", gbs=256)]  # another batch
    rs = [res(c.id, 2.0 if "-b200-" in c.id else 1.6, 2.0 if "-b200-" in c.id else 1.9) for c in cs]
    hp = V.hardware_pairs(cs, rs)
    assert hp["n_pairs"] == 1 and hp["n_runs"] == 1
    p = hp["pairs"][0]
    assert p["gpus"] == ["B200", "GB200"] and p["runs"][0]["ids"] == ["mb-1-b200-m-8g", "mb-1-gb200-m-8g"]
    # measured 2.0 / 1.9 = 1.0526x, predicted 2.0 / 1.6 = 1.25x: the model overstates the speedup by 18.75%
    assert p["measured_speedup_median"] == pytest.approx(2.0 / 1.9)
    assert p["predicted_speedup_median"] == pytest.approx(1.25)
    assert p["ratio_error_median"] == pytest.approx(1.25 * 1.9 / 2.0 - 1.0)


def test_weak_scaling_pairs_hand_computed():
    def case(rid, n, dp, gbs, tp=1, mbs=2, source="t"):
        system = types.SimpleNamespace(gpu=types.SimpleNamespace(name="H100"), n_gpus=n, gpus_per_node=8)
        return types.SimpleNamespace(id=rid, source=source, design={"tp": tp, "dp": dp, "mbs": mbs},
                                     group=("ds", "m", "shape", "H100", n, 2048, gbs, "bf16"),
                                     scenario=types.SimpleNamespace(system=system))

    def res(rid, pred, meas, metric="iteration_s"):
        return {"id": rid, "predicted": pred, "measured": meas, "metric": metric}

    cs = [case("a16", 16, 16, 32), case("a64", 64, 64, 128), case("a32", 32, 32, 64),  # one series, 1 microbatch
          case("b128", 128, 128, 512),        # 2 microbatches per rank: another series, alone
          case("c32", 32, 8, 16, tp=4),       # another layout, alone
          case("d64", 64, 64, 128, source="u")]  # another table, alone
    rs = [res("a16", 1.0, 1.0), res("a32", 1.01, 1.04), res("a64", 1.03, 1.0816), res("b128", 2.0, 2.0),
          res("c32", 1.0, 1.0), res("d64", 1.0, 1.0)]
    ws = V.weak_scaling(cs, rs)
    assert ws["n_pairs"] == 2
    assert [p["gpus"] for p in ws["pairs"]] == [[16, 32], [32, 64]]
    # measured 1.04 per doubling both times: ln 1.04; predicted ln 1.01, then ln(1.03 / 1.01)
    assert [p["measured"] for p in ws["pairs"]] == pytest.approx([math.log(1.04)] * 2)
    assert [p["predicted"] for p in ws["pairs"]] == pytest.approx([math.log(1.01), math.log(1.03 / 1.01)])
    assert ws["median_measured"] == pytest.approx(math.log(1.04))
    assert ws["median_predicted"] == pytest.approx((math.log(1.01) + math.log(1.03 / 1.01)) / 2)
    # a 16 -> 64 pair without 32 between counts two doublings
    ws = V.weak_scaling([cs[0], cs[1]], [rs[0], rs[2]])
    assert ws["pairs"][0]["measured"] == pytest.approx(math.log(1.0816) / 2)
    # throughput metrics are left out (a series' time ratio needs times); no pair: medians None
    assert V.weak_scaling(cs[:2], [res("a16", 1.0, 1.0, "tflops_per_gpu"), rs[2]])["median_measured"] is None


def test_weak_scaling_on_the_published_runs(full):
    ws = full["weak_scaling"]
    by_id = {c["id"]: c for c in full["cases"]}
    assert ws["n_pairs"] >= 30
    for p in ws["pairs"]:
        a, b = (by_id[i] for i in p["ids"])
        assert a["dataset"] == b["dataset"] and a["n_gpus"] < b["n_gpus"] == p["gpus"][1]
        assert {k: v for k, v in a["design"].items() if k != "dp"} == {k: v for k, v in b["design"].items()
                                                                          if k != "dp"}
    # what the README says: the published FSDP series slow down faster with N than the model does
    assert ws["median_measured"] > ws["median_predicted"] > 0.0


def test_spearman_hand_computed():
    assert V.spearman([1, 2, 3, 4, 5], [10, 20, 30, 40, 50]) == pytest.approx(1.0)
    assert V.spearman([1, 2, 3, 4], [9, 7, 5, 1]) == pytest.approx(-1.0)
    # ties: ranks of b = 1.5, 1.5, 3, 4 -> rho = 4.5 / sqrt(5 * 4.5) = 3 / sqrt(10)
    assert V.spearman([1, 2, 3, 4], [1, 1, 2, 3]) == pytest.approx(3 / math.sqrt(10))
    assert list(V.rankdata([3.0, 1.0, 3.0, 2.0])) == [3.5, 1.0, 3.5, 2.0]
    # no ties: d = (0, -2, 1, 1), sum d^2 = 6 -> 1 - 6 * 6 / (4 * (16 - 1)) = 0.4
    assert V.spearman([1, 2, 3, 4], [1, 4, 2, 3]) == pytest.approx(0.4)
    assert math.isnan(V.spearman([1, 2, 3], [5, 5, 5]))


def test_pairwise_concordance_hand_computed():
    """Pairs (predicted a, measured a, predicted b, measured b): the first two agree, the third is reversed, the
    fourth is predicted equal (half), the fifth agrees but is measured 0.5% apart and drops out at a 1% gap."""
    pairs = [(2.0, 20.0, 1.0, 10.0), (1.0, 10.0, 3.0, 30.0), (1.0, 30.0, 2.0, 10.0), (5.0, 11.0, 5.0, 10.0),
             (1.0, 100.0, 2.0, 100.5)]
    assert V.concordance(pairs, 0.0) == {"min_gap": 0.0, "pairs": 5, "concordant": 3.5, "share": 0.7}
    assert V.concordance(pairs, 0.01) == {"min_gap": 0.01, "pairs": 4, "concordant": 2.5, "share": 0.625}
    assert V.concordance(pairs, 0.5)["pairs"] == 3 and V.concordance(pairs, 5.0)["share"] is None
    # a pair measured equal carries no order, whatever the gap asked for
    assert V.concordance([(1.0, 7.0, 2.0, 7.0)], 0.0)["pairs"] == 0


def test_calibration_split_is_the_documented_rule():
    cases, _ = V.load_cases(ORIGINAL)
    fit = {i for ids in V.calibration_subset().values() for i in ids}
    assert V.calibration_split(cases) == fit  # the 27: exactly the per-GPU fit_cases
    ids = [f"run-{i}" for i in range(2000)]
    share = sum(V.split_member(i, 0.3) for i in ids) / len(ids)
    assert 0.25 < share < 0.35 and V.split_member("x", 1.0) and not V.split_member("x", 0.0)


def test_gb200_rack_rule():
    from sax_jax.config import load_gpu
    gb = load_gpu(os.path.join(V.CONFIGS, "hardware", "GB200.yaml"))
    h = load_gpu(os.path.join(V.CONFIGS, "hardware", "H100-SXM-80GB.yaml"))
    assert [V.rack_gpus_per_node(gb, n) for n in (8, 32, 64, 128, 256, 512)] == [72, 72, 72, 64, 64, 64]
    assert V.rack_gpus_per_node(h, 1024) == 8


def _public_row(**kw):
    good, _ = _good_rows()
    row = {**good, "id": "moe", "dataset": "mine", "source": "own", "model": "m", "layers": "48", "hidden": "2048",
           "heads": "32", "kv_heads": "4", "ffn": "6144", "vocab": "151936", "seq": "4096", "gated_mlp": "yes",
           "gpu": "GB200", "n_gpus": "128", "tp": "1", "pp": "1", "dp": "128", "cp": "1", "vpp": "1", "mbs": "1",
           "gbs": "512", "recompute": "none", "seq_parallel": "no", "precision": "mxfp8", "ep": "8",
           "experts": "128", "top_k": "8", "moe_ffn": "768", "shared_experts": "0", "dense_layers": "0",
           "head_dim": "128", "value": "3.0"}
    return {**row, **kw}


def test_public_columns_unsupported_and_bad_rows(tmp_path):
    rows = [_public_row(),                                                         # MoE, 128 GB200: loads
            _public_row(id="dense3", dense_layers="3"),                            # loads: first 3 dense
            _public_row(id="fp4", precision="nvfp4"),                              # loads: fp4 GEMMs
            _public_row(id="mla", features="mla"),                                 # unsupported: no m.yaml
            _public_row(id="skip", exclude="CHECK: contradicts itself"),           # excluded
            _public_row(id="badtp", tp="3", dp="1", n_gpus="3", experts="", ep="", gpu="H100-SXM-80GB")]
    path = tmp_path / "pub.csv"
    _write_csv(path, rows, V.COLUMNS + V.OPTIONAL_COLUMNS + V.EXTRA_COLUMNS)
    res = V.validate([str(path)])
    assert [c["id"] for c in res["cases"]] == ["moe", "dense3", "fp4"]
    c, _, fp4 = res["cases"]
    assert c["design"]["ep"] == 8 and any("mxfp8" in a for a in c["approximations"])
    assert any("nvfp4 is modelled as fp4" in a for a in fp4["approximations"])
    assert any(f.startswith("gpus_per_node=64") for f in c["filled"])
    reasons = {u["id"]: u["reason"] for u in res["unsupported"]}
    assert set(reasons) == {"mla"} and "configs/models/m.yaml" in reasons["mla"]
    assert "latent attention" in reasons["mla"]
    assert [u["id"] for u in res["excluded"]] == ["skip"] and res["datasets"]["mine"]["unsupported"] == 1
    assert len(res["errors"]) == 1
    e = res["errors"][0]
    assert "row 7" in e and "'tp'" in e and "3" in e and "heads" in e


def test_empty_csv_and_unknown_dataset_refused(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header = tmp_path / "header.csv"
    header.write_text(",".join(V.COLUMNS) + "\n")
    for p in (empty, header):
        assert cli.main(["validate", str(p)]) == 2
        assert "no runs" in capsys.readouterr().err
    with pytest.raises(Exception) as err:
        V.validate([str(header)])
    assert "no runs" in str(err.value) and "header.csv" in str(err.value)
    assert cli.main(["validate", RUNS_CSV, "--dataset", "nope"]) == 2
    assert "known datasets" in capsys.readouterr().err
    with pytest.raises(Exception) as err:
        V.validate([RUNS_CSV], dataset="nope")
    assert "unknown dataset" in str(err.value) and "korthikanti2022" in str(err.value)


def test_grand_teton_runs_use_the_500w_hbm2e_board():
    """torchtitan's H100 runs (feature h100-96gb) are evaluated on configs/hardware/H100-GT-96GB.yaml: HBM2e at
    2.4 TB/s and dense peaks interpolated in board power between the H100 NVL (400 W: 835.5 / 1670.5 TFLOP/s) and
    the SXM5 (700 W: 989.4 / 1978.9) at 500 W; every achieved fraction is the SXM5's (same silicon)."""
    from sax_jax.config import load_gpu
    gt = load_gpu(os.path.join(V.CONFIGS, "hardware", "H100-GT-96GB.yaml"))
    sxm = load_gpu(os.path.join(V.CONFIGS, "hardware", "H100-SXM-80GB.yaml"))
    for prec, nvl, full in (("bf16", 835.5, 989.4), ("fp8", 1670.5, 1978.9)):
        assert gt.peak_tflops[prec] == pytest.approx(nvl + (full - nvl) * (500 - 400) / (700 - 400), abs=0.05)
    assert gt.hbm_GBps == 2400 and gt.efficiency == sxm.efficiency
    assert (gt.sm_count, gt.nvlink_GBps, gt.attention_kernels) == (sxm.sm_count, sxm.nvlink_GBps, sxm.attention_kernels)
    cases, _ = V.load_cases(dataset="torchtitan-h100-asynctp")
    assert cases and all(c.scenario.system.gpu.name == "H100-GT-96GB" for c in cases)
    assert not any("Grand Teton" in a for c in cases for a in c.approximations)
    a100, _ = V.load_cases(dataset="torchtitan-a100")
    assert all(c.scenario.system.gpu.name == "A100-SXM-80GB" for c in a100)


def test_weak_scaling_ties_stay_ties(full):
    # Nemotron-4 340B: the report's 10.3 s iterations at DP 16 and DP 32 (batch doubling with the GPUs) are equal
    # measured TFLOP/s per GPU, a tie (ranks 2.5, 2.5, 1), not an order float rounding picks; predicted ranks 3, 2,
    # 1 -> rho = 1.5 / sqrt(1.5 x 2) = sqrt(3)/2
    g = next(g for g in full["ranking"]["groups"] if g["dataset"] == "nemotron4-340b")
    assert g["spearman"] == pytest.approx(math.sqrt(3) / 2, rel=1e-9)


def test_the_memory_model_admits_the_published_runs(full):
    """Runs that ran fit: with a fixed 2.5 GiB reserve (hardware YAMLs) no published run is refused; at 0.92 of HBM
    the six Megatron-FSDP Llama 3 70B runs on GB200 (172.5 GiB modeled) and Nemotron-4 340B (76.7 GiB) were. NeMo
    24.07's Llama 2 70B SFT on 16 H100s (TP 4, PP 4, no data parallelism) fits only with the state its launcher
    example kept: bf16 optimizer state and FP8 weights (below)."""
    refused = {c["id"] for c in full["cases"] if not c["metrics"]["feasible"]}
    assert refused == set()
    tight = {c["id"]: c for c in full["cases"]}["nemo-24.07-h100-nemotron4-340B-pretrain-fp8-128g-gbs32"]
    assert tight["metrics"]["feasible"]


def test_nemo_sft_rows_carry_their_launcher_state_and_interleaving():
    """NeMo-Framework-Launcher's H100 fine-tuning examples (examples/peft/llama/h100, conf/peft/llama/sft.yaml):
    Apex distributed Adam with bf16 state (master, m, v: 6 bytes per parameter), bf16 gradients, FP8 primary weights
    (1 byte), and the interleaving the table leaves out (70B SFT VP 20: one layer per virtual stage). Hand check of
    the 70B row's state on its fullest GPU: 20 layers of 855.6M parameters / TP 4 plus the 32,000 x 8,192
    embedding / 4 = 4.343e9 parameters x (1 + 2 + 6) bytes = 39.1e9 B = 36.4 GiB, where 16 bytes (64.7 GiB) and
    its activations had overflowed the 80 GB HBM."""
    cases, _ = V.load_cases(dataset="nvidia-finetune")
    by_id = {c.id: c for c in cases}
    sft = by_id["nemo-24.07-h100-llama2-70B-sft-fp8-16g-gbs32"]
    t = sft.scenario.training
    assert (t.param_bytes, t.grad_bytes, t.optimizer_bytes_per_param) == (1.0, 2.0, 6.0)
    assert sft.design["vpp"] == 20 and by_id["nemo-24.07-h100-llama2-13B-sft-fp8-8g-gbs32"].design["vpp"] == 10
    assert any(f.startswith("optimizer_bytes_per_param=6 (NeMo-Framework-Launcher") for f in sft.filled)
    layer = 8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672 + 2 * 8192
    params = 20 * layer / 4 + 32000 * 8192 / 4
    assert params == pytest.approx(4.343e9, rel=1e-3)
    (res,) = V.evaluate_cases([sft])
    assert res["metrics"]["feasible"]
    state_GiB = params * 9 / 2**30
    assert state_GiB < res["memory_GiB"] < state_GiB + 25  # activations of ~4 in-flight microbatches on top
    # the Megatron-Bridge rows of the same dataset keep the defaults (fp32 Adam state)
    mb = next(c for c in cases if c.id.startswith("mb-"))
    assert mb.scenario.training.optimizer_bytes_per_param == 12.0
    # the launcher's pretraining examples reduce gradients in bf16, except the two Nemotron ones (Apex's fp32)
    pre, _ = V.load_cases(dataset="nemo-perf-h100")
    fp32 = {c.id for c in pre if c.scenario.training.grad_bytes == 4.0}
    assert fp32 == {"nemo-24.07-h100-nemotron-8B-pretrain-fp8-64g-gbs256",
                    "nemo-24.07-h100-nemotron-22B-pretrain-fp8-64g-gbs256"}
    assert all(c.scenario.training.grad_bytes == 2.0 for c in pre if c.id not in fp32)



def test_nemo_gpt3_175b_runs_its_tp_collectives_exposed():
    """NeMo 24.07's GPT-3 175B row ran NeMo-Framework-Launcher's gpt3/175b config, which sets ub_tp_comm_overlap
    False (no example overrides it): its TP all-gathers and reduce-scatters are not hidden under the GEMMs. Every
    other TP > 1 row of the dataset keeps the profile's dp+tp."""
    cases, _ = V.load_cases(dataset="nemo-perf-h100")
    gpt = next(c for c in cases if c.id == "nemo-24.07-h100-gpt3-175B-pretrain-fp8-128g-gbs256")
    assert gpt.design["overlap"] == "dp"
    assert any(f.startswith("overlap=dp (NeMo-Framework-Launcher@1a7171d") for f in gpt.filled)
    assert all(c.design["overlap"] == "dp+tp" for c in cases if c.design["tp"] > 1 and c is not gpt)
    overlapped = dataclasses.replace(gpt, design={**gpt.design, "overlap": "dp+tp"})
    off, on = V.evaluate_cases([gpt, overlapped])
    # exposing the TP collectives costs time; it moves the TP term and what scales with a stage's microbatch time
    # (the pipeline bubble, the straggler wait), nothing else
    assert off["breakdown"]["tp"] > on["breakdown"]["tp"] > 0.0
    assert off["breakdown"]["bubble"] > on["breakdown"]["bubble"]
    for k in off["breakdown"]:
        if k not in ("tp", "bubble", "straggler"):
            assert off["breakdown"][k] == pytest.approx(on["breakdown"][k], rel=1e-5), k
    assert off["predicted"] == pytest.approx(sum(off["breakdown"].values()), rel=1e-5)
    assert off["predicted"] > on["predicted"]


def _bundled_row(rid, table="nvidia_perf.csv"):
    """(file, line, row) of one run of a bundled public-run table, as the reader sees it (exclusions included)."""
    rows, _ = V.read_csv(os.path.join(V.VALIDATION_DIR, "data", table))
    (found,) = [r for r in rows if r[2]["id"] == rid]
    return found


def test_unknown_run_setting_names_the_profile_key():
    """A misspelt run_settings key is refused with the run and key named, not silently dropped; a state size outside
    the training section's range (specs.RANGES) likewise."""
    rid = "nemo-24.07-h100-llama2-7B-sft-fp8-8g-gbs32"
    file, n, row = _bundled_row(rid)
    profiles = V._profiles()
    for bad, match in (({"optimiser_bytes": 6}, "optimiser_bytes.*unknown setting"),
                       ({"optimizer_bytes_per_param": -1}, "optimizer_bytes_per_param.*must be a finite number in")):
        profile = {**profiles["nvidia-finetune"], "run_settings": {rid: bad}}
        with pytest.raises(V.CaseError, match=rf"run_settings\.{re.escape(rid)}\.{match}"):
            V.build_case(row, file, n, {**profiles, "nvidia-finetune": profile}, gpus={})


def test_usable_memory_is_hbm_less_a_fixed_reserve():
    for path in glob.glob(os.path.join(V.CONFIGS, "hardware", "*.yaml")):
        g = load_gpu(path)
        reserve_GiB = (g.hbm_bytes - g.usable_bytes) / 2**30
        assert abs(reserve_GiB - 2.5) < 0.01, (path, reserve_GiB)


GB300_HBM_GiB = 288


@pytest.mark.parametrize("rid", ["mb-26.02.01-gb300-llama3-70B-pretrain-nvfp4-64g-gbs256",
                                 "mb-26.02.01-gb300-llama3-70B-pretrain-mxfp8-64g-gbs256"])
def test_rows_excluded_for_an_impossible_layout_cannot_hold_the_model(rid):
    """The two 26.02.01 GB300 rows import_shared.py sets aside: built as published, the memory model puts them far
    over the card (TP1 PP1 without FSDP: 2 + 4 bytes of weight and gradient per parameter, 424 GB for 70.6e9)."""
    file, n, row = _bundled_row(rid)
    assert "cannot hold" in row["exclude"]
    case = V.build_case({**row, "exclude": ""}, file, n, V._profiles(), {}, gpus={})
    (res,) = V.evaluate_cases([case])
    assert not res["metrics"]["feasible"]
    assert res["memory_GiB"] > 1.25 * GB300_HBM_GiB


def test_the_row_excluded_for_an_ep_its_stage_cannot_hold_is_one_the_model_refuses():
    """25.09's DeepSeek-V3 FP8-MX variant on 256 GB200s, set aside by import_shared.py: its table cells give PP 8 but
    only the base variant's EP 64, and a stage of 256 / 8 = 32 ranks cannot hold EP 64. Built as published, the
    reader refuses it with that reason; the base variant (PP 4, EP 64) is scored."""
    file, n, row = _bundled_row("mb-25.09-gb200-deepseek-v3-pretrain-fp8-mx-256g-gbs2048-alt")
    assert "cannot hold" in row["exclude"] and (row["pp"], row["ep"]) == ("8", "64")
    with pytest.raises(V.Unsupported, match="ep=64"):
        V.build_case({**row, "exclude": ""}, file, n, V._profiles(), {}, gpus={})
    file, n, base = _bundled_row("mb-25.09-gb200-deepseek-v3-pretrain-fp8-256g-gbs2048")
    assert not base["exclude"] and (base["pp"], base["ep"]) == ("4", "64")
    V.build_case(base, file, n, V._profiles(), {}, gpus={})


def test_the_run_its_release_could_not_give_deepep_is_set_aside_and_its_patch_release_scored():
    """Megatron-Bridge's 26.02 known issues: DeepEP is not supported in that container on H100. Of the bundled 26.02
    rows, the H100 Qwen3-30B-A3B one is the only run whose recipe asks for DeepEP (recipes.csv), so it alone is set
    aside; 26.02.01, the patch release whose recipe moved to HybridEP, is scored at the same table columns and runs
    1.77x as fast as the excluded number."""
    rid = "mb-26.02-h100-qwen3-30b-a3b-pretrain-fp8-16g-gbs1024"
    recipes = V.RECIPES()
    deepep_2602_h100 = [i for i, r in recipes.items()
                        if r["release"] == "26.02" and "-h100-" in i and r["flex_backend"] == "deepep"]
    assert deepep_2602_h100 == [rid]
    _, _, row = _bundled_row(rid)
    assert "DeepEP is not supported" in row["exclude"] and "known-issues" in row["exclude"]
    _, _, patch = _bundled_row(rid.replace("mb-26.02-", "mb-26.02.01-"))
    assert not patch["exclude"] and recipes[patch["id"]]["flex_backend"] == "hybridep"
    same = ("n_gpus", "tp", "pp", "dp", "cp", "vpp", "mbs", "gbs", "precision")
    assert [row[k] for k in same] == [patch[k] for k in same]
    assert float(row["value"]) / float(patch["value"]) == pytest.approx(51.27 / 28.94, rel=1e-3)
    assert rid not in {c.id for c in V.load_all().cases}


def test_opt_175b_is_scored_on_the_flops_its_source_counts():
    """OPT's 147 TFLOP/s per GPU counts recomputation (import_shared.py CORRECT): its chronicle gives 4.30e23 FLOPs
    for 300e9 tokens, 1.433e12 per token, which is Narayanan et al. 2021's full-recompute count for its shape, and 33
    days on 1024 GPUs at that rate. The row is scored as hardware FLOPs, whose count per token is that figure."""
    file, n, row = _bundled_row("opt-175b-992", "other.csv")
    assert row["metric"] == "tflops_per_gpu_hw" and "4.30E+23" in row["notes"]
    case = V.build_case(row, file, n, V._profiles(), {}, gpus={})
    seq = case.scenario.training.seq_len
    assert V.hw_flops_per_sequence(case) / seq == pytest.approx(4.30e23 / 300e9, rel=2e-3)
    assert 4.30e23 / (33 * 86_400 * 1024) / 1e12 == pytest.approx(float(row["value"]), rel=2e-3)
    # the model-FLOPs count the row had been scored on is 3/4 of it less the recomputed logits: 1.08e12 per token
    model_per_token = V._host_flops(case)[0] / seq
    assert model_per_token == pytest.approx(1.0764e12, rel=2e-3)


def test_deepseek_blockwise_row_is_scored_on_its_tables_own_flop_count():
    """The 25.09 H100 DeepSeek-V3 blockwise-FP8 variant gives TFLOP/s only (import_shared.py CORRECT). Its base FP8 row
    (same model, sequence, GPUs and table) gives 338 TFLOP/s at 1297 tokens/s per GPU, 2.61e11 FLOPs per token, where
    the model's count (the whole score matrix) is 2.81e11: scored as TFLOP/s the variant was off by that ratio before
    any model error. Converted with the table's own count, its step time is 8192 x 4096 / (1297 x 330/338 x 1024)."""
    rid = "mb-25.09-h100-deepseek-v3-pretrain-fp8-blockwise-1024g-gbs8192-alt"
    file, n, row = _bundled_row(rid)
    _, _, base = _bundled_row("mb-25.09-h100-deepseek-v3-pretrain-fp8-1024g-gbs8192")
    assert row["metric"] == "iteration_s" and "1297 x 330 / 338" in row["notes"]
    same = ("model", "seq", "n_gpus", "gbs")
    assert [row[k] for k in same] == [base[k] for k in same]
    tokens = int(row["gbs"]) * int(row["seq"])
    # the base row's own figures: its step time from tokens/s, and its FLOPs per token from TFLOP/s over tokens/s
    assert float(base["value"]) == pytest.approx(tokens / (1297 * int(base["n_gpus"])), rel=1e-5)
    assert float(row["value"]) == pytest.approx(tokens / (1297 * 330 / 338 * int(row["n_gpus"])), rel=1e-5)
    case = V.build_case(row, file, n, V._profiles(), {}, gpus={})
    per_token = V._host_flops(case)[0] / case.scenario.training.seq_len
    assert per_token / (338e12 / 1297) == pytest.approx(1.0763, rel=2e-3)


def test_import_reproduces_the_bundled_tables(tmp_path):
    """configs/validation/data/import_shared.py rebuilds both bundled tables byte for byte from the shared collection
    (its corrections and filled shapes included), so no hand edit of a table is lost on the next import. Runs where
    the collection sits beside the checkout (../shared/data), as it does for the project's developers."""
    shared = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")
    if not os.path.exists(os.path.join(shared, "public_runs_nvidia_perf.csv")):
        pytest.skip("the shared collection is not beside this checkout")
    import importlib.util
    here = os.path.join(V.VALIDATION_DIR, "data")
    spec = importlib.util.spec_from_file_location("import_shared", os.path.join(here, "import_shared.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for src, dst in (("public_runs_nvidia_perf.csv", "nvidia_perf.csv"), ("public_runs_other.csv", "other.csv")):
        mod.convert(os.path.join(shared, src), str(tmp_path / dst))
        with open(os.path.join(here, dst), "rb") as a, open(tmp_path / dst, "rb") as b:
            assert a.read() == b.read(), dst


def test_by_feature_groups_the_runs_by_each_design_feature():
    """overall.by_feature: summarize() over the runs relabelled by one design feature at a time; a run counts once
    per feature, and each group's MAPE and signed step-time bias are its runs' own (hand-computed)."""
    ns = types.SimpleNamespace

    def case(i, framework="megatron-te", **design):
        return ns(id=i, design={"tp": 1, "pp": 1, "cp": 1, "recompute": "none", "sharding": "zero1", **design},
                  scenario=ns(training=ns(framework=ns(name=framework))))

    cases = [case("a", recompute="full", pp=4, schedule="interleaved", tp=8),
             case("b", cp=2, tp=4),
             case("c", framework="composer-fsdp", sharding="fsdp", tp=16),
             case("d", pp=2, schedule="1f1b")]
    errs = {"a": 0.10, "b": -0.04, "c": 0.02, "d": -0.06}
    results = [{"id": i, "dataset": "x", "error": e, "step_time_error": e} for i, e in errs.items()]
    out = V.by_feature(cases, results, held_out={"a", "b"})
    assert set(out) == set(V.FEATURES)
    for groups in out.values():
        assert sum(g["n"] for g in groups.values()) == len(cases)
    rc = out["recompute"]
    assert rc["recompute=full"]["n"] == 1 and rc["recompute=full"]["step_time_bias"] == pytest.approx(0.10)
    assert rc["recompute=none"]["mape"] == pytest.approx((0.04 + 0.02 + 0.06) / 3)
    assert rc["recompute=none"]["step_time_bias"] == pytest.approx((-0.04 + 0.02 - 0.06) / 3)
    assert rc["recompute=none"]["held_out"] == {"n": 1, "mape": pytest.approx(0.04), "max_abs_error": pytest.approx(0.04)}
    assert out["tp"]["tp=2-8"]["n"] == 2 and out["tp"]["tp>8"]["n"] == 1 and "tp=1" in out["tp"]
    assert set(out["schedule"]) == {"schedule=interleaved", "schedule=1f1b", "pp=1"}
    assert out["cp"]["cp>1"]["mape"] == pytest.approx(0.04)
    assert out["framework"]["framework=composer-fsdp"]["n"] == 1
    assert out["sharding"]["sharding=fsdp"]["n"] == 1 and out["sharding"]["sharding=zero1"]["n"] == 3

"""Trust signals in every output: provisional hardware, training-semantics changes, extrapolation."""
import json
import os

import pytest

import sax_jax as sx
from sax_jax.cli import main
from sax_jax.trust import scenario_warnings, validated_range, warnings_for

from conftest import CONFIGS, DEFAULT


def kinds(ws):
    return {w["kind"] for w in ws}


def test_validated_range_from_the_bundled_validation_set():
    r = validated_range()
    assert r["max_gpus"] == 6144 and {"A100-SXM-80GB", "H100-SXM-80GB"} <= set(r["gpus"])


def test_default_scenario_extrapolates(default_scenario):
    assert kinds(scenario_warnings(default_scenario)) == {"beyond_validated_gpus", "beyond_validated_levels"}


def test_beyond_validated_gpus_carries_the_scale_gap():
    """The extrapolation warning carries the validated scale gap over the doublings past the largest run: 1% per
    doubling over 2 doublings is exp(0.02) - 1 = 2.02% more than predicted; nothing without a committed gap or
    inside the validated range."""
    from sax_jax.trust import scale_gap_note
    b = {"scale_gap": {"n_pairs": 9, "median_per_doubling": 0.01, "q10": -0.005, "q90": 0.025}}
    note = scale_gap_note(4096, 1024, b)
    assert "1.0% per doubling" in note and "9 weak-scaling pairs" in note and "-0.5% to +2.5%" in note
    assert "2.0 doublings beyond it expect about 2.0% more than predicted" in note
    assert scale_gap_note(4096, 1024, {}) == "" and scale_gap_note(1024, 1024, b) == ""
    msg = next(w["message"] for w in scenario_warnings(sx.load_scenario(DEFAULT))
               if w["kind"] == "beyond_validated_gpus")
    assert "weak-scaling pairs" in msg and "doublings beyond it" in msg


def test_within_the_validated_range_no_warning():
    sc = sx.load_scenario(os.path.join(CONFIGS, "scenarios", "h100-building.yaml"))
    assert sc.system.n_gpus <= 6144 or "beyond_validated_gpus" in kinds(scenario_warnings(sc))
    assert "provisional_hardware" not in kinds(scenario_warnings(sc))
    assert "beyond_validated_levels" not in kinds(scenario_warnings(sc))


def test_moe_speedup_bands_flagged_while_no_moe_ranking_group_exists():
    """An MoE scenario is told that its speedup bands rest on dense runs as long as the committed bands have no
    ranking group of an MoE model; a dense scenario never is, and an MoE group in the bands lifts it."""
    from sax_jax import uncertainty
    from sax_jax.trust import moe_speedup_warnings

    moe = sx.load_scenario(os.path.join(CONFIGS, "scenarios", "mixtral-moe.yaml"))
    dense = sx.load_scenario(DEFAULT)
    committed = uncertainty.bands()
    flagged = "moe_speedups_from_dense_runs" in kinds(scenario_warnings(moe))
    assert flagged == (committed["relative"]["n_groups_moe"] == 0)
    assert "moe_speedups_from_dense_runs" not in kinds(scenario_warnings(dense))
    with_moe_group = {**committed, "relative": {**committed["relative"], "n_groups_moe": 1}}
    assert moe_speedup_warnings(moe, with_moe_group) == []
    without = {**committed, "relative": {**committed["relative"], "n_groups_moe": 0}}
    (w,) = moe_speedup_warnings(moe, without)
    assert f"{committed['relative']['n_pairs']} run pairs of {committed['relative']['n_groups']}" in w["message"]


@pytest.mark.parametrize("gpu,provisional", [("A100-SXM-40GB", True), ("V100-SXM-16GB", True), ("B200", False),
                                             ("GB200", False), ("H200", False)])
def test_provisional_hardware_flagged(tmp_path, gpu, provisional):
    """Provisional constants are flagged; the Blackwell parts are calibrated (calibrate.py --family blackwell) and
    H200 carries H100's fit (calibrate.py SAME_SILICON)."""
    system = open(os.path.join(CONFIGS, "systems", "h100-building.yaml")).read().replace(
        "../hardware/H100-SXM-80GB.yaml", os.path.join(CONFIGS, "hardware", f"{gpu}.yaml"))
    (tmp_path / "sys.yaml").write_text(system)
    (tmp_path / "s.yaml").write_text(f"""
model: {CONFIGS}/models/llama3-8B.yaml
system: {tmp_path}/sys.yaml
transports: {CONFIGS}/network/transports.yaml
training: {{global_batch_sequences: 1024, seq_len: 4096}}
space: {{tp: [8], pp: [1]}}
""")
    ws = scenario_warnings(sx.load_scenario(str(tmp_path / "s.yaml")))
    flagged = "provisional_hardware" in kinds(ws) and gpu in " ".join(w["message"] for w in ws)
    assert flagged == provisional


def test_bounded_loss_flagged_only_when_shown():
    sc = sx.load_scenario(os.path.join(CONFIGS, "scenarios", "huge-four-buildings.yaml"))
    base = sc.space.to_dict(sc.baseline_design())
    assert "changes_training_semantics" not in kinds(warnings_for(sc, [base]))
    assert "changes_training_semantics" in kinds(warnings_for(sc, [base, dict(base, transport="bounded_loss")]))


def test_eval_json_and_table_carry_warnings_and_resolved_dp(capsys):
    assert main(["eval", DEFAULT, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["resolved"]["dp"] == 16384 // (8 * 16)
    # the production layout's predicted MFU is above every published BF16 dense run on H100 (above_published_mfu)
    assert kinds(rec["warnings"]) == {"beyond_validated_gpus", "beyond_validated_levels", "above_published_mfu"}
    # the measured step time's 80% band, from the scenario's GPU, GPU count and class, as a sweep reports its best
    from sax_jax import uncertainty
    assert rec["band"] == uncertainty.design_band(uncertainty.bands(), sx.load_scenario(DEFAULT), rec["step_time_s"])
    assert rec["band"]["group"] == "Hopper, dense"
    lo, hi = rec["band"]["measured_s"]
    assert lo < rec["step_time_s"] < hi
    # ... and it is set beside the best of those runs, as predicted (published.versus_ceiling)
    vs = rec["versus_published"]
    ceiling = uncertainty.bands()["published_mfu"][uncertainty.mfu_class("H100-SXM-80GB", "bf16")]
    assert rec["mfu"] > ceiling["max"] and vs["id"] == ceiling["max_id"]
    step = sum(rec["breakdown"].values())
    assert step == pytest.approx(rec["raw_step_time_s"], rel=1e-5)
    assert vs["design"]["compute_mfu"] == pytest.approx(rec["mfu"] * step / rec["breakdown"]["compute"], rel=1e-6)
    assert main(["eval", DEFAULT]) == 0
    out = capsys.readouterr().out
    assert "dp=auto (= 128)" in out and "warning (beyond_validated_gpus)" in out
    assert f"share, {vs['id']}" in out and "above the best published run of its class" in out
    assert "80% band" in out and "runs: Hopper, dense" in out
    # a design that cannot run has no step time to put a band on
    assert main(["eval", DEFAULT, "--set", "tp=16", "--json"]) == 0
    bad = json.loads(capsys.readouterr().out)
    assert not bad["feasible"] and "band" not in bad


def test_sweep_json_carries_warnings(capsys, tmp_path):
    sc = os.path.join(CONFIGS, "scenarios", "huge-four-buildings.yaml")
    assert main(["sweep", sc, "--json", "--max-designs", "4096", "--top", "3", "--no-progress",
                 "--no-compile-cache", "--out", str(tmp_path / "o")]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert {"beyond_validated_gpus", "beyond_validated_levels"} <= kinds(rec["warnings"])
    on_disk = json.load(open(tmp_path / "o" / "result.json"))
    assert on_disk["warnings"] == rec["warnings"]


def test_v4_kernels_flagged_and_the_stated_error_is_the_validated_one(tmp_path):
    """A scenario with DeepSeek-V4-Flash is told its sparse-attention and hyper-connection kernels are modelled in
    part, with the validated error of the two published runs; a GQA model is not."""
    import dataclasses
    from sax_jax import validation as V
    from sax_jax.trust import UNMODELLED_KERNELS_ERROR
    from conftest import bundled_model
    dense = sx.load_scenario(DEFAULT)
    assert "unmodelled_kernels" not in kinds(scenario_warnings(dense))
    v4 = dataclasses.replace(dense, model=bundled_model("deepseek-v4-flash"))
    (w,) = [w for w in scenario_warnings(v4) if w["kind"] == "unmodelled_kernels"]
    assert "26-28% faster than measured" in w["message"]
    cases = [c for c in V.load_all().cases if c.scenario.model.compressed_attention is not None]
    errors = sorted(r["step_time_error"] for r in V.evaluate_cases(cases))
    assert errors == pytest.approx(sorted(UNMODELLED_KERNELS_ERROR), abs=5e-4)


def test_above_published_mfu_flags_a_design_beyond_every_measured_run():
    """A predicted MFU above the highest published run of the scenario's class (GPU type, precision, dense/MoE) is
    flagged with that run; at or below it, for a class with no published run, or with nothing shown, it is not."""
    from sax_jax import uncertainty
    from sax_jax.trust import mfu_warnings
    sc = sx.load_scenario(DEFAULT)  # llama3-405B, bf16, H100-SXM-80GB
    key = uncertainty.mfu_class("H100-SXM-80GB", "bf16")
    table = {key: {"n": 12, "max": 0.45, "max_id": "run-x", "max_n_gpus": 1024}}
    bands = {"published_mfu": table}
    (w,) = mfu_warnings(sc, 0.5, bands)
    assert w["kind"] == "above_published_mfu"
    assert "MFU 50.0% is above all 12 published bf16 dense runs on H100-SXM-80GB" in w["message"]
    # a class of fewer than MIN_RUNS runs sets no ceiling
    assert mfu_warnings(sc, 0.5, {"published_mfu": {key: {**table[key], "n": uncertainty.MIN_RUNS - 1}}}) == []
    assert "highest 45.0%: run-x, 1,024 GPUs" in w["message"]
    assert mfu_warnings(sc, 0.45, bands) == [] and mfu_warnings(sc, None, bands) == []
    assert mfu_warnings(sc, 0.9, {"published_mfu": {}}) == []  # no published run of the class
    # a shown record gives its MFU only when it has a step time (an infeasible design's MFU is not a prediction)
    from sax_jax.trust import feasible_mfu
    assert feasible_mfu({"mfu": 0.5, "step_time_s": 1.0}) == 0.5
    assert feasible_mfu({"mfu": 0.5, "step_time_s": None}) is None and feasible_mfu(None) is None
    # another precision's or class's ceiling says nothing about this one
    other = {uncertainty.mfu_class("H100-SXM-80GB", "fp8"): table[key],
             uncertainty.mfu_class("H100-SXM-80GB", "bf16", moe=True): table[key]}
    assert mfu_warnings(sc, 0.9, {"published_mfu": other}) == []


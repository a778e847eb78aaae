"""Error bands from the validation residuals (sax_jax.uncertainty): the committed file, quantiles, pairs, ties."""
import math
from types import SimpleNamespace

import pytest

from sax_jax import uncertainty as U


def _run(id_, gpu, n_gpus, predicted, measured, metric="iteration_s", moe=False):
    return {"id": id_, "gpu": gpu, "n_gpus": n_gpus, "metric": metric, "predicted": predicted,
            "measured": measured, "moe": moe}


def _close(a, b, path="") -> None:
    """Equal dicts/lists, floats within 1e-6."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, abs=1e-6), path
    else:
        assert a == b, path


def test_committed_bands_match_validation():
    """configs/validation/uncertainty.json is what validate() gives today: a model change that moves the
    predictions makes this fail until `python -m sax_jax.uncertainty --write` is rerun."""
    from sax_jax.validation import validate

    fresh = U.compute(validate())
    committed = U.bands()
    assert fresh["model_fingerprint"] == committed["model_fingerprint"], "stale bands: rerun --write"
    _close(fresh, committed)
    assert committed["relative"]["n_pairs"] >= 100
    absolute = committed["absolute"]
    assert absolute["all"]["n"] == committed["n_cases"]
    # every run is in exactly one class, and the validation set holds enough of each for a band of its own
    assert absolute[U.DENSE]["n"] + absolute[U.MOE]["n"] == committed["n_cases"]
    assert min(absolute[U.DENSE]["n"], absolute[U.MOE]["n"]) >= committed["min_runs"]


# 11 Hopper runs at 8 GPUs with residuals 0.00, 0.01, ..., 0.10 and three A100 runs at 2048 GPUs scored on
# TFLOP/s per GPU (step time ~ 1 / throughput: measured/predicted 0.5, 1.0, 1.5 -> residuals -0.5, 0, +0.5)
HOPPER = [_run(f"h{k}", "H100-SXM-80GB", 8, 1.0 + k / 100, 1.0) for k in range(11)]
A100 = [_run(f"a{k}", "A100-SXM-80GB", 2048, 100.0, m, "tflops_per_gpu") for k, m in enumerate((50, 100, 150))]


def test_absolute_groups_golden():
    groups = U.absolute_groups(HOPPER + A100)
    assert set(groups) == {"Hopper, dense, <= 64 GPUs", "Hopper, dense", "A100, dense, > 1024 GPUs", "A100, dense",
                           "dense", "all"}
    # 11 values, linear interpolation: the 10th percentile sits at position 1.0, the 90th at 9.0
    assert groups["Hopper, dense"] == {"n": 11, "q10": pytest.approx(0.01), "q90": pytest.approx(0.09)}
    assert groups["A100, dense"] == {"n": 3, "q10": pytest.approx(-0.4), "q90": pytest.approx(0.4)}
    # all 14 sorted: -0.5, 0, 0, 0.01 .. 0.10, 0.5; q10 at position 1.3 (between the zeros), q90 at 11.7
    # (0.09 + 0.7 x 0.01)
    assert groups["all"] == {"n": 14, "q10": pytest.approx(0.0), "q90": pytest.approx(0.097)}
    assert groups["dense"] == groups["all"]  # no MoE run among them


# 10 MoE runs on 16 Blackwell GPUs with residuals -0.20, -0.15, ..., +0.25 (step 0.05)
MOE = [_run(f"m{k}", "GB200", 16, 0.8 + k / 20, 1.0, moe=True) for k in range(10)]


def test_moe_runs_have_groups_of_their_own():
    groups = U.absolute_groups(HOPPER + A100 + MOE)
    assert {"Blackwell, MoE, <= 64 GPUs", "Blackwell, MoE", "MoE"} <= set(groups)
    # 10 values -0.20 .. +0.25: the 10th percentile at position 0.9 (-0.155), the 90th at 8.1 (+0.205)
    assert groups["MoE"] == {"n": 10, "q10": pytest.approx(-0.155), "q90": pytest.approx(0.205)}
    assert groups["dense"]["n"] == 14 and groups["all"]["n"] == 24
    b = {"min_runs": 10, "level": 0.8, "absolute": groups}
    # an MoE design on Blackwell takes the MoE runs' band, a dense design there never does (no dense Blackwell
    # run: the dense runs of every generation)
    assert U.absolute_band(b, "B200", 8, 1.0, moe=True)["group"] == "Blackwell, MoE, <= 64 GPUs"
    assert U.absolute_band(b, "B200", 8, 1.0)["group"] == "dense"
    # an MoE design on Hopper, which has no MoE run: the MoE runs of every generation, not Hopper's dense ones
    hopper_moe = U.absolute_band(b, "H100-SXM-80GB", 8, 1.0, moe=True)
    assert (hopper_moe["group"], hopper_moe["n_runs"]) == ("MoE", 10)
    assert hopper_moe["measured_s"] == pytest.approx([1.0 / 1.205, 1.0 / 0.845])


def test_absolute_band_falls_back_to_wider_groups():
    b = {"min_runs": 10, "level": 0.8, "absolute": U.absolute_groups(HOPPER + A100)}
    h200 = U.absolute_band(b, "H200", 64, 2.0)  # the Hopper <= 64 group itself (11 runs)
    assert (h200["group"], h200["n_runs"]) == ("Hopper, dense, <= 64 GPUs", 11)
    assert h200["measured_s"] == pytest.approx([2.0 / 1.09, 2.0 / 1.01])
    # no Hopper run at 65-1024 GPUs: all Hopper runs
    assert U.absolute_band(b, "H100-SXM-80GB", 128, 1.0)["group"] == "Hopper, dense"
    # 3 A100 runs are too few at any level: the dense runs of every generation (here all 14)
    a100 = U.absolute_band(b, "A100-SXM-40GB", 4096, 1.0)
    assert (a100["group"], a100["n_runs"]) == ("dense", 14)
    assert a100["measured_s"] == pytest.approx([1.0 / 1.097, 1.0])
    assert U.absolute_band(b, "V100-SXM-16GB", 8, 1.0)["group"] == "dense"  # no listed generation
    # no MoE run at all, and the last key is taken whatever its size
    assert U.absolute_band(b, "V100-SXM-16GB", 8, 1.0, moe=True)["group"] == "all"
    few = {"min_runs": 10, "level": 0.8, "absolute": U.absolute_groups(A100)}  # 3 runs: no group is big enough
    band = U.absolute_band(few, "A100-SXM-80GB", 8, 1.0)
    assert (band["group"], band["n_runs"]) == ("all", 3)


def _mfu_run(id_, gpu, precision, predicted_mfu, predicted, measured, metric="iteration_s", moe=False, lora=False):
    return {**_run(id_, gpu, 64, predicted, measured, metric, moe), "precision": precision, "lora": lora,
            "metrics": {"mfu": predicted_mfu}}


def test_published_mfu_golden():
    """The measured MFU is the predicted one times predicted / measured step time (MFU ~ 1 / step); a throughput
    metric's step time is 1 / throughput; LoRA runs, runs without a prediction or a precision are left out."""
    runs = [
        _mfu_run("slow", "H100-SXM-80GB", "bf16", 0.50, 1.0, 1.25),  # measured 0.50 x 1.0 / 1.25 = 0.40
        _mfu_run("fast", "H100-SXM-80GB", "bf16", 0.40, 1.1, 1.0),  # 0.44: the class's highest
        _mfu_run("tput", "H100-SXM-80GB", "bf16", 0.30, 400.0, 500.0, "tflops_per_gpu"),  # 0.30 x 500 / 400 = 0.375
        _mfu_run("lora", "H100-SXM-80GB", "bf16", 0.90, 1.0, 1.0, lora=True),  # would be 0.90: not comparable
        _mfu_run("fp8", "H100-SXM-80GB", "fp8", 0.35, 1.0, 1.0),
        _mfu_run("moe", "H100-SXM-80GB", "bf16", 0.20, 1.0, 1.0, moe=True),
        _mfu_run("none", "H100-SXM-80GB", "bf16", 0.99, None, 1.0),
        {**_run("old", "H100-SXM-80GB", 64, 1.0, 0.5), "metrics": {"mfu": 0.99}},  # no precision entry
    ]
    assert U.measured_mfu(runs[0]) == pytest.approx(0.40) and U.measured_mfu(runs[2]) == pytest.approx(0.375)
    table = U.published_mfu(runs)
    assert set(table) == {"H100-SXM-80GB, bf16, dense", "H100-SXM-80GB, fp8, dense", "H100-SXM-80GB, bf16, MoE"}
    dense = table["H100-SXM-80GB, bf16, dense"]
    assert (dense["n"], dense["max_id"], dense["max_n_gpus"]) == (3, "fast", 64)
    assert dense["max"] == pytest.approx(0.44)
    assert table["H100-SXM-80GB, fp8, dense"]["max"] == pytest.approx(0.35)
    assert "max_shares" not in dense  # no breakdown in these records: nothing to set a design beside


def test_ceiling_run_carries_its_breakdown():
    """The ceiling run's prediction travels with it: MFU, compute-only MFU (mfu x step / compute: 0.4 x 1.0 / 0.8 =
    0.5) and each nonzero term's share of the step."""
    assert U.compute_mfu(0.4, {"compute": 0.8, "tp": 0.15, "bubble": 0.05, "cp": 0.0}) == pytest.approx(0.5)
    assert U.compute_mfu(0.4, {"compute": 0.0, "tp": 1.0}) is None
    shares = U.breakdown_shares({"compute": 0.8, "tp": 0.15, "bubble": 0.05, "cp": 0.0})
    assert shares == {"compute": pytest.approx(0.8), "tp": pytest.approx(0.15), "bubble": pytest.approx(0.05)}
    run = {**_mfu_run("top", "H100-SXM-80GB", "bf16", 0.4, 1.0, 0.8),  # measured 0.4 x 1.0 / 0.8 = 0.5
           "breakdown": {"compute": 0.8, "tp": 0.15, "bubble": 0.05, "cp": 0.0}}
    (g,) = U.published_mfu([run]).values()
    assert (g["max"], g["max_predicted_mfu"], g["max_compute_mfu"]) == (pytest.approx(0.5), 0.4, pytest.approx(0.5))
    assert g["max_shares"] == shares


def test_committed_mfu_ceilings_are_measured_values():
    """Every committed ceiling is the MFU its run reached: `sax eval`'s published context (published.py, from the
    run's measured step time) gives the same value."""
    from sax_jax import validation as V
    from sax_jax.published import measured_step_s

    table = U.bands()["published_mfu"]
    h100 = table[U.mfu_class("H100-SXM-80GB", "bf16")]
    assert h100["n"] >= 50 and 0.3 < h100["max"] < 0.7
    cases = {c.id: c for c in V.load_cases()[0]}
    for key in ("H100-SXM-80GB, bf16, dense", "GB200, fp8, MoE"):
        case = cases[table[key]["max_id"]]
        assert V.metrics_of(case, measured_step_s(case), True)["mfu"] == pytest.approx(table[key]["max"], rel=1e-5)


def test_scale_gap_golden():
    """Measured minus predicted growth per doubling over the weak-scaling pairs: median and 10th/90th percentiles
    (gaps 0, 0.01, 0.02, 0.03, 0.04: median 0.02, q10 at position 0.4 = 0.004, q90 at 3.6 = 0.036)."""
    pairs = [{"measured": 0.01 * k + 0.005, "predicted": 0.005} for k in range(5)]
    gap = U.scale_gap({"pairs": pairs})
    assert gap["n_pairs"] == 5 and gap["median_per_doubling"] == pytest.approx(0.02)
    assert (gap["q10"], gap["q90"]) == (pytest.approx(0.004), pytest.approx(0.036))
    assert U.scale_gap({"pairs": []}) is None and U.scale_gap(None) is None
    committed = U.bands()["scale_gap"]
    assert committed["n_pairs"] >= 30 and committed["q10"] < committed["median_per_doubling"] < committed["q90"]


@pytest.mark.parametrize("gpu, n, moe, keys", [
    ("GB300", 64, False, ["Blackwell, dense, <= 64 GPUs", "Blackwell, dense", "dense", "all"]),
    ("B200", 65, True, ["Blackwell, MoE, 65-1024 GPUs", "Blackwell, MoE", "MoE", "all"]),
    ("H200", 1025, False, ["Hopper, dense, > 1024 GPUs", "Hopper, dense", "dense", "all"]),
    ("A100-SXM-40GB", 1024, True, ["A100, MoE, 65-1024 GPUs", "A100, MoE", "MoE", "all"]),
    ("V100-SXM-16GB", 8, False, ["dense", "all"]),
])
def test_group_keys(gpu, n, moe, keys):
    assert U.group_keys(gpu, n, moe) == keys


def test_pair_errors_golden():
    """Time ratios 1, 1.1, 1.21 in one group: e = +-ln 1.1 (4 ordered pairs) and +-2 ln 1.1 (2); a lone run and a
    run without a prediction add nothing."""
    runs = [_run("x", "H200", 8, 1.0, 1.0), _run("y", "H200", 8, 1.1, 1.0), _run("z", "H200", 8, 2.42, 2.0),
            _run("lone", "H200", 8, 3.0, 1.0), _run("none", "H200", 8, None, 1.0)]
    groups = [["x", "y", "z", "none"], ["lone"]]
    e = sorted(U.pair_errors(runs, groups))
    L = math.log(1.1)
    assert e == pytest.approx([-2 * L, -L, -L, L, L, 2 * L])
    stats = U.relative_band_stats(runs, groups)
    # 6 values: the 10th percentile at position 0.5, halfway between -2L and -L
    assert stats == {"n_pairs": 6, "n_groups": 2, "q10": pytest.approx(-1.5 * L), "q90": pytest.approx(1.5 * L)}
    assert U.speedup_band({"relative": stats}, 2.0) == pytest.approx([2.0 * 1.1 ** -1.5, 2.0 * 1.1 ** 1.5])


def test_compute_counts_the_moe_ranking_groups():
    result = {"cases": HOPPER + MOE, "ranking": {"groups": [{"ids": ["h0", "h1", "h2"]}, {"ids": ["m0", "m1"]}]}}
    out = U.compute(result)
    assert out["relative"]["n_groups"] == 2 and out["relative"]["n_groups_moe"] == 1
    assert out["absolute"]["MoE"]["n"] == 10 and out["n_cases"] == 21


def test_throughput_metric_inverts_the_ratio():
    assert U.time_ratio(_run("t", "H200", 8, 110.0, 100.0, "tokens_per_s")) == pytest.approx(100 / 110)
    assert U.time_ratio(_run("s", "H200", 8, 1.1, 1.0)) == pytest.approx(1.1)
    assert U.time_ratio(_run("n", "H200", 8, None, 1.0)) is None


def test_fingerprint_sees_4_significant_digits():
    base = U.fingerprint([_run("a", "H200", 8, 1.23449, 1.0)])
    assert U.fingerprint([_run("a", "H200", 8, 1.23441, 1.0)]) == base
    assert U.fingerprint([_run("a", "H200", 8, 1.2346, 1.0)]) != base


BANDS = {"level": 0.8, "relative": {"n_pairs": 6, "q10": -0.1, "q90": 0.05}}  # tie within exp(0.1) = 1.10517


def test_tie_rule():
    assert U.tie_factor(BANDS) == pytest.approx(math.exp(0.1))
    assert U.ties(BANDS, 1.0, 1.105) and U.ties(BANDS, 1.105, 1.0)
    assert not U.ties(BANDS, 1.0, 1.106) and not U.ties(BANDS, 1.106, 1.0)
    lo, hi = U.speedup_band(BANDS, 1.04)  # [1.04 e^-0.1, 1.04 e^0.05] = [0.941, 1.093]: contains 1
    assert lo == pytest.approx(0.94104, abs=1e-5) and hi == pytest.approx(1.09332, abs=1e-5)


def _rec(t, **design):
    return {"step_time_s": t, "design": {"tp": 4, **design}}


TOP = [_rec(1.00, pp=8, transport="spray_sr"), _rec(1.02, pp=8, transport="ecmp_qp4"),
       _rec(1.05, pp=8, transport="spray_sr"), _rec(1.20, pp=4, transport="spray_sr")]


def test_near_optimal_shared_and_free_decisions():
    near = U.near_optimal(BANDS, TOP, ["pp", "transport"])  # tp is not varied: left out
    assert near == {"n": 3, "n_listed": 4, "within": pytest.approx(math.exp(0.1) - 1), "top_k_limited": False,
                    "shared": {"pp": 8}, "free": ["transport"]}
    assert U.near_optimal(BANDS, TOP[:3], ["pp", "transport", "tp"])["top_k_limited"]
    # one design: everything is shared
    assert U.near_optimal(BANDS, TOP[:1], ["pp"])["shared"] == {"pp": 8}


def test_for_sweep():
    b = {**BANDS, "min_runs": 10, "absolute": U.absolute_groups(HOPPER + A100)}
    scen = SimpleNamespace(system=SimpleNamespace(gpu=SimpleNamespace(name="H100-SXM-80GB"), n_gpus=16),
                           model=SimpleNamespace(moe=None))
    out = U.for_sweep(b, scen, TOP, {"near": 1.04, "far": 1.5, "infeasible": None}, ["pp", "transport"])
    assert out["band"]["group"] == "Hopper, dense, <= 64 GPUs" and out["band"]["step_time_s"] == 1.0
    assert out["speedups"]["near"]["tie"] and not out["speedups"]["far"]["tie"]
    assert out["speedups"]["far"]["band"] == pytest.approx([1.5 * math.exp(-0.1), 1.5 * math.exp(0.05)])
    assert out["speedups"]["far"]["n_pairs"] == 6 and out["speedups"]["infeasible"] is None
    assert out["near_optimal"]["n"] == 3


def test_for_sweep_takes_the_scenarios_model_class():
    """A scenario whose model has routed experts reads the MoE runs' band; the bundled MoE scenarios and the
    default one (dense) pick their classes from the committed bands (no compile: the band needs a step time only)."""
    b = {**BANDS, "min_runs": 10, "absolute": U.absolute_groups(HOPPER + A100 + MOE)}
    gpu = SimpleNamespace(name="H100-SXM-80GB")
    moe = SimpleNamespace(system=SimpleNamespace(gpu=gpu, n_gpus=16), model=SimpleNamespace(moe=object()))
    assert U.for_sweep(b, moe, TOP, {}, ["pp"])["band"]["group"] == "MoE"
    import sax_jax as sx
    from conftest import CONFIGS

    for name, cls in (("mixtral-moe", U.MOE), ("deepseek-v3-two-buildings", U.MOE), ("default", U.DENSE)):
        sc = sx.load_scenario(f"{CONFIGS}/scenarios/{name}.yaml")
        band = U.for_sweep(U.bands(), sc, TOP, {}, ["pp"])["band"]
        assert band["group"] == f"Hopper, {cls}", name
        g = U.bands()["absolute"][band["group"]]
        assert band["measured_s"] == pytest.approx([1.0 / (1.0 + g["q90"]), 1.0 / (1.0 + g["q10"])])


def test_two_gpu_types_take_the_wider_band():
    """A system with an H100 building and a B200 building: the band is the wider of the two types', whichever type
    the system names first."""
    wide = [_run(f"w{k}", "B200", 16, 0.8 + k / 20, 1.0) for k in range(10)]  # dense, -0.20 .. +0.25
    b = {**BANDS, "min_runs": 10, "absolute": U.absolute_groups(HOPPER + wide)}

    def scen(*gpus):
        buildings = tuple(SimpleNamespace(gpu=SimpleNamespace(name=g)) for g in gpus)
        return SimpleNamespace(system=SimpleNamespace(gpu=buildings[0].gpu, n_gpus=16, buildings=buildings),
                               model=SimpleNamespace(moe=None))

    for gpus in (("H100-SXM-80GB", "B200"), ("B200", "H100-SXM-80GB")):
        band = U.design_band(b, scen(*gpus), 1.0)
        assert (band["group"], band["q10"], band["q90"]) == ("Blackwell, dense, <= 64 GPUs", pytest.approx(-0.155),
                                                             pytest.approx(0.205)), gpus
    # one type, or no buildings: that type's band (Hopper's narrow 0.01 .. 0.09 here)
    assert U.design_band(b, scen("H100-SXM-80GB"), 1.0)["group"] == "Hopper, dense, <= 64 GPUs"
    flat = SimpleNamespace(system=SimpleNamespace(gpu=SimpleNamespace(name="H200"), n_gpus=8, buildings=()),
                           model=SimpleNamespace(moe=None))
    assert U.design_band(b, flat, 2.0)["group"] == "Hopper, dense, <= 64 GPUs"

"""Error bands from the validation residuals (sax_jax.uncertainty): the committed file, quantiles, pairs, ties."""
import math
from types import SimpleNamespace

import pytest

from sax_jax import uncertainty as U


def _run(id_, gpu, n_gpus, predicted, measured, metric="iteration_s"):
    return {"id": id_, "gpu": gpu, "n_gpus": n_gpus, "metric": metric, "predicted": predicted,
            "measured": measured}


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
    assert committed["absolute"]["all"]["n"] == committed["n_cases"]


# 11 Hopper runs at 8 GPUs with residuals 0.00, 0.01, ..., 0.10 and three A100 runs at 2048 GPUs scored on
# TFLOP/s per GPU (step time ~ 1 / throughput: measured/predicted 0.5, 1.0, 1.5 -> residuals -0.5, 0, +0.5)
HOPPER = [_run(f"h{k}", "H100-SXM-80GB", 8, 1.0 + k / 100, 1.0) for k in range(11)]
A100 = [_run(f"a{k}", "A100-SXM-80GB", 2048, 100.0, m, "tflops_per_gpu") for k, m in enumerate((50, 100, 150))]


def test_absolute_groups_golden():
    groups = U.absolute_groups(HOPPER + A100)
    assert set(groups) == {"Hopper, <= 64 GPUs", "Hopper", "A100, > 1024 GPUs", "A100", "all"}
    # 11 values, linear interpolation: the 10th percentile sits at position 1.0, the 90th at 9.0
    assert groups["Hopper"] == {"n": 11, "q10": pytest.approx(0.01), "q90": pytest.approx(0.09)}
    assert groups["A100"] == {"n": 3, "q10": pytest.approx(-0.4), "q90": pytest.approx(0.4)}
    # all 14 sorted: -0.5, 0, 0, 0.01 .. 0.10, 0.5; q10 at position 1.3 (between the zeros), q90 at 11.7
    # (0.09 + 0.7 x 0.01)
    assert groups["all"] == {"n": 14, "q10": pytest.approx(0.0), "q90": pytest.approx(0.097)}


def test_absolute_band_falls_back_to_wider_groups():
    b = {"min_runs": 10, "level": 0.8, "absolute": U.absolute_groups(HOPPER + A100)}
    h200 = U.absolute_band(b, "H200", 64, 2.0)  # the Hopper <= 64 group itself (11 runs)
    assert (h200["group"], h200["n_runs"]) == ("Hopper, <= 64 GPUs", 11)
    assert h200["measured_s"] == pytest.approx([2.0 / 1.09, 2.0 / 1.01])
    # no Hopper run at 65-1024 GPUs: all Hopper runs
    assert U.absolute_band(b, "H100-SXM-80GB", 128, 1.0)["group"] == "Hopper"
    # 3 A100 runs are too few at any level: all runs
    a100 = U.absolute_band(b, "A100-SXM-40GB", 4096, 1.0)
    assert (a100["group"], a100["n_runs"]) == ("all", 14)
    assert a100["measured_s"] == pytest.approx([1.0 / 1.097, 1.0])
    assert U.absolute_band(b, "V100-SXM-16GB", 8, 1.0)["group"] == "all"  # no listed generation


@pytest.mark.parametrize("gpu, n, keys", [
    ("GB300", 64, ["Blackwell, <= 64 GPUs", "Blackwell", "all"]),
    ("B200", 65, ["Blackwell, 65-1024 GPUs", "Blackwell", "all"]),
    ("H200", 1025, ["Hopper, > 1024 GPUs", "Hopper", "all"]),
    ("A100-SXM-40GB", 1024, ["A100, 65-1024 GPUs", "A100", "all"]),
    ("V100-SXM-16GB", 8, ["all"]),
])
def test_group_keys(gpu, n, keys):
    assert U.group_keys(gpu, n) == keys


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
    scen = SimpleNamespace(system=SimpleNamespace(gpu=SimpleNamespace(name="H100-SXM-80GB"), n_gpus=16))
    out = U.for_sweep(b, scen, TOP, {"near": 1.04, "far": 1.5, "infeasible": None}, ["pp", "transport"])
    assert out["band"]["group"] == "Hopper, <= 64 GPUs" and out["band"]["step_time_s"] == 1.0
    assert out["speedups"]["near"]["tie"] and not out["speedups"]["far"]["tie"]
    assert out["speedups"]["far"]["band"] == pytest.approx([1.5 * math.exp(-0.1), 1.5 * math.exp(0.05)])
    assert out["speedups"]["far"]["n_pairs"] == 6 and out["speedups"]["infeasible"] is None
    assert out["near_optimal"]["n"] == 3

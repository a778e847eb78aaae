"""Error bands of predictions, from the validation residuals: step times, speedups, ties, near-optimal sets.

Every number below comes from the scored runs of ``validation.validate()`` (the bundled validation set); sweeps
read the precomputed ``configs/validation/uncertainty.json`` (``python -m sax_jax.uncertainty --write``) and never
run validation themselves.

* **Step-time residual** of a run: r = predicted / measured step time - 1. A run scored on a throughput metric
  (TFLOP/s per GPU, MFU, tokens/s) has step time inversely proportional to it, so there r = measured /
  predicted - 1.
* **Absolute band** of one predicted step time t: the 10th-90th percentile (q10, q90) of r over comparable runs,
  an 80% interval: the measured time lies in [t / (1 + q90), t / (1 + q10)]. Comparable = the same GPU
  generation (A100; Hopper: H100, H200; Blackwell: B200, GB200, B300, GB300), model class (dense, or MoE: a
  model with routed experts) and scale bucket (<= 64, 65-1024, > 1024 GPUs); a group of fewer than MIN_RUNS
  runs falls back to all runs of the generation and class, then to the class on every generation, then to all
  runs (a GPU of no listed generation starts at its class). The class comes before the generation because the
  residuals split by it: MoE runs add expert dispatch, grouped GEMMs and host waits the dense runs do not have,
  and their 80% band is about twice as wide (Blackwell dense -7% / +8%, MoE -21% / +13% at the time of
  writing); a band pooled over both would be too wide for a dense design and too narrow for an MoE one.
* **Relative band** of a speedup S between two designs on one cluster: the model's biases shared by both designs
  (GPU efficiency, software release) cancel in a ratio, so the band comes from pairs of runs of one ranking group
  (``validation.ranking``: one table, model, GPU, sequence length and precision; today every such group is of a
  dense model, so for an MoE design this band is the dense runs'). Per ordered pair (i, j):
  e_ij = log((pred_i / pred_j) / (meas_i / meas_j)) of step times; both (i, j) and (j, i) count, so the set is
  symmetric and the direction of the ratio does not matter. Band: [S exp(q10), S exp(q90)] of e.
* **Ties**: two designs tie when the band of their predicted speedup contains 1, i.e. their step-time ratio is
  at most exp(max(|q10|, |q90|)) of e. The near-optimal set of a sweep is its top-k designs that tie with the
  best; its *shared* decisions are the varied axes with one value across the set, its *free* decisions the
  axes that take more than one value there (they do not matter within the model's resolution).

* **Scale gap**: over the weak-scaling pairs of the validation set (one layout, the same work per GPU, two GPU
  counts), how much more the measured step time grows per doubling of the GPUs than the predicted one (median and
  80% interval). A scenario beyond the largest validated run inherits it per doubling (``trust.py``
  ``beyond_validated_gpus``).
* **Published MFU ceiling** of a class (one GPU type, precision, dense or MoE): the highest MFU a published run of
  the class reached, each against its own precision's peak (LoRA runs left out). A design predicted above it is
  more efficient than anything measured on that hardware: ``trust.py`` says so (``above_published_mfu``).

Percentiles interpolate linearly between order statistics (numpy's default). The bands describe the validated
regime (runs inside one building, up to 6,144 GPUs); beyond it (``trust.py`` warnings) they understate the
uncertainty.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os

import numpy as np

from .resources import bundled

QUANTILES = (10.0, 90.0)  # percent: an 80% interval
MIN_RUNS = 10  # fewer runs than this in a group: fall back to the wider group
GENERATIONS = {"A100": ("A100",), "Hopper": ("H100", "H200"), "Blackwell": ("B200", "GB200", "B300", "GB300")}
SCALE_BUCKETS = ((64, "<= 64 GPUs"), (1024, "65-1024 GPUs"), (math.inf, "> 1024 GPUs"))
DENSE, MOE = "dense", "MoE"  # model classes: a model with routed experts is MoE
ALL = "all"
BANDS_FILE = ("validation", "uncertainty.json")
THROUGHPUT_METRICS = ("tflops_per_gpu", "tflops_per_gpu_hw", "mfu", "tokens_per_s")


# ------------------------------------------------------------------------------------------------ from validation
def time_ratio(case: dict) -> float | None:
    """Predicted / measured step time of a scored run (None when the prediction is missing or not positive)."""
    pred, meas = case["predicted"], case["measured"]
    if pred is None or not pred > 0 or not meas > 0:
        return None
    return meas / pred if case["metric"] in THROUGHPUT_METRICS else pred / meas


def percentiles(values) -> tuple[float, float]:
    """(q10, q90) of values."""
    lo, hi = np.percentile(np.asarray(values, np.float64), QUANTILES)
    return float(lo), float(hi)


def generation(gpu_name: str) -> str | None:
    """GPU generation of a GPU type name (``H100-SXM-80GB`` -> Hopper); None for a GPU of no listed generation."""
    part = gpu_name.split("-")[0].upper()
    return next((gen for gen, parts in GENERATIONS.items() if part in parts), None)


def scale_bucket(n_gpus: int) -> str:
    return next(name for limit, name in SCALE_BUCKETS if n_gpus <= limit)


def model_class(moe: bool) -> str:
    return MOE if moe else DENSE


def scenario_is_moe(scenario) -> bool:
    """Whether a scenario's model has routed experts (specs.MoESpec)."""
    return getattr(scenario.model, "moe", None) is not None


def group_keys(gpu_name: str, n_gpus: int, moe: bool = False) -> list:
    """Keys of the absolute-band groups of a run or scenario, narrowest first: generation, class and scale;
    generation and class; the class on every generation; all runs."""
    gen, cls = generation(gpu_name), model_class(moe)
    return ([f"{gen}, {cls}, {scale_bucket(n_gpus)}", f"{gen}, {cls}"] if gen else []) + [cls, ALL]


def absolute_groups(cases) -> dict:
    """{group key: {"n", "q10", "q90"}} of the step-time residuals, for every group that holds a run (a case
    without a "moe" entry is a dense model's)."""
    residuals: dict = {}
    for c in cases:
        ratio = time_ratio(c)
        if ratio is not None:
            for key in group_keys(c["gpu"], c["n_gpus"], c.get("moe", False)):
                residuals.setdefault(key, []).append(ratio - 1.0)
    return {key: {"n": len(r), **dict(zip(("q10", "q90"), percentiles(r)))}
            for key, r in sorted(residuals.items())}


def mfu_class(gpu_name: str, precision: str, moe: bool = False) -> str:
    """Key of a published-MFU class: one GPU type, one training precision, dense or MoE (``H100-SXM-80GB, bf16,
    dense``). Finer than the bands' generation: MFU is against the part's own peak, which differs within one."""
    return f"{gpu_name}, {precision}, {model_class(moe)}"


def compute_mfu(mfu: float, breakdown: dict) -> float | None:
    """MFU of the compute term alone: the MFU the step would reach if every other term of its breakdown (seconds)
    were free, mfu x step / compute. Two designs with the same compute-only MFU differ only in their overheads."""
    step, compute = sum(breakdown.values()), breakdown.get("compute", 0.0)
    return mfu * step / compute if compute > 0 and mfu else None


def breakdown_shares(breakdown: dict) -> dict:
    """Each nonzero term's share of the step (the breakdown sums to it)."""
    step = sum(breakdown.values())
    return {k: v / step for k, v in breakdown.items() if v > 0} if step > 0 else {}


def measured_mfu(case: dict) -> float | None:
    """MFU a scored run reached, from its predicted MFU and the step-time ratio (MFU ~ 1 / step time)."""
    ratio, mfu = time_ratio(case), (case.get("metrics") or {}).get("mfu")
    return None if ratio is None or mfu is None or not mfu > 0 else mfu * ratio


def published_mfu(cases) -> dict:
    """{mfu_class: {"n", "max", "max_id", "max_n_gpus", "max_predicted_mfu", "max_compute_mfu", "max_shares"}}: the
    highest MFU a published run of each class reached, and that run's prediction (its MFU, its compute-only MFU and
    its breakdown's shares of the step, where the case has a breakdown) for `sax eval` to set a design beside.
    LoRA runs are left out: their frozen weights skip the weight-gradient GEMMs that the model-FLOPs count (6 x
    parameters per token) assumes, so their MFU is not comparable with full training's. A case without a
    "precision" entry (an older validation result) is left out."""
    out: dict = {}
    for c in cases:
        m = measured_mfu(c)
        if m is None or c.get("lora") or not c.get("precision"):
            continue
        key = mfu_class(c["gpu"], c["precision"], c.get("moe", False))
        g = out.setdefault(key, {"n": 0, "max": -1.0})
        g["n"] += 1
        if m > g["max"]:
            bd, mfu = c.get("breakdown"), c["metrics"]["mfu"]
            # the new highest run's prediction replaces the old one's, or goes with it when the case has none
            out[key] = g = {"n": g["n"], "max": m, "max_id": c["id"], "max_n_gpus": c["n_gpus"],
                            **({"max_predicted_mfu": mfu, "max_compute_mfu": compute_mfu(mfu, bd),
                                "max_shares": breakdown_shares(bd)} if bd else {})}
    return dict(sorted(out.items()))


def scale_gap(weak_scaling: dict) -> dict | None:
    """How much faster than the model the published step time grows with the GPU count: per weak-scaling pair
    (``validation.weak_scaling``: one layout and per-GPU work at two GPU counts), measured minus predicted growth
    per doubling of the GPUs; median and 80% interval. None without pairs."""
    gaps = [p["measured"] - p["predicted"] for p in (weak_scaling or {}).get("pairs", [])]
    if not gaps:
        return None
    lo, hi = percentiles(gaps)
    return {"n_pairs": len(gaps), "median_per_doubling": float(np.median(gaps)), "q10": lo, "q90": hi}


def pair_errors(cases, groups) -> list:
    """e_ij = log(time ratio_i / time ratio_j) over ordered pairs i != j of runs in one group (lists of ids)."""
    log_ratio = {c["id"]: math.log(r) for c in cases if (r := time_ratio(c)) is not None}
    out = []
    for ids in groups:
        logs = [log_ratio[i] for i in ids if i in log_ratio]
        out += [a - b for k, a in enumerate(logs) for m, b in enumerate(logs) if k != m]
    return out


def relative_band_stats(cases, groups) -> dict:
    e = pair_errors(cases, groups)
    return {"n_pairs": len(e), "n_groups": len(groups), **dict(zip(("q10", "q90"), percentiles(e)))}


def fingerprint(cases) -> str:
    """sha256 of every run's prediction to 4 significant digits: changes when the model (or the validation set)
    changes enough to move the bands, so a test can tell a stale bands file."""
    text = "\n".join(f"{c['id']}:{'none' if c['predicted'] is None else format(c['predicted'], '.3e')}"
                     for c in sorted(cases, key=lambda c: c["id"]))
    return hashlib.sha256(text.encode()).hexdigest()


def compute(result: dict) -> dict:
    """The bands file's content from a validation result (``validation.validate()``)."""
    cases = result["cases"]
    groups = [g["ids"] for g in result["ranking"]["groups"]]
    moe_ids = {c["id"] for c in cases if c.get("moe")}
    # how many of the pairs' groups are of an MoE model (trust.py warns when none is: an MoE design's speedup
    # band is then the dense runs')
    relative = {**relative_band_stats(cases, groups), "n_groups_moe": sum(1 for ids in groups if moe_ids & set(ids))}
    return {"level": (QUANTILES[1] - QUANTILES[0]) / 100.0, "quantiles_percent": list(QUANTILES),
            "min_runs": MIN_RUNS, "n_cases": len(cases), "model_fingerprint": fingerprint(cases),
            "absolute": absolute_groups(cases), "relative": relative, "published_mfu": published_mfu(cases),
            "scale_gap": scale_gap(result.get("weak_scaling"))}


# ------------------------------------------------------------------------------------------------ applying
@functools.lru_cache(maxsize=1)
def bands() -> dict | None:
    """The precomputed bands (configs/validation/uncertainty.json); None when the configs directory has none
    (a $SAX_CONFIGS tree without it)."""
    path = bundled(*BANDS_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def absolute_band(b: dict, gpu_name: str, n_gpus: int, step_time_s: float, moe: bool = False) -> dict:
    """80% band of the measured step time behind a predicted one, from the narrowest group with MIN_RUNS runs
    (the last key, all runs, is taken whatever its size)."""
    keys = group_keys(gpu_name, n_gpus, moe)
    key = next((k for k in keys if b["absolute"].get(k, {"n": 0})["n"] >= b["min_runs"]), keys[-1])
    g = b["absolute"][key]
    return {"step_time_s": step_time_s, "measured_s": [step_time_s / (1.0 + g["q90"]),
                                                       step_time_s / (1.0 + g["q10"])],
            "level": b["level"], "group": key, "n_runs": g["n"], "q10": g["q10"], "q90": g["q90"]}


def design_band(b: dict, scenario, step_time_s: float) -> dict:
    """absolute_band of one predicted step time of a scenario: its GPU, GPU count and model class pick the group.
    A system whose buildings hold different GPU types takes the widest of their types' bands: the step waits for
    every building, so the model's error on any of them reaches it."""
    sys_ = scenario.system
    moe = scenario_is_moe(scenario)
    gpus = [bd.gpu.name for bd in getattr(sys_, "buildings", ())] or [sys_.gpu.name]
    bands = [absolute_band(b, name, sys_.n_gpus, step_time_s, moe) for name in dict.fromkeys(gpus)]  # in order
    return max(bands, key=lambda band: band["q90"] - band["q10"])


def speedup_band(b: dict, speedup: float) -> list:
    rel = b["relative"]
    return [speedup * math.exp(rel["q10"]), speedup * math.exp(rel["q90"])]


def tie_factor(b: dict) -> float:
    """Largest step-time ratio two designs may have and still tie."""
    rel = b["relative"]
    return math.exp(max(abs(rel["q10"]), abs(rel["q90"])))


def ties(b: dict, time_a_s: float, time_b_s: float) -> bool:
    return max(time_a_s, time_b_s) <= min(time_a_s, time_b_s) * tie_factor(b)


def near_optimal(b: dict, records, axes) -> dict:
    """The records (best first, each {"step_time_s", "design"}) that tie with the first, the axes among `axes`
    with one value across them (shared: {axis: value}) and those with several (free). top_k_limited: every
    record ties, so more near-optimal designs may lie beyond the listed ones."""
    best = records[0]["step_time_s"]
    near = [r for r in records if ties(b, best, r["step_time_s"])]
    values = {ax: {str(r["design"][ax]) for r in near} for ax in axes}
    return {"n": len(near), "n_listed": len(records), "within": tie_factor(b) - 1.0,
            "top_k_limited": len(near) == len(records),
            "shared": {ax: near[0]["design"][ax] for ax in axes if len(values[ax]) == 1},
            "free": [ax for ax in axes if len(values[ax]) > 1]}


def for_sweep(b: dict, scenario, top, speedup_vs: dict, axes) -> dict:
    """What a sweep reports: the band of the best step time (the scenario's GPU, GPU count and model class pick
    the group),
    each speedup over a baseline with its band (tie: the band contains 1) and the near-optimal set of the top-k
    over the axes the space varies. Uses only the step times the sweep already has."""
    rel = b["relative"]
    speedups = {}
    for name, s in speedup_vs.items():
        band = None if s is None else speedup_band(b, s)  # an infeasible baseline has no speedup
        speedups[name] = band and {"speedup": s, "band": band, "level": b["level"], "n_pairs": rel["n_pairs"],
                                   "tie": band[0] <= 1.0 <= band[1]}
    return {"band": design_band(b, scenario, top[0]["step_time_s"]), "speedups": speedups,
            "near_optimal": near_optimal(b, top, axes)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sax_jax.uncertainty", description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write {os.path.join('configs', *BANDS_FILE)}")
    args = ap.parse_args(argv)
    from .validation import validate  # ~10 s: only when the bands are recomputed

    out = compute(validate())
    text = json.dumps(out, indent=2) + "\n"
    if args.write:
        with open(bundled(*BANDS_FILE), "w") as fh:
            fh.write(text)
        print(f"wrote {bundled(*BANDS_FILE)}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Fit the per-GPU efficiency constants on a documented subset of published runs; print JSON.

    python benchmarks/calibrate.py            # fit, print fitted values and train / held-out errors
    python benchmarks/calibrate.py --write    # also write them into configs/hardware/<gpu>.yaml
    python benchmarks/calibrate.py --split all   # fit on fit_cases plus the public runs' calibration split

The subset is configs/validation/calibration.yaml (fixed before fitting). For each GPU type one vector of
constants is fitted: GEMM efficiency curve (gemm_max, gemm_half_flops), fused-attention efficiency
(attention_max, only where a run uses flash attention), memory-bound efficiency, NCCL bus efficiency per
level (nvlink_bus, network_bus) and a fixed per-layer overhead (kernel launches, small kernels). Objective:
least squares of the relative errors of the runs' measured metrics (each over its dataset's target) plus a
small ridge pulling each constant toward its datasheet-based provisional value (RIDGE; with 5-9 runs per GPU
and 6-7 constants the fit is otherwise free to trade one constant against another); Nelder-Mead (written here with numpy) on
unconstrained coordinates (logit for fractions, log for positive values), several starts. No per-case factor
exists anywhere: every run of a GPU type sees the same constants.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sax_jax import validation as V  # noqa: E402
from sax_jax.config import load_gpu  # noqa: E402

NAMES = ("gemm_max", "gemm_half_flops", "attention_max", "memory_bound", "nvlink_bus", "network_bus",
         "layer_overhead_us")
FRACTIONS = ("gemm_max", "attention_max", "memory_bound", "nvlink_bus", "network_bus")
BOUNDS = {"gemm_max": (0.3, 0.95), "attention_max": (0.2, 0.9), "memory_bound": (0.3, 0.95),
          "nvlink_bus": (0.4, 0.95), "network_bus": (0.4, 0.95), "gemm_half_flops": (1e8, 1e12),
          "layer_overhead_us": (1.0, 500.0)}


def to_z(name, x):
    lo, hi = BOUNDS[name]
    if name in FRACTIONS:
        u = (x - lo) / (hi - lo)
        u = min(max(u, 1e-4), 1 - 1e-4)
        return float(np.log(u / (1 - u)))
    return float(np.log(x))


def from_z(name, z):
    lo, hi = BOUNDS[name]
    if name in FRACTIONS:
        return float(lo + (hi - lo) / (1.0 + np.exp(-z)))
    return float(np.clip(np.exp(z), lo, hi))


def nelder_mead(f, x0, step=0.5, iters=1500, tol=1e-10):
    n = len(x0)
    pts = [np.asarray(x0, float)] + [np.asarray(x0, float) + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2.0 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    i = int(np.argmin(vals))
    return pts[i], vals[i]


def make_objective(cases):
    """Relative errors of the cases' measured metrics as a jitted function of the constants vector."""
    params, designs = V.case_arrays(cases)
    # metric = c / t (throughputs) or t (iteration time): c from the case's own metric at t = 1 s
    coef = np.array([1.0 if c.metric == "iteration_s" else V.metrics_of(c, 1.0, True)[c.metric] for c in cases])
    is_time = np.array([c.metric == "iteration_s" for c in cases])
    measured = np.array([c.measured for c in cases])
    bus0 = np.array([[c.scenario.system.gpu.efficiency.nvlink_bus, c.scenario.system.gpu.efficiency.network_bus]
                     for c in cases])
    raw_bw = params.net.bw_Bps / jnp.asarray(bus0, params.net.bw_Bps.dtype)

    @jax.jit
    def errors(theta):
        gm, ghalf, am, mb, nvb, nwb, ovh = (theta[i] for i in range(7))
        one = jnp.ones_like(params.gpu.gemm_max)
        gpu = params.gpu._replace(gemm_max=gm * one, gemm_half_flops=ghalf * one, attention_max=am * one,
                                  memory_bound=mb * one, layer_overhead_s=ovh * 1e-6 * one)
        net = params.net._replace(bw_Bps=raw_bw * jnp.stack([nvb * one, nwb * one], axis=-1))
        cost = V._eval_cases(params._replace(gpu=gpu, net=net), designs)
        t = cost.raw_step_time_s
        pred = jnp.where(is_time, t, coef / t)
        return (pred - measured) / measured

    return errors


# The provisional (pre-calibration) values of configs/hardware/*.yaml, from datasheets and kernel benchmarks:
# the fit starts there and the ridge pulls toward them.
PROVISIONAL = {
    "A100-SXM-80GB": {"gemm_max": 0.80, "gemm_half_flops": 2.0e10, "attention_max": 0.55, "memory_bound": 0.70,
                      "nvlink_bus": 0.80, "network_bus": 0.85, "layer_overhead_us": 20.0},
    "H100-SXM-80GB": {"gemm_max": 0.75, "gemm_half_flops": 6.0e10, "attention_max": 0.50, "memory_bound": 0.70,
                      "nvlink_bus": 0.80, "network_bus": 0.85, "layer_overhead_us": 20.0},
}
# Each run's error is weighed against the bar its dataset must meet (issue 3: korthikanti2022 MAPE 3%,
# narayanan2021 and megatron-core-h100 8%), so a fit shared by two papers does not trade the tight one away.
TARGET_MAPE = {"korthikanti2022": 0.03}
RIDGE = 0.02  # per unit of squared distance (logit / log scale) from the provisional value
DEFAULT_TARGET = 0.08


def fit_gpu(gpu_name, cases, fit_ids, seed=0, starts_n=3, iters=800):
    fit_cases = [c for c in cases if c.id in fit_ids]
    if not fit_cases:
        raise SystemExit(f"no fitting cases for {gpu_name}")
    eff = load_gpu(os.path.join(V.CONFIGS, "hardware", f"{gpu_name}.yaml")).efficiency
    uses_flash = any(c.scenario.training.flash_attention for c in fit_cases)
    free = [n for n in NAMES if uses_flash or n != "attention_max"]
    fixed = dict(PROVISIONAL[gpu_name]) if gpu_name in PROVISIONAL else {n: float(getattr(eff, n)) for n in NAMES}
    PROVISIONAL.setdefault(gpu_name, dict(fixed))
    errors = make_objective(fit_cases)
    z_prior = np.array([to_z(n, PROVISIONAL[gpu_name][n]) for n in free])
    target = np.array([TARGET_MAPE.get(c.dataset, DEFAULT_TARGET) for c in fit_cases])

    def theta_of(z):
        vals = dict(fixed)
        vals.update({n: from_z(n, zi) for n, zi in zip(free, z)})
        return vals

    def loss(z):
        vals = theta_of(z)
        e = np.asarray(errors(jnp.asarray([vals[n] for n in NAMES], jnp.float32)), np.float64) / target
        prior = RIDGE * float(np.sum((np.asarray(z) - z_prior) ** 2))
        return float(np.mean(e ** 2)) + prior if np.all(np.isfinite(e)) else 1e9

    rng = np.random.default_rng(seed)
    starts = [np.array([to_z(n, PROVISIONAL[gpu_name][n]) for n in free])]
    starts += [starts[0] + rng.normal(0.0, 1.0, len(free)) for _ in range(starts_n - 1)]
    best = None
    for z0 in starts:
        z, v = nelder_mead(loss, z0, iters=iters)
        z, v = nelder_mead(loss, z, step=0.1, iters=iters)  # restart to escape a collapsed simplex
        if best is None or v < best[1]:
            best = (z, v)
    vals = theta_of(best[0])
    e = np.asarray(errors(jnp.asarray([vals[n] for n in NAMES], jnp.float32)), np.float64)
    return vals, free, float(np.sqrt(np.mean(e ** 2)))


MEANING = {
    "gemm_max": "asymptotic GEMM efficiency (large GEMMs)",
    "gemm_half_flops": "GEMM work at which efficiency is half of gemm_max (small-GEMM cost)",
    "attention_max": "fused (flash) attention efficiency on the causal half",
    "memory_bound": "fraction of HBM bandwidth reached by elementwise/softmax/optimizer kernels",
    "nvlink_bus": "NCCL bus bandwidth / NVLink bandwidth (TP collectives)",
    "network_bus": "NCCL bus bandwidth / NIC bandwidth (DP collectives, pipeline p2p)",
    "layer_overhead_us": "fixed time per layer and pass (launches, small kernels)",
}


def write_yaml(gpu_name, vals, free, fit_ids, rms):
    """Rewrite only the efficiency block's values and comments, keeping the rest of the file."""
    path = os.path.join(V.CONFIGS, "hardware", f"{gpu_name}.yaml")
    text = open(path).read()
    how = (f"benchmarks/calibrate.py: one least-squares fit on {len(fit_ids)} runs ({', '.join(fit_ids)}), "
           f"rms rel. error {100 * rms:.1f}%; held-out runs in `sax validate`")
    text = re.sub(r"(\n  status: )\S+.*", lambda m: f"{m.group(1)}calibrated         # {how}", text)
    for n in NAMES:
        v = vals[n]
        s = f"{v:.3e}" if n == "gemm_half_flops" else f"{v:.3f}" if n != "layer_overhead_us" else f"{v:.1f}"
        note = f"fitted: {MEANING[n]}" if n in free else \
            f"not fitted (no fit run uses it; provisional value): {MEANING[n]}"
        text = re.sub(rf"(\n  {n}: )\S+.*", lambda m: f"{m.group(1)}{s:<13}# {note}", text)
    open(path, "w").write(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fitted constants into the hardware YAMLs")
    ap.add_argument("--split", choices=("fit_cases", "all"), default="fit_cases",
                    help="fit_cases: the per-GPU fit_cases of calibration.yaml (what today's constants were fitted "
                         "on); all: also every run of the named calibration split (calibration.yaml `split`) "
                         "of the GPU, public-run datasets included")
    args = ap.parse_args(argv)
    cases, errs = V.load_cases([V.VALIDATION_DIR])
    if errs:
        raise SystemExit("\n".join(map(str, errs)))
    subset = V.calibration_subset()
    if args.split == "all":
        split = V.calibration_split(cases)
        for c in cases:
            if c.id in split and c.id not in subset.setdefault(c.scenario.system.gpu.name, []):
                subset[c.scenario.system.gpu.name].append(c.id)
    out = {"fit": {}, "errors": {}}
    for gpu_name, fit_ids in subset.items():
        gcases = [c for c in cases if c.scenario.system.gpu.name == gpu_name]
        vals, free, rms = fit_gpu(gpu_name, gcases, set(fit_ids))
        out["fit"][gpu_name] = {"values": vals, "fitted": free, "fit_cases": fit_ids, "rms_rel_error": rms}
        if args.write:
            write_yaml(gpu_name, vals, free, fit_ids, rms)
    if args.write:  # re-run the validation with what was written
        res = V.validate()
        out["errors"] = {"datasets": res["datasets"],
                         "cases": {c["id"]: round(c["error"], 4) for c in res["cases"]}}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

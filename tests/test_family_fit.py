"""The Blackwell family fit (benchmarks/calibrate.py --family blackwell): gemm_max per die, the rest shared. Its
objective reproduces the model at the YAMLs' constants and moves only the part whose constant changes."""
import dataclasses
import os
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import ROOT
from sax_jax import validation as V
from sax_jax.config import load_gpu

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import calibrate as C  # noqa: E402

MEMBERS = C.FAMILIES["blackwell"]


@pytest.fixture(scope="module")
def setup():
    cases, _ = V.load_cases([V.VALIDATION_DIR])
    split = V.calibration_split(cases)
    picked = []
    for g in MEMBERS:  # two calibration-split runs of each part
        picked += [c for c in cases if c.scenario.system.gpu.name == g and c.id in split][:2]
    # the model's own step time as the "measurement": the objective must be zero at the YAMLs' constants
    raw = [r["metrics"]["iteration_s"] for r in V.evaluate_cases(picked)]
    picked = [dataclasses.replace(c, metric="iteration_s", measured=float(t)) for c, t in zip(picked, raw)]
    effs = {g: load_gpu(os.path.join(V.CONFIGS, "hardware", f"{g}.yaml")).efficiency for g in MEMBERS}
    theta = []
    for n in C.NAMES:
        theta += [getattr(effs[g], n) for g in MEMBERS] if n in C.FAMILY_PER_PART else [getattr(effs[MEMBERS[0]], n)]
    return picked, C.make_family_objective(picked, MEMBERS), np.asarray(theta, np.float64)


def test_the_yamls_share_every_constant_but_the_per_part_ones():
    gpus = {g: load_gpu(os.path.join(V.CONFIGS, "hardware", f"{g}.yaml")) for g in MEMBERS}
    for n in C.NAMES:
        vals = {getattr(gpus[g].efficiency, n) for g in MEMBERS}
        assert (len(vals) == 1) != (n in C.FAMILY_PER_PART), n
    # gemm_max per die as an achieved rate: the two parts of a die reach the same dense BF16 TFLOP/s (the YAMLs keep
    # 3 decimals of each fraction, +-0.0005 on ~0.6 each: equal to 2e-3 relative), and the Ultra die at least Blackwell's
    rate = {g: gpus[g].efficiency.gemm_max * gpus[g].peak_tflops["bf16"] for g in MEMBERS}
    assert rate["GB200"] == pytest.approx(rate["B200"], rel=2e-3)
    assert rate["GB300"] == pytest.approx(rate["B300"], rel=2e-3)
    assert rate["B300"] >= rate["B200"] * (1 - 2e-3)
    assert C.FAMILY_DIES["blackwell"] == {"B200": "B200", "GB200": "B200", "B300": "B300", "GB300": "B300"}


def test_die_tied_values_are_one_rate_per_die_in_power_order():
    ratios = {"B200": 1.0, "GB200": 0.9, "B300": 1.0, "GB300": 0.9}  # the NVL72 parts' peaks are 2.5 / 2.25 PF
    # B200 die 0.70, B300 die 0.80: each NVL72 part at 0.9 of its HGX twin's fraction (the same TFLOP/s)
    got = C.die_tied({"B200": 0.70, "B300": 0.80}, "blackwell", ratios)
    assert got == pytest.approx({"B200": 0.70, "GB200": 0.63, "B300": 0.80, "GB300": 0.72})
    # an Ultra die below Blackwell's is lifted to it (B300's 1100 W limit is above B200's 1000 W)
    got = C.die_tied({"B200": 0.70, "B300": 0.65}, "blackwell", ratios)
    assert got == pytest.approx({"B200": 0.70, "GB200": 0.63, "B300": 0.70, "GB300": 0.63})
    # the ratios come from the YAMLs' BF16 peaks: 2,250 / 2,500 TFLOP/s for both NVL72 parts
    assert C.die_ratios("blackwell") == pytest.approx({"B200": 1.0, "GB200": 0.9, "B300": 1.0, "GB300": 0.9})
    # gemm_max scales every precision's peak, so one ratio must hold for all of them (FP8 4.5 / 5, FP4 9 / 10 and
    # 13.5 / 15 PF): the two parts of a die reach the same rate in each precision
    peaks = {g: load_gpu(os.path.join(V.CONFIGS, "hardware", f"{g}.yaml")).peak_tflops for g in MEMBERS}
    for part, ref in C.FAMILY_DIES["blackwell"].items():
        for prec in ("bf16", "fp8", "fp4"):
            assert peaks[ref][prec] / peaks[part][prec] == pytest.approx(C.die_ratios("blackwell")[part]), (part, prec)


def test_family_fit_runs_are_the_dense_calibration_split_runs():
    cases, _ = V.load_cases([V.VALIDATION_DIR])
    split = V.calibration_split(cases)
    runs = C.family_fit_runs("blackwell", cases)
    assert runs and all(c.id in split and c.scenario.system.gpu.name in MEMBERS for c in runs)
    assert all(c.scenario.model.moe is None and c.scenario.model.hybrid is None for c in runs)
    # every die has runs (B300 through its GB300 twin), and the MoE runs of the split are left to --moe-host
    assert {C.FAMILY_DIES["blackwell"][c.scenario.system.gpu.name] for c in runs} == {"B200", "B300"}
    moe = [c for c in cases if c.id in split and c.scenario.system.gpu.name in MEMBERS and c.scenario.model.moe]
    assert moe and not {c.id for c in moe} & {c.id for c in runs}


def test_objective_is_zero_at_the_yaml_constants_and_moves_only_the_changed_part(setup):
    picked, errors, theta = setup
    assert len(picked) == 2 * len(MEMBERS)
    e0 = np.asarray(errors(jnp.asarray(theta, jnp.float32)))
    # the YAMLs print 3 decimals of gemm_max, the objective takes the same values: float32 round-off only
    assert np.max(np.abs(e0)) < 1e-4
    k = MEMBERS.index("GB300")  # gemm_max comes first in NAMES, one slot per member
    faster = theta.copy()
    faster[k] *= 1.1
    e1 = np.asarray(errors(jnp.asarray(faster, jnp.float32)))
    gb300 = np.array([c.scenario.system.gpu.name == "GB300" for c in picked])
    assert np.all(e1[gb300] < e0[gb300] - 1e-3)  # faster GEMMs, shorter steps
    assert np.allclose(e1[~gb300], e0[~gb300], atol=1e-6)

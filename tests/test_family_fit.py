"""The Blackwell family fit (benchmarks/calibrate.py --family blackwell): gemm_max per part, the rest shared. Its
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
    effs = [load_gpu(os.path.join(V.CONFIGS, "hardware", f"{g}.yaml")).efficiency for g in MEMBERS]
    for n in C.NAMES:
        vals = {getattr(e, n) for e in effs}
        assert (len(vals) == 1) != (n in C.FAMILY_PER_PART), n
    # the fit keeps the parts in power-limit order, B200 (1000 W) <= B300 (1100 W) <= GB200 (1200 W) <= GB300
    # (1400 W): never slower GEMMs at a higher limit; the NVL72 parts are strictly faster than the HGX boards
    gm = {g: e.gemm_max for g, e in zip(MEMBERS, effs)}
    assert gm["B200"] <= gm["B300"] < gm["GB200"] < gm["GB300"]
    assert C.FAMILY_POWER_ORDER["blackwell"] == ("B200", "B300", "GB200", "GB300")


def test_power_monotone_projects_the_per_part_constants_onto_the_power_order():
    # layout as fit_family builds it: the per-part name once per member (members order), the rest once
    members, order = ("B200", "GB200", "B300", "GB300"), ("B200", "B300", "GB200", "GB300")
    layout = [("gemm_max", g) for g in members] + [("memory_bound", None)]
    # B300 (third in members, second in power) below B200: lifted to B200's value; the rest already in order
    got = C.power_monotone([0.65, 0.69, 0.61, 0.72, 0.36], layout, order)
    assert list(got) == [0.65, 0.69, 0.65, 0.72, 0.36]
    # a part above a higher-power one lifts that one: GB200 0.75 > GB300 0.72 -> GB300 0.75
    got = C.power_monotone([0.60, 0.75, 0.62, 0.72, 0.36], layout, order)
    assert list(got) == [0.60, 0.75, 0.62, 0.75, 0.36]


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

"""The straggler term: the step waits for the slowest of N GPUs (cost/straggler.py)."""
import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from sax_jax.cost.straggler import expected_max_std_normal, straggler_term
from sax_jax.evaluate import evaluate_one
from sax_jax.params import build_params

from conftest import f32 as F


def test_expected_max_matches_exact_normal_order_statistics():
    # exact E[max of N standard normals] (tables of normal order statistics, e.g. Harter 1961): N=2 1/sqrt(pi),
    # N=8 1.4236, N=100 2.5076, N=1000 3.2414; Blom's approximation within 5% at N=2 and 1% from N=8 on
    assert float(expected_max_std_normal(F(1))) == 0.0
    assert float(expected_max_std_normal(F(2))) == pytest.approx(1 / np.sqrt(np.pi), rel=0.05)
    for n, exact in ((8, 1.4236), (100, 2.5076), (1000, 3.2414)):
        assert float(expected_max_std_normal(F(n))) == pytest.approx(exact, rel=0.01)


def test_straggler_seconds_golden_and_monotone_in_n():
    # cv 5%, 10 s of kernels, 8 GPUs: 0.05 x 1.434 x 10 s (Blom at N = 8)
    t = straggler_term(F(8), F(10.0), F(0.05))
    assert float(t.step_s) == pytest.approx(0.05 * float(expected_max_std_normal(F(8))) * 10.0, rel=1e-6)
    ns = jnp.asarray([1, 2, 8, 64, 1024, 16384, 131072], jnp.float32)
    s = np.asarray(straggler_term(ns, F(1.0), F(0.05)).step_s)
    assert s[0] == 0.0 and np.all(np.diff(s) > 0)


def test_straggler_in_the_breakdown_of_the_default_scenario():
    sc = sx.load_scenario("default")
    design = sc.baseline_design()
    c = evaluate_one(sc, design)
    cv = float(build_params(sc).gpu.straggler_cv)
    b = c["breakdown"]
    expected = cv * float(expected_max_std_normal(F(sc.system.n_gpus))) * b["compute"]
    assert cv > 0 and b["straggler"] == pytest.approx(expected, rel=1e-4)
    assert sum(b.values()) == pytest.approx(c["step_time_s"], rel=1e-5)


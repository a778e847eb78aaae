"""The model's numbers against tests/data/golden_model.npz (recorded by tests/record_golden.py): a refactor
must not change what the model computes. The file was first recorded before the step was split into named terms
(commit "cost: the step as named terms" passed against it, timing bit-identical); a deliberate physics change
re-records it in the same commit and says so.

On CPU with the JAX version, the CPU and the XLA flags (tests/xla_flags.py) that recorded the file the comparison is
exact (bit-identical); elsewhere (another JAX release, another CPU's vector width, another LLVM optimization level, a
GPU's fusion) float32 reductions run in another order: a few
ulps, or 1e-4 relative plus 1e-6 absolute where a long sum (an expert trace's 58 layers x 256 experts) or a
difference of two terms (the pipeline stall) amplifies them; a physics change moves these numbers by far more.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from record_golden import ROOT, cost_arrays, cpu_fingerprint, sample_indices, scenario_paths

GOLDEN = np.load(os.path.join(os.path.dirname(__file__), "data", "golden_model.npz"))
EXACT = (jax.default_backend() == "cpu" and str(GOLDEN["meta/jax"]) == jax.__version__
         and "meta/cpu" in GOLDEN and str(GOLDEN["meta/cpu"]) == cpu_fingerprint()
         and "meta/xla_flags" in GOLDEN and str(GOLDEN["meta/xla_flags"]) == os.environ.get("XLA_FLAGS", ""))
MAXULP = 8  # elsewhere, or within REL_TOL of the recorded value plus ABS_TOL
REL_TOL = 1e-4
ABS_TOL = 1e-6  # 1 us on the time arrays: below anything the model resolves, above a difference's rounding


def _same(actual, expected, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, what
    if actual.dtype.kind == "f":
        fin = np.isfinite(expected)
        np.testing.assert_array_equal(np.isfinite(actual), fin, err_msg=what)
        np.testing.assert_array_equal(actual[~fin], expected[~fin], err_msg=what)
        if fin.any():
            if EXACT:
                np.testing.assert_array_equal(actual[fin], expected[fin], err_msg=what)
            else:
                a, e = actual[fin].astype(expected.dtype), expected[fin]
                ulps = np.abs(a - e) / np.spacing(np.abs(e))
                close = np.abs(a - e) <= REL_TOL * np.abs(e) + ABS_TOL
                bad = ~((ulps <= MAXULP) | close)
                assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} beyond {MAXULP} ulps and {REL_TOL:g} " \
                    f"relative, e.g. {a[bad][:3]} vs {e[bad][:3]}"
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


@pytest.mark.parametrize("path", scenario_paths(), ids=lambda p: os.path.basename(p))
def test_every_bundled_scenario_matches_the_recorded_numbers(path):
    name = os.path.splitext(os.path.basename(path))[0]
    sc = sx.load_scenario(path)
    idx = sample_indices(sc.space.size)
    np.testing.assert_array_equal(idx, GOLDEN[f"{name}/indices"])
    cost = sx.evaluate(sc, sc.space.decode(jnp.asarray(idx, jnp.int32)))
    got = cost_arrays(name, cost)
    for key, value in got.items():
        _same(value, GOLDEN[key], key)


def test_sweep_grid_and_validation_match_the_recorded_numbers():
    sc = sx.load_scenario(os.path.join(ROOT, "configs", "scenarios", "default.yaml"))
    res = sx.sweep(sc, top_k=8, max_designs=600_000, start=1_000_000, progress=False, chunk_size=1 << 17)
    _same([r["index"] for r in res.top], GOLDEN["sweep/top_index"], "sweep top-k indices")
    _same(np.asarray([r["step_time_s"] for r in res.top]), GOLDEN["sweep/top_step_time_s"], "sweep top-k times")
    assert res.n_feasible == int(GOLDEN["sweep/n_feasible"])
    for fname, recs in res.pareto.items():
        _same([r["index"] for r in recs], GOLDEN[f"sweep/{fname}/index"], fname)
        _same(np.asarray([r["step_time_s"] for r in recs]), GOLDEN[f"sweep/{fname}/step_time_s"], fname)
    rep = sx.validate()
    ids = [c["id"] for c in rep["cases"]]
    recorded = dict(zip(GOLDEN["validate/ids"].tolist(), GOLDEN["validate/predicted"]))
    assert set(recorded) <= set(ids)
    got = {c["id"]: c["predicted"] for c in rep["cases"]}
    _same(np.asarray([got[i] for i in recorded]), np.asarray(list(recorded.values())), "validation predictions")


def test_seeded_search_matches_the_recorded_result():
    huge = sx.load_scenario(os.path.join(ROOT, "configs", "scenarios", "huge-four-buildings.yaml"))
    rec = sx.search(huge, "evolution", strategy="de", budget=1500, seed=0)
    _same(np.asarray(rec["best"]["step_time_s"]), GOLDEN["search/step_time_s"], "search best")
    _same(np.asarray([np.inf if x is None else x for x in rec["history"]]), GOLDEN["search/history"], "history")
    _same(np.asarray([rec["baselines"][k] for k in sorted(rec["baselines"])]), GOLDEN["search/baselines"], "base")

"""The jit(vmap) boundary: batch == loop, jit == no-jit, float32 ~ float64, no retrace."""
import json
import subprocess
import sys

import jax
import numpy as np

import sax_jax as sx
from sax_jax.evaluate import TRACE_COUNT, evaluate, evaluate_batch
from sax_jax.cost import step_time

from conftest import DEFAULT, ROOT


def test_batch_equals_loop(default_scenario, default_params, sample_batch):
    batch, idx = sample_batch
    full = evaluate_batch(default_params, batch)
    for i in range(0, 512, 64):
        one = evaluate(default_scenario, default_scenario.space.decode(int(idx[i])), default_params)
        for a, b in ((full.raw_step_time_s, one.raw_step_time_s), (full.memory_bytes, one.memory_bytes),
                     (full.violation, one.violation)):
            np.testing.assert_allclose(np.asarray(a)[i], np.asarray(b)[0], rtol=1e-6)


def test_jit_equals_no_jit(default_scenario, default_params, sample_batch):
    batch, _ = sample_batch
    small = jax.tree_util.tree_map(lambda x: x[:4], batch)
    jitted = evaluate_batch(default_params, small)
    with jax.disable_jit():
        plain = jax.vmap(step_time, in_axes=(None, 0))(default_params, small)
    np.testing.assert_allclose(np.asarray(jitted.raw_step_time_s), np.asarray(plain.raw_step_time_s), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(jitted.violation), np.asarray(plain.violation))


def test_no_retrace_on_second_call(default_params, sample_batch):
    batch, _ = sample_batch
    evaluate_batch(default_params, batch)
    before = TRACE_COUNT["batched"]
    faster = default_params._replace(net=default_params.net._replace(bw_Bps=default_params.net.bw_Bps * 2))
    evaluate_batch(faster, batch)  # new values, same shapes: no new trace
    evaluate_batch(default_params, batch)
    assert TRACE_COUNT["batched"] == before


X64_SCRIPT = """
import json, sys, numpy as np, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import sax_jax as sx
from sax_jax.evaluate import evaluate_batch
sc = sx.load_scenario(sys.argv[1])
idx = np.random.default_rng(0).integers(0, sc.space.size, 512)
d = sc.space.decode(jnp.asarray(idx, jnp.int32))
c = evaluate_batch(sx.build_params(sc, dtype=jnp.float64), d)
print(json.dumps({"t": np.asarray(c.raw_step_time_s).tolist(), "v": np.asarray(c.violation).tolist(),
                  "dtype": str(c.raw_step_time_s.dtype)}))
"""


def test_float32_matches_float64(default_params, sample_batch):
    out = subprocess.run([sys.executable, "-c", X64_SCRIPT, DEFAULT], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["dtype"] == "float64"
    c32 = evaluate_batch(default_params, sample_batch[0])
    t32 = np.asarray(c32.raw_step_time_s, np.float64)
    np.testing.assert_allclose(t32, np.asarray(r["t"]), rtol=2e-4)
    # feasibility agrees except where memory sits within float32 rounding of the capacity
    assert np.mean(np.asarray(c32.violation) == np.asarray(r["v"])) > 0.99


def test_python_api_roundtrip(default_scenario):
    d = sx.design_from_dict(default_scenario, {"tp": 4, "placement": "tp-cp-pp-dp"})
    as_dict = default_scenario.space.to_dict(d)
    assert as_dict["tp"] == 4 and as_dict["placement"] == "tp-cp-pp-dp"
    assert as_dict["schedule"] == default_scenario.baselines["production"]["schedule"]


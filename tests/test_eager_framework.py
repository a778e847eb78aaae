"""A framework without torch.compile runs its norm and rotary embedding as composite PyTorch ops (configs/frameworks.yaml
torchtitan-eager; cost/compute.py): golden bytes counted from torchtitan's eager code, the rows that say "eager"
pick it, and eager is never faster than the compiled stack."""
import dataclasses
import os

import jax
import numpy as np
import pytest
import yaml

import sax_jax as sx
import sax_jax.validation as V
from sax_jax.config import load_framework, load_frameworks
from sax_jax.cost.compute import MEMORY_BWD_RATIO, layer_times
from sax_jax.params import build_params
from sax_jax.resources import bundled
from sax_jax.specs import ConfigError


def test_counted_bytes_are_the_yaml_values():
    """RMSNorm (x.float, pow, mean, x * rsqrt, type_as, * weight) moves 6 + 8 + 4 + 8 + 6 + 4 = 36 bytes per bf16
    hidden element where a fused norm moves 4; the complex RoPE (float, complex multiply, type_as) 6 + 8 + 6 = 20."""
    fw = load_framework("torchtitan-eager", None)
    assert fw.eager_norm_bytes_per_element == 36 - 4
    assert fw.eager_rope_bytes_per_element == 6 + 8 + 6
    compiled = load_framework("torchtitan", None)
    assert compiled.eager_norm_bytes_per_element == 0 and compiled.eager_rope_bytes_per_element == 0
    # everything else is torchtitan's stack
    same = ("attention_kernel", "elementwise_bytes_factor", "layer_overhead_us", "dp_calls", "expert_gemm_us",
            "moe_host_us")
    assert all(getattr(fw, f) == getattr(compiled, f) for f in same)
    # no other bundled framework is eager
    assert [n for n, f in load_frameworks().items() if f.eager_norm_bytes_per_element > 0] == ["torchtitan-eager"]


@pytest.fixture(scope="module")
def a100_8b():
    cases, _ = V.load_cases(dataset="torchtitan-a100")
    (case,) = [c for c in cases if c.id == "tt-a100-l3-8b-sac-op"]
    return case


def test_eager_rows_pick_the_eager_framework(a100_8b):
    """The torchtitan rows whose source says eager run torchtitan-eager; the torch.compile ones torchtitan."""
    assert a100_8b.scenario.training.framework.name == "torchtitan-eager"
    assert any("framework=torchtitan-eager (row feature eager)" in f for f in a100_8b.filled)
    cases, _ = V.load_cases(dataset="torchtitan-h100")
    by_id = {c.id: c.scenario.training.framework.name for c in cases}
    assert by_id["tt-h100-t1-8b-fsdp"] == "torchtitan-eager"
    assert by_id["tt-h100-t1-8b-fsdp-compile"] == "torchtitan"
    assert sum(n == "torchtitan-eager" for n in by_id.values()) == 2


def _layer(case, framework):
    sc = case.scenario
    sc = dataclasses.replace(sc, training=dataclasses.replace(sc.training, framework=load_framework(framework, None)))
    P = build_params(sc)
    d = case.design
    with jax.disable_jit():
        return layer_times(float(d["tp"]), float(d["cp"]), float(d["mbs"]), float(sc.training.seq_len), P.model,
                           P.gpu, P.train, float(d["pp"]), float(d["vpp"]))


def test_golden_layer_time_difference(a100_8b):
    """Llama 3 8B (h 4096, 32 query and 8 key heads of 128) on an A100 80GB, one 8,192-token sequence, no TP: the
    eager layer's forward moves 8,192 x (2 norms x 32 x 4,096 + 20 x (32 + 8) x 128) bytes more, at the GPU's
    elementwise bandwidth (HBM 2,039 GB/s x memory_bound from the hardware YAML); the backward 1.2x that."""
    with open(os.path.join(bundled("hardware"), "A100-SXM-80GB.yaml")) as fh:
        hw = yaml.safe_load(fh)
    bw = hw["hbm_GBps"] * 1e9 * hw["efficiency"]["memory_bound"]
    extra = 8192 * (2 * 32 * 4096 + 20 * (32 + 8) * 128)
    eager, compiled = _layer(a100_8b, "torchtitan-eager"), _layer(a100_8b, "torchtitan")
    assert float(eager.fwd_s - compiled.fwd_s) == pytest.approx(extra / bw, rel=1e-4)
    assert float(eager.bwd_s - compiled.bwd_s) == pytest.approx(MEMORY_BWD_RATIO * extra / bw, rel=1e-4)
    # GEMMs and attention do not change
    assert float(eager.linear_fwd_s) == pytest.approx(float(compiled.linear_fwd_s), rel=1e-6)
    assert float(eager.attn_fwd_s) == pytest.approx(float(compiled.attn_fwd_s), rel=1e-6)


def test_eager_never_faster(default_scenario, sample_batch):
    """Over the feasible ones of 512 designs of the default space: the same designs under the eager stack are never faster than under
    the compiled one: every feasible one is slower (every layer has norms). (Infeasible points, e.g. half a
    microbatch per step, are left out: their windows are not a schedule.)"""
    designs, _ = sample_batch

    def run(name):
        tr = dataclasses.replace(default_scenario.training, framework=load_framework(name, None))
        sc = dataclasses.replace(default_scenario, training=tr)
        cost = sx.evaluate(sc, designs)
        return np.asarray(cost.step_time_s), np.asarray(cost.feasible)

    (eager, ok_e), (compiled, ok_c) = run("torchtitan-eager"), run("torchtitan")
    np.testing.assert_array_equal(ok_e, ok_c)  # the norms' bytes do not change what fits
    assert ok_c.sum() >= 30  # 37 of the 512 fit
    assert np.all(eager[ok_c] > compiled[ok_c])


@pytest.mark.parametrize("value", [-1.0, 5000.0, "lots"])
def test_bad_eager_bytes_name_the_key(tmp_path, value):
    path = tmp_path / "frameworks.yaml"
    path.write_text(yaml.safe_dump({"frameworks": {"mine": {"eager_norm_bytes_per_element": value}}}))
    with pytest.raises(ConfigError) as err:
        load_frameworks(str(path))
    assert "eager_norm_bytes_per_element" in str(err.value) and "frameworks.yaml" in str(err.value)

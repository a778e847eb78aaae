"""Blackwell Ultra's attention: a family shares one fitted attention_max, and a part whose attention loop is faster
(GB300, B300: doubled exponential throughput) carries efficiency.attention_part_factor (configs/hardware/*.yaml)."""
import dataclasses

import jax
import pytest
import yaml

import sax_jax.validation as V
from sax_jax.config import load_gpu
from sax_jax.cost.compute import layer_times
from sax_jax.params import build_params
from sax_jax.resources import bundled
from sax_jax.specs import ConfigError

REL = 4 * float(jax.numpy.finfo(jax.numpy.float32).eps)


def test_blackwell_ultra_parts_carry_the_measured_factor_and_nothing_else_does():
    """NVIDIA measured ~35% more attention forward throughput on GB300 than on GB200 (doubled MUFU.EX2 rate)."""
    for name in ("GB300", "B300"):
        assert load_gpu(bundled("hardware", f"{name}.yaml")).efficiency.attention_part_factor == 1.35
    for name in ("GB200", "B200", "H100-SXM-80GB", "H200", "A100-SXM-80GB"):
        assert load_gpu(bundled("hardware", f"{name}.yaml")).efficiency.attention_part_factor == 1.0
    # the family shares the fitted value itself
    assert load_gpu(bundled("hardware", "GB300.yaml")).efficiency.attention_max == load_gpu(bundled("hardware", "GB200.yaml")).efficiency.attention_max


@pytest.fixture(scope="module")
def gb300_8b():
    cases, _ = V.load_cases(dataset="megatron-bridge-gb300")
    return next(c for c in cases if "llama3-8B" in c.id)


def _layer(scenario, design):
    p = build_params(scenario)
    seq = scenario.training.seq_len
    with jax.disable_jit():
        return layer_times(float(design["tp"]), float(design["cp"]), float(design["mbs"]), float(seq), p.model,
                           p.gpu, p.train, float(design["pp"]), float(design["vpp"]))


def test_the_factor_speeds_only_the_attention_core(gb300_8b):
    """Attention efficiency is linear in attention_max (compute.attention_efficiency), so the core's forward takes
    exactly 1/1.35 of its time at factor 1; GEMMs and the rest of the layer do not move."""
    sc = gb300_8b.scenario
    gpu = sc.system.gpu
    plain_gpu = dataclasses.replace(gpu, efficiency=dataclasses.replace(gpu.efficiency, attention_part_factor=1.0))
    plain = dataclasses.replace(sc, system=dataclasses.replace(sc.system, gpu=plain_gpu))
    fast, slow = _layer(sc, gb300_8b.design), _layer(plain, gb300_8b.design)
    assert float(slow.attn_fwd_s) / float(fast.attn_fwd_s) == pytest.approx(1.35, rel=REL)
    assert float(fast.linear_fwd_s) == float(slow.linear_fwd_s)
    # the rest of the forward (elementwise, casts, overhead) is the same
    rest = lambda lt: float(lt.fwd_s) - float(lt.attn_fwd_s)  # noqa: E731
    assert rest(fast) == pytest.approx(rest(slow), rel=1e-5)
    assert float(fast.fwd_s) < float(slow.fwd_s)


@pytest.mark.parametrize("bad", [0, -1, 11, "fast"])
def test_bad_factor_names_the_key(tmp_path, bad):
    data = yaml.safe_load(open(bundled("hardware", "GB300.yaml")))
    data["efficiency"]["attention_part_factor"] = bad
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="attention_part_factor") as err:
        load_gpu(str(path))
    assert str(path) in str(err.value)

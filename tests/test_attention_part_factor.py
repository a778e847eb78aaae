"""Blackwell Ultra's attention: a family shares one fitted attention_max, and a part whose attention loop is faster
(GB300, B300: doubled exponential throughput) carries efficiency.attention_part_factor (configs/hardware/*.yaml)."""
import dataclasses
import math

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


# cuDNN's SDPA training benchmark, one cuDNN (9.22) on both parts (NVIDIA/cudnn-frontend
# benchmark/sdpa_benchmark_training/results/{llama3.1,dsv3,kimiK26}/{gb200,gb300}, April 2026): BF16, causal
# (top_left), batch 2, non-deterministic backward. (model, keys, GB200 fwd ms, bwd ms, GB300 fwd ms, bwd ms)
CUDNN_GB200_GB300_BF16_CAUSAL = (
    ("dsv3", 2048, 0.321, 1.056, 0.268, 0.977), ("dsv3", 4096, 0.977, 3.383, 0.864, 3.127),
    ("dsv3", 8192, 3.470, 11.984, 3.013, 11.074), ("dsv3", 16384, 13.103, 50.424, 11.178, 43.911),
    ("dsv3", 32768, 50.456, 212.546, 44.189, 177.494),
    ("kimiK26", 2048, 0.167, 0.536, 0.136, 0.492), ("kimiK26", 4096, 0.518, 1.698, 0.421, 1.548),
    ("kimiK26", 8192, 1.733, 6.005, 1.466, 5.466), ("kimiK26", 16384, 6.398, 24.921, 5.442, 21.253),
    ("kimiK26", 32768, 25.720, 105.445, 21.498, 88.821),
    ("llama3.1", 2048, 0.125, 0.389, 0.100, 0.356), ("llama3.1", 4096, 0.391, 1.198, 0.323, 1.101),
    ("llama3.1", 8192, 1.397, 4.127, 1.185, 3.832), ("llama3.1", 16384, 5.150, 16.554, 4.593, 14.593),
    ("llama3.1", 32768, 21.692, 71.756, 18.014, 59.024),
)


def test_blackwell_ultra_parts_carry_the_measured_factor_and_nothing_else_does():
    """GB300 over GB200 in forward + backward time of the same cuDNN kernel, 15 causal BF16 shapes (d 128 and 192,
    2k-32k keys): geometric mean 1.136, each within 1.09-1.22. (NVIDIA's ~35% is an FP8 forward: attention runs at
    the 16-bit rate in the model.) B300 is the same die."""
    ratios = [(f2 + b2) / (f3 + b3) for _, _, f2, b2, f3, b3 in CUDNN_GB200_GB300_BF16_CAUSAL]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert geomean == pytest.approx(1.136, abs=5e-4) and min(ratios) > 1.09 and max(ratios) < 1.22
    for name in ("GB300", "B300"):
        assert load_gpu(bundled("hardware", f"{name}.yaml")).efficiency.attention_part_factor == round(geomean, 2)
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
    exactly 1/1.14 of its time at factor 1; GEMMs and the rest of the layer do not move."""
    sc = gb300_8b.scenario
    gpu = sc.system.gpu
    plain_gpu = dataclasses.replace(gpu, efficiency=dataclasses.replace(gpu.efficiency, attention_part_factor=1.0))
    plain = dataclasses.replace(sc, system=dataclasses.replace(sc.system, gpu=plain_gpu))
    fast, slow = _layer(sc, gb300_8b.design), _layer(plain, gb300_8b.design)
    assert float(slow.attn_fwd_s) / float(fast.attn_fwd_s) == pytest.approx(1.14, rel=REL)
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

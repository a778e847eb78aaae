"""GEMM rates never above the part's measured maximum achievable matmul rate (GpuSpec.mamf_tflops,
cost/compute.gemm_rate). Golden values: stas00/ml-engineering compute/accelerator/README.md, "Maximum Achievable
Matmul FLOPS comparison table" (H100 SXM FP8 1402.6 TFLOP/s, BF16 794.5; B300 SXM BF16 1769.0, FP8 3353.3)."""
import dataclasses
import glob
import os

import jax.numpy as jnp
import pytest

import sax_jax as sx
from sax_jax import specs as S
from sax_jax.config import load_gpu
from sax_jax.cost.compute import gemm_rate, layer_times
from sax_jax.params import build_params
from sax_jax.resources import configs_dir

HW = os.path.join(configs_dir(), "hardware")


def _gpu(name):
    return load_gpu(os.path.join(HW, f"{name}.yaml"))


def _params(gpu_name, precision):
    """The h100-building scenario on ``gpu_name`` in ``precision``."""
    sc = sx.load_scenario("h100-building")
    system = dataclasses.replace(sc.system, gpu=_gpu(gpu_name))
    return build_params(dataclasses.replace(sc, system=system,
                                            training=dataclasses.replace(sc.training, precision=precision)))


def _rate(p):
    return float(gemm_rate(p.gpu.peak_flops, p.gpu.gemm_max, p.gpu.gemm_cap))


def test_h100_fp8_gemms_run_at_the_measured_rate():
    """H100's fitted gemm_max 0.734 x 1978.9 FP8 TFLOP/s = 1452.5 is above the measured 1402.6: capped there."""
    g = _gpu("H100-SXM-80GB")
    assert g.efficiency.gemm_max * g.peak_tflops["fp8"] > 1402.6
    assert _rate(_params("H100-SXM-80GB", "fp8")) == pytest.approx(1402.6e12, rel=1e-6)
    # the 16-bit work of an FP8 recipe (output layer, BF16 layers) keeps BF16's measurement as its ceiling
    assert float(_params("H100-SXM-80GB", "fp8").gpu.gemm_cap_16bit) == pytest.approx(794.5 / 989.4, rel=1e-6)


def test_a_rate_below_the_measurement_is_left_alone():
    """H100 BF16: 0.734 x 989.4 = 726.2 TFLOP/s < 794.5 measured, so the fitted rate stands."""
    g = _gpu("H100-SXM-80GB")
    assert _rate(_params("H100-SXM-80GB", "bf16")) == pytest.approx(g.efficiency.gemm_max * 989.4e12, rel=1e-6)


def test_b300_bf16_is_capped_too():
    """B300's die-tied fit (gemm_max 0.808 of 2,250) exceeds the measured 1769.0 BF16 TFLOP/s."""
    assert _gpu("B300").efficiency.gemm_max * 2250.0 > 1769.0
    assert _rate(_params("B300", "bf16")) == pytest.approx(1769.0e12, rel=1e-6)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(HW, "*.yaml"))), ids=os.path.basename)
def test_no_bundled_part_runs_a_gemm_above_its_measurement(path):
    g = load_gpu(path)
    for precision in ("bf16", "fp16", "fp8"):
        key = S.MAMF_OF_PRECISION[precision]
        rate = float(gemm_rate(g.peak_flops(precision), g.efficiency.gemm_max, g.gemm_ceiling(precision)))
        if key in g.mamf_tflops:
            assert rate <= g.mamf_tflops[key] * 1e12 * (1 + 1e-6), (g.name, precision)  # float32
        else:  # nothing measured: the fitted rate as it is
            assert rate == pytest.approx(g.efficiency.gemm_max * g.peak_flops(precision), rel=1e-6)  # float32


def test_fp16_takes_bf16s_measurement_and_fp4_has_none():
    g = _gpu("B200")
    assert g.gemm_ceiling("fp16") == pytest.approx(1745.0 / 2250.0)
    assert g.gemm_ceiling("fp4") == S.GEMM_CEILING_NONE
    assert _gpu("GB300").gemm_ceiling("fp8") == S.GEMM_CEILING_NONE  # no GB300 row in the table


def test_the_layer_gemms_slow_by_exactly_the_cap():
    """Every GEMM term of a layer divides by the same rate, so capping it scales the linear-layer time by
    fitted rate / measured rate: 0.734 x 1978.9 / 1402.6 on H100 in FP8."""
    p = _params("H100-SXM-80GB", "fp8")
    free = p.gpu._replace(gemm_cap=jnp.float32(S.GEMM_CEILING_NONE))

    def lin(gpu):
        return float(layer_times(8.0, 1.0, 1.0, 8192.0, p.model, gpu, p.train).linear_fwd_s)

    g = _gpu("H100-SXM-80GB")
    expect = g.efficiency.gemm_max * 1978.9 / 1402.6
    assert lin(p.gpu) / lin(free) == pytest.approx(expect, rel=1e-5)


def test_a_higher_ceiling_is_never_slower():
    p = _params("B300", "fp8")
    times = []
    for cap in (0.5, 0.7, 0.745, 0.8, S.GEMM_CEILING_NONE):
        lt = layer_times(4.0, 1.0, 1.0, 8192.0, p.model, p.gpu._replace(gemm_cap=jnp.float32(cap)), p.train)
        times.append(float(lt.fwd_s + lt.bwd_s))
    assert times == sorted(times, reverse=True)

"""Activation offloading (cost/offload.py): the stage waits where a layer's copy to / from host memory outruns the
next layer's kernels, and the offloaded layers' activations leave HBM; a GPU without a host link refuses it; the
Megatron-Bridge runs that offload get it from their recipes."""
import os

import numpy as np
import pytest

import sax_jax as sx
from conftest import CONFIGS, f32 as F
from sax_jax import specs as S
from sax_jax.config import load_scenario
from sax_jax.cost.context import context
from sax_jax.cost.memory import activation_bytes_per_layer
from sax_jax.evaluate import evaluate
from sax_jax.params import build_params
from sax_jax.space import Design
from sax_jax.validation import load_cases

# one stage, no recompute: every layer's activations stay until its backward
DESIGN = {"tp": 8, "pp": 1, "cp": 1, "mbs": 1, "recompute": "none", "schedule": "1f1b", "sharding": "fsdp",
          "overlap": "dp"}


def _setup(offload_layers, host_GBps):
    sc = sx.load_scenario("default")
    p = build_params(sc)
    p = p._replace(train=p.train._replace(offload_layers=F(offload_layers)),
                   gpu=p.gpu._replace(host_Bps=F(host_GBps * 1e9)))
    d = sc.space.design(DESIGN)
    return sc, p, Design(*[np.asarray(getattr(d, f)) for f in Design._fields])


def _cost(offload_layers, host_GBps):
    sc, p, d = _setup(offload_layers, host_GBps)
    c = evaluate(sc, d, p)
    return float(np.asarray(c.breakdown.offload).ravel()[0]), float(np.asarray(c.memory_bytes).ravel()[0])


def _layer(offload_layers=0, host_GBps=64.0):
    """(stored bytes of one layer and microbatch, its forward and backward seconds, layers on the stage)."""
    sc, p, d = _setup(offload_layers, host_GBps)
    ctx = context(p, d)
    b = float(activation_bytes_per_layer(d.mbs, ctx.seq, d.tp, d.cp, d.recompute, p.model, p.train,
                                         p.gpu.gemm_input_bytes))
    return b, float(ctx.layer.fwd_s), float(ctx.layer.bwd_s), float(ctx.layers_stage), float(ctx.microbatches)


def test_each_offloaded_layer_waits_for_the_copy_that_outruns_the_next_layer():
    b, fwd, bwd, layers, micro = _layer()
    # a host link slow enough that one layer's copy outruns its forward but not its backward, and one slower still
    slow = b / (1.5 * fwd) / 1e9  # copy = 1.5 x forward
    slower = b / (3.0 * bwd) / 1e9  # copy = 3 x backward
    assert 1.5 * fwd < bwd  # the backward of a layer takes about twice its forward
    got, _ = _cost(10, slow)
    assert got == pytest.approx(micro * 10 * 0.5 * fwd, rel=2e-5)  # only the forward copies wait
    got, _ = _cost(10, slower)
    assert got == pytest.approx(micro * 10 * ((3.0 * bwd - fwd) + 2.0 * bwd), rel=2e-5)


def test_offloaded_activations_leave_hbm_layer_by_layer():
    b, *_ = _layer()
    _, mem0 = _cost(0, 64.0)
    _, mem10 = _cost(10, 64.0)
    # 1F1B with one stage holds one microbatch's activations: ten layers of it go to host memory
    assert mem0 - mem10 == pytest.approx(10 * b, rel=1e-5)
    _, mem_all = _cost(10_000, 64.0)  # never more layers than the stage holds
    *_, layers, _ = _layer()
    assert mem0 - mem_all == pytest.approx(layers * b, rel=1e-5)


@pytest.mark.parametrize("layers", [1, 20, 60])
def test_more_host_bandwidth_never_slower_and_no_offload_costs_nothing(layers):
    times = [_cost(layers, bw)[0] for bw in (4.0, 16.0, 64.0, 225.0, 10_000.0)]
    assert all(a >= b for a, b in zip(times, times[1:]))
    assert times[0] > 0.0 and times[-1] == 0.0  # a copy faster than the layer hides entirely
    assert _cost(0, 4.0)[0] == 0.0


def test_offloading_on_a_gpu_without_a_host_link_names_the_key(tmp_path):
    # the default scenario, its system and its GPU copied, the GPU without host_GBps, the training offloading
    sc_dir = os.path.join(CONFIGS, "scenarios")
    text = open(os.path.join(sc_dir, "default.yaml")).read()
    sys_ref = next(ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("system:"))
    sys_path = os.path.normpath(os.path.join(sc_dir, sys_ref))
    sys_text = open(sys_path).read()
    gpu_ref = next(ln.split(":", 1)[1].split("#")[0].strip() for ln in sys_text.splitlines()
                   if ln.startswith("gpu:"))
    gpu_text = open(os.path.normpath(os.path.join(os.path.dirname(sys_path), gpu_ref))).read()
    assert "\nhost_GBps:" in gpu_text  # every bundled GPU gives its link
    (tmp_path / "gpu.yaml").write_text("\n".join(ln for ln in gpu_text.splitlines()
                                                 if not ln.startswith("host_GBps")) + "\n")
    (tmp_path / "system.yaml").write_text(sys_text.replace(gpu_ref, "gpu.yaml"))
    body = text.replace(f"system: {sys_ref}", "system: system.yaml").replace("training:", "training:\n  offload_layers: 4", 1)
    for ref in ("../network/", "../models/", "../prices/", "../traces/"):
        body = body.replace(ref, os.path.join(CONFIGS, ref[3:]))
    (tmp_path / "s.yaml").write_text(body)
    with pytest.raises(S.ConfigError, match="training.offload_layers") as exc:
        load_scenario(str(tmp_path / "s.yaml"))
    assert "host_GBps" in str(exc.value) and "s.yaml" in str(exc.value)
    # with the link it loads
    (tmp_path / "gpu.yaml").write_text(gpu_text)
    assert load_scenario(str(tmp_path / "s.yaml")).training.offload_layers == 4


def test_megatron_bridge_runs_that_offload_get_it_from_their_recipes():
    cases, _ = load_cases(dataset="megatron-bridge-gb200")
    by_id = {c.id: c for c in cases}
    c = by_id["mb-26.04-gb200-llama3-70B-pretrain-fp8-64g-gbs256"]
    assert c.scenario.training.offload_layers == 40  # cpu_offloading_num_layers=40, pp 1
    assert any("offload_layers=40" in f for f in c.filled)
    # the 25.11 405B recipe offloads 92 layers of an FSDP layout; the row ran pp 16, where Megatron-Core refuses it
    c = by_id["mb-25.11-gb200-llama3-405B-pretrain-fp8-cs-256g-gbs1536"]
    assert c.scenario.training.offload_layers == 0
    assert any("cannot run with the row's pp 16" in a for a in c.approximations)

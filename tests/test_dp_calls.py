"""Data-parallel collectives pay the ring's step latencies once per NCCL call (cost/dp.py per_call_s, dp_calls):
hand-derived values from NCCL's tuning model (latency per call + bytes / bandwidth) and Megatron-Core's bucket rule,
the framework switch, and the published runs a source footnotes as a known regression (kept out of scoring)."""
import os

import numpy as np
import pytest

import sax_jax as sx
from conftest import f32 as F
from sax_jax import specs as S
from sax_jax.config import load_frameworks
from sax_jax.cost.dp import dp_calls, multirail_ring_reduce_scatter_s, per_call_s
from sax_jax.evaluate import evaluate
from sax_jax.params import build_params
from sax_jax.space import Design
from sax_jax.validation import load_all

# 4 nodes of 8 GPUs: NVLink 3 us / 450 GB/s, network 8 us / 50 GB/s per GPU
K, ALPHA, BW = F([8.0, 4.0]), F([3e-6, 8e-6]), F([450e9, 50e9])


def test_each_call_pays_the_ring_latency_and_only_the_bytes_divide():
    # ring of 32: per lap 28 hops inside the nodes, 4 leaving them: mean hop (28 x 3 + 4 x 8) / 32 = 3.625 us,
    # (n - 1) hops = 112.375 us per call; bandwidth: the network level carries 31/32 S through the 8 NICs of a node,
    # 0.96875 GB / 400 GB/s = 2.421875 ms (NVLink's 0.96875 / 450 is faster)
    one = float(multirail_ring_reduce_scatter_s(K, F(1e9), ALPHA, BW))
    assert one == pytest.approx(2.421875e-3 + 112.375e-6, rel=1e-5)
    # ten calls of 100 MB: each runs LL128 (nccl_protocol): hops 3 us less NCCL's share (1 - 1.9/3.4) = 1.6765 us
    # in the nodes, 8 us x 4.0/14 = 2.2857 us leaving them, mean 1.7526 us, 31 of them = 54.33 us, plus its base
    # latency's 5.6 us over Simple's, and the bytes at 0.92 of the bandwidth: 0.2421875 ms / 0.92
    ll128 = 5.6e-6 + 31 * (28 * 3e-6 * 1.9 / 3.4 + 4 * 8e-6 * 4.0 / 14) / 32 + 2.421875e-4 / 0.92
    assert ll128 < 2.421875e-4 + 112.375e-6  # Simple's call
    ten = float(per_call_s(multirail_ring_reduce_scatter_s, F(10.0), K, F(1e9), ALPHA, BW))
    assert ten == pytest.approx(10 * ll128, rel=1e-5)
    assert float(per_call_s(multirail_ring_reduce_scatter_s, F(1.0), K, F(1e9), ALPHA, BW)) == pytest.approx(one)


@pytest.mark.parametrize("calls", [1.0, 3.0, 40.0, 167.0])
def test_more_latency_per_hop_never_faster_and_more_calls_never_faster(calls):
    base = float(per_call_s(multirail_ring_reduce_scatter_s, F(calls), K, F(3e8), ALPHA, BW))
    assert float(per_call_s(multirail_ring_reduce_scatter_s, F(calls), K, F(3e8), ALPHA * 2, BW)) > base
    assert float(per_call_s(multirail_ring_reduce_scatter_s, F(calls + 1), K, F(3e8), ALPHA, BW)) > base


def test_megatron_buckets_grow_with_dp_and_fsdp_calls_once_per_layer():
    # Megatron-Core DDP: max(40M, 1M x dp) parameters per bucket; 8e9 parameters on the GPU
    assert float(dp_calls(F(8e9), F(16.0), F(40.0), True, F(0.0))) == pytest.approx(200.0)
    assert float(dp_calls(F(8e9), F(48.0), F(40.0), True, F(0.0))) == pytest.approx(8e9 / 4.8e7, rel=1e-6)
    assert float(dp_calls(F(1e7), F(8.0), F(40.0), True, F(0.0))) == 1.0  # never fewer than one call
    assert float(dp_calls(F(8e9), F(48.0), F(40.0), False, F(0.0))) == 1.0  # no overlap: Megatron does not bucket
    assert float(dp_calls(F(8e9), F(48.0), F(40.0), False, F(1.0))) == 40.0  # PyTorch FSDP: per layer regardless


def _dp_seconds(per_layer: float, n_gpus_scale=None):
    sc = sx.load_scenario("default")
    p = build_params(sc)
    p = p._replace(gpu=p.gpu._replace(dp_per_layer=F(per_layer)))
    d = sc.space.design({"tp": 8, "pp": 16, "cp": 1, "mbs": 1, "recompute": "full", "schedule": "1f1b",
                         "sharding": "zero1", "overlap": "none"})
    cost = evaluate(sc, Design(*[np.asarray(getattr(d, f)) for f in Design._fields]), p)
    return float(np.asarray(cost.breakdown.dp_exposed).ravel()[0])


def test_a_per_layer_framework_pays_more_latency_than_one_unbucketed_call():
    # without overlap Megatron reduces the gradients in one call; a per-layer framework in (layers per stage) calls,
    # each paying the whole ring's hop latencies
    assert _dp_seconds(1.0) > _dp_seconds(0.0) > 0.0


def test_frameworks_name_their_dp_calls():
    fws = load_frameworks()
    assert fws["megatron-te"].dp_calls == "buckets"
    assert fws["composer-fsdp"].dp_calls == "layers" and fws["torchtitan"].dp_calls == "layers"
    assert fws["torchtitan"].tp_overlap == "micro_pipeline" and fws["megatron-te"].tp_overlap == "userbuffers"
    assert fws["torchtitan-eager"].tp_overlap == "none"


# the choice-valued framework fields: how dp calls are issued, when ZeRO-3's backward gathers (test_fsdp_prefetch),
# how TP overlap works (test_overlap)
@pytest.mark.parametrize("key, value", [("dp_calls", "rings"), ("backward_prefetch", "sideways"),
                                        ("tp_overlap", "flux")])
def test_a_bad_framework_choice_names_the_file_key_and_value(tmp_path, key, value):
    bad = tmp_path / "frameworks.yaml"
    bad.write_text(f"frameworks:\n  mine:\n    {key}: {value}\n")
    with pytest.raises(S.ConfigError, match=f"frameworks.mine.{key}") as exc:
        load_frameworks(str(bad))
    assert value in str(exc.value) and os.path.basename(str(bad)) in str(exc.value)


def test_runs_the_source_footnotes_as_a_regression_are_kept_out_with_the_reason():
    loaded = load_all()
    out = {u.id: u.reason for u in loaded.excluded}
    reg = {i: r for i, r in out.items() if "known software regression" in r}
    assert sorted(reg) == ["mb-26.06.01-gb200-gpt-oss-120b-pretrain-mxfp8-64g-gbs1280",
                           "mb-26.06.01-gb300-gpt-oss-120b-pretrain-mxfp8-64g-gbs1280"]
    assert all("cudnn-frontend#256" in r for r in reg.values())
    assert not any(c.id in reg for c in loaded.cases)


def test_tree_is_an_all_reduce_only_so_the_distributed_optimizer_runs_rings():
    # NCCL's tuning model offers the tree for the all-reduce only (reduce-scatter and all-gather: ring)
    from sax_jax.cost.dp import dp_step_comm_s
    from sax_jax.space import DpAlgo, Sharding
    k = F([8.0, 64.0])
    alpha, bw = F([3e-6, 8e-6]), F([450e9, 50e9])

    def comm(sharding, algo):
        g, p = dp_step_comm_s(sharding, algo, k, k, F([1.0, 1.0]), F(4e8), F(2e8), alpha, bw, calls=F(50.0))
        return float(g), float(p)

    for sharding in (Sharding.ZERO1, Sharding.ZERO2):
        assert comm(sharding, DpAlgo.TREE) == comm(sharding, DpAlgo.RING)
    # the all-reduce of ZeRO-0 does use the tree: log2 latency instead of (n - 1) hops per call (8 MB calls:
    # latency-bound even for the ring's fastest protocol)
    assert comm(Sharding.ZERO0, DpAlgo.TREE)[0] < comm(Sharding.ZERO0, DpAlgo.RING)[0]

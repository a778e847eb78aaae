"""A CUDA graph replaying the iteration leaves each GEMM only the kernel's own fixed cost (cost/compute.py
gemm_half_for, GPU efficiency gemm_half_flops_graphed): hand-derived values, the parts without a graphed value, and a
Blackwell run with its recipe's full-iteration graph."""
import jax.numpy as jnp
import pytest

from sax_jax import validation as V
from sax_jax.cost.compute import gemm_half_for, gemm_time_s, layer_times
from sax_jax.params import build_params

from conftest import f32 as F, hand_train


class _G:
    """Just the two GEMM constants gemm_half_for reads."""

    def __init__(self, half, graphed):
        self.gemm_half_flops, self.gemm_half_graphed = F(half), F(graphed)


@pytest.mark.parametrize("half,graphed,full,expected", [
    (3.0e11, 8.0e10, 1.0, 8.0e10),   # full-iteration graph: the graphed value
    (3.0e11, 8.0e10, 0.0, 3.0e11),   # launched from the host: the fitted eager value
    (3.5e10, 0.0, 1.0, 3.5e10),      # no graphed value (Hopper, A100): graphs change nothing
    (5.0e10, 8.0e10, 1.0, 5.0e10),   # a graphed value above the eager one is never used: graphs do not slow a GEMM
])
def test_gemm_half_under_graphs(half, graphed, full, expected):
    train = hand_train()._replace(graph_full=F(full))
    assert float(gemm_half_for(_G(half, graphed), train)) == pytest.approx(expected, rel=1e-6)


def test_a_gemm_under_a_graph_by_hand():
    """One 1e12-FLOP GEMM at 2.25 PFLOP/s x 0.68: (1e12 + 3.25e11) / 1.53e15 = 866 us launched, (1e12 + 7.9e10) /
    1.53e15 = 705 us replayed; the 161 us between them is the host's share of its fixed time."""
    peak, gmax = F(2.25e15), F(0.68)
    g = _G(3.25e11, 7.9e10)
    eager = float(gemm_time_s(F(1e12), peak * gmax, gemm_half_for(g, hand_train())))
    graphed = float(gemm_time_s(F(1e12), peak * gmax, gemm_half_for(g, hand_train()._replace(graph_full=F(1.0)))))
    assert eager == pytest.approx(1.325e12 / 1.53e15, rel=1e-5)
    assert graphed == pytest.approx(1.079e12 / 1.53e15, rel=1e-5)
    assert eager - graphed == pytest.approx(2.46e11 / 1.53e15, rel=1e-4)


def _case(case_id):
    cases, _ = V.load_cases()
    return next(c for c in cases if c.id == case_id)


def test_full_iteration_graph_takes_the_graphed_half_per_gemm_call():
    """Qwen3-235B on GB200 (Megatron-Bridge 26.06, full_iteration graph, MXFP8): its forward GEMMs are three calls
    per layer (QKV, projection, MLP with the experts), so replaying them saves 3 x (half - graphed) / (peak x
    gemm_max) of forward GEMM time per layer, and the forward's three calls again twice in the backward."""
    case = _case("mb-26.06-gb200-qwen3-235b-a22b-pretrain-mxfp8-256g-gbs8192")
    assert case.scenario.training.cuda_graphs == "full"
    p = build_params(case.scenario)
    d = case.scenario.space.design(case.design)
    g, tr = p.gpu, p.train
    assert float(g.gemm_half_graphed) > 0.0 and float(g.gemm_half_graphed) < float(g.gemm_half_flops)

    def times(gpu):
        return layer_times(F(d.tp), F(d.cp), F(d.mbs), F(case.scenario.training.seq_len), p.model, gpu, tr,
                           F(d.pp), F(d.vpp), F(d.ep))
    replayed, eager = times(g), times(g._replace(gemm_half_graphed=jnp.float32(0.0)))
    per_call = (float(g.gemm_half_flops) - float(g.gemm_half_graphed)) / (float(g.peak_flops) * float(g.gemm_max))
    assert float(eager.linear_fwd_s - replayed.linear_fwd_s) == pytest.approx(3.0 * per_call, rel=1e-4)
    # backward: the weight- and input-gradient GEMMs, twice the forward's calls
    saved_b = float(eager.bwd_s - replayed.bwd_s)
    assert saved_b == pytest.approx(2.0 * 3.0 * per_call, rel=1e-3)


def test_eager_runs_keep_the_fitted_half():
    """The same model's GB200 run at 26.04 (Transformer Engine's partial graphs: the expert GEMMs still launched
    from the host) is unchanged by the graphed value."""
    case = _case("mb-26.04-gb200-qwen3-235b-a22b-pretrain-mxfp8-256g-gbs8192")
    assert case.scenario.training.cuda_graphs != "full"
    p = build_params(case.scenario)
    d = case.scenario.space.design(case.design)

    def fwd(gpu):
        return float(layer_times(F(d.tp), F(d.cp), F(d.mbs), F(case.scenario.training.seq_len), p.model, gpu,
                                 p.train, F(d.pp), F(d.vpp), F(d.ep)).fwd_s)
    assert fwd(p.gpu) == fwd(p.gpu._replace(gemm_half_graphed=jnp.float32(0.0)))

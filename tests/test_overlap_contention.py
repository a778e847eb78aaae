"""An overlapped NCCL collective costs the compute beside it more than its SM share (cost/overlap.nccl_price):
one fitted contention fraction shared by every GPU type, bounded by what was measured."""
import os
import re

import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import sax_jax as sx
from sax_jax.config import load_gpu
from sax_jax.specs import ConfigError
from sax_jax.cost.overlap import exposed_s, nccl_price
from sax_jax.resources import bundled

HARDWARE = bundled("hardware")


def _efficiency(name):
    with open(os.path.join(HARDWARE, name)) as fh:
        return yaml.safe_load(fh)["efficiency"]


def test_one_fitted_value_for_every_gpu_and_it_says_how():
    files = sorted(f for f in os.listdir(HARDWARE) if f.endswith(".yaml"))
    values = {f: _efficiency(f)["overlap_contention"] for f in files}
    assert len(set(values.values())) == 1, values
    text = open(os.path.join(HARDWARE, "H100-SXM-80GB.yaml")).read()
    assert "overlap_contention" in text and "calibrate.py --overlap" in text


def test_price_within_the_measured_range(default_params):
    """Sahu et al. 2025 (arXiv 2507.03114): compute beside an overlapped collective slows by 18.9% on average
    and 40% at most (A100, H100, MI210, MI250). The SM share alone (16 of 132 SMs on H100, 12%) is below the
    mean; the price with the fitted contention must not exceed the largest slowdown measured."""
    c = float(default_params.gpu.overlap_contention)
    sm = 16 / 132
    assert c > 0
    assert float(nccl_price(default_params.gpu)) == pytest.approx(sm + c, rel=1e-6)
    assert 0.189 <= sm + c <= 0.40
    a100 = load_gpu(os.path.join(HARDWARE, "A100-SXM-80GB.yaml"))
    assert a100.comm_sms / a100.sm_count + c <= 0.40


def test_hidden_collective_golden():
    """10 s of collective fully hidden under 20 s of compute, in 10 chunks: the last chunk (1 s) stays exposed and
    the compute loses (SM share + contention) of the 9 s that hide: 1 + (0.12 + 0.14) x 9 = 3.34 s (the
    arithmetic of cost/overlap.exposed_s with a price of 0.26)."""
    got = float(exposed_s(10.0, 20.0, True, 10.0, 0.12 + 0.14))
    assert got == pytest.approx(1.0 + 0.26 * 9.0, rel=1e-6)


def _with_contention(params, c):
    return params._replace(gpu=params.gpu._replace(overlap_contention=jnp.asarray(c, jnp.float32)))


def test_more_contention_never_faster(default_scenario, sample_batch):
    """Over 512 designs spread over the default space: the step time never falls as the contention grows, and
    designs with hidden collectives pay for it."""
    params = sx.build_params(default_scenario)
    designs, _ = sample_batch
    times = [np.asarray(sx.evaluate(default_scenario, designs, _with_contention(params, c)).raw_step_time_s)
             for c in (0.0, 0.14, 0.3)]
    ok = np.isfinite(times[0])
    assert ok.sum() > 50
    assert np.all(times[1][ok] >= times[0][ok]) and np.all(times[2][ok] >= times[1][ok])
    assert np.any(times[1][ok] > times[0][ok])


def test_fsdp_price_grows_linearly_in_the_contention(default_scenario):
    """A ZeRO-3 design whose gathers hide under compute: its data-parallel term is exposed + price x hidden, so
    the term's growth from contention 0 to c is c x hidden (linear: twice the contention, twice the growth)."""
    d = default_scenario.baseline_design("production", {"sharding": "fsdp", "overlap": "dp"})
    params = sx.build_params(default_scenario)
    dp = [float(sx.evaluate(default_scenario, d, _with_contention(params, c)).breakdown.dp_exposed[0])
          for c in (0.0, 0.1, 0.2)]
    assert dp[1] > dp[0]
    assert (dp[2] - dp[0]) == pytest.approx(2.0 * (dp[1] - dp[0]), rel=1e-3)


@pytest.mark.parametrize("value", ["1.0", "-0.1", "lots"])
def test_bad_contention_is_a_named_error(tmp_path, value):
    text = open(os.path.join(HARDWARE, "H100-SXM-80GB.yaml")).read()
    bad, n = re.subn(r"overlap_contention: [0-9.]+", f"overlap_contention: {value}", text)
    assert n == 1
    path = tmp_path / "gpu.yaml"
    path.write_text(bad)
    with pytest.raises(ConfigError) as e:
        load_gpu(str(path))
    assert "efficiency.overlap_contention" in str(e.value) and str(path) in str(e.value)


def test_tp_overlap_pays_the_same_contention(default_scenario):
    """Userbuffers' TP overlap (tp 8 inside the H100 node, --tp-comm-overlap) pays its SM share plus the same
    contention on every hidden second: the TP term grows linearly in it, while TP without overlap (exposed) does
    not move."""
    params = sx.build_params(default_scenario)
    on = default_scenario.baseline_design("production", {"overlap": "dp+tp"})
    off = default_scenario.baseline_design("production", {"overlap": "dp"})

    def tp(d, c):
        return float(sx.evaluate(default_scenario, d, _with_contention(params, c)).breakdown.tp[0])
    t_on = [tp(on, c) for c in (0.0, 0.1, 0.2)]
    assert t_on[1] > t_on[0]
    assert (t_on[2] - t_on[0]) == pytest.approx(2.0 * (t_on[1] - t_on[0]), rel=1e-3)
    assert tp(off, 0.0) == tp(off, 0.2)
    assert t_on[2] < tp(off, 0.2)  # hiding still pays at this price


# ------------------------------------------------------------------------------------- point-to-point transfers
def test_p2p_price_golden(default_params):
    """NCCL send/receive runs on two channels (one thread block each) per network peer (NCCL_NCHANNELS_PER_NET_PEER
    = 2), not on a collective's 16 SMs: on H100 (132 SMs) a ring step's send and receive (two peers) take 4 SMs,
    one pipeline transfer 2; both pay the same fitted contention."""
    from sax_jax.cost.overlap import p2p_price
    g = default_params.gpu
    c = float(g.overlap_contention)
    assert float(p2p_price(g, 2.0)) == pytest.approx(4 / 132 + c, rel=1e-6)
    assert float(p2p_price(g, 1.0)) == pytest.approx(2 / 132 + c, rel=1e-6)
    assert float(p2p_price(g, 2.0)) < float(nccl_price(g))


def _term(scenario, params, design, name, contention, sm_share=None):
    gpu = params.gpu._replace(overlap_contention=jnp.asarray(contention, jnp.float32))
    if sm_share is not None:
        gpu = gpu._replace(sm_share=jnp.asarray(sm_share, jnp.float32))
    return float(getattr(sx.evaluate(scenario, design, params._replace(gpu=gpu)).breakdown, name)[0])


def test_cp_ring_pays_two_peers_channels(default_scenario):
    """The production layout's CP 2 ring hides entirely under attention, so its whole term is the price of the
    hidden ring: SM share 4/132 (two peers x two channels) against the contention's c, in that ratio."""
    params = sx.build_params(default_scenario)
    d = default_scenario.baseline_design("production")
    cp0, cp1 = (_term(default_scenario, params, d, "cp", c) for c in (0.0, 0.1))
    assert _term(default_scenario, params, d, "cp", 0.0, sm_share=0.0) == 0.0  # nothing exposed
    assert cp0 > 0
    assert cp0 / (cp1 - cp0) == pytest.approx((4 / 132) / 0.1, rel=1e-3)


def test_interleaved_transfers_pay_one_peers_channels(default_scenario):
    """Interleaved 1F1B overlaps each transfer with compute; each kernel has one peer: its price per hidden second
    is 2/132 of SM share plus c, so the SM part of pp_p2p is (2/132)/c of the contention part."""
    params = sx.build_params(default_scenario)
    d = default_scenario.baseline_design("production")
    bare = _term(default_scenario, params, d, "pp_p2p", 0.0, sm_share=0.0)
    sm = _term(default_scenario, params, d, "pp_p2p", 0.0) - bare
    cont = _term(default_scenario, params, d, "pp_p2p", 0.1, sm_share=0.0) - bare
    assert sm > 0 and cont > 0
    assert sm / cont == pytest.approx((2 / 132) / 0.1, rel=1e-3)

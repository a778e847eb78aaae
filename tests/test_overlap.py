"""Overlap has a price, and TP communication overlaps only where its mechanism exists (an NVLink domain)."""
import numpy as np
import pytest

import sax_jax as sx
from sax_jax.cost.overlap import exposed_s

from test_terms import _one, _scenario


@pytest.mark.parametrize("comm, window, chunks, slowdown, on, expected", [
    (10.0, 6.0, None, 0.1, True, 4.0 + 0.1 * 6.0),   # 4 s exposed; compute slowed during the 6 s that hide
    (10.0, 6.0, 5.0, 0.1, True, 4.0 + 0.1 * 6.0),    # the floor (last of 5 chunks: 2 s) is below 4 s
    (10.0, 9.0, 5.0, 0.1, True, 2.0 + 0.1 * 8.0),    # the last chunk (2 s) stays exposed
    (10.0, 20.0, None, 0.0, True, 0.0),              # fully hidden, free when nothing is shared
    (10.0, 20.0, None, 0.25, True, 2.5),             # fully hidden: a quarter of the SMs for 10 s
    (10.0, 6.0, None, 0.1, False, 10.0),             # not overlapped: all of it, no slowdown
])
def test_exposed_seconds_golden(comm, window, chunks, slowdown, on, expected):
    assert float(exposed_s(comm, window, on, chunks, slowdown)) == pytest.approx(expected, rel=1e-6)


def test_overlap_price_is_the_sm_share_of_the_collective(default_params):
    # configs/hardware/H100-SXM-80GB.yaml: NCCL's 16 channels on 132 SMs
    assert float(default_params.gpu.overlap_slowdown) == pytest.approx(16 / 132, rel=1e-6)


def test_more_overlap_never_beats_no_communication(default_scenario):
    """Hidden communication still costs its SM share: the step with overlap is slower than one whose
    communication were free (bandwidth x 1000, latency / 1000) by at least nothing, at most the hidden time."""
    base = default_scenario.baseline_design()
    params = sx.build_params(default_scenario)
    fast = params._replace(net=params.net._replace(bw_Bps=params.net.bw_Bps * 1e3,
                                                   latency_s=params.net.latency_s * 1e-3))
    t = float(sx.evaluate(default_scenario, base, params).step_time_s[0])
    t_free = float(sx.evaluate(default_scenario, base, fast).step_time_s[0])
    assert t > t_free


def test_tp_overlap_only_inside_the_nvlink_domain(tmp_path):
    """Nodes of 2 GPUs: tp 2 stays in the NVLink domain and --tp-comm-overlap hides part of its all-reduces;
    tp 8 spans nodes, buildings and the campus and its collectives stay exposed whatever the flag says."""
    sc = _scenario(tmp_path, name="ovl.yaml")
    _, _, in_node_on = _one(sc, tp=2, overlap="dp+tp", sharding="zero1")
    _, _, in_node_off = _one(sc, tp=2, overlap="dp", sharding="zero1")
    assert float(in_node_on.breakdown.tp) < float(in_node_off.breakdown.tp)
    _, _, across_on = _one(sc, tp=8, overlap="dp+tp", sharding="zero1")
    _, _, across_off = _one(sc, tp=8, overlap="dp", sharding="zero1")
    assert float(across_on.breakdown.tp) == float(across_off.breakdown.tp) > 0
    assert np.isfinite(float(across_on.raw_step_time_s))


def test_tcp_over_a_lossy_wan_is_loss_limited_per_socket():
    """Mathis et al. 1997: one TCP flow with MSS 1460 B, RTT 20 ms, loss 1e-4 averages
    1460 x sqrt(3/2) / (0.02 x 0.01) = 8.94 MB/s; 8 channels x 4 sockets = 32 flows = 286 MB/s, well below the
    48 MiB / 20 ms = 2.5 GB/s the socket buffers would allow."""
    import jax.numpy as jnp
    from sax_jax.cost.transport import ecmp_table, level_factors
    from sax_jax.params import NetP, TransportP
    one = lambda x: jnp.asarray([x], jnp.float32)  # noqa: E731 (one network level)
    net = NetP(unit_gpus=one(8), bw_Bps=one(50e9), latency_s=one(0.01), oversub=one(1), loss=one(1e-4),
               paths=one(1), mtu_bytes=one(1460), planes=one(1), fail_per_s=one(0), is_network=one(1),
               cross_building=one(1))
    tr = TransportP(ecmp=one(1), go_back_n=one(0), bounded=one(0), tcp=one(1), qps=one(4),
                    window_bytes=one(8 * 6 * 2**20), channels=one(8), reroute_s=one(1), tolerated_loss=one(0))
    _, _, cap = level_factors(net, tr, ecmp_table(net), 0, jnp.float32(0), jnp.float32(0))
    assert float(cap[0]) == pytest.approx(32 * 1460 * 1.5 ** 0.5 / (0.02 * 0.01), rel=1e-5)
    no_loss = net._replace(loss=one(0.0))
    _, _, cap0 = level_factors(no_loss, tr, ecmp_table(no_loss), 0, jnp.float32(0), jnp.float32(0))
    assert float(cap0[0]) == pytest.approx(8 * 6 * 2**20 / 0.02, rel=1e-5)

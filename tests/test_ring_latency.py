"""Ring collectives pay each hop's latency once (collectives.ring_hop_latency_s)."""
import jax.numpy as jnp
import pytest

from conftest import f32 as F


def test_ring_pays_each_hop_latency_once_not_the_slowest_on_every_step():
    """NCCL's tuning model: a ring all-reduce over nNodes nodes takes 2(nNodes-1) steps at the network latency and
    the rest at the NVLink one. 2 buildings x 256 nodes x 8 GPUs, latencies 1 us / 5 us / 20 ms: per lap 2 hops
    cross the buildings, 510 the building fabric, 3,584 stay inside nodes."""
    from sax_jax.cost.collectives import ring_allreduce_s, ring_hop_latency_s
    k = jnp.asarray([8.0, 256.0, 2.0], jnp.float32)
    alpha = jnp.asarray([1e-6, 5e-6, 20e-3], jnp.float32)
    n = 4096
    mean_hop = (3584 * 1e-6 + 510 * 5e-6 + 2 * 20e-3) / n
    assert float(ring_hop_latency_s(k, alpha)) == pytest.approx(mean_hop, rel=1e-5)
    bw = jnp.asarray([1e11, 5e10, 1e10], jnp.float32)
    t = float(ring_allreduce_s(k, F(0.0), alpha, bw))
    # an empty message runs LL (nccl_protocol): its hops 0.294 us in the nodes (1 us less NCCL's share, 1 - 1/3.4),
    # 0.964 us on the fabric (5 us x 2.7/14), 20 ms - 11.3 us across; its base latency 1.8 us under Simple's
    ll_hop = (3584 * (1e-6 / 3.4) + 510 * 5e-6 * 2.7 / 14 + 2 * (20e-3 - 11.3e-6)) / n
    assert t == pytest.approx(2 * (n - 1) * ll_hop - 1.8e-6, rel=1e-5)
    assert t < 2 * (n - 1) * mean_hop  # never slower than Simple
    assert t < 0.2 and 2 * (n - 1) * 20e-3 > 160  # the slowest-hop-per-step form charged 164 s of latency
    # one level: every hop at that level's latency, as before
    k1 = jnp.asarray([8.0, 1.0, 1.0], jnp.float32)
    assert float(ring_hop_latency_s(k1, alpha)) == pytest.approx(1e-6, rel=1e-5)

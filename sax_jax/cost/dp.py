"""Data-parallel synchronization: gradient reduction, parameter gathering, overlap with the backward pass.

Sharding (space.SHARDING): zero0 all-reduces gradients; zero1/zero2 (Megatron's distributed optimizer)
reduce-scatter gradients and all-gather updated 16-bit parameters; fsdp additionally gathers weights for
every microbatch's forward and backward and reduce-scatters its gradients (ZeRO-3); hsdp does the fsdp part
inside the building-local shard group and all-reduces the shard across buildings once per step.
Overlap: with `dp` overlap, bucketed reduction runs under the last microbatch's backward and the parameter
gather under the first microbatch's forward (Megatron --overlap-grad-reduce/--overlap-param-gather); what the
window cannot hide is exposed, and the last bucket always is.

Ring collectives over a multi-level group (validation change): NCCL builds one ring per channel and spreads
the channels over all the NICs of a node (one NIC per channel, rail-aligned), so the m GPUs of a ring that
sit in one node leave it through m NICs at once. Level L then carries (n-1)/n S per unit through the
NICs/links of the m_(L-1) members inside it: per-GPU time (n-1)/n S / (m_(L-1) B_L), and the levels run
pipelined (the slowest sets the pace). This is why NCCL's measured inter-node all-reduce bus bandwidth on
DGX A100/H100 (8 NICs per node) is ~8 x the per-GPU NIC rate, not 1 x (NVIDIA nccl-tests PERFORMANCE.md,
bus bandwidth; DGX SuperPOD reference architectures). The flat bottleneck form (collectives.ring_*) charged
the whole message to one NIC and made every data-parallel sync of the Megatron-Core H100 runs ~8x too slow
(dp=48 with 8, 4, 2 members per node); hierarchical and tree keep collectives.py's forms.
"""
import jax.numpy as jnp

from .collectives import hierarchical_allreduce_s, tree_allreduce_s
from .placement import spans

BUCKET_PARAMS = 4e7  # Megatron's default DDP bucket (40M parameters)


def multirail_ring_reduce_scatter_s(k, size_bytes, alpha, bw):
    """NCCL ring reduce-scatter (all-gather: same) over levels with k[L] participants each:
    (n-1) alpha_max + max_L (n-1)/n S / (m_(L-1) B_L) over the spanned levels, m_(L-1) = prod(k below L)."""
    n = jnp.prod(k)
    s = spans(k) > 0
    inner = jnp.cumprod(jnp.concatenate([jnp.ones_like(k[:1]), k[:-1]]))
    per_level = jnp.where(s, (n - 1.0) / n * size_bytes / (inner * bw), 0.0)
    a = jnp.max(jnp.where(s, alpha, 0.0))
    return (n - 1.0) * a + jnp.max(per_level)


def _allreduce_s(algo, k, size_bytes, alpha, bw):
    """algo (space.DP_ALGOS): 0 multi-rail ring, 1 tree, 2 hierarchical."""
    return jnp.select([algo == 0, algo == 1],
                      [2.0 * multirail_ring_reduce_scatter_s(k, size_bytes, alpha, bw),
                       tree_allreduce_s(k, size_bytes, alpha, bw)],
                      hierarchical_allreduce_s(k, size_bytes, alpha, bw))


def dp_step_comm_s(sharding, algo, k_dp, k_inner, k_outer, grad_bytes, param_bytes, alpha, bw):
    """Per-step (gradient, parameter) communication seconds for the dp x cp group (before overlap).

    k_dp: participants per level of the whole group; k_inner/k_outer: the same split at the building
    boundary (hsdp shards inside, replicates across).
    """
    # reduce-scatter and all-gather each cost half an all-reduce of the same size (NCCL has no tree
    # reduce-scatter: 'tree' charges half a tree all-reduce, its reduce phase)
    ar = _allreduce_s(algo, k_dp, grad_bytes, alpha, bw)
    rs = 0.5 * ar
    ag = 0.5 * _allreduce_s(algo, k_dp, param_bytes, alpha, bw)
    shard = jnp.maximum(jnp.prod(k_inner), 1.0)
    hsdp_cross = _allreduce_s(algo, k_outer, grad_bytes / shard, alpha, bw)
    grad = jnp.select([sharding == 0, sharding <= 2, sharding == 3], [ar, rs, 0.0], hsdp_cross)
    param = jnp.select([sharding == 0, sharding <= 2], [0.0, ag], 0.0)
    return grad, param


def fsdp_microbatch_comm_s(sharding, k_dp, k_inner, layer_param_bytes_stage, grad_bytes_stage, alpha, bw):
    """Per-microbatch ZeRO-3 traffic: all-gather weights in forward and backward, reduce-scatter grads."""
    k = jnp.where(sharding == 4, k_inner, k_dp)
    ag = multirail_ring_reduce_scatter_s(k, layer_param_bytes_stage, alpha, bw)
    rs = multirail_ring_reduce_scatter_s(k, grad_bytes_stage, alpha, bw)
    return jnp.where(sharding >= 3, 2.0 * ag + rs, 0.0)


def exposed_s(comm, window, overlap_on, n_buckets):
    """What overlap cannot hide: at least the last bucket, at most everything."""
    hidden = jnp.maximum(comm - window, comm / n_buckets)
    return jnp.where(overlap_on, jnp.minimum(hidden, comm), comm)

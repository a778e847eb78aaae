"""Data-parallel synchronization: gradient reduction, parameter gathering, overlap with the backward pass.

Sharding (space.SHARDING): zero0 all-reduces gradients; zero1/zero2 (Megatron's distributed optimizer)
reduce-scatter gradients and all-gather updated 16-bit parameters; fsdp additionally gathers weights for
every microbatch's forward and backward and reduce-scatters its gradients (ZeRO-3); hsdp does the fsdp part
inside the building-local shard group and all-reduces the shard across buildings once per step.
Overlap: with `dp` overlap, bucketed reduction runs under the last microbatch's backward and the parameter
gather under the first microbatch's forward (Megatron --overlap-grad-reduce/--overlap-param-gather); what the
window cannot hide is exposed, and the last bucket always is.
"""
import jax.numpy as jnp

from .collectives import reduce_scatter_s, allreduce_s, ring_reduce_scatter_s

BUCKET_PARAMS = 4e7  # Megatron's default DDP bucket (40M parameters)


def dp_step_comm_s(sharding, algo, k_dp, k_inner, k_outer, grad_bytes, param_bytes, alpha, bw):
    """Per-step (gradient, parameter) communication seconds for the dp x cp group (before overlap).

    k_dp: participants per level of the whole group; k_inner/k_outer: the same split at the building
    boundary (hsdp shards inside, replicates across).
    """
    ar = allreduce_s(algo, k_dp, grad_bytes, alpha, bw)
    rs = reduce_scatter_s(algo, k_dp, grad_bytes, alpha, bw)
    ag = reduce_scatter_s(algo, k_dp, param_bytes, alpha, bw)
    shard = jnp.maximum(jnp.prod(k_inner), 1.0)
    hsdp_cross = allreduce_s(algo, k_outer, grad_bytes / shard, alpha, bw)
    grad = jnp.select([sharding == 0, sharding <= 2, sharding == 3], [ar, rs, 0.0], hsdp_cross)
    param = jnp.select([sharding == 0, sharding <= 2], [0.0, ag], 0.0)
    return grad, param


def fsdp_microbatch_comm_s(sharding, k_dp, k_inner, layer_param_bytes_stage, grad_bytes_stage, alpha, bw):
    """Per-microbatch ZeRO-3 traffic: all-gather weights in forward and backward, reduce-scatter grads."""
    k = jnp.where(sharding == 4, k_inner, k_dp)
    ag = ring_reduce_scatter_s(k, layer_param_bytes_stage, alpha, bw)
    rs = ring_reduce_scatter_s(k, grad_bytes_stage, alpha, bw)
    return jnp.where(sharding >= 3, 2.0 * ag + rs, 0.0)


def exposed_s(comm, window, overlap_on, n_buckets):
    """What overlap cannot hide: at least the last bucket, at most everything."""
    hidden = jnp.maximum(comm - window, comm / n_buckets)
    return jnp.where(overlap_on, jnp.minimum(hidden, comm), comm)

"""What communication overlapped with compute leaves exposed. Every term that hides a collective under
compute goes through ``exposed_s``, so the rule (and, later, the price of overlap) lives in one place.

A collective of ``comm_s`` seconds overlapped with a compute window of ``window_s`` seconds is exposed for
``max(comm_s - window_s, floor)``, never more than ``comm_s``. The floor is the part no schedule can hide: with
the communication split into ``chunks`` pieces (buckets, layers), the last piece waits for the last compute
(Megatron's bucketed --overlap-grad-reduce; PyTorch FSDP's per-layer prefetch), so floor = comm_s / chunks.
"""
import jax.numpy as jnp


def exposed_s(comm_s, window_s, overlapped, chunks=None):
    floor = 0.0 if chunks is None else comm_s / chunks
    hidden_fail = jnp.maximum(comm_s - window_s, floor)
    return jnp.where(overlapped, jnp.minimum(hidden_fail, comm_s), comm_s)

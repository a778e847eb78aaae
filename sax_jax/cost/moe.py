"""Expert parallelism: dispatch + combine all-to-all per MoE layer over the ep group.

Bytes per GPU per all-to-all ~ tokens x h x 2 bytes x top_k x (1 - locality), scaled by the load
imbalance (max/mean expert load), which also scales expert compute (compute.py). The ep group is carved
from the innermost part of the data-parallel axis (Megatron-Core's expert-data layout).
"""
import jax.numpy as jnp

from .collectives import all_to_all_s


def moe_alltoall_bytes(tokens_per_gpu, m, act_bytes=2.0):
    return tokens_per_gpu * m.hidden * act_bytes * m.top_k * (1.0 - m.locality) * m.imbalance


def moe_layer_comm_s(m_ep, k_ep, tokens_per_gpu, m, alpha, bw):
    """(forward, backward) seconds of one MoE layer's all-to-alls: dispatch + combine, twice in backward."""
    one = all_to_all_s(m_ep, k_ep, moe_alltoall_bytes(tokens_per_gpu, m), alpha, bw)
    one = jnp.where(m.experts > 0, one, 0.0)
    return 2.0 * one, 4.0 * one

"""Activation offloading to host memory: what it saves in HBM and what it costs when the copies outrun the compute.

Transformer Engine's CPU offloading (Megatron-Core ``cpu_offloading_num_layers``; TE ``get_cpu_offload_context``)
copies the saved activations of the first N layers to host memory on a side stream after each layer's forward and
copies them back during the backward, one layer ahead, double-buffered: the copy of layer i runs beside the
forward (backward) of the layer after it, and that layer's successor waits for it. Per offloaded layer and
microbatch the stage therefore waits max(0, copy - that layer's kernels), once each way; the copy moves the
layer's stored activations (memory.activation_bytes_per_layer) over the GPU's host link (GpuSpec.host_GBps, per
direction). The copies' HBM traffic (one read or write per byte, against several TB/s) is left out. Megatron-Core
allows it only with one pipeline stage and no recomputation (TransformerConfig checks); the model applies it to any
design and leaves that choice to the scenario.
"""
import jax.numpy as jnp

from .memory import activation_bytes_per_layer
from .terms import Term


def offloaded_layers(train, layers_stage):
    """Layers of the stage whose activations live in host memory."""
    return jnp.minimum(train.offload_layers, layers_stage)


def offload_term(ctx, d, model, train, gpu):
    """(Term: the waits per microbatch on the stage, forward part of them in seconds)."""
    n = offloaded_layers(train, ctx.layers_stage)
    layer_bytes = activation_bytes_per_layer(d.mbs, ctx.seq, d.tp, d.cp, d.recompute, model, train,
                                             gpu.gemm_input_bytes, ctx.recompute_share)
    copy_s = jnp.where(gpu.host_Bps > 0, layer_bytes / jnp.where(gpu.host_Bps > 0, gpu.host_Bps, 1.0), 0.0)
    fwd_s = n * jnp.maximum(copy_s - ctx.layer.fwd_s, 0.0)
    bwd_s = n * jnp.maximum(copy_s - ctx.layer.bwd_s, 0.0)
    return Term(stage_s=fwd_s + bwd_s), fwd_s

"""What a pipeline stage pays per layer: the weight on which the layers are split over the stages.

A stage's compute, its recompute, and the TP, CP and EP communication it leaves exposed are each the per-layer cost
times the stage's layers, so one layer's worth is the sum of those terms on a one-layer stage with no output layer.
The ZeRO-3 gathers, overlapped with the stage's whole compute, stay with the dp term. Both the homogeneous stage
choice (context.restaged) and the heterogeneous split over GPU types (hetero.py) weigh stages on this, so that a
stage's communication moves the split as its kernels do.
"""
import jax.numpy as jnp

from .compute import compute_term
from .context_parallel import cp_term
from .moe import ep_term
from .tensor_parallel import tp_term


def stage_layer_s(ctx, d, params):
    """One layer's seconds on a pipeline stage under ``ctx`` (context.Context) for design ``d``: kernels and their
    recompute, plus the tensor-, context- and expert-parallel communication the stage leaves exposed per layer."""
    model, train, gpu = params.model, params.train, params.gpu
    zero = jnp.zeros_like(ctx.logits_fwd_s)
    one = ctx._replace(layers_stage=jnp.ones_like(ctx.layers_stage), logits_fwd_s=zero, logits_bwd_s=zero, mtp_s=zero)
    return (compute_term(one, d, model).stage_s + tp_term(one, d, train, gpu, model)[0].stage_s
            + cp_term(one, d, model, train, gpu)[0].stage_s + ep_term(one, d, model, train, gpu, params.experts)[0].stage_s)


def last_stage_extra_s(ctx):
    """What only the last stage runs, per microbatch: the output layer and loss (forward and backward) and MTP."""
    return ctx.last_logits_fwd_s + ctx.last_logits_bwd_s + ctx.last_mtp_s

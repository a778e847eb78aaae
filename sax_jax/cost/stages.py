"""How the layers are split over pipeline stages, and which stage is the slowest.

Layers go to pp x vpp chunks, ceil(units / (pp vpp)) per chunk; the last stage also runs the output layer and
the loss. Megatron-Core can count the embedding and the loss as one layer each when it splits the pipeline
(account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split; set by Megatron-Bridge's 405B
recipes, e.g. PP 16 x VP 8 = 128 chunks for 126 layers + 2): the last stage then holds one layer less. The
model takes whichever split makes the slowest stage faster (as the recipes choose it), and only the split that
counts them allows pp x vpp = layers + 1 or + 2.
"""
import jax.numpy as jnp

EXTRA_PIPELINE_UNITS = 2.0  # the embedding and the loss, when counted as layers


def slowest_stage(layers, pp, vpp, layer_s, logits_s, mtp_s=0.0):
    """(layers on the slowest stage, 1 if it also runs the output layer and loss else 0)."""
    n_layers, with_logits, _ = stage_layers(layers, pp, vpp, layer_s, logits_s, mtp_s)
    return n_layers, with_logits


def stage_layers(layers, pp, vpp, layer_s, logits_s, mtp_s=0.0):
    """(layers on the slowest stage, 1 if it also runs the output layer and loss else 0, layers on every stage but
    the last).

    layer_s: one layer's forward + backward seconds; logits_s: the output layer's and loss's; mtp_s: the
    multi-token-prediction modules', which also run on the last stage. Megatron-Core's pipeline layouts count each
    MTP module as units of their own (Megatron-Bridge's DeepSeek-V3 layouts end in "...mL": MTP, loss), so the
    counted split moves ceil(mtp_s / layer_s) more layers off the last stage."""
    extra = logits_s + mtp_s
    mtp_units = jnp.ceil(mtp_s / layer_s - 1e-6)
    plain = jnp.ceil(layers / (pp * vpp) - 1e-6) * vpp  # last stage: `plain` layers + logits (+ MTP)
    # last stage: counted - 1 - mtp_units layers + logits + MTP
    counted = jnp.ceil((layers + EXTRA_PIPELINE_UNITS + mtp_units) / (pp * vpp) - 1e-6) * vpp
    last_layers = jnp.maximum(counted - 1.0 - mtp_units, 0.0)
    t_plain = plain * layer_s + extra
    # with counted units the last stage is slower only if its extra work > the layers it gave up
    last_heavier = extra > (counted - last_layers) * layer_s
    t_counted = jnp.where(last_heavier, last_layers * layer_s + extra, counted * layer_s)
    use_counted = (pp > 1.0) & ((t_counted < t_plain) | (pp * vpp > layers))
    n_layers = jnp.where(use_counted, jnp.where(last_heavier, last_layers, counted), plain)
    with_logits = jnp.where(use_counted, jnp.where(last_heavier, 1.0, 0.0), 1.0)
    return n_layers, with_logits, jnp.where(use_counted, counted, plain)

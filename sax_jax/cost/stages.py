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


def slowest_stage(layers, pp, vpp, layer_s, logits_s):
    """(layers on the slowest stage, 1 if it also runs the output layer and loss else 0).

    layer_s: one layer's forward + backward seconds; logits_s: the output layer's and loss's."""
    plain = jnp.ceil(layers / (pp * vpp) - 1e-6) * vpp  # last stage: `plain` layers + logits
    counted = jnp.ceil((layers + EXTRA_PIPELINE_UNITS) / (pp * vpp) - 1e-6) * vpp  # last: counted - 1 + logits
    t_plain = plain * layer_s + logits_s
    last_heavier = logits_s > layer_s  # with counted units the last stage is slower only if logits > a layer
    t_counted = jnp.where(last_heavier, (counted - 1.0) * layer_s + logits_s, counted * layer_s)
    use_counted = (pp > 1.0) & ((t_counted < t_plain) | (pp * vpp > layers))
    n_layers = jnp.where(use_counted, jnp.where(last_heavier, counted - 1.0, counted), plain)
    with_logits = jnp.where(use_counted, jnp.where(last_heavier, 1.0, 0.0), 1.0)
    return n_layers, with_logits

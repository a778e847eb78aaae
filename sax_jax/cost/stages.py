"""How the layers are split over pipeline stages, and which stage is the slowest.

Layers go to pp x vpp chunks, ceil(layers / (pp vpp)) per chunk, filled in order (chunk k on stage k mod pp), so a
remainder leaves the last chunk short and the last stage, which also runs the output layer and the loss, holds
fewer layers than the first. That is the layout Megatron-Bridge's recipes write out where the layers do not divide
(pipeline_model_parallel_layout, DeepSeek-V3 and Kimi-K2: 61 layers at PP 4 x VP 4 are 16, 16, 16 and 13 layers +
MTP + loss; recipes/deepseek/deepseek_v3.py, set_deepseek_v3_pipeline_model_parallel_layout). Megatron-Core can
instead count the embedding and the loss as one layer each (account_for_embedding_in_pipeline_split,
account_for_loss_in_pipeline_split; set by Megatron-Bridge's 405B recipes, e.g. PP 16 x VP 8 = 128 chunks for
126 layers + 2): the last stage then holds one layer less. Training.pipeline_split names the split a run uses;
"auto" (a plan) takes whichever makes the slowest stage faster. Only the split that counts them allows
pp x vpp = layers + 1 or + 2.
"""
import jax.numpy as jnp

EXTRA_PIPELINE_UNITS = 2.0  # the embedding and the loss, when counted as layers
SPLIT_AUTO, SPLIT_FILLED, SPLIT_COUNTED = 0.0, 1.0, 2.0  # Training.pipeline_split (specs.PIPELINE_SPLITS order)


def slowest_stage(layers, pp, vpp, layer_s, logits_s, mtp_s=0.0, split=SPLIT_AUTO):
    """(layers on the slowest stage, 1 if it also runs the output layer and loss else 0)."""
    n_layers, with_logits, _, _ = stage_layers(layers, pp, vpp, layer_s, logits_s, mtp_s, split)
    return n_layers, with_logits


def filled_chunks(layers, pp, vpp):
    """(layers on the first stage, on the last) when chunks of c = ceil(layers / (pp vpp)) layers are filled in
    order: `full` chunks hold c, the next one the remainder, the rest none; stage s holds chunks s, s + pp, ..."""
    c = jnp.ceil(layers / (pp * vpp) - 1e-6)
    full = jnp.floor(layers / c + 1e-6)
    rem = layers - full * c
    partial = (rem > 0.0) & (full < pp * vpp)
    at = jnp.mod(full, pp)  # the stage holding the short chunk
    first = c * jnp.minimum(jnp.ceil(full / pp - 1e-6), vpp) + jnp.where(partial & (at == 0.0), rem, 0.0)
    last = c * jnp.minimum(jnp.floor(full / pp + 1e-6), vpp) + jnp.where(partial & (at == pp - 1.0), rem, 0.0)
    return first, last


def stage_layers(layers, pp, vpp, layer_s, logits_s, mtp_s=0.0, split=SPLIT_AUTO):
    """(layers on the slowest stage, 1 if it also runs the output layer and loss else 0, the most layers any stage
    but the last holds: the first stage's when the chunks are filled in order, a middle stage's when the embedding
    counts as a layer, and the first stage's layers: the stage with the most microbatches in flight, whose memory
    the model checks).

    layer_s: one layer's forward + backward seconds; logits_s: the output layer's and loss's; mtp_s: the
    multi-token-prediction modules', which also run on the last stage. Megatron-Core's pipeline layouts count each
    MTP module as units of their own (Megatron-Bridge's DeepSeek-V3 layouts end in "...mL": MTP, loss), so the
    counted split moves ceil(mtp_s / layer_s) more layers off the last stage. split: Training.pipeline_split (auto
    takes the faster of the two); pp x vpp > layers always counts (as before the filled split)."""
    extra = logits_s + mtp_s
    mtp_units = jnp.ceil(mtp_s / layer_s - 1e-6)
    # the first stage holds the most layers, the last the output layer (one stage: both are all the layers)
    first, last = filled_chunks(layers, pp, vpp)
    plain_last_slower = last * layer_s + extra >= first * layer_s
    t_plain = jnp.where(plain_last_slower, last * layer_s + extra, first * layer_s)
    plain = jnp.where(plain_last_slower, last, first)
    # last stage: counted - 1 - mtp_units layers + logits + MTP; the first counted - 1 + the embedding
    counted = jnp.ceil((layers + EXTRA_PIPELINE_UNITS + mtp_units) / (pp * vpp) - 1e-6) * vpp
    last_layers = jnp.maximum(counted - 1.0 - mtp_units, 0.0)
    # with counted units the last stage is slower only if its extra work > the layers it gave up
    last_heavier = extra > (counted - last_layers) * layer_s
    t_counted = jnp.where(last_heavier, last_layers * layer_s + extra, counted * layer_s)
    use_counted = (pp > 1.0) & (((t_counted < t_plain) & (split == SPLIT_AUTO)) | (split == SPLIT_COUNTED)
                                | (pp * vpp > layers))
    n_layers = jnp.where(use_counted, jnp.where(last_heavier, last_layers, counted), plain)
    with_logits = jnp.where(use_counted, jnp.where(last_heavier, 1.0, 0.0), jnp.where(plain_last_slower, 1.0, 0.0))
    # the first stage holds the embedding: counted as a unit, it leaves counted - 1 layers there (one stage: all)
    first_layers = jnp.where(use_counted, counted - 1.0, first)
    return n_layers, with_logits, jnp.where(use_counted, counted, first), first_layers

"""LoRA fine-tuning (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", arXiv 2106.09685):
the base weights W are frozen and each adapted linear layer adds a trainable low-rank path x A B, A (in x r),
B (r x out). Adapted layers (Megatron-Bridge LoRA target_modules default): QKV, attention output, fc1, fc2.

What changes against full training, per layer (the model's terms that read it):
  * compute: the backward of a frozen linear layer needs only its input gradient dX = dY W^T (one GEMM, 1x
    the forward), not its weight gradient (the other 1x): linear backward 1x instead of 2x. The adapters add
    2 tokens r (in + out) forward FLOPs, and a full 2x backward (both their gradients), as rank-r GEMMs.
  * zero-bubble schedules defer only weight-gradient GEMMs: those of the adapters.
  * model state: frozen weights keep only their 16-bit copy (no gradient, no optimizer state); the adapters
    keep weights + gradients + Adam state like any trained weight.
  * data-parallel sync and the optimizer step: the adapters' gradients and parameters only.
  * activations: unchanged. The frozen layer's input gradient needs no saved input, but the adapter's A
    gradient needs the same input x, so the same tensors stay saved (plus the r-wide x A, left out: r << h).
Adapters are counted on the GQA widths and the dense ffn (the LoRA runs modelled are dense; experts and MLA
projections would add their own adapters) and split over TP like the layer they adapt.
"""


def adapter_params_per_layer(model, train):
    """LoRA adapter parameters of one layer (whole layer, before TP): r (in + out) summed over QKV (h ->
    a d + 2 g d), output (a d -> h), fc1 (h -> (mats - 1) f) and fc2 (f -> h) = r (4h + 2ad + 2gd + mats f);
    0 without LoRA."""
    h, d = model.hidden, model.head_dim
    widths = 4.0 * h + 2.0 * model.heads * d + 2.0 * model.kv_heads * d + model.mlp_mats * model.ffn
    return train.lora * train.lora_rank * widths

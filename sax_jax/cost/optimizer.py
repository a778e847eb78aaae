"""The optimizer step: Adam over the parameters one GPU updates, bound by HBM bandwidth.

Traffic per locally-updated parameter: read fp32 master, m, v and grad (16 B), write master, m, v (12 B) and the
16-bit copy (2 B). The update is sharded like the optimizer state: not at all under zero0, over the building's
shard group under hsdp, over the whole dp x cp group otherwise; expert weights over their expert-data-parallel
ranks only (dp x cp / ep unless folding splits the experts over fewer ranks than the dense layers), as
Megatron-Core's distributed optimizer shards them (its expert buffers use the expert-data-parallel group), and
as cost/dp.py counts their state in memory (dp.expert_shards). At EP = DP each GPU updates all of its experts' weights.
"""
import jax.numpy as jnp

from ..space import Sharding
from .dp import expert_shards
from .terms import Term

ADAM_BYTES_PER_PARAM = 30.0


def optimizer_term(ctx, d, gpu) -> Term:
    shards = jnp.select([d.sharding == Sharding.ZERO0, d.sharding == Sharding.HSDP],
                        [1.0, ctx.grad_shards_building], ctx.grad_shards)
    # LoRA (cost/lora.py): only the adapters are updated
    updated = jnp.where(ctx.params_adapter > 0, ctx.params_adapter / shards,
                        ctx.params_dense / shards + ctx.params_expert / expert_shards(shards, ctx, d))
    return Term(step_s=updated * ADAM_BYTES_PER_PARAM / (gpu.hbm_Bps * gpu.memory_bound))

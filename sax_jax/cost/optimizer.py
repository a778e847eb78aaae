"""The optimizer step: Adam over the parameters one GPU updates, bound by HBM bandwidth.

Traffic per locally-updated parameter: read the optimizer state (fp32 master, m, v: 12 B) and the grad (4 B), write
the state back (12 B) and the 16-bit copy (2 B), 30 B; an optimizer that keeps its state in 16-bit (Apex
DistributedFusedAdam with dtype bf16: 6 B of state) moves 2 x 6 + 6 = 18 B. The update is sharded like the optimizer
state: not at all under zero0, over its shard group under hsdp (a building or a node; every dp rank under
hsdp_outer optim), over the whole dp x cp group otherwise;
expert weights over their expert-data-parallel ranks only (dp x cp / ep unless folding splits the experts over fewer
ranks than the dense layers), as Megatron-Core's distributed optimizer shards them (its expert buffers use the
expert-data-parallel group), and as cost/dp.py counts their state in memory (dp.expert_shards). At EP = DP each GPU
updates all of its experts' weights.
"""
import jax.numpy as jnp

from ..space import Sharding
from .dp import expert_shards
from .terms import Term

GRAD_READ_WEIGHT_WRITE_BYTES = 6.0  # the fp32 gradient read and the 16-bit weight written per parameter


def adam_traffic_bytes(opt_bytes):
    """HBM bytes the Adam update moves per parameter: its state read and written, the gradient and the weight."""
    return 2.0 * opt_bytes + GRAD_READ_WEIGHT_WRITE_BYTES


ADAM_BYTES_PER_PARAM = adam_traffic_bytes(12.0)  # fp32 master, m and v: 30 B


def optimizer_term(ctx, d, gpu, train) -> Term:
    # sharded like the optimizer state (context.opt_shards), not at all under zero0
    shards = jnp.where(d.sharding == Sharding.ZERO0, 1.0, ctx.opt_shards)
    # LoRA (cost/lora.py): only the adapters are updated
    updated = jnp.where(ctx.params_adapter > 0, ctx.params_adapter / shards,
                        ctx.params_dense / shards + ctx.params_expert / expert_shards(shards, ctx, d))
    return Term(step_s=updated * adam_traffic_bytes(train.opt_bytes) / (gpu.hbm_Bps * gpu.memory_bound))

"""Expert parallelism: dispatch + combine all-to-all per MoE layer over the ep group.

Bytes per GPU per all-to-all ~ tokens x h x 2 bytes x top_k x (1 - locality), scaled by the load
imbalance (max/mean expert load), which also scales expert compute (compute.py). The ep group is carved
from the innermost part of the data-parallel axis (Megatron-Core's expert-data layout). Per MoE layer the
forward runs dispatch + combine (2 all-to-alls) and the backward their gradients (2: the gradient of an
all-to-all is the reverse all-to-all of the same bytes, combine's before dispatch's; Megatron-Core's
_AllToAll autograd function is exactly that), full recompute the forward's again, and so does selective recompute
of the MoE module (Training.recompute_modules "moe"): Megatron-Core checkpoints the whole MoELayer forward (router,
dispatch all-to-all, experts, combine all-to-all; megatron/core/transformer/moe/moe_layer.py runs
tensor_parallel.checkpoint over it when moe_layer_recompute), so the layer's backward starts by running both
forward all-to-alls again.
"""
import jax
import jax.numpy as jnp

from ..space import Recompute
from .collectives import all_to_all_levels_s, bottleneck, launch_s
from .compute import dispatched_width
from .expert_placement import level_fractions
from .overlap import exposed_s, nccl_price
from .terms import Term

FWD_ALLTOALLS = 2.0
BWD_ALLTOALLS = 2.0


def moe_alltoall_bytes(tokens_per_gpu, model, act_bytes=2.0):
    # LatentMoE dispatches the tokens after their down projection: latent-wide rows instead of hidden-wide
    return tokens_per_gpu * dispatched_width(model) * act_bytes * model.top_k * (1.0 - model.locality) * model.imbalance


def distinct_ratio(n, model):
    """Copies of a token sent to distinct units / routed copies, for routing spread evenly over n units of the EP
    group (E experts, E / n per unit, top_k distinct experts per token): a unit receives the token if any of its
    E / n experts is picked, probability 1 - q with q = C(E - E/n, k) / C(E, k) (hypergeometric), so n (1 - q)
    copies instead of k, the same ratio for the units other than the sender's. 1 for n = 1."""
    n = jnp.maximum(n, 1.0)
    e, k = jnp.maximum(model.experts, 1.0), jnp.maximum(model.top_k, 1.0)
    rest = e - e / n  # experts on the other units
    log_q = (jax.scipy.special.gammaln(rest + 1.0) - jax.scipy.special.gammaln(jnp.maximum(rest - k, 0.0) + 1.0)
             - jax.scipy.special.gammaln(e + 1.0) + jax.scipy.special.gammaln(e - k + 1.0))
    q = jnp.where(rest >= k, jnp.exp(log_q), 0.0)
    return jnp.where(n > 1.0, n * (1.0 - q) / k, 1.0)


def node_dedup_ratio(members, is_network, model):
    """Copies of a token that cross the network with per-node dedup / without it (distinct_ratio over the EP
    group's nodes): (n - 1)(1 - q) copies instead of k (n - 1) / n. 1 inside one node."""
    return distinct_ratio(jnp.max(jnp.where(is_network, members, 1.0)) / jnp.max(jnp.where(is_network, 1.0, members)),
                          model)


def moe_layer_comm_s(k_ep, level_bytes, model, alpha_s, bw_Bps):
    """(forward, backward) seconds of one MoE layer's all-to-alls: dispatch + combine, twice in backward.
    level_bytes [L]: what one all-to-all sends through each level (collectives.all_to_all_levels_s)."""
    one = all_to_all_levels_s(k_ep, level_bytes, alpha_s, bw_Bps) + launch_s(k_ep, 1.0)
    one = jnp.where(model.experts > 0, one, 0.0)
    return FWD_ALLTOALLS * one, BWD_ALLTOALLS * one


def unpaired_share(pp, vpp, microbatches):
    """Share of a stage's forward and backward passes that Megatron-Core's combined 1F1B (the EP all-to-all overlap)
    runs with no other microbatch's pass beside them, so their all-to-alls stay exposed. Without pipelining the first
    microbatch's forward and the last one's backward run alone (combined_1f1b.py,
    combined_1f1b_schedule_for_no_pipelining: the steady loop pairs num_microbatches - 1 of them); interleaved, the
    first stage's warmup forwards, (pp - 1) 2 + (vpp - 1) pp + 1 model chunks (schedules.py: the interleaved warmup
    count plus the one microbatch the overlap adds), and as many cooldown backwards, of its m vpp chunk passes each
    way. Megatron-Core runs the overlap with pp > 1 only interleaved (it asserts a virtual pipeline); a plain 1F1B
    pipeline is taken as the same scheme on its own warmup, pp - 1 + 1 microbatches. pp, vpp: the design's;
    microbatches: per pipeline and step."""
    warmup = jnp.where(vpp > 1.0, 2.0 * (pp - 1.0) + (vpp - 1.0) * pp, pp - 1.0) + 1.0
    return jnp.minimum(warmup / jnp.maximum(microbatches * vpp, 1.0), 1.0)


def ep_term(ctx, d, model, train, gpu, tables=None):
    """(Term, forward seconds per layer averaged over the layers: MoE layers are a fraction of them). tables: the
    scenario's expert placement tables (None: the model's constant locality and imbalance)."""
    members = ctx.ep.members
    if tables is None:  # an even spread over the group (all_to_all_s): (m_L - m_(L-1)) / m of S leaves through L
        below = jnp.concatenate([jnp.ones_like(members[:1]), members[:-1]])
        level_bytes = (members - below) / members[-1] * moe_alltoall_bytes(ctx.tokens_gpu, model)
        # DeepEP / HybridEP also send a token once to each destination GPU, which sums its experts' outputs before
        # the combine (DeepEP get_dispatch_layout: is_token_in_rank, one row per token and rank): over NVLink the
        # copies go to the distinct GPUs of the group, not one per routed expert
        level_bytes = level_bytes * jnp.where(train.ep_dedup > 0, jnp.where(
            ctx.is_network, node_dedup_ratio(members, ctx.is_network, model), distinct_ratio(members[-1], model)), 1.0)
    else:
        # every token's top_k copies, the share crossing each level; the busiest receiver gets imbalance x the mean
        dispatched = moe_alltoall_bytes(ctx.tokens_gpu, model._replace(locality=0.0, imbalance=1.0))
        level_share = level_fractions(tables, d, members)
        level_bytes = dispatched * level_share * model.imbalance
    f_moe_s, b_moe_s = moe_layer_comm_s(ctx.ep.participants, level_bytes, model, ctx.ep_net.alpha_s,
                                        ctx.ep_net.bw_Bps)
    fwd_layer_s, bwd_layer_s = model.moe_fraction * f_moe_s, model.moe_fraction * b_moe_s
    # Training.ep_overlap: in the 1F1B steady state Megatron-Core merges one microbatch's forward with another's
    # backward and runs each one's all-to-alls beside the other's layer compute, so a layer's all-to-alls hide under
    # a layer's forward + backward (overlap.exposed_s, with the SMs the communication kernels take). Needs two
    # microbatches in flight, and the passes with no partner keep theirs exposed (unpaired_share).
    overlapped = (train.ep_overlap > 0) & (ctx.microbatches > 1.0)
    comm_s = fwd_layer_s + bwd_layer_s
    exposed = exposed_s(comm_s, ctx.layer.fwd_s + ctx.layer.bwd_s, overlapped,
                        chunks=1.0 / unpaired_share(d.pp, d.vpp, ctx.microbatches), slowdown=nccl_price(gpu))
    kept = jnp.where(comm_s > 0, exposed / jnp.where(comm_s > 0, comm_s, 1.0), 1.0)
    fwd_layer_s, bwd_layer_s = fwd_layer_s * kept, bwd_layer_s * kept
    # layers whose forward all-to-alls run twice: the fully recomputed ones, or every MoE layer when selective
    # recompute names the MoE module (module docstring)
    again = jnp.where(d.recompute == Recompute.SELECTIVE, train.rc_moe, ctx.recompute_share)
    stage_s = ctx.layers_stage * (fwd_layer_s + bwd_layer_s + again * fwd_layer_s)

    alltoalls = FWD_ALLTOALLS * (1.0 + again) + BWD_ALLTOALLS
    if tables is None:
        leaving = members - jnp.concatenate([jnp.ones_like(members[:1]), members[:-1]])  # members outside each level
        per_gpu = alltoalls * moe_alltoall_bytes(ctx.tokens_gpu, model) * jnp.sum(ctx.xb * leaving / d.ep)
    else:  # the mean sender's bytes (the job's traffic), not the busiest receiver's
        per_gpu = alltoalls * dispatched * jnp.sum(ctx.xb * level_share)
    cross = ctx.microbatches * ctx.layers_stage * model.moe_fraction * per_gpu * train.n_gpus
    return Term(stage_s=stage_s, step_s=replica_sync_s(ctx, model, train, tables), cross_bytes=cross), fwd_layer_s


def replica_sync_s(ctx, model, train, tables):
    """Redundant expert replicas (EPLB) hold copies whose gradients must be summed with their primary's every step:
    each replica holder exchanges its replicas' gradients with the primary's rank inside the EP group (a pairwise
    all-reduce: S/B each way at the slowest level the group spans, plus its latency), and the sum is applied to
    both. Their memory and their share of the expert data-parallel reduction come with the expert parameters
    (memory.params_per_gpu x expert_slots)."""
    if tables is None:
        return 0.0
    replica_bytes = ctx.params_expert * (1.0 - 1.0 / model.expert_slots) * train.grad_reduce_bytes
    alpha_s, bw_Bps = bottleneck(ctx.ep.participants, ctx.alpha_grad_s, ctx.bw_grad_Bps)
    sync = 2.0 * alpha_s + replica_bytes / bw_Bps
    return jnp.where(model.expert_slots > 1.0, sync, 0.0)

"""Low-communication data parallelism across workers (buildings or regions): DiLoCo and streaming DiLoCo.

DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of Language Models", arXiv
2311.08105, Algorithm 1): each worker (a building or a region, ``Training.diloco_workers``) takes H inner steps
(``sync_every``) with its own optimizer, syncing gradients only among its own GPUs (context.grad_k is then the
part of the dp x cp group inside one worker, so dp.py's every-step terms cost the inner sync); then the workers
all-reduce the outer gradient (parameters at the last sync minus now) and apply the outer optimizer. The outer
all-reduce blocks the step it follows; amortized over the H steps it costs outer_s / H per step.

    outer_s = AR(k_outer, P b_o / S) + AG(k_inner, P b_p)           [seconds, once per H steps]

P: parameters one GPU holds (the stage's share; LoRA: the adapters), S: the GPUs of one worker that share a
copy of them (the inner dp x cp group), b_o: outer-gradient bytes on the wire (``outer_precision``), b_p: 16-bit
parameters. Each GPU all-reduces its 1/S slice of the outer gradient with its counterparts in the other workers
(every GPU of a worker sends at once, so the level's per-GPU bandwidth is the one when every GPU sends:
ctx.bw_Bps), then the worker all-gathers the updated parameters (half an all-reduce of the same algorithm).
Outer gradients are not dropped: the outer sync uses the levels' plain latency and bandwidth, not a
bounded-loss transport's gradient path.

Streaming DiLoCo (Douillard et al. 2025, "Streaming DiLoCo with overlapping communication", arXiv 2501.18512,
sections 2.2-2.3): the model in K fragments (``streaming_fragments``), fragment j synced at steps j H/K mod H;
each fragment's sync overlaps the next tau inner steps (``streaming_overlap_steps``), at most the H/K steps
before that fragment is synced again. Per step: K/H fragment syncs, each exposed for what its window of
min(tau, H/K) inner steps cannot hide (overlap.exposed_s, with the compute slowdown of the hidden part).
Contention of the outer traffic with the inner sync on the worker's own NICs is left out.

With H = 1 (or when the group has no member in another worker) the design is synchronous data parallelism: the
inner sync is the whole group's and this term is 0 (context.local_sync).

Training efficiency is an input: ``Training.diloco_token_multiplier`` gives the tokens DiLoCo needs to reach the
synchronous run's loss, relative to it, per H (log-linear in between); step.py divides the tokens/s by it.
"""
import jax.numpy as jnp

from ..space import OUTER_BYTES, DpSync
from .collectives import NCCL_BASE_LATENCY_S
from .dp import BUCKET_PARAMS, _allreduce_s, allreduce_bytes_per_level
from .overlap import exposed_s, nccl_price
from .terms import Term


def tokens_multiplier(train, sync_every, local_sync):
    """Tokens to the synchronous run's loss / its tokens at H = sync_every (1 when the design syncs every step)."""
    log_h = jnp.log(jnp.maximum(sync_every, 1.0))
    return jnp.where(local_sync, jnp.interp(log_h, train.token_log_h, train.token_mult), 1.0)


def outer_sync_s(algo, k_outer, k_inner, outer_bytes_gpu, param_bytes_gpu, alpha_s, bw_Bps, server=False):
    """One outer synchronization (seconds): all-reduce of each GPU's 1/S slice of the outer gradient across the
    workers (k_outer participants per level), then the all-gather of the updated 16-bit parameters inside the
    worker (k_inner). outer_bytes_gpu: the slice's bytes; param_bytes_gpu: the GPU's whole parameter bytes.
    server (static): the program has a sharded parameter server (dp.server_paths), here on the same paths."""
    ar = _allreduce_s(algo, k_outer, outer_bytes_gpu, alpha_s, bw_Bps, ps=(alpha_s, bw_Bps) if server else None)
    return ar, inner_gather_s(algo, k_inner, param_bytes_gpu, alpha_s, bw_Bps, server)


def inner_gather_s(algo, k_inner, param_bytes_gpu, alpha_s, bw_Bps, server=False):
    """All-gather of the updated 16-bit parameters inside the worker (k_inner participants per level); 0 when one
    GPU holds the whole copy."""
    ag = 0.5 * _allreduce_s(algo, k_inner, param_bytes_gpu, alpha_s, bw_Bps, allreduce=False,
                            ps=(alpha_s, bw_Bps) if server else None)
    return jnp.where(jnp.prod(k_inner) > 1.0, ag, 0.0)


def outer_sync_term(ctx, d, train, gpu, inner_step_s, expert_sync=True):
    """The outer synchronization as a term: seconds per step (amortized, exposed part), cross-building bytes per
    step, and the outer optimizer state in memory. 0 unless ``ctx.local_sync``."""
    local = ctx.local_sync
    h = jnp.maximum(d.sync_every, 1.0)
    lora = train.lora > 0
    dense_gpu = jnp.where(lora, ctx.params_adapter, ctx.params_dense)
    expert_gpu = jnp.where(lora, 0.0, ctx.params_expert)
    trained_gpu = dense_gpu + expert_gpu
    # GPUs of one worker sharing a copy: the inner dp x cp group for the dense weights, the inner expert-data-parallel
    # group for the experts (dp.py: an EP group that takes the worker's dp ranks leaves each expert one holder there,
    # which sends all of it to the other workers)
    shards = jnp.maximum(ctx.grad_shards, 1.0)
    expert_shards = jnp.maximum(jnp.prod(ctx.edp_k), 1.0)

    def per_slice(bytes_per_weight):  # bytes of the GPU's slice of the worker's copy
        return dense_gpu * bytes_per_weight / shards + expert_gpu * bytes_per_weight / expert_shards

    slice_bytes = per_slice(outer_bytes(d.outer_precision))
    streaming = d.dp_sync == DpSync.STREAMING
    k = jnp.where(streaming, jnp.maximum(train.stream_fragments, 1.0), 1.0)  # fragments per sync round
    server = ctx.ps_net is not None
    ar_s, ag_s = outer_sync_s(d.dp_algo, ctx.grad_k_outer, ctx.grad_k, slice_bytes / k,
                              dense_gpu * train.param_bytes / k, ctx.alpha_s, ctx.bw_Bps, server)
    if expert_sync:  # static (Topology.expert_sync): a model without experts leaves this out
        # the experts' updated slices are gathered inside their own (expert-data-parallel) group
        ag_expert_s = inner_gather_s(d.dp_algo, ctx.edp_k, expert_gpu * train.param_bytes / k, ctx.alpha_s, ctx.bw_Bps,
                                     server)
        ag_s = ag_s + jnp.where(expert_gpu > 0, ag_expert_s, 0.0)
    buckets = jnp.maximum(trained_gpu / (k * BUCKET_PARAMS), 1.0)  # NCCL calls per fragment (both collectives)
    frag_s = ar_s + ag_s + 2.0 * buckets * NCCL_BASE_LATENCY_S
    window_s = jnp.minimum(train.stream_overlap_steps, h / k) * inner_step_s
    exposed = jnp.where(streaming, exposed_s(frag_s, window_s, True, None, nccl_price(gpu)), frag_s)
    step_s = jnp.where(local, k / h * exposed, 0.0)
    # bytes over campus/region links: hierarchical accounting as dp._cross_bytes, the whole model once per H steps
    per_byte = jnp.sum(ctx.xb * allreduce_bytes_per_level(d.dp_algo, ctx.grad_k_outer, server))
    cross = jnp.where(local, per_byte * slice_bytes * train.n_gpus / h, 0.0)
    memory = jnp.where(local, per_slice(train.outer_state_bytes), 0.0)
    return Term(step_s=step_s, cross_bytes=cross, memory_bytes=memory)


def outer_bytes(code):
    """Bytes per outer-gradient element on the wire of an ``outer_precision`` code."""
    return jnp.asarray(OUTER_BYTES)[code]

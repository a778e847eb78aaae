"""Frozen specs -> array pytrees for the jitted model.

Everything one might sweep (bandwidths, latencies, efficiencies, model sizes) is an array leaf, so a vmap
over hardware variants or a gradient w.r.t. a bandwidth needs no recompile. Only the number of levels and
transports (shapes) are static.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .cost.compute import ROPE_EAGER_BYTES_PER_ELEMENT
from .cost import quantize
from .cost.expert_placement import ExpertTables
from .cost.hetero import HeteroP
from .cost.provision import PriceP
from .space import placement_inner_table
from .specs import (BEST_KERNEL, GEMM_CEILING_NONE, MAX_LOSS_PHASES, MAX_TOKEN_POINTS, PIPELINE_SPLITS, SystemSpec,
                    Training, ModelSpec, precision_16bit)

CROSS_BUILDING_LEVELS = ("campus", "region")
NVLINK_LEVEL = "node"


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Topology:
    """Static structure of a system's hierarchy (shapes, not values): a pytree with no leaves, so it rides
    inside ``Params`` through jit and a different structure compiles a different program.

    building_level: index of the outermost level inside one building (HSDP shards its states over the levels
    up to here and replicates across the rest); decided by level name, like the cross-building levels.
    """
    level_names: tuple
    # True when the scenario's space provisions the cross-building network per design (co-design axes
    # xb_*; cost/provision.py). Static: without them the network stays one shared value for the whole batch, so
    # the system-only tables (ECMP, transport rounds, microbursts) are computed once, not once per design.
    provisioned: bool = False
    # True when the model has routed experts: the program then carries their expert-data-parallel sync
    # (cost/dp.py, cost/outer_sync.py), which a dense model's sweep would compute only to add zero. Static, like
    # `provisioned`; validation sets it for every case so that cases of any model stack into one program.
    expert_sync: bool = True
    # True when the scenario's space or a baseline has dp_algo ps (a sharded parameter server; evaluate() also sets
    # it for a design that asks for one): only then does the program carry the server's network paths and cost
    # branches (cost/context.py, cost/dp.py), which every other design's sweep would compute only to discard.
    parameter_server: bool = False

    @property
    def n_levels(self) -> int:
        return len(self.level_names)

    @property
    def cross_building(self) -> tuple:
        return tuple(n in CROSS_BUILDING_LEVELS for n in self.level_names)

    @property
    def is_network(self) -> tuple:
        return tuple(n != NVLINK_LEVEL for n in self.level_names)

    @property
    def building_level(self) -> int:
        inside = [i for i, cross in enumerate(self.cross_building) if not cross]
        return inside[-1] if inside else 0

    @property
    def inside_building(self) -> tuple:
        return tuple(i <= self.building_level for i in range(self.n_levels))

    @staticmethod
    def of(system: SystemSpec) -> "Topology":
        return Topology(tuple(lv.name for lv in system.levels))


class ModelP(NamedTuple):
    layers: jnp.ndarray
    hidden: jnp.ndarray
    heads: jnp.ndarray
    kv_heads: jnp.ndarray
    head_dim: jnp.ndarray
    ffn: jnp.ndarray
    mlp_mats: jnp.ndarray  # 3 gated (SwiGLU), 2 otherwise
    vocab: jnp.ndarray
    tied: jnp.ndarray  # 1 if input and output embeddings share weights
    dropout: jnp.ndarray  # 1 if the layers have dropout (its masks are stored for the backward)
    experts: jnp.ndarray  # 0 for dense models
    top_k: jnp.ndarray
    expert_ffn: jnp.ndarray
    shared_experts: jnp.ndarray
    moe_fraction: jnp.ndarray  # fraction of layers that are MoE
    imbalance: jnp.ndarray
    locality: jnp.ndarray
    # multi-head latent attention (specs.MLASpec); for GQA models mla = 0, the widths 0 and the head dims head_dim
    mla: jnp.ndarray  # 1 if the attention is MLA
    mla_down: jnp.ndarray  # MACs per token of the down projections W_DQ, W_DKV (duplicated on every TP rank)
    mla_up: jnp.ndarray  # MACs per token of the up projections W_UQ (or W_Q), W_UKV (split over TP)
    mla_rep_params: jnp.ndarray  # parameters duplicated on every TP rank (down projections, latent norms)
    mla_latent: jnp.ndarray  # per-token width of [c_Q, c_KV, k_rope]
    qk_head_dim: jnp.ndarray  # per-head width of the QK^T product (MLA: nope + rope)
    v_head_dim: jnp.ndarray  # per-head width of the PV product
    window: jnp.ndarray  # keys a query of a sliding-window layer sees (0: no windowed layers)
    window_fraction: jnp.ndarray  # fraction of the layers with windowed attention
    mla_out: jnp.ndarray  # MACs per token of the MLA output projection (grouped low-rank: both halves)
    kv_shared: jnp.ndarray  # 1: one key/value vector per token serves every head (DeepSeek-V4)
    # DeepSeek-V4's compressed attention (specs.CompressedAttentionSpec; compressed 0 and the rest neutral without):
    # every layer has the window band; csa_fraction of the layers add up to index_topk of the keys compressed
    # csa_ratio to one (chosen by an indexer of index_width = heads x dim), hca_fraction every key compressed
    # hca_ratio to one
    compressed: jnp.ndarray
    csa_fraction: jnp.ndarray
    csa_ratio: jnp.ndarray
    hca_fraction: jnp.ndarray
    hca_ratio: jnp.ndarray
    index_topk: jnp.ndarray
    index_width: jnp.ndarray
    hc_streams: jnp.ndarray  # residual streams (mHC expansion rate; 1: a plain residual)
    hc_params: jnp.ndarray  # their mixing weights per layer (specs.ModelSpec.hyper_params_per_layer; 0 for one stream)
    rope_scaled: jnp.ndarray  # 1 if the rotary cos/sin carry a YaRN attention factor other than 1
    # blocks (specs.HybridSpec): share of the layers with attention / an MLP or MoE / a Mamba-2 mixer; a
    # transformer has (1, 1, 0)
    attn_fraction: jnp.ndarray
    mlp_fraction: jnp.ndarray
    mamba_fraction: jnp.ndarray
    mamba_inner: jnp.ndarray  # d_in = mamba heads x head dim (0 without Mamba blocks)
    mamba_heads: jnp.ndarray
    mamba_gn: jnp.ndarray  # B and C width: groups x state
    mamba_state: jnp.ndarray
    mamba_conv: jnp.ndarray
    mamba_chunk: jnp.ndarray
    shared_ffn: jnp.ndarray  # width of each shared expert
    moe_latent: jnp.ndarray  # LatentMoE width of the routed experts (0: hidden)
    expert_slots: jnp.ndarray | float = 1.0  # experts held per GPU / (experts / ep): redundant replicas (EPLB)


class GpuP(NamedTuple):
    peak_flops: jnp.ndarray
    hbm_bytes: jnp.ndarray  # usable capacity
    hbm_Bps: jnp.ndarray
    gemm_max: jnp.ndarray
    gemm_half_flops: jnp.ndarray
    attention_max: jnp.ndarray
    attention_half_seq: jnp.ndarray  # keys per causal kernel call at which attention efficiency is half its max
    attention_half_seq_full: jnp.ndarray  # the same for calls without a causal diagonal (window, chunk, ring step)
    peak_flops_16bit: jnp.ndarray  # attention core and output layer: the BF16 peak even in FP8 training
    gemm_input_bytes: jnp.ndarray  # bytes/element of saved linear-layer inputs: 1 with FP8 GEMMs (TE), else 2
    memory_bound: jnp.ndarray
    layer_overhead_s: jnp.ndarray
    overlap_slowdown: jnp.ndarray  # fraction compute slows while a collective overlaps it: its SM share
    elementwise_factor: jnp.ndarray  # the framework's elementwise HBM bytes / Megatron-TE's fused kernels
    straggler_cv: jnp.ndarray  # coefficient of variation of one GPU's kernel time (cost/straggler.py)
    expert_gemm_s: jnp.ndarray | float = 0.0  # fixed time per local expert per grouped-GEMM pass (compute.py)
    gemm_half_graphed: jnp.ndarray | float = 0.0  # gemm_half_flops under a replayed CUDA graph (0: the same)
    moe_host_s: jnp.ndarray | float = 0.0  # host-bound time per MoE layer forward without CUDA graphs (compute.py)
    # compute slowdown beyond overlap_slowdown's SM share while a collective overlaps (HBM, L2, power), fitted
    # (Efficiency.overlap_contention, cost/overlap.nccl_price)
    overlap_contention: jnp.ndarray | float = 0.0
    dp_per_layer: jnp.ndarray | float = 0.0  # 1: the framework issues one dp collective per layer (Framework.dp_calls)
    # 1: ZeRO-3's backward gathers and reduce-scatters run between the layers' gradient computes, none hidden
    # (Framework.backward_prefetch "post")
    fsdp_backward_serial: jnp.ndarray | float = 0.0
    tp_micro_pipeline: jnp.ndarray | float = 0.0  # 1: TP overlap is PyTorch's async TP (Framework.tp_overlap)
    tp_overlappable: jnp.ndarray | float = 1.0  # 0: the framework has no TP overlap mechanism (tp_overlap "none")
    host_Bps: jnp.ndarray | float = 0.0  # GPU <-> host bandwidth per direction (activation offloading); 0: not given
    # HBM bytes per rotated query/key element of a YaRN-scaled RoPE the framework cannot fuse (Framework.
    # fused_scaled_rope, compute.ROPE_EAGER_BYTES_PER_ELEMENT); 0 where it fuses it
    rope_eager_bytes: jnp.ndarray | float = 0.0
    # eager frameworks (Framework.eager_*_bytes_per_element): extra bytes per hidden element per norm, and bytes per
    # rotated query/key element of a RoPE that always runs unfused; 0 for fused kernels
    norm_eager_bytes: jnp.ndarray | float = 0.0
    rope_always_bytes: jnp.ndarray | float = 0.0
    sm_share: jnp.ndarray | float = 0.0  # 1 / SMs: the compute one SM's worth of communication kernel takes
    # head width at which fused attention runs at half its wide-head speed (compute.head_dim_factor); 0: flat
    attention_head_dim_half: jnp.ndarray | float = 0.0
    # HBM bytes per element a low-precision recipe's casts move, standalone and for a norm-fed input
    # (cost/quantize.py); 0 for 16-bit GEMMs
    quant_bytes: jnp.ndarray | float = 0.0
    quant_norm_bytes: jnp.ndarray | float = 0.0
    # bytes per element of the casts on a sequence-parallel tensor all-gathered in 16 bits first (torchao rowwise,
    # quantize.GATHERED_16BIT); 0: the recipe casts the shard and gathers the low-precision copy
    quant_gathered_bytes: jnp.ndarray | float = 0.0
    # the part's measured maximum achievable matmul rate as a fraction of the peak of the GEMMs' precision and of the
    # 16-bit one (GpuSpec.gemm_ceiling): gemm_max is capped there (cost/compute.gemm_rate); GEMM_CEILING_NONE: no cap
    gemm_cap: jnp.ndarray | float = GEMM_CEILING_NONE
    gemm_cap_16bit: jnp.ndarray | float = GEMM_CEILING_NONE


class NetP(NamedTuple):
    """Per-level arrays, inner (node) to outer."""
    unit_gpus: jnp.ndarray
    bw_Bps: jnp.ndarray  # per GPU per direction, after NCCL bus efficiency
    latency_s: jnp.ndarray
    oversub: jnp.ndarray
    loss: jnp.ndarray
    paths: jnp.ndarray
    mtu_bytes: jnp.ndarray
    planes: jnp.ndarray
    fail_per_s: jnp.ndarray
    is_network: jnp.ndarray  # 0 for the NVLink node level, 1 above
    cross_building: jnp.ndarray  # 1 for campus and region
    # per GPU link into the level (cost/goodput.py); defaults keep hand-built params (tests) valid
    link_fail_per_s: jnp.ndarray | float = 0.0
    link_flap_per_s: jnp.ndarray | float = 0.0
    repair_s: jnp.ndarray | float = 1.0
    switch_fail_per_s: jnp.ndarray | float = 0.0  # per plane switch
    gpus_per_switch: jnp.ndarray | float = 64.0
    # microbursts at one port (cost/bursts.py); rate 0: none
    burst_rate_per_s: jnp.ndarray | float = 0.0
    burst_duration_s: jnp.ndarray | float = 1e-4
    burst_overload: jnp.ndarray | float = 1.0
    buffer_bytes: jnp.ndarray | float = 0.0
    # 1 at the levels between DiLoCo workers (Training.diloco_workers): the outer sync crosses them, inner steps not
    outer_worker: jnp.ndarray | float = 0.0
    # 1 at the levels sharding hsdp shards over (Training.hsdp_shard: the building's levels, or the node's); None
    # (hand-built params): the building's, Topology.inside_building
    hsdp_group: jnp.ndarray | None = None
    bus: jnp.ndarray | float = 1.0  # NCCL bus efficiency of the level (bw_Bps = bandwidth_GBps x 1e9 x bus)


class TransportP(NamedTuple):
    """Per-transport arrays [T]."""
    ecmp: jnp.ndarray  # 1 ECMP hashing, 0 packet spraying
    go_back_n: jnp.ndarray
    bounded: jnp.ndarray
    tcp: jnp.ndarray  # socket transport: loss-limited per-flow throughput (Mathis et al. 1997)
    qps: jnp.ndarray  # flows per connection (sockets per channel for tcp)
    window_bytes: jnp.ndarray  # channels x per-channel window
    channels: jnp.ndarray
    reroute_s: jnp.ndarray
    tolerated_loss: jnp.ndarray
    survives: jnp.ndarray | float = 0.0  # 1: a connection moves off a failed plane (needs planes > 1)
    rto_s: jnp.ndarray | float = 1e-3  # retransmission timeout of a lost tail (cost/bursts.py)
    deadline_s: jnp.ndarray | float = 0.0  # bounded loss: wait past a round's end before dropping
    # bounded loss by training phase [T, MAX_LOSS_PHASES]: weight (fraction of training) and tolerated loss
    phase_weight: jnp.ndarray | float = 1.0
    phase_loss: jnp.ndarray | float = 0.0


class TrainP(NamedTuple):
    gbs: jnp.ndarray
    seq: jnp.ndarray
    param_bytes: jnp.ndarray
    grad_bytes: jnp.ndarray
    grad_reduce_bytes: jnp.ndarray
    opt_bytes: jnp.ndarray
    seq_parallel: jnp.ndarray
    flash: jnp.ndarray
    allow_bounded: jnp.ndarray
    n_gpus: jnp.ndarray
    lora: jnp.ndarray  # 1: LoRA fine-tuning (base weights frozen), 0: every weight trains
    lora_rank: jnp.ndarray
    # bytes per weight in the data-parallel parameter all-gathers (Training.param_gather_bytes, resolved)
    param_gather_bytes: jnp.ndarray | float = 2.0
    doc_tokens: jnp.ndarray | float = 0.0  # packed sequences: length-weighted mean tokens per example (0: unpacked)
    gpu_fail_per_s: jnp.ndarray | float = 0.0  # non-network job-killing failures per GPU-second
    checkpoint_write_s: jnp.ndarray | float = 0.0
    restart_s: jnp.ndarray | float = 0.0
    checkpoint_interval_s: jnp.ndarray | float = 0.0  # 0: the Daly optimum
    # recompute "selective": 1 for each module it recomputes (specs.Training.recompute_modules)
    rc_core_attn: jnp.ndarray | float = 1.0
    rc_mlp: jnp.ndarray | float = 0.0
    rc_moe: jnp.ndarray | float = 0.0
    rc_moe_act: jnp.ndarray | float = 0.0
    rc_shared: jnp.ndarray | float = 0.0
    rc_norm: jnp.ndarray | float = 0.0
    rc_mla_up: jnp.ndarray | float = 0.0
    rc_elementwise: jnp.ndarray | float = 0.0
    rc_linear: jnp.ndarray | float = 0.0  # share of the linear-layer FLOPs recomputed (module linear)
    rc_layers: jnp.ndarray | float = 0.0  # recompute "full": layers of each chunk recomputed (0: all)
    bf16_start: jnp.ndarray | float = 0.0  # layers kept at 16-bit in a low-precision run (first / last)
    bf16_end: jnp.ndarray | float = 0.0
    mtp_layers: jnp.ndarray | float = 0.0
    offload_layers: jnp.ndarray | float = 0.0  # layers per GPU whose activations sit in host memory (cost/offload.py)
    ep_overlap: jnp.ndarray | float = 0.0  # 1: MoE all-to-alls overlap another microbatch's compute
    ep_dedup: jnp.ndarray | float = 0.0  # 1: one copy of a token per remote node / GPU, no sort (DeepEP, HybridEP)
    fp8_attn: jnp.ndarray | float = 0.0  # 1: FP8 attention (its backward sweeps a window layer's whole causal triangle)
    graph_moe: jnp.ndarray | float = 0.0  # 1: CUDA graphs capture the MoE router and preprocessing (partial, full)
    graph_full: jnp.ndarray | float = 0.0  # 1: one CUDA graph for the whole iteration (expert GEMMs included)
    pipeline_split: jnp.ndarray | float = 0.0  # index into specs.PIPELINE_SPLITS (0 auto, 1 filled, 2 counted)
    hsdp_optim: jnp.ndarray | float = 0.0  # 1: hsdp shards the optimizer over every dp rank (Training.hsdp_outer)
    etp: jnp.ndarray | float = 0.0  # expert tensor parallel size; 0: the design's tp, EP inside dp x cp (no folding)
    grad_var_tol: jnp.ndarray | float = 0.01  # extra gradient variance dropped data may add (cost/bursts.py)
    # low-communication training (cost/outer_sync.py)
    stream_fragments: jnp.ndarray | float = 4.0
    stream_overlap_steps: jnp.ndarray | float = 1.0
    outer_state_bytes: jnp.ndarray | float = 8.0
    token_log_h: jnp.ndarray | float = 0.0  # [MAX_TOKEN_POINTS] log H of the multiplier table, padded
    token_mult: jnp.ndarray | float = 1.0  # [MAX_TOKEN_POINTS] its multipliers
    target_tokens: jnp.ndarray | float = 1e12


class Params(NamedTuple):
    model: ModelP
    gpu: GpuP
    net: NetP
    transport: TransportP
    train: TrainP
    placement_inner: jnp.ndarray  # [n_placements, 4, 4]
    topology: Topology  # static
    prices: PriceP = PriceP()  # infrastructure prices (cost/provision.py); 0 without a prices file
    experts: ExpertTables | None = None  # MoE placement tables from an activation trace (sax_jax/moe/tables.py)
    hetero: HeteroP | None = None  # per GPU type of a system with buildings (cost/hetero.py); None: one type


def _f(x, dtype):
    return jnp.asarray(np.asarray(x, np.float64), dtype)


def _arrays(cls, dtype, **values):
    """A params NamedTuple built by field name: a missing or unknown field is an error, never a shifted value."""
    missing, unknown = set(cls._fields) - set(values), set(values) - set(cls._fields)
    if missing or unknown:
        raise TypeError(f"{cls.__name__}: missing {sorted(missing)}, unknown {sorted(unknown)}")
    return cls(**{k: _f(v, dtype) for k, v in values.items()})


def model_params(m: ModelSpec, dtype=jnp.float32) -> ModelP:
    moe = m.moe
    return _arrays(
        ModelP, dtype, layers=m.layers, hidden=m.hidden, heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
        ffn=m.ffn, mlp_mats=3 if m.gated_mlp else 2, vocab=m.vocab, tied=1 if m.tied_embeddings else 0,
        dropout=1 if m.dropout else 0,
        experts=moe.experts if moe else 0, top_k=moe.top_k if moe else 1, expert_ffn=moe.expert_ffn if moe else 0,
        shared_experts=moe.shared_experts if moe else 0,
        moe_fraction=(m.n_moe_layers / m.layers) if moe else 0.0, imbalance=moe.imbalance if moe else 1.0,
        locality=moe.locality if moe else 0.0, expert_slots=1.0, **_mla_values(m),
        **_window_values(m), rope_scaled=float(m.rope_attention_factor != 1.0),
        hc_streams=m.hyper_connections, hc_params=m.hyper_params_per_layer(), **_block_values(m))


def _window_values(m: ModelSpec) -> dict:
    ca, sw = m.compressed_attention, m.sliding_window
    if ca is not None:  # every layer has the band
        return dict(window=ca.window, window_fraction=1.0, compressed=1, csa_fraction=ca.csa_layers / m.layers,
                    csa_ratio=ca.csa_ratio, hca_fraction=ca.hca_layers / m.layers, hca_ratio=ca.hca_ratio,
                    index_topk=ca.index_topk, index_width=ca.index_heads * ca.index_head_dim)
    return dict(window=sw.window if sw else 0, window_fraction=sw.layers / m.layers if sw else 0.0, compressed=0,
                csa_fraction=0.0, csa_ratio=1, hca_fraction=0.0, hca_ratio=1, index_topk=1, index_width=0)


def _block_values(m: ModelSpec) -> dict:
    attn, mlp, mamba = m.block_fractions()
    hy, moe = m.hybrid, m.moe
    return dict(attn_fraction=attn, mlp_fraction=mlp, mamba_fraction=mamba,
                mamba_inner=hy.inner if hy else 0, mamba_heads=hy.mamba_heads if hy else 0,
                mamba_gn=hy.mamba_groups * hy.mamba_state if hy else 0, mamba_state=hy.mamba_state if hy else 0,
                mamba_conv=hy.mamba_conv if hy else 0, mamba_chunk=hy.mamba_chunk if hy else 1,
                shared_ffn=moe.shared_ffn if moe else 0, moe_latent=moe.latent_size if moe else 0)


def _mla_values(m: ModelSpec) -> dict:
    a, h, mla = m.heads, m.hidden, m.mla
    if mla is None:
        return dict(mla=0, mla_down=0, mla_up=0, mla_rep_params=0, mla_latent=0, qk_head_dim=m.head_dim,
                    v_head_dim=m.head_dim, mla_out=0, kv_shared=0)
    # compressors and indexers (DeepSeek-V4), averaged over the layers: small projections every TP rank runs
    # whole, like the down projections; their per-position biases (a few thousand weights) are counted as MACs
    extra = m.compressed_params() / m.layers
    return dict(mla=1, mla_down=h * mla.q_lora_rank + h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + extra,
                mla_up=mla.up_params(h, a), mla_rep_params=mla.replicated_params(h) + extra,
                mla_latent=mla.latent_width, qk_head_dim=mla.qk_head_dim, v_head_dim=mla.v_head_dim,
                mla_out=mla.out_params(h, a), kv_shared=1 if mla.shared_kv else 0)


# Bytes per element of the inputs a linear layer saves for its weight gradient: FP8 1; NVFP4 half a byte plus one
# FP8 (E4M3) scale per 16-element block (NVIDIA NVFP4 format: 16-value micro-blocks) = 0.5625; else 16-bit.
GEMM_INPUT_BYTES = {"fp8": 1.0, "fp4": 0.5 + 1.0 / 16.0}


def quantization_bytes(training: Training, any_layout: bool = False) -> tuple:
    """(standalone, norm-fed, after a 16-bit gather) cast bytes per element of the training's recipe
    (cost/quantize.py); 0 at 16 bits. any_layout: the GPU's FP8 GEMMs take every layout (GpuSpec.fp8_any_layout);
    NVFP4's 16-element block scales run along the reduction dimension whatever its global scale, so it writes both
    orientations regardless."""
    q = GEMM_INPUT_BYTES.get(training.precision)
    if q is None:
        return 0.0, 0.0, 0.0
    frozen = training.lora_rank > 0
    fp8 = training.precision == "fp8"
    return (*quantize.bytes_per_element(training.fp8_scaling, q, training.framework.fused_amax, frozen_weights=frozen,
                                        any_layout=any_layout and fp8, norm_amax=training.framework.norm_amax and fp8,
                                        cudnn_norm=training.cudnn_norm),
            quantize.gathered_bytes(training.fp8_scaling, q, frozen_weights=frozen))


def gpu_params(system: SystemSpec, training: Training, dtype=jnp.float32) -> GpuP:
    """The GPU's constants as the training framework sees them: its attention kernel's speed relative to the
    calibrated one, its elementwise traffic and its extra per-layer overhead (specs.Framework)."""
    g, e, fw = system.gpu, system.gpu.efficiency, training.framework
    quant_bytes, quant_norm_bytes, quant_gathered_bytes = quantization_bytes(training, g.fp8_any_layout)
    return _arrays(
        GpuP, dtype, peak_flops=g.peak_flops(training.precision), hbm_bytes=g.usable_bytes,
        hbm_Bps=g.hbm_GBps * 1e9, gemm_max=e.gemm_max, gemm_half_flops=e.gemm_half_flops,
        gemm_half_graphed=e.gemm_half_flops_graphed,
        attention_max=e.attention_max * e.attention_part_factor * g.attention_kernel_factor(fw.attention_kernel),
        attention_half_seq=e.attention_half_seq,
        attention_half_seq_full=e.attention_half_seq_full if e.attention_half_seq_full > 0 else e.attention_half_seq,
        elementwise_factor=fw.elementwise_bytes_factor,
        # the head-width curve is the calibrated kernel's (cuDNN's on Hopper and Blackwell); the other kernels'
        # ratios are measured at 128-wide heads and FlashAttention-2 / Triton lose less at 64 (FlashAttention-3
        # paper: 0.90 / 0.96 vs cuDNN's 0.80), so they run flat
        attention_head_dim_half=e.attention_head_dim_half if fw.attention_kernel == BEST_KERNEL else 0.0,
        straggler_cv=e.straggler_cv, overlap_contention=e.overlap_contention,
        peak_flops_16bit=g.peak_flops_16bit(training.precision),
        gemm_input_bytes=GEMM_INPUT_BYTES.get(training.precision, 2.0), memory_bound=e.memory_bound,
        layer_overhead_s=(e.layer_overhead_us + fw.layer_overhead_us) * 1e-6, overlap_slowdown=g.comm_sms / g.sm_count,
        expert_gemm_s=fw.expert_gemm_us * 1e-6, moe_host_s=fw.moe_host_us * 1e-6,
        dp_per_layer=float(fw.dp_calls == "layers"), fsdp_backward_serial=float(fw.backward_prefetch == "post"),
        tp_micro_pipeline=float(fw.tp_overlap == "micro_pipeline"), tp_overlappable=float(fw.tp_overlap != "none"),
        host_Bps=g.host_GBps * 1e9,
        rope_eager_bytes=0.0 if fw.fused_scaled_rope else ROPE_EAGER_BYTES_PER_ELEMENT, sm_share=1.0 / g.sm_count,
        norm_eager_bytes=fw.eager_norm_bytes_per_element, rope_always_bytes=fw.eager_rope_bytes_per_element,
        quant_bytes=quant_bytes, quant_norm_bytes=quant_norm_bytes, quant_gathered_bytes=quant_gathered_bytes,
        gemm_cap=g.gemm_ceiling(training.precision),
        gemm_cap_16bit=g.gemm_ceiling(precision_16bit(training.precision)))


def outer_worker_levels(system: SystemSpec, workers: str = "building") -> list:
    """[L] 1 at the levels between DiLoCo workers: the cross-building levels (campus, region) for workers =
    buildings, the region level for workers = regions."""
    outer = CROSS_BUILDING_LEVELS if workers == "building" else ("region",)
    return [float(lv.name in outer) for lv in system.levels]


def hsdp_group_levels(topo: Topology, shard: str = "building") -> list:
    """[L] 1 at the levels sharding hsdp's shard group spans: those inside one building (Topology.inside_building),
    or the node level alone (shard = node: the NVLink domain)."""
    if shard == "node":
        return [float(n == NVLINK_LEVEL) for n in topo.level_names]
    return [float(x) for x in topo.inside_building]


def net_params(system: SystemSpec, dtype=jnp.float32, diloco_workers: str = "building",
               hsdp_shard: str = "building") -> NetP:
    e = system.gpu.efficiency
    lv = system.levels
    topo = Topology.of(system)
    bus = [e.network_bus if net else e.nvlink_bus for net in topo.is_network]
    return _arrays(
        NetP, dtype,
        unit_gpus=system.unit_gpus,
        bw_Bps=[l.bandwidth_GBps * 1e9 * b for l, b in zip(lv, bus)],
        latency_s=[l.latency_us * 1e-6 for l in lv],
        oversub=[l.oversubscription for l in lv],
        loss=[l.loss_rate for l in lv],
        paths=[l.paths for l in lv],
        mtu_bytes=[l.mtu_bytes for l in lv],
        planes=[l.planes for l in lv],
        fail_per_s=[l.failure_rate_per_hour / 3600.0 for l in lv],
        is_network=[float(x) for x in topo.is_network],
        cross_building=[float(x) for x in topo.cross_building],
        link_fail_per_s=[l.link_failures_per_link_hour / 3600.0 for l in lv],
        link_flap_per_s=[l.link_flaps_per_link_hour / 3600.0 for l in lv],
        repair_s=[l.repair_s for l in lv],
        switch_fail_per_s=[l.switch_failures_per_switch_hour / 3600.0 for l in lv],
        gpus_per_switch=[l.gpus_per_switch for l in lv],
        burst_rate_per_s=[l.burst_rate_per_s for l in lv],
        burst_duration_s=[l.burst_duration_us * 1e-6 for l in lv],
        burst_overload=[l.burst_overload for l in lv],
        buffer_bytes=[l.buffer_bytes for l in lv],
        outer_worker=outer_worker_levels(system, diloco_workers),
        hsdp_group=hsdp_group_levels(topo, hsdp_shard),
        bus=bus,
    )


def transport_params(transports, dtype=jnp.float32) -> TransportP:
    return _arrays(
        TransportP, dtype,
        ecmp=[t.load_balancing == "ecmp" for t in transports],
        go_back_n=[t.loss_recovery == "go_back_n" for t in transports],
        bounded=[t.loss_recovery == "bounded_loss" for t in transports],
        tcp=[t.loss_recovery == "tcp" for t in transports],
        qps=[t.qps for t in transports],
        window_bytes=[t.channels * t.window_bytes_per_channel for t in transports],
        channels=[t.channels for t in transports],
        reroute_s=[t.reroute_s for t in transports],
        tolerated_loss=[t.tolerated_loss for t in transports],
        survives=[t.survives_link_failure for t in transports],
        rto_s=[t.rto_us * 1e-6 for t in transports],
        deadline_s=[t.deadline_us * 1e-6 for t in transports],
        phase_weight=[_padded_phases(t)[0] for t in transports],
        phase_loss=[_padded_phases(t)[1] for t in transports],
    )


def _padded_phases(t) -> tuple:
    """(weights, tolerated losses) of a transport's loss schedule, padded to MAX_LOSS_PHASES with weight 0."""
    ph = list(t.phases()) + [(0.0, 0.0)] * (MAX_LOSS_PHASES - len(t.phases()))
    return [w for w, _ in ph], [q for _, q in ph]


def train_params(training: Training, system: SystemSpec, dtype=jnp.float32) -> TrainP:
    t = training
    return _arrays(
        TrainP, dtype, gbs=t.global_batch_sequences, seq=t.seq_len, param_bytes=t.param_bytes,
        param_gather_bytes=t.param_gather_bytes or t.param_bytes,
        grad_bytes=t.grad_bytes, grad_reduce_bytes=t.grad_reduce_bytes, opt_bytes=t.optimizer_bytes_per_param,
        seq_parallel=1 if t.sequence_parallel else 0, flash=1 if t.flash_attention else 0,
        allow_bounded=1 if t.allow_bounded_loss else 0, n_gpus=system.n_gpus,
        lora=1 if t.lora_rank > 0 else 0, lora_rank=t.lora_rank, doc_tokens=t.packed_doc_tokens,
        gpu_fail_per_s=t.gpu_failures_per_gpu_hour / 3600.0, checkpoint_write_s=t.checkpoint_write_s,
        restart_s=t.restart_s, checkpoint_interval_s=t.checkpoint_interval_s,
        **{f"rc_{k}": 1 if m in t.recompute_modules else 0 for k, m in RC_FIELDS.items()},
        rc_linear=t.recompute_linear_share if "linear" in t.recompute_modules else 0.0,
        rc_layers=t.recompute_layers, bf16_start=t.bf16_layers_start, bf16_end=t.bf16_layers_end, mtp_layers=t.mtp_layers,
        offload_layers=t.offload_layers, ep_overlap=1 if t.ep_overlap else 0, ep_dedup=1 if t.ep_dedup else 0,
        fp8_attn=1 if t.fp8_attention else 0, etp=t.expert_tensor_parallel,
        hsdp_optim=1 if t.hsdp_outer == "optim" else 0,
        graph_moe=1 if t.cuda_graphs in ("partial", "full") else 0, graph_full=1 if t.cuda_graphs == "full" else 0,
        pipeline_split=PIPELINE_SPLITS.index(t.pipeline_split),
        grad_var_tol=t.gradient_variance_tolerance,
        stream_fragments=t.streaming_fragments, stream_overlap_steps=t.streaming_overlap_steps,
        outer_state_bytes=t.outer_state_bytes_per_param, target_tokens=t.target_tokens,
        **_token_table(t.diloco_token_multiplier))


def _token_table(points) -> dict:
    """The tokens-to-target table as (log H, multiplier) arrays padded to MAX_TOKEN_POINTS with its last point."""
    pts = list(points) + [points[-1]] * (MAX_TOKEN_POINTS - len(points))
    return dict(token_log_h=[np.log(float(h)) for h, _ in pts], token_mult=[float(m) for _, m in pts])


# TrainP flag -> Training.recompute_modules entry
RC_FIELDS = {"core_attn": "core_attn", "mlp": "mlp", "moe": "moe", "moe_act": "moe_act", "shared": "shared_experts",
             "norm": "layernorm", "mla_up": "mla_up_proj", "elementwise": "elementwise"}


def build_params(scenario, dtype=jnp.float32) -> Params:
    return Params(
        model=model_params(scenario.model, dtype),
        gpu=gpu_params(scenario.system, scenario.training, dtype),
        net=net_params(scenario.system, dtype, scenario.training.diloco_workers,
                       scenario.training.hsdp_shard),
        transport=transport_params(scenario.transports, dtype),
        train=train_params(scenario.training, scenario.system, dtype),
        placement_inner=jnp.asarray(placement_inner_table(), dtype),
        topology=dataclasses.replace(Topology.of(scenario.system), provisioned=provisions(scenario),
                                     expert_sync=scenario.model.moe is not None,
                                     parameter_server=uses_parameter_server(scenario)),
        prices=price_params(getattr(scenario, "prices", None), dtype),
        experts=expert_tables(scenario, dtype),
        hetero=hetero_params(scenario, dtype),
    )


def expert_tables(scenario, dtype=jnp.float32) -> ExpertTables | None:
    """The scenario's expert placement tables (None without an activation trace: the model's constants)."""
    trace = getattr(scenario, "expert_trace", None)
    if trace is None:
        return None
    from .moe.tables import scenario_tables
    return ExpertTables(*(_f(x, dtype) for x in scenario_tables(scenario)))


def stack_trees(trees):
    """Pytrees of the same structure stacked leaf by leaf on a new leading axis."""
    return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *trees)


def hetero_params(scenario, dtype=jnp.float32) -> HeteroP | None:
    """The GPU types of a system with ``buildings`` stacked on a leading axis (buildings.py); None without."""
    from .buildings import building_system, building_types
    system = scenario.system
    if not system.buildings:
        return None
    types = building_types(system)
    last = len(system.buildings) - 1
    per = [building_system(system, b) for b, _ in types]
    return HeteroP(gpu=stack_trees([gpu_params(s, scenario.training, dtype) for s in per]),
                   net=stack_trees([net_params(s, dtype, scenario.training.diloco_workers, scenario.training.hsdp_shard)
                                     for s in per]),
                   count=_f([len(ix) for _, ix in types], dtype), last=_f([last in ix for _, ix in types], dtype),
                   buildings=_f(len(system.buildings), dtype))


def uses_parameter_server(scenario) -> bool:
    """Whether an option or a baseline of the scenario has dp_algo ps (Topology.parameter_server)."""
    from .space import AXES, DpAlgo
    in_space = any(int(DpAlgo.PS) in opts for ax, opts in zip(AXES, scenario.space.options) if ax == "dp_algo")
    in_baselines = any(b.get("dp_algo") == DpAlgo.PS.label for b in (getattr(scenario, "baselines", None) or {}).values())
    return in_space or in_baselines


def provisions(scenario) -> bool:
    """Whether an option or a baseline of the scenario sets a co-design axis (cost/provision.py), i.e. is not
    "auto"."""
    from .space import AUTO, AXES
    in_space = any(v != AUTO for ax, opts in zip(AXES, scenario.space.options) if ax.startswith("xb_") for v in opts)
    in_baselines = any(v not in ("auto", 0, AUTO) for b in (getattr(scenario, "baselines", None) or {}).values()
                       for ax, v in b.items() if ax.startswith("xb_"))
    return in_space or in_baselines


def price_params(prices, dtype=jnp.float32) -> PriceP:
    """Prices of a scenario's prices file (specs.PriceSpec), zeros without one."""
    if prices is None:
        return _arrays(PriceP, dtype, gpu_usd_per_hour=0.0, link_usd_per_GBps_hour=0.0, port_usd_per_hour=0.0)
    return _arrays(PriceP, dtype, gpu_usd_per_hour=prices.gpu_usd_per_hour,
                   link_usd_per_GBps_hour=prices.link_usd_per_GBps_hour, port_usd_per_hour=prices.port_usd_per_hour)

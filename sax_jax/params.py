"""Frozen specs -> array pytrees for the jitted model.

Everything one might sweep (bandwidths, latencies, efficiencies, model sizes) is an array leaf, so a vmap
over hardware variants or a gradient w.r.t. a bandwidth needs no recompile. Only the number of levels and
transports (shapes) are static.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .space import placement_inner_table
from .specs import SystemSpec, Training, ModelSpec

CROSS_BUILDING_LEVELS = ("campus", "region")


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
    experts: jnp.ndarray  # 0 for dense models
    top_k: jnp.ndarray
    expert_ffn: jnp.ndarray
    shared_experts: jnp.ndarray
    moe_fraction: jnp.ndarray  # fraction of layers that are MoE
    imbalance: jnp.ndarray
    locality: jnp.ndarray


class GpuP(NamedTuple):
    peak_flops: jnp.ndarray
    hbm_bytes: jnp.ndarray  # usable capacity
    hbm_Bps: jnp.ndarray
    gemm_max: jnp.ndarray
    gemm_half_flops: jnp.ndarray
    attention_max: jnp.ndarray
    memory_bound: jnp.ndarray
    layer_overhead_s: jnp.ndarray


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


class TransportP(NamedTuple):
    """Per-transport arrays [T]."""
    ecmp: jnp.ndarray  # 1 ECMP hashing, 0 packet spraying
    go_back_n: jnp.ndarray
    bounded: jnp.ndarray
    qps: jnp.ndarray
    window_bytes: jnp.ndarray  # channels x per-channel window
    channels: jnp.ndarray
    reroute_s: jnp.ndarray
    tolerated_loss: jnp.ndarray


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


class Params(NamedTuple):
    model: ModelP
    gpu: GpuP
    net: NetP
    transport: TransportP
    train: TrainP
    placement_inner: jnp.ndarray  # [n_placements, 4, 4]


def _f(x, dtype):
    return jnp.asarray(np.asarray(x, np.float64), dtype)


def model_params(m: ModelSpec, dtype=jnp.float32) -> ModelP:
    moe = m.moe
    return ModelP(*[_f(v, dtype) for v in (
        m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, 3 if m.gated_mlp else 2, m.vocab,
        1 if m.tied_embeddings else 0,
        moe.experts if moe else 0, moe.top_k if moe else 1, moe.expert_ffn if moe else 0,
        moe.shared_experts if moe else 0, (m.n_moe_layers / m.layers) if moe else 0.0,
        moe.imbalance if moe else 1.0, moe.locality if moe else 0.0)])


def gpu_params(system: SystemSpec, training: Training, dtype=jnp.float32) -> GpuP:
    g, e = system.gpu, system.gpu.efficiency
    return GpuP(*[_f(v, dtype) for v in (
        g.peak_flops(training.precision), g.hbm_bytes * g.usable_memory_fraction, g.hbm_GBps * 1e9,
        e.gemm_max, e.gemm_half_flops, e.attention_max, e.memory_bound, e.layer_overhead_us * 1e-6)])


def net_params(system: SystemSpec, dtype=jnp.float32) -> NetP:
    e = system.gpu.efficiency
    lv = system.levels
    bus = [e.nvlink_bus if i == 0 else e.network_bus for i in range(len(lv))]
    return NetP(
        unit_gpus=_f(system.unit_gpus, dtype),
        bw_Bps=_f([l.bandwidth_GBps * 1e9 * b for l, b in zip(lv, bus)], dtype),
        latency_s=_f([l.latency_us * 1e-6 for l in lv], dtype),
        oversub=_f([l.oversubscription for l in lv], dtype),
        loss=_f([l.loss_rate for l in lv], dtype),
        paths=_f([l.paths for l in lv], dtype),
        mtu_bytes=_f([l.mtu_bytes for l in lv], dtype),
        planes=_f([l.planes for l in lv], dtype),
        fail_per_s=_f([l.failure_rate_per_hour / 3600.0 for l in lv], dtype),
        is_network=_f([0.0] + [1.0] * (len(lv) - 1), dtype),
        cross_building=_f([1.0 if l.name in CROSS_BUILDING_LEVELS else 0.0 for l in lv], dtype),
    )


def transport_params(transports, dtype=jnp.float32) -> TransportP:
    return TransportP(
        ecmp=_f([t.load_balancing == "ecmp" for t in transports], dtype),
        go_back_n=_f([t.loss_recovery == "go_back_n" for t in transports], dtype),
        bounded=_f([t.loss_recovery == "bounded_loss" for t in transports], dtype),
        qps=_f([t.qps for t in transports], dtype),
        window_bytes=_f([t.channels * t.window_bytes_per_channel for t in transports], dtype),
        channels=_f([t.channels for t in transports], dtype),
        reroute_s=_f([t.reroute_s for t in transports], dtype),
        tolerated_loss=_f([t.tolerated_loss for t in transports], dtype),
    )


def train_params(training: Training, system: SystemSpec, dtype=jnp.float32) -> TrainP:
    t = training
    return TrainP(*[_f(v, dtype) for v in (
        t.global_batch_sequences, t.seq_len, t.param_bytes, t.grad_bytes, t.grad_reduce_bytes,
        t.optimizer_bytes_per_param, 1 if t.sequence_parallel else 0, 1 if t.flash_attention else 0,
        1 if t.allow_bounded_loss else 0, system.n_gpus)])


def build_params(scenario, dtype=jnp.float32) -> Params:
    return Params(
        model=model_params(scenario.model, dtype),
        gpu=gpu_params(scenario.system, scenario.training, dtype),
        net=net_params(scenario.system, dtype),
        transport=transport_params(scenario.transports, dtype),
        train=train_params(scenario.training, scenario.system, dtype),
        placement_inner=jnp.asarray(placement_inner_table(), dtype),
    )

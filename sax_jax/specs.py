"""Frozen, validated specifications: model, GPU, system hierarchy, transports, training.

Specs are parsed once on the host (``config.py``), validated eagerly here, then frozen.
Nothing in this module touches JAX: ``params.py`` turns specs into array pytrees for the jitted model.
Units are in every field name.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

LEVEL_NAMES = ("node", "building", "campus", "region")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
LOAD_BALANCING = ("ecmp", "spray")
LOSS_RECOVERY = ("go_back_n", "selective_repeat", "bounded_loss")


class ConfigError(ValueError):
    """A user-facing configuration error: names the file, the key, the value and a hint."""

    def __init__(self, file: str | None, key: str | None, value: Any, problem: str, hint: str = ""):
        self.file, self.key, self.value = file, key, value
        where = f"{file}" if file else "<config>"
        if key:
            where += f": key '{key}'"
        msg = f"{where}: {problem} (got {value!r})."
        if hint:
            msg += f" Hint: {hint}"
        super().__init__(msg)


def _check(cond: bool, key: str, value: Any, problem: str, hint: str = "", file: str | None = None):
    if not cond:
        raise ConfigError(file, key, value, problem, hint)


def _positive(obj, *names, file=None, allow_zero=False):
    for name in names:
        v = getattr(obj, name)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ok = ok and (v >= 0 if allow_zero else v > 0)
        _check(ok, name, v, "must be a finite number " + (">= 0" if allow_zero else "> 0"), file=file)


@dataclasses.dataclass(frozen=True)
class MoESpec:
    experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int = 0
    layer_interval: int = 1
    imbalance: float = 1.0  # max/mean expert load
    locality: float = 0.0  # fraction of routed tokens whose expert is local to the GPU

    def validate(self, file=None):
        _positive(self, "experts", "top_k", "expert_ffn", "layer_interval", file=file)
        _check(self.top_k <= self.experts, "moe.top_k", self.top_k, "cannot exceed moe.experts", file=file)
        _check(self.imbalance >= 1.0, "moe.imbalance", self.imbalance, "is max/mean load, so >= 1", file=file)
        _check(0.0 <= self.locality < 1.0, "moe.locality", self.locality, "must be in [0, 1)", file=file)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    gated_mlp: bool
    vocab: int
    tied_embeddings: bool = True
    moe: MoESpec | None = None
    source: str = ""

    def validate(self, file=None):
        _positive(self, "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", file=file)
        _check(self.heads % self.kv_heads == 0, "kv_heads", self.kv_heads,
               f"must divide heads={self.heads}", "GQA groups query heads evenly", file=file)
        if self.moe is not None:
            self.moe.validate(file)

    @property
    def n_moe_layers(self) -> int:
        return 0 if self.moe is None else self.layers // self.moe.layer_interval

    def params_per_layer(self, moe_layer: bool = False) -> float:
        h, d = self.hidden, self.head_dim
        attn = h * (self.heads * d + 2 * self.kv_heads * d) + self.heads * d * h
        mats = 3 if self.gated_mlp else 2
        if moe_layer and self.moe is not None:
            mlp = (self.moe.experts + self.moe.shared_experts) * mats * h * self.moe.expert_ffn
            mlp += h * self.moe.experts  # router
        else:
            mlp = mats * h * self.ffn
        return attn + mlp + 2 * h  # two norms

    @property
    def n_params(self) -> float:
        n_moe = self.n_moe_layers
        emb = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return ((self.layers - n_moe) * self.params_per_layer(False)
                + n_moe * self.params_per_layer(True) + emb)


@dataclasses.dataclass(frozen=True)
class Efficiency:
    status: str
    gemm_max: float
    gemm_half_flops: float
    attention_max: float
    memory_bound: float
    nvlink_bus: float
    network_bus: float
    layer_overhead_us: float
    # keys one attention kernel call sweeps per query at which the fused-attention efficiency is half of
    # attention_max (compute.attention_efficiency); 0 = no dependence on the sequence length
    attention_half_seq: float = 0.0

    def validate(self, file=None):
        _check(self.status in ("provisional", "calibrated"), "efficiency.status", self.status,
               "must be 'provisional' or 'calibrated'", file=file)
        for k in ("gemm_max", "attention_max", "memory_bound", "nvlink_bus", "network_bus"):
            v = getattr(self, k)
            _check(isinstance(v, (int, float)) and 0 < v <= 1, f"efficiency.{k}", v,
                   "must be a fraction in (0, 1]", file=file)
        _check(self.gemm_half_flops > 0, "efficiency.gemm_half_flops", self.gemm_half_flops, "must be > 0",
               file=file)
        _check(self.layer_overhead_us >= 0, "efficiency.layer_overhead_us", self.layer_overhead_us,
               "must be >= 0", file=file)
        _check(isinstance(self.attention_half_seq, (int, float)) and self.attention_half_seq >= 0,
               "efficiency.attention_half_seq", self.attention_half_seq, "must be a number of tokens >= 0",
               file=file)


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    name: str
    peak_tflops: dict
    hbm_GiB: float
    hbm_GBps: float
    nvlink_GBps: float
    nic_GBps: float
    nvl_domain_gpus: int
    usable_memory_fraction: float
    efficiency: Efficiency

    def validate(self, file=None):
        _positive(self, "hbm_GiB", "hbm_GBps", "nvlink_GBps", "nic_GBps", "nvl_domain_gpus", file=file)
        for p in PRECISIONS:
            _check(p in self.peak_tflops, f"peak_tflops.{p}", None, "is missing",
                   f"give all of {', '.join(PRECISIONS)}", file=file)
        _check(0 < self.usable_memory_fraction <= 1, "usable_memory_fraction", self.usable_memory_fraction,
               "must be in (0, 1]", file=file)
        self.efficiency.validate(file)

    def peak_flops(self, precision: str) -> float:
        return float(self.peak_tflops[precision]) * 1e12

    def peak_flops_16bit(self, precision: str) -> float:
        """The tensor-core rate of the work that stays in 16 bits when the GEMMs run in FP8: the attention core
        and the output layer. FP8 training recipes quantize only the transformer layers' linear layers
        (Transformer Engine fp8_autocast around Linear/LayerNormLinear; Megatron-Bridge keeps
        fp8_dot_product_attention off by default and the output layer outside the FP8 region; torchtitan's
        Float8 converter skips the output layer), so those run at the BF16 peak. Other precisions: their own."""
        return self.peak_flops("bf16" if precision == "fp8" else precision)

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_GiB * 2**30


@dataclasses.dataclass(frozen=True)
class Level:
    """One level of the hierarchy. ``size`` counts units of the level below (GPUs for ``node``)."""
    name: str
    size: int
    bandwidth_GBps: float  # per GPU, per direction, into this level
    latency_us: float  # one way: propagation (4.9 us/km of fibre) plus switching
    oversubscription: float = 1.0  # 1:x between the level's injection and its uplink capacity
    loss_rate: float = 0.0  # packet loss probability on this level's links
    paths: int = 1  # equal-cost paths between two units of this level
    mtu_bytes: int = 4096
    planes: int = 1  # NIC planes (multi-plane fabrics)
    failure_rate_per_hour: float = 0.0  # link/plane failures per hour seen by one job on this level

    def validate(self, file=None):
        key = f"levels.{self.name}"
        _check(self.name in LEVEL_NAMES, f"{key}.name", self.name, "unknown level",
               f"use one of {', '.join(LEVEL_NAMES)} (inner to outer)", file=file)
        for k in ("size", "bandwidth_GBps", "latency_us", "oversubscription", "paths", "mtu_bytes", "planes"):
            v = getattr(self, k)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            _check(ok, f"{key}.{k}", v, "must be a finite number > 0", file=file)
        _check(self.oversubscription >= 1, f"{key}.oversubscription", self.oversubscription,
               "is the x of 1:x, so >= 1", file=file)
        _check(0 <= self.loss_rate < 0.5, f"{key}.loss_rate", self.loss_rate, "must be in [0, 0.5)", file=file)
        _check(self.failure_rate_per_hour >= 0, f"{key}.failure_rate_per_hour", self.failure_rate_per_hour,
               "must be >= 0", file=file)


@dataclasses.dataclass(frozen=True)
class SystemSpec:
    name: str
    gpu: GpuSpec
    levels: tuple  # of Level, inner to outer

    def validate(self, file=None):
        _check(len(self.levels) >= 1, "levels", [], "needs at least the node level", file=file)
        names = [lv.name for lv in self.levels]
        for lv in self.levels:
            lv.validate(file)
        order = [LEVEL_NAMES.index(n) for n in names]
        _check(order == sorted(order) and len(set(order)) == len(order) and names[0] == "node", "levels",
               names, "must start at 'node' and go inner to outer without repeats",
               f"order is {', '.join(LEVEL_NAMES)}", file=file)

    @property
    def unit_gpus(self) -> tuple:
        """GPUs in one unit of each level (cumulative product of sizes)."""
        out, acc = [], 1
        for lv in self.levels:
            acc *= lv.size
            out.append(acc)
        return tuple(out)

    @property
    def n_gpus(self) -> int:
        return self.unit_gpus[-1]

    @property
    def gpus_per_node(self) -> int:
        return self.levels[0].size


@dataclasses.dataclass(frozen=True)
class TransportSpec:
    """A network-layer technology applied on every level above the node."""
    name: str
    load_balancing: str  # ecmp | spray
    loss_recovery: str  # go_back_n | selective_repeat | bounded_loss
    qps: int = 1  # queue pairs (flows) per connection; ECMP hashes each separately
    channels: int = 8  # NCCL channels per GPU; each keeps window_bytes_per_channel in flight
    window_bytes_per_channel: float = 4 * 2**20
    reroute_s: float = 1.0  # time to route around a failed link/plane
    tolerated_loss: float = 0.0  # bounded-loss only: fraction of data dropped at the deadline

    def validate(self, file=None):
        key = f"transports.{self.name}"
        _check(self.load_balancing in LOAD_BALANCING, f"{key}.load_balancing", self.load_balancing,
               "unknown", f"use one of {', '.join(LOAD_BALANCING)}", file=file)
        _check(self.loss_recovery in LOSS_RECOVERY, f"{key}.loss_recovery", self.loss_recovery, "unknown",
               f"use one of {', '.join(LOSS_RECOVERY)}", file=file)
        for k in ("qps", "channels", "window_bytes_per_channel", "reroute_s"):
            _check(getattr(self, k) > 0, f"{key}.{k}", getattr(self, k), "must be > 0", file=file)
        _check(0 <= self.tolerated_loss < 1, f"{key}.tolerated_loss", self.tolerated_loss, "must be in [0,1)",
               file=file)


@dataclasses.dataclass(frozen=True)
class Training:
    global_batch_sequences: int
    seq_len: int
    precision: str = "bf16"
    param_bytes: float = 2.0  # 16-bit weights
    grad_bytes: float = 4.0  # Megatron keeps fp32 main grads by default
    grad_reduce_bytes: float = 4.0  # bytes per gradient element on the wire
    optimizer_bytes_per_param: float = 12.0  # Adam: fp32 master + m + v
    sequence_parallel: bool = True
    flash_attention: bool = True
    allow_bounded_loss: bool = False  # bounded-loss transport changes training semantics

    def validate(self, file=None):
        _positive(self, "global_batch_sequences", "seq_len", "param_bytes", "grad_bytes", "grad_reduce_bytes",
                  file=file)
        _positive(self, "optimizer_bytes_per_param", file=file, allow_zero=True)
        _check(self.precision in PRECISIONS, "training.precision", self.precision, "unknown precision",
               f"use one of {', '.join(PRECISIONS)}", file=file)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_sequences * self.seq_len

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
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
# Precisions that quantize only the linear layers' GEMMs; attention and the output layer stay 16-bit
LOW_PRECISION_GEMMS = ("fp8", "fp4")
# Precisions a GpuSpec.mamf_tflops measurement may name, and the measurement each training precision's GEMMs take
MAMF_PRECISIONS = ("bf16", "fp8")
MAMF_OF_PRECISION = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}
GEMM_CEILING_NONE = 10.0  # a fraction of the peak no fitted gemm_max reaches: no cap


def precision_16bit(precision: str) -> str:
    """The precision of the work a recipe keeps in 16 bits (attention core, output layer): BF16 for the
    low-precision GEMM recipes (GpuSpec.peak_flops_16bit), the recipe's own precision otherwise."""
    return "bf16" if precision in LOW_PRECISION_GEMMS else precision
LOAD_BALANCING = ("ecmp", "spray")
LOSS_RECOVERY = ("go_back_n", "selective_repeat", "bounded_loss", "tcp")


class ConfigError(ValueError):
    """A user-facing configuration error: names the file, the key, the value and a hint."""

    def __init__(self, file: str | None, key: str | None, value: Any, problem: str, hint: str = ""):
        self.file, self.key, self.value, self.problem, self.hint = file, key, value, problem, hint
        if not file and key and key.startswith("--"):
            where = f"option {key}"  # a command-line flag
        elif not file and key and key.startswith("argument "):
            where = key  # a positional command-line argument, e.g. "argument 'tp=0', axis tp"
        else:
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
class Range:
    """The accepted values of one numeric field: [lo, hi] (open ends where marked), whole numbers if integer."""
    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    why: str = ""

    def describe(self) -> str:
        kind = "a whole number" if self.integer else "a finite number"
        num = lambda x: f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"  # noqa: E731
        return f"{kind} in {'(' if self.lo_open else '['}{num(self.lo)}, {num(self.hi)}{')' if self.hi_open else ']'}"

    def ok(self, v) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        if self.integer and not float(v).is_integer():
            return False
        return (v > self.lo if self.lo_open else v >= self.lo) and (v < self.hi if self.hi_open else v <= self.hi)


# Physical ranges of every numeric input field, per spec (documented in README "Input ranges"). The bounds are
# wide (beyond any machine or model built so far) and exist to catch typos and unit slips (1e30, 1e-30, 8192.5).
RANGES = {
    "model": {
        "layers": Range(1, 10_000, True, why="transformer layers"),
        "hidden": Range(1, 1_000_000, True, why="model width"),
        "heads": Range(1, 100_000, True, why="attention heads"),
        "kv_heads": Range(1, 100_000, True, why="key/value heads (GQA)"),
        "head_dim": Range(1, 100_000, True, why="per-head width"),
        "ffn": Range(1, 10_000_000, True, why="MLP intermediate width"),
        "vocab": Range(1, 100_000_000, True, why="vocabulary size"),
        "rope_attention_factor": Range(0.01, 100, why="YaRN attention factor on the rotary cos/sin (1: plain RoPE)"),
        "hyper_connections": Range(1, 64, True, why="residual streams (mHC expansion rate n; 1: a plain residual)"),
    },
    "moe": {
        "experts": Range(1, 100_000, True), "top_k": Range(1, 100_000, True),
        "expert_ffn": Range(1, 10_000_000, True), "shared_experts": Range(0, 100_000, True),
        "layer_interval": Range(1, 10_000, True), "imbalance": Range(1, 1_000, why="max/mean expert load"),
        "locality": Range(0, 1, hi_open=True, why="fraction of routed tokens kept on the GPU"),
    },
    "gpu": {
        "hbm_GiB": Range(0.1, 100_000, why="HBM capacity per GPU"),
        "hbm_GBps": Range(1, 1_000_000, why="HBM bandwidth per GPU"),
        "nvlink_GBps": Range(0.1, 100_000, why="scale-up bandwidth per GPU per direction"),
        "nic_GBps": Range(0.01, 100_000, why="scale-out NIC bandwidth per GPU"),
        "nvl_domain_gpus": Range(1, 100_000, True, why="GPUs per NVLink domain"),
        "memory_reserve_GiB": Range(0, 100_000, why="memory a process holds beside the modeled tensors"),
        "sm_count": Range(1, 100_000, True, why="streaming multiprocessors per GPU"),
        "comm_sms": Range(0, 100_000, True, why="SMs a collective occupies while it overlaps compute"),
        "host_GBps": Range(0, 100_000, why="GPU-host link bandwidth per GPU per direction (0: not given)"),
    },
    "peak_tflops": {p: Range(0.001, 1_000_000, why="dense peak per GPU, TFLOP/s") for p in PRECISIONS},
    "efficiency": {
        "gemm_max": Range(0, 1, lo_open=True), "attention_max": Range(0, 1, lo_open=True),
        "memory_bound": Range(0, 1, lo_open=True), "nvlink_bus": Range(0, 1, lo_open=True),
        "network_bus": Range(0, 1, lo_open=True),
        "gemm_half_flops": Range(0, 1e18, lo_open=True, why="GEMM size (FLOPs) at half of gemm_max"),
        "gemm_half_flops_graphed": Range(0, 1e18, why="GEMM size (FLOPs) at half of gemm_max when a CUDA graph "
                                         "replays it (0: gemm_half_flops)"),
        "layer_overhead_us": Range(0, 1e6, why="fixed time per layer, microseconds"),
        "attention_half_seq": Range(0, 1e9, why="keys per attention call at half of attention_max (0: flat)"),
        "attention_half_seq_full": Range(0, 1e9, why="keys per attention call without a causal diagonal at half of "
                                         "attention_max (0: attention_half_seq)"),
        "attention_head_dim_half": Range(0, 1024, why="head width at which the calibrated attention kernel's speed "
                                         "is half its wide-head limit (0: flat)"),
        "attention_part_factor": Range(0, 10, lo_open=True, why="this part's fused-attention speed relative to "
                                       "its family's fitted attention_max"),
        "straggler_cv": Range(0, 1, why="coefficient of variation of a GPU's kernel time per step"),
        "overlap_contention": Range(0, 1, hi_open=True, why="compute slowdown beyond the SM share while a "
                                    "collective overlaps it (a fraction)"),
    },
    "level": {
        "size": Range(1, 1_000_000, True, why="units of the level below"),
        "bandwidth_GBps": Range(0.001, 100_000, why="per GPU per direction, GB/s"),
        "latency_us": Range(0, 1_000_000, lo_open=True, why="one way, microseconds (1 s at most)"),
        "oversubscription": Range(1, 1_000, why="the x of 1:x"),
        "loss_rate": Range(0, 0.5, hi_open=True, why="packet loss probability"),
        "paths": Range(1, 1_000_000, True, why="equal-cost paths"),
        "mtu_bytes": Range(64, 1_048_576, True, why="bytes per packet"),
        "planes": Range(1, 1_024, True, why="NIC planes"),
        "failure_rate_per_hour": Range(0, 10_000, why="link/plane failures per hour"),
        "link_failures_per_link_hour": Range(0, 1, why="hard failures of one GPU's links into this level, per hour"),
        "link_flaps_per_link_hour": Range(0, 1, why="transient link down/up events per link-hour"),
        "repair_s": Range(0, 1e8, lo_open=True, why="seconds until a failed link is repaired"),
        # microbursts and plane switches (cost/bursts.py, cost/resilience.py)
        "burst_rate_per_s": Range(0, 1e7, why="microbursts arriving at one port per second (Poisson)"),
        "burst_duration_us": Range(0, 1e7, lo_open=True, why="mean microburst duration (exponential)"),
        "burst_overload": Range(1, 1_000, why="arrival rate / port rate during a burst (incast degree)"),
        "buffer_bytes": Range(0, 1e12, why="switch buffer a burst can fill at one port"),
        "switch_failures_per_switch_hour": Range(0, 1, why="hard failures of one plane switch per hour"),
        "gpus_per_switch": Range(1, 1_000_000, True, why="GPU NIC ports on one plane switch"),
    },
    "transport": {
        "qps": Range(1, 4_096, True, why="queue pairs per connection"),
        "channels": Range(1, 4_096, True, why="NCCL channels per GPU"),
        "window_bytes_per_channel": Range(1, 2.0**40, why="bytes in flight per channel"),
        "reroute_s": Range(0, 100_000, lo_open=True, why="seconds to route around a failure"),
        "tolerated_loss": Range(0, 1, hi_open=True, why="bounded-loss only: fraction dropped"),
        "rto_us": Range(0, 1e8, lo_open=True, why="retransmission timeout for a lost tail, microseconds"),
        "deadline_us": Range(0, 1e8, why="bounded-loss only: wait past a round's end before dropping"),
    },
    "framework": {
        "elementwise_bytes_factor": Range(0.25, 20, why="HBM bytes of the memory-bound kernels / Megatron-TE's"),
        "layer_overhead_us": Range(0, 1e6, why="extra fixed time per layer and pass, microseconds"),
        "expert_gemm_us": Range(0, 1e6, why="fixed time per local expert per grouped-GEMM pass, microseconds"),
        "moe_host_us": Range(0, 1e6, why="host-bound time per MoE layer forward without CUDA graphs, microseconds"),
        "eager_norm_bytes_per_element": Range(0, 1000, why="extra HBM bytes of an unfused norm per hidden element"),
        "eager_rope_bytes_per_element": Range(0, 1000, why="HBM bytes of an unfused RoPE per query/key element"),
    },
    "training": {
        "global_batch_sequences": Range(1, 100_000_000, True, why="sequences per optimizer step"),
        "seq_len": Range(1, 100_000_000, True, why="tokens per sequence"),
        "param_bytes": Range(0.125, 16, why="bytes per weight"),
        "param_gather_bytes": Range(0, 16, why="bytes per weight in the parameter all-gathers; 0: param_bytes"),
        "grad_bytes": Range(0.125, 16, why="bytes per gradient element"),
        "grad_reduce_bytes": Range(0.125, 16, why="bytes per gradient element on the wire"),
        "optimizer_bytes_per_param": Range(0, 256, why="optimizer state bytes per parameter"),
        "checkpoint_write_s": Range(0, 1e6, lo_open=True, why="seconds a checkpoint blocks training"),
        "restart_s": Range(0, 1e7, why="seconds from an interruption to training again (excl. lost work)"),
        "checkpoint_interval_s": Range(0, 1e8, why="seconds of training between checkpoints; 0 = Daly optimum"),
        "gpu_failures_per_gpu_hour": Range(0, 1, why="job-killing non-network failures per GPU-hour"),
        "gradient_variance_tolerance": Range(0, 1_000, why="extra gradient variance / |g|^2 dropped data may add"),
        "streaming_fragments": Range(1, 10_000, True, why="streaming DiLoCo: model fragments synced in turn"),
        "streaming_overlap_steps": Range(0, 1_000_000, why="streaming DiLoCo: inner steps a fragment's sync may "
                                                           "overlap (tau)"),
        "outer_state_bytes_per_param": Range(0, 256, why="DiLoCo outer optimizer state per parameter (anchor, "
                                                         "momentum)"),
        "target_tokens": Range(1, 1e16, why="tokens of synchronous training to the target loss"),
    },
    "prices": {
        "gpu_usd_per_hour": Range(0, 1e6, why="one GPU with its node and building share, per hour"),
        "link_usd_per_GBps_hour": Range(0, 1e6, why="one GB/s of cross-building uplink capacity, per hour"),
        "port_usd_per_hour": Range(0, 1e6, why="one cross-building NIC port (per GPU per plane), per hour"),
    },
}
# Ranges of the layer-kind fields (MLA, sliding windows, hybrid blocks, MoE widths) and the recipe settings (LoRA,
# BF16 layers, MTP, expert tensor parallelism), validated like RANGES and
# documented in README's "Input ranges" table like them (tests/test_config.py).
ARCH_RANGES = {
    "moe": {"first_dense_layers": Range(0, 10_000, True, why="leading dense layers before the MoE layers"),
            "shared_expert_ffn": Range(0, 10_000_000, True, why="width of each shared expert (0: expert_ffn)"),
            "latent_size": Range(0, 1_000_000, True, why="LatentMoE: width the routed experts work in (0: hidden)"),
            "node_limit": Range(0, 100_000, True, why="nodes a token's experts may span (0: unlimited)")},
    "hybrid": {
        "mamba_heads": Range(1, 100_000, True, why="Mamba-2 heads"),
        "mamba_head_dim": Range(1, 100_000, True, why="channels per Mamba-2 head"),
        "mamba_groups": Range(1, 100_000, True, why="Mamba-2 B/C groups (n_groups)"),
        "mamba_state": Range(1, 100_000, True, why="SSM state size per group (ssm_state_size)"),
        "mamba_conv": Range(1, 1_000, True, why="causal conv1d kernel width"),
        "mamba_chunk": Range(1, 1_000_000, True, why="SSD chunk length"),
    },
    "mla": {
        "q_lora_rank": Range(0, 1_000_000, True, why="query latent width (0: no query compression)"),
        "kv_lora_rank": Range(1, 1_000_000, True, why="key/value latent width"),
        "qk_nope_head_dim": Range(1, 100_000, True, why="per-head query/key width without RoPE"),
        "qk_rope_head_dim": Range(0, 100_000, True, why="per-head decoupled RoPE query/key width"),
        "v_head_dim": Range(1, 100_000, True, why="per-head value width"),
        "o_lora_rank": Range(0, 1_000_000, True, why="grouped low-rank output projection's width per group "
                                                      "(0: one full-rank output projection)"),
        "o_groups": Range(1, 100_000, True, why="head groups of the low-rank output projection"),
    },
    "compressed_attention": {
        "window": Range(1, 100_000_000, True, why="keys of the local band every layer attends to"),
        "csa_layers": Range(0, 10_000, True, why="layers with compressed sparse attention (indexer top-k)"),
        "csa_ratio": Range(1, 1_000_000, True, why="tokens per compressed key in a CSA layer"),
        "hca_layers": Range(0, 10_000, True, why="layers with heavily compressed attention (every compressed key)"),
        "hca_ratio": Range(1, 1_000_000, True, why="tokens per compressed key in an HCA layer"),
        "index_topk": Range(1, 100_000_000, True, why="compressed keys the indexer selects per query"),
        "index_heads": Range(1, 100_000, True, why="indexer query heads"),
        "index_head_dim": Range(1, 100_000, True, why="indexer query/key width per head"),
    },
    "training": {"lora_rank": Range(0, 1_000_000, True, why="LoRA adapter rank (0: every weight trains)"),
                 "bf16_layers_start": Range(0, 10_000, True, why="first layers kept at 16-bit in FP8/FP4 training"),
                 "bf16_layers_end": Range(0, 10_000, True, why="last layers kept at 16-bit in FP8/FP4 training"),
                 "mtp_layers": Range(0, 100, True, why="multi-token-prediction layers trained"),
                 "recompute_linear_share": Range(0, 1, lo_open=True,
                                                 why="share of the layer's linear-layer FLOPs the 'linear' recompute "
                                                     "module runs again (1: every linear layer)"),
                 "recompute_layers": Range(0, 100_000, True,
                                           why="layers of each pipeline chunk full recompute recomputes (0: all)"),
                 "packed_doc_tokens": Range(0, 100_000_000, True,
                                            why="length-weighted mean document length in packed sequences "
                                                "(0: one document per sequence)"),
                 "offload_layers": Range(0, 10_000, True,
                                         why="layers per GPU whose activations are offloaded to host memory"),
                 "expert_tensor_parallel": Range(0, 100_000, True,
                                                 why="ranks one expert is split over (0: the tensor-parallel ones)")},
    "sliding_window": {
        "window": Range(1, 100_000_000, True, why="keys a query of a windowed layer attends to"),
        "layers": Range(1, 10_000, True, why="how many of the layers use the window"),
    },
}


MAX_LOSS_PHASES = 4  # phases of a transport's loss_schedule (params.py pads to this many)

DILOCO_WORKER_LEVELS = ("building", "region")  # DiLoCo workers: one per building, or one per region
# the levels sharding hsdp shards over: the building (ZeRO-3 inside it, replicated across buildings) or one node, the
# NVLink domain (PyTorch FSDP HYBRID_SHARD's default shard group; Megatron-FSDP HSDP in Megatron-Bridge's Nemotron 3
# Ultra recipes: data_parallel_sharding_strategy optim_grads_params inside each NVL72 domain)
HSDP_SHARD_LEVELS = ("building", "node")
# what sharding hsdp does across its shard groups: replicate the whole state (PyTorch HYBRID_SHARD), or replicate the
# weights and gradients but shard the optimizer state and its update over every data-parallel rank (Megatron-FSDP's
# outer_dp_sharding_strategy "optim", num_distributed_optimizer_instances > 1)
HSDP_OUTER = ("replicate", "optim")
MAX_TOKEN_POINTS = 8  # points of a diloco_token_multiplier table (params.py pads to this many)
# Tokens to reach the synchronous run's loss, relative to it, per H (inner steps per outer sync).
# EXAMPLE VALUES, not measurements: shaped after the published findings that DiLoCo with a few workers matches
# synchronous data parallelism at H of a few hundred (Douillard et al. 2023, arXiv 2311.08105, section 3: 8
# workers, H = 500, comparable perplexity with 500x less communication) and that quality degrades slowly as H
# grows (Douillard et al. 2025, arXiv 2501.18512, ablation over H; Charles et al. 2025, arXiv 2503.09799,
# scaling laws: with 2 replicas DiLoCo matches or beats data parallelism at scale). Replace them with your own
# ablation (training.diloco_token_multiplier in the scenario).
DEFAULT_DILOCO_TOKENS = ((1, 1.0), (10, 1.0), (30, 1.01), (100, 1.02), (300, 1.04), (1000, 1.08), (3000, 1.15))


def ranges_of(kind: str) -> dict:
    """Every range of a spec kind: RANGES and ARCH_RANGES together."""
    return {**RANGES.get(kind, {}), **ARCH_RANGES.get(kind, {})}


# a GPU's attention_kernels values: speed relative to the kernel its attention_max was fitted on
ATTENTION_KERNEL_RANGE = Range(0, 4, lo_open=True, why="kernel speed / the GPU's calibrated kernel")
BOOL_FIELDS = {"model": ("gated_mlp", "tied_embeddings", "dropout"), "sliding_window": ("sinks",),
               "mla": ("shared_kv",),
               "training": ("sequence_parallel", "flash_attention", "allow_bounded_loss", "ep_overlap", "ep_dedup",
                            "fp8_attention", "cudnn_norm"),
               "transport": ("survives_link_failure",), "gpu": ("fp8_any_layout",),
               "framework": ("fused_scaled_rope", "fused_amax", "norm_amax")}
MAX_GPUS = 100_000_000  # a system larger than this is a typo in a level size


def _check_pairs(tab, key: str, pair: str, max_n: int, hint: str, file, *, min_n: int = 0,
                 increase: str = "must increase", x_max: float = math.inf, point=None) -> float:
    """A table of [x, y] pairs (a transport's loss_schedule, DiLoCo's tokens per H): a list of min_n to max_n
    pairs of finite numbers, x increasing above 0 up to x_max; ``point(i, pair)`` checks the rest of each pair.
    Returns the last x (0 for an empty table)."""
    count = f"at most {max_n}" if min_n == 0 else f"{min_n} to {max_n}"
    _check(isinstance(tab, (list, tuple)) and min_n <= len(tab) <= max_n, key, tab,
           f"must be a list of {count} [{pair}] pairs", hint, file=file)
    prev = 0.0
    for i, pt in enumerate(tab):
        ok = (isinstance(pt, (list, tuple)) and len(pt) == 2
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pt))
        _check(ok, f"{key}[{i}]", pt, f"must be a pair [{pair}] of numbers", hint, file=file)
        _check(prev < pt[0] <= x_max, f"{key}[{i}]", pt, f"{increase} (previous {prev:g})", hint, file=file)
        if point is not None:
            point(i, pt)
        prev = pt[0]
    return prev


def _ranges(obj, kind: str, prefix: str = "", file=None):
    """Every field of ``obj`` listed in RANGES[kind] must be in its range; booleans must be booleans."""
    for name, rng in ranges_of(kind).items():
        v = getattr(obj, name)
        _check(rng.ok(v), prefix + name, v, f"must be {rng.describe()}" + (f" ({rng.why})" if rng.why else ""),
               file=file)
    for name in BOOL_FIELDS.get(kind, ()):
        v = getattr(obj, name)
        _check(isinstance(v, bool), prefix + name, v, "must be true or false", file=file)


@dataclasses.dataclass(frozen=True)
class MoESpec:
    experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int = 0
    layer_interval: int = 1
    imbalance: float = 1.0  # max/mean expert load
    locality: float = 0.0  # fraction of routed tokens whose expert is local to the GPU
    # leading dense layers before the first MoE layer (DeepSeek-V3 config.json first_k_dense_replace = 3,
    # Kimi-K2 1): they run the dense `ffn` MLP; MoE layers are every layer_interval-th of the rest
    first_dense_layers: int = 0
    # width of each shared expert when it differs from expert_ffn (Nemotron-3: moe_shared_expert_intermediate_size
    # 3712 = 2 x 1856); 0: expert_ffn
    shared_expert_ffn: int = 0
    # LatentMoE (Nemotron-3 Super, config.json moe_latent_size 1024): the router's tokens are projected from hidden
    # down to latent_size, dispatched, run through routed experts of width latent_size -> expert_ffn -> latent_size,
    # combined and projected back up; the shared expert stays at hidden width. 0: no latent projection
    latent_size: int = 0
    # node-limited routing (DeepSeek-V3, arXiv 2412.19437 section 2.1.2: each token goes to at most M = 4 nodes);
    # 0: unlimited. Read by the expert_placement policy node-limited (sax_jax/moe/tables.py)
    node_limit: int = 0

    @property
    def shared_ffn(self) -> int:
        return self.shared_expert_ffn or self.expert_ffn

    def validate(self, file=None):
        _ranges(self, "moe", "moe.", file)
        _check(self.top_k <= self.experts, "moe.top_k", self.top_k, "cannot exceed moe.experts", file=file)


@dataclasses.dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1; DeepSeek-V3, arXiv 2412.19437,
    section 2.1.1; field names as in DeepSeek-V3's config.json). Per layer, h = hidden, a = heads:
      query:  c_Q = W_DQ h (h -> q_lora_rank), q = W_UQ c_Q (q_lora_rank -> a (nope + rope));
              q_lora_rank = 0: q = W_Q h directly (DeepSeek-V2-Lite)
      key/value: [c_KV, k_rope] = W_DKV h (h -> kv_lora_rank + rope, the RoPE key shared by all heads),
              [k_nope, v] = W_UKV c_KV (kv_lora_rank -> a (nope + v_head_dim))
      output: W_O (a v_head_dim -> h).
    Attention per head: QK^T over nope + rope dims, PV over v_head_dim. DeepSeek-V3 / Kimi-K2: q_lora_rank 1536,
    kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128."""
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    # DeepSeek-V4 (config.json num_key_value_heads 1, head_dim 512, o_lora_rank 1024, o_groups 8): one key/value
    # vector per token, [c_KV, k_rope] itself, is every head's key and value (no W_UKV), and the output projection
    # is low-rank in groups: the a v_head_dim outputs in o_groups groups, each mapped to o_lora_rank
    # (a v_head_dim o_lora_rank weights in all), then o_groups o_lora_rank -> h
    shared_kv: bool = False
    o_lora_rank: int = 0
    o_groups: int = 1

    def validate(self, file=None):
        _ranges(self, "mla", "mla.", file)
        if self.shared_kv:
            _check(self.v_head_dim == self.qk_head_dim, "mla.v_head_dim", self.v_head_dim,
                   f"must equal qk_nope_head_dim + qk_rope_head_dim = {self.qk_head_dim} with shared_kv",
                   "a shared key/value vector is both the key and the value", file=file)

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def replicated_params(self, hidden: int) -> float:
        """Down projections (and the latent norms): Megatron-Core builds them duplicated on every TP rank."""
        q_down = hidden * self.q_lora_rank + self.q_lora_rank  # W_DQ + q_a_layernorm
        return q_down + hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank  # + kv norm

    def up_params(self, hidden: int, heads: int) -> float:
        """Up projections W_UQ (or W_Q) and W_UKV (none with shared_kv)."""
        q_in = self.q_lora_rank if self.q_lora_rank > 0 else hidden
        kv_up = 0 if self.shared_kv else self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q_in * heads * self.qk_head_dim + kv_up

    def out_params(self, hidden: int, heads: int) -> float:
        """Output projection: a v_head_dim -> h, or the grouped low-rank pair (o_lora_rank > 0)."""
        if self.o_lora_rank > 0:
            return heads * self.v_head_dim * self.o_lora_rank + self.o_groups * self.o_lora_rank * hidden
        return heads * self.v_head_dim * hidden

    def split_params(self, hidden: int, heads: int) -> float:
        """Up and output projections: column-/row-parallel over the heads."""
        return self.up_params(hidden, heads) + self.out_params(hidden, heads)

    @property
    def latent_width(self) -> int:
        """Per-token width of the compressed activations [c_Q, c_KV, k_rope]."""
        return self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim


@dataclasses.dataclass(frozen=True)
class SlidingWindowSpec:
    """Local (banded) causal attention in some of the layers: a query of such a layer attends to the last
    `window` keys only (itself included). GPT-OSS (OpenAI 2025, gpt-oss-120b/20b model card and config.json:
    sliding_window 128, layer_types alternating sliding_attention / full_attention, so half the layers) in the
    style of Sparse Transformer's banded attention (Child et al. 2019) and Mistral 7B (Jiang et al. 2023).
    sinks: a learned per-head logit added to each softmax denominator (GPT-OSS "attention sinks"; Xiao et al.
    2023): a heads x tokens extra exponentials per layer, no GEMM work, so the model gives them no FLOPs."""
    window: int
    layers: int
    sinks: bool = False

    def validate(self, file=None):
        _ranges(self, "sliding_window", "sliding_window.", file)


@dataclasses.dataclass(frozen=True)
class CompressedAttentionSpec:
    """DeepSeek-V4's hybrid attention (DeepSeek-AI 2026, DeepSeek-V4 model card and config.json: sliding_window,
    compress_ratios per layer, index_topk, index_n_heads, index_head_dim; Megatron-Bridge's DSv4HybridSelfAttention).
    Every layer attends to its last `window` tokens; a compressed layer also to compressed keys, each summarizing
    `ratio` consecutive tokens through a learned gated pooling (the compressor, its own key/value and gate
    projections; with ratio 4 windows overlap, twice the width):
      CSA (compressed sparse attention, csa_layers at csa_ratio): a lightning indexer (index_heads x index_head_dim
          queries from the query latent, one key of index_head_dim per compressed position from its own compressor)
          scores every earlier compressed key and the query attends to the index_topk best;
      HCA (heavily compressed attention, hca_layers at hca_ratio): every earlier compressed key, no indexer.
    The other layers (layers - csa_layers - hca_layers) attend to the window only. Needs mla with shared_kv: the
    keys, compressed or not, are the shared key/value vectors of width qk_head_dim."""
    window: int
    csa_layers: int
    csa_ratio: int
    hca_layers: int
    hca_ratio: int
    index_topk: int
    index_heads: int
    index_head_dim: int

    def validate(self, file=None):
        _ranges(self, "compressed_attention", "compressed_attention.", file)

    def layer_params(self, hidden: int, kv_dim: int, q_lora_rank: int) -> float:
        """Compressor and indexer weights summed over the layers: a compressor's key/value and gate projections
        (h -> coff kv_dim each; coff = 2 in CSA layers, whose windows overlap) and its per-position bias
        (ratio x coff kv_dim); the indexer's query up projection (q_lora_rank -> heads x dim), its own compressor
        (kv_dim = index_head_dim, the CSA ratio) and its per-head weights (h -> heads)."""
        def compressor(ratio, dim, coff):
            return 2 * hidden * coff * dim + ratio * coff * dim
        index = (q_lora_rank * self.index_heads * self.index_head_dim + hidden * self.index_heads
                 + compressor(self.csa_ratio, self.index_head_dim, 2))
        return (self.csa_layers * (compressor(self.csa_ratio, kv_dim, 2) + index)
                + self.hca_layers * compressor(self.hca_ratio, kv_dim, 1))


@dataclasses.dataclass(frozen=True)
class HybridSpec:
    """Hybrid Mamba-2 / attention / MLP blocks (Nemotron-H, arXiv 2504.03624; Nemotron-3, arXiv 2512.20848), as
    Megatron-Core's hybrid_override_pattern lays them out: one character per block, `M` a Mamba-2 mixer, `*` a
    self-attention block, `-` a dense MLP block, `E` a MoE block. `layers` counts blocks, not transformer layers:
    each block is one sub-layer (a norm, one mixer or MLP, a residual add). Mamba-2 (Dao & Gu 2024, "Transformers
    are SSMs", section 7 / mamba_ssm Mamba2): in_proj h -> [z, x, B, C, dt] of widths (d_in, d_in, G N, G N, heads)
    with d_in = mamba_heads x mamba_head_dim, a causal conv1d of width mamba_conv over [x, B, C], the SSD scan in
    chunks of mamba_chunk tokens, a gated RMSNorm, out_proj d_in -> h."""
    pattern: str
    mamba_heads: int
    mamba_head_dim: int
    mamba_groups: int
    mamba_state: int
    mamba_conv: int = 4
    mamba_chunk: int = 128

    def validate(self, file=None):
        _ranges(self, "hybrid", "hybrid.", file)
        bad = sorted(set(self.pattern) - set(HYBRID_BLOCKS))
        _check(isinstance(self.pattern, str) and self.pattern != "" and not bad, "hybrid.pattern", self.pattern,
               f"must be a non-empty string of {', '.join(repr(c) for c in HYBRID_BLOCKS)}"
               + (f" (found {bad[0]!r})" if bad else ""),
               "Megatron-Core hybrid_override_pattern: M Mamba-2, * attention, - MLP, E MoE", file=file)

    def count(self, kind: str) -> int:
        return self.pattern.count(kind)

    @property
    def inner(self) -> int:
        return self.mamba_heads * self.mamba_head_dim

    def mamba_params(self, hidden: int) -> float:
        """in_proj + conv1d (weights and bias) + A, D, dt_bias per head + gated norm + out_proj + the block norm."""
        gn = self.mamba_groups * self.mamba_state
        in_proj = hidden * (2 * self.inner + 2 * gn + self.mamba_heads)
        conv = (self.inner + 2 * gn) * (self.mamba_conv + 1)
        return in_proj + conv + 3 * self.mamba_heads + self.inner + self.inner * hidden + hidden


HYBRID_BLOCKS = ("M", "*", "-", "E")


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
    # dropout layers (Megatron-LM's default hidden/attention dropout 0.1): training stores their masks. Llama,
    # Qwen, Mixtral, MPT and Nemotron-4 train with dropout 0, and PyTorch's dropout at p = 0 returns its input
    # without a mask (ATen dropout: p == 0 -> input), so they store none.
    dropout: bool = True
    moe: MoESpec | None = None
    source: str = ""
    mla: MLASpec | None = None  # multi-head latent attention instead of GQA (heads, kv_heads, head_dim unused)
    sliding_window: SlidingWindowSpec | None = None  # local attention in some layers
    hybrid: HybridSpec | None = None  # Mamba-2 / attention / MLP / MoE blocks instead of transformer layers
    # YaRN's attention (concentration) factor, which scales the rotary cos and sin (Peng et al. 2023, "YaRN",
    # section 3.4: 0.1 ln(s) + 1 for a context extension s; Megatron-Core _yarn_get_mscale); 1: plain RoPE or none.
    # Megatron-Core's fused RoPE cannot apply it and runs the eager one instead (Framework.fused_scaled_rope)
    rope_attention_factor: float = 1.0
    # DeepSeek-V4's hybrid compressed attention (CompressedAttentionSpec) instead of full attention
    compressed_attention: CompressedAttentionSpec | None = None
    # residual streams: Manifold-Constrained Hyper-Connections (Xie et al. 2025, "mHC", arXiv 2512.24880) widen the
    # residual to n streams of h that each sub-layer reads through a learned mix and writes back into (DeepSeek-V4:
    # hc_mult 4); 1 is the plain residual
    hyper_connections: int = 1

    def validate(self, file=None):
        _check(isinstance(self.name, str) and self.name != "", "name", self.name, "must be a non-empty string",
               file=file)
        _ranges(self, "model", "", file)
        _check(self.heads % self.kv_heads == 0, "kv_heads", self.kv_heads,
               f"must divide heads={self.heads}", "GQA groups query heads evenly", file=file)
        if self.moe is not None:
            self.moe.validate(file)
            _check(self.moe.first_dense_layers < self.layers, "moe.first_dense_layers", self.moe.first_dense_layers,
                   f"must be below layers={self.layers}", "leave at least one MoE layer", file=file)
        if self.mla is not None:
            self.mla.validate(file)
            _check(self.rope_attention_factor == 1.0, "rope_attention_factor", self.rope_attention_factor,
                   "is not modelled for multi-head latent attention",
                   "MLA folds YaRN's factor into the softmax scale (DeepSeek-V3: mscale = mscale_all_dim): leave 1",
                   file=file)
        if self.sliding_window is not None:
            self.sliding_window.validate(file)
            _check(self.sliding_window.layers <= self.layers, "sliding_window.layers", self.sliding_window.layers,
                   f"cannot exceed layers={self.layers}", "count the layers whose attention is windowed", file=file)
        ca = self.compressed_attention
        if ca is not None:
            ca.validate(file)
            _check(self.mla is not None and self.mla.shared_kv, "compressed_attention", "(section)",
                   "needs mla with shared_kv: true", "DeepSeek-V4 attends over shared key/value vectors", file=file)
            _check(ca.csa_layers + ca.hca_layers <= self.layers, "compressed_attention.csa_layers",
                   ca.csa_layers, f"plus hca_layers={ca.hca_layers} cannot exceed layers={self.layers}",
                   "count the layers of each kind; the rest attend to the window only", file=file)
            _check(self.sliding_window is None and self.hybrid is None, "compressed_attention", "(section)",
                   "cannot be combined with sliding_window or hybrid", "its window is compressed_attention.window",
                   file=file)
        if self.hybrid is not None:
            self.hybrid.validate(file)
            _check(len(self.hybrid.pattern) == self.layers, "hybrid.pattern", self.hybrid.pattern,
                   f"has {len(self.hybrid.pattern)} blocks but layers={self.layers}",
                   "layers counts the blocks of a hybrid model", file=file)
            _check((self.hybrid.count("E") > 0) == (self.moe is not None), "hybrid.pattern", self.hybrid.pattern,
                   "has MoE blocks ('E') but no moe: section" if self.moe is None
                   else "has no MoE block ('E') but the model has a moe: section", file=file)
            _check(self.mla is None and self.sliding_window is None, "hybrid.pattern", self.hybrid.pattern,
                   "cannot be combined with mla or sliding_window", "the hybrid model has plain GQA attention",
                   file=file)

    @property
    def n_moe_layers(self) -> int:
        if self.moe is None:
            return 0
        if self.hybrid is not None:
            return self.hybrid.count("E")
        return (self.layers - self.moe.first_dense_layers) // self.moe.layer_interval

    def block_fractions(self) -> tuple:
        """(attention, mlp or moe, mamba) share of the layers: (1, 1, 0) for a transformer, whose every layer has
        attention and an MLP; a hybrid model's blocks have one each."""
        if self.hybrid is None:
            return 1.0, 1.0, 0.0
        n, c = self.layers, self.hybrid.count
        return c("*") / n, (c("-") + c("E")) / n, c("M") / n

    def attention_params(self) -> float:
        """Per layer (averaged over the layers: compressors and indexers sit in some of them only)."""
        h, d = self.hidden, self.head_dim
        if self.mla is not None:
            return (self.mla.replicated_params(h) + self.mla.split_params(h, self.heads)
                    + self.compressed_params() / self.layers)
        return h * (self.heads * d + 2 * self.kv_heads * d) + self.heads * d * h

    def compressed_params(self) -> float:
        """Compressors and indexers of every layer (0 without compressed attention)."""
        ca = self.compressed_attention
        return 0.0 if ca is None else ca.layer_params(self.hidden, self.mla.qk_head_dim, self.mla.q_lora_rank)

    def hyper_params_per_layer(self) -> float:
        """mHC's mixing weights, per sub-layer: a projection of the n h flattened streams to the n pre weights,
        n post weights and n x n residual weights, their biases and three gates (mHC eqs. 7-8; DeepSeek-V4's
        hc_attn_fn / hc_attn_base / hc_attn_scale); two sub-layers per layer. 0 for one stream."""
        n = self.hyper_connections
        if n == 1:
            return 0.0
        mix = (2 + n) * n
        return 2.0 * (n * self.hidden * mix + mix + 3)

    def params_per_layer(self, moe_layer: bool = False, active: bool = False) -> float:
        """Parameters of one layer; active: only those one token uses (top_k routed + shared experts)."""
        h = self.hidden
        attn = self.attention_params()
        mats = 3 if self.gated_mlp else 2
        if moe_layer and self.moe is not None:
            routed = self.moe.top_k if active else self.moe.experts
            width = self.moe.latent_size or h
            mlp = routed * mats * width * self.moe.expert_ffn + self.moe.shared_experts * mats * h * self.moe.shared_ffn
            mlp += h * self.moe.experts + 2 * h * self.moe.latent_size  # router, latent down/up projections
        else:
            mlp = mats * h * self.ffn
        return attn + mlp + 2 * h + self.hyper_params_per_layer()  # two norms

    def _hybrid_params(self, active: bool) -> float:
        """Blocks of a hybrid model: each a norm plus one mixer, MLP or MoE."""
        hy, h = self.hybrid, self.hidden
        mats = 3 if self.gated_mlp else 2
        per = {"M": hy.mamba_params(h), "*": self.attention_params() + h, "-": mats * h * self.ffn + h}
        if self.moe is not None:
            per["E"] = self.params_per_layer(True, active) - self.attention_params() - h
        return sum(hy.count(k) * v for k, v in per.items())

    @property
    def n_active_params(self) -> float:
        """Parameters one token uses (embeddings included), the MoE papers' "activated" count."""
        n_moe = self.n_moe_layers
        emb = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        if self.hybrid is not None:
            return self._hybrid_params(active=True) + emb
        return ((self.layers - n_moe) * self.params_per_layer(False)
                + n_moe * self.params_per_layer(True, active=True) + emb)

    @property
    def n_params(self) -> float:
        n_moe = self.n_moe_layers
        emb = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        if self.hybrid is not None:
            return self._hybrid_params(active=False) + emb
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
    # gemm_half_flops where a CUDA graph replays the GEMMs (Training.cuda_graphs "full"): the fitted
    # gemm_half_flops comes from runs that launch every kernel from the host, so its fixed time per GEMM holds the
    # host's launch work too, which a replayed graph does not do; what is left is the kernel's own (cost/compute.py
    # gemm_half_for). 0 = gemm_half_flops (no graphed run tells them apart)
    gemm_half_flops_graphed: float = 0.0
    # keys one attention kernel call sweeps per query at which the fused-attention efficiency is half of
    # attention_max (compute.attention_efficiency); 0 = no dependence on the sequence length
    attention_half_seq: float = 0.0
    # the same for calls without a causal diagonal: a sliding-window band, a Mamba chunk scan, a context-parallel ring
    # step off the diagonal (compute.attention_call_efficiency); 0 = attention_half_seq (one curve for every call)
    attention_half_seq_full: float = 0.0
    # head width at which the calibrated fused-attention kernel runs at half its wide-head speed
    # (compute.head_dim_factor); 0 = no dependence on the head width
    attention_head_dim_half: float = 0.0
    # this part's fused-attention speed relative to attention_max, where a family shares one fitted attention_max
    # but a member's silicon differs in the attention loop (Blackwell Ultra's doubled exponential throughput: GB300,
    # B300); 1 = the fitted value as it stands
    attention_part_factor: float = 1.0
    # coefficient of variation of one GPU's kernel time per step (cost/straggler.py); 0 = identical GPUs
    straggler_cv: float = 0.0
    # what an overlapped collective costs the compute beside it beyond the SMs its kernels hold (HBM and L2
    # traffic of its copies, clocks under the shared power limit): a fraction of the hidden time (cost/overlap.py)
    overlap_contention: float = 0.0

    def validate(self, file=None):
        _check(self.status in ("provisional", "calibrated"), "efficiency.status", self.status,
               "must be 'provisional' or 'calibrated'", file=file)
        _ranges(self, "efficiency", "efficiency.", file)


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    name: str
    peak_tflops: dict
    hbm_GiB: float
    hbm_GBps: float
    nvlink_GBps: float
    nic_GBps: float
    nvl_domain_gpus: int
    efficiency: Efficiency
    sm_count: int  # streaming multiprocessors
    comm_sms: int  # SMs a collective's kernels take while they overlap compute (NCCL: one per channel)
    # attention kernel name -> its speed relative to the kernel attention_max was fitted on (Framework)
    attention_kernels: dict = dataclasses.field(default_factory=dict)
    # GPU <-> host memory bandwidth per GPU per direction, GB/s (PCIe or NVLink-C2C, shared as the board shares it):
    # what activation offloading copies over (Training.offload_layers; cost/offload.py). 0: not given
    host_GBps: float = 0.0
    # The FP8 tensor cores take every operand layout (Blackwell, sm_100 and later: Transformer Engine's
    # nvte_is_non_tn_fp8_gemm_supported). Hopper's FP8 GEMMs take only TN, so a per-tensor-scaled FP8 operand that a
    # backward GEMM reads transposed needs a second, transposed copy; on such a GPU TE creates none
    # (quantizer.cpp: create_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()). Block-scaled
    # formats (MXFP8, NVFP4) still write two copies: their scales run along the reduction dimension.
    fp8_any_layout: bool = False
    # HBM a training process holds beside the tensors the memory model counts: the CUDA context and library handles,
    # NCCL's channel buffers, Transformer Engine's workspaces. A fixed amount, not a share of the card (it does not
    # grow with HBM). Bounded above by published runs that ran: Nemotron-4 340B (NeMo 24.07, TP 8, PP 8, VP 12,
    # FP8, 128 H100s) needs 76.7 GiB of modeled weights, optimizer state and activations of the 79.6 GiB the driver
    # reports, Megatron-Bridge's Megatron-FSDP Llama 3 70B runs on 64 GB200s 172.5 GiB, so a reserve above 2.9 GiB
    # refuses real runs (tests/test_validate.py).
    memory_reserve_GiB: float = 2.5
    # Maximum achievable matmul TFLOP/s measured on the part, per precision (MAMF: the fastest torch.mm over a sweep
    # of large shapes; stas00/ml-engineering compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS
    # comparison table"): no GEMM of a training step runs faster, so a fitted gemm_max x peak above it is capped
    # there (gemm_ceiling, cost/compute.gemm_rate). Keys: MAMF_PRECISIONS; empty: nothing measured, no cap.
    mamf_tflops: dict = dataclasses.field(default_factory=dict)

    def validate(self, file=None):
        _ranges(self, "gpu", "", file)
        for k, v in self.mamf_tflops.items():
            _check(k in MAMF_PRECISIONS, f"mamf_tflops.{k}", v, "unknown precision",
                   f"measured precisions are: {', '.join(MAMF_PRECISIONS)}", file=file)
            peak = self.peak_tflops.get(k)
            _check(not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0 and (peak is None or v <= peak),
                   f"mamf_tflops.{k}", v, f"must be a measured rate in (0, peak_tflops.{k}={peak}] TFLOP/s",
                   "a measured matmul rate cannot exceed the datasheet peak", file=file)
        _check(self.memory_reserve_GiB < self.hbm_GiB, "memory_reserve_GiB", self.memory_reserve_GiB,
               f"must be below hbm_GiB={self.hbm_GiB}", file=file)
        _check(self.comm_sms < self.sm_count, "comm_sms", self.comm_sms,
               f"must be below sm_count={self.sm_count}", file=file)
        for p in PRECISIONS:
            _check(p in self.peak_tflops, f"peak_tflops.{p}", None, "is missing",
                   f"give all of {', '.join(PRECISIONS)}", file=file)
            rng = RANGES["peak_tflops"][p]
            _check(rng.ok(self.peak_tflops[p]), f"peak_tflops.{p}", self.peak_tflops[p],
                   f"must be {rng.describe()} ({rng.why})", file=file)
        extra = sorted(set(self.peak_tflops) - set(PRECISIONS))
        _check(not extra, f"peak_tflops.{extra[0] if extra else ''}", None, "unknown precision",
               f"precisions are: {', '.join(PRECISIONS)}", file=file)
        rng = ATTENTION_KERNEL_RANGE
        for k, v in self.attention_kernels.items():
            _check(isinstance(k, str) and k != BEST_KERNEL, f"attention_kernels.{k}", v,
                   f"kernel names are strings other than {BEST_KERNEL!r} (the calibrated kernel)", file=file)
            _check(rng.ok(v), f"attention_kernels.{k}", v, f"must be {rng.describe()} ({rng.why})", file=file)
        self.efficiency.validate(file)

    def attention_kernel_factor(self, kernel: str) -> float:
        """Speed of ``kernel`` relative to the calibrated one; a kernel the GPU does not list runs at 1.0 (no
        published ratio for that GPU)."""
        return 1.0 if kernel == BEST_KERNEL else float(self.attention_kernels.get(kernel, 1.0))

    def peak_flops(self, precision: str) -> float:
        return float(self.peak_tflops[precision]) * 1e12

    def gemm_ceiling(self, precision: str) -> float:
        """The measured maximum achievable matmul rate of ``precision`` as a fraction of its peak (mamf_tflops);
        GEMM_CEILING_NONE where the part has no measurement of that precision. FP16 runs at BF16's tensor-core rate
        on every part here, so it takes BF16's measurement; FP4 and the FP32/TF32 paths have none."""
        key = MAMF_OF_PRECISION.get(precision)
        if key is None or key not in self.mamf_tflops:
            return GEMM_CEILING_NONE
        return float(self.mamf_tflops[key]) / float(self.peak_tflops[precision])

    def peak_flops_16bit(self, precision: str) -> float:
        """The tensor-core rate of the work that stays in 16 bits when the GEMMs run in FP8: the attention core
        and the output layer. FP8 training recipes quantize only the transformer layers' linear layers
        (Transformer Engine fp8_autocast around Linear/LayerNormLinear; Megatron-Bridge keeps
        fp8_dot_product_attention off by default and the output layer outside the FP8 region; torchtitan's
        Float8 converter skips the output layer), so those run at the BF16 peak; NVFP4 recipes likewise (TE
        NVFP4BlockScaling quantizes the linear layers only). Other precisions: their own."""
        return self.peak_flops(precision_16bit(precision))

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_GiB * 2**30

    @property
    def usable_bytes(self) -> float:
        """HBM the modeled tensors may fill: the card less the process's fixed reserve."""
        return (self.hbm_GiB - self.memory_reserve_GiB) * 2**30


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
    # Failures of the links a GPU cannot route around without another plane (its NIC ports into this level; each
    # GPU has one such link, of all its planes together: failures scale with the optical lanes, not with how the
    # lanes are grouped into planes). Rates per link-hour; failures the fabric routes around (equal-cost paths
    # behind the first hop) belong in failure_rate_per_hour. cost/goodput.py turns them into interruptions or
    # degraded time; 0 (no data) by default.
    link_failures_per_link_hour: float = 0.0  # hard: down until repaired
    link_flaps_per_link_hour: float = 0.0  # transient: down and up again within the transport's reroute time
    # Time to replace a failed optic/cable. Assumption (no published figure for AI fabrics): a few hours, the
    # on-site swap of a pluggable optic; set per system.
    repair_s: float = 4 * 3600.0  # also the time to replace a failed plane switch
    # Plane switches (cost/goodput.py): a failed switch takes one plane of the gpus_per_switch NICs attached to it;
    # the job depends on planes x (GPUs crossing the level) / gpus_per_switch of them. 0 (no data) by default.
    switch_failures_per_switch_hour: float = 0.0
    gpus_per_switch: int = 64
    # Microbursts at one port of this level (cost/bursts.py): Poisson arrivals, exponential durations, arrivals at
    # burst_overload x the port rate while one lasts, buffer_bytes of switch buffer before the port drops. A rate
    # of 0 (the default) means no bursts; the other three then do not matter.
    burst_rate_per_s: float = 0.0
    burst_duration_us: float = 100.0
    burst_overload: float = 2.0
    buffer_bytes: float = 2.0**20

    def validate(self, file=None, prefix: str = ""):
        key = f"{prefix}levels.{self.name}"  # prefix: "buildings[1]." for a building's own values
        _check(self.name in LEVEL_NAMES, f"{key}.name", self.name, "unknown level",
               f"use one of {', '.join(LEVEL_NAMES)} (inner to outer)", file=file)
        _ranges(self, "level", key + ".", file)


@dataclasses.dataclass(frozen=True)
class BuildingSpec:
    """One building of a heterogeneous system (sax_jax/buildings.py): its GPU type and the levels inside it (the
    system's node and building levels, with this building's own fabric values where it gives them)."""
    gpu: GpuSpec
    levels: tuple  # of Level, inside one building (node .. building)


@dataclasses.dataclass(frozen=True)
class SystemSpec:
    name: str
    gpu: GpuSpec  # of a heterogeneous system: the first building's (the reference for reports)
    levels: tuple  # of Level, inner to outer
    buildings: tuple = ()  # of BuildingSpec, one per building in rank order; () for one GPU type (buildings.py)

    def validate(self, file=None):
        _check(len(self.levels) >= 1, "levels", [], "needs at least the node level", file=file)
        names = [lv.name for lv in self.levels]
        for lv in self.levels:
            lv.validate(file)
        order = [LEVEL_NAMES.index(n) for n in names]
        _check(order == sorted(order) and len(set(order)) == len(order) and names[0] == "node", "levels",
               names, "must start at 'node' and go inner to outer without repeats",
               f"order is {', '.join(LEVEL_NAMES)}", file=file)
        biggest = max(self.levels, key=lambda lv: lv.size)
        _check(self.n_gpus <= MAX_GPUS, f"levels.{biggest.name}.size", biggest.size,
               f"the levels multiply to {self.n_gpus:,} GPUs, more than {MAX_GPUS:,}", "check the level sizes",
               file=file)

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
    loss_recovery: str  # go_back_n | selective_repeat | bounded_loss | tcp (socket transport, e.g. over a WAN)
    qps: int = 1  # queue pairs (flows) per connection; ECMP hashes each separately
    channels: int = 8  # NCCL channels per GPU; each keeps window_bytes_per_channel in flight
    window_bytes_per_channel: float = 4 * 2**20
    reroute_s: float = 1.0  # time to route around a failed link/plane
    tolerated_loss: float = 0.0  # bounded-loss only: fraction of data dropped at the deadline
    # Whether a connection survives the hard failure of its GPU's link on one plane by moving to the other planes
    # (MRC: sprays over all planes and stops using a failed path within ~RTT). False for RDMA RC (RoCE, one QP
    # bound to one port): the retry counter runs out (NCCL_IB_TIMEOUT/RETRY_CNT), the QP goes to error and NCCL
    # aborts the job. With one plane nothing survives: the GPU has no other link.
    survives_link_failure: bool = False
    # Retransmission timeout (cost/bursts.py): what a reliable transport waits when the tail of a round is lost and no
    # later packet triggers a NAK/SACK. Only microbursts use it.
    rto_us: float = 1000.0
    # Bounded loss (DBLP, OptiReduce, MLT): a round of gradient traffic waits at most deadline_us past its expected
    # end, then proceeds without the missing data if that is within the tolerated loss (cost/bursts.py).
    deadline_us: float = 0.0
    # Bounded loss: tolerated loss by training phase, ((until, tolerated_loss), ...) with `until` the fraction of
    # training at which the phase ends (increasing, the last 1.0); empty: tolerated_loss throughout.
    loss_schedule: tuple = ()

    def validate(self, file=None):
        key = f"transports.{self.name}"
        _check(self.load_balancing in LOAD_BALANCING, f"{key}.load_balancing", self.load_balancing,
               "unknown", f"use one of {', '.join(LOAD_BALANCING)}", file=file)
        _check(self.loss_recovery in LOSS_RECOVERY, f"{key}.loss_recovery", self.loss_recovery, "unknown",
               f"use one of {', '.join(LOSS_RECOVERY)}", file=file)
        _ranges(self, "transport", key + ".", file)
        self._validate_schedule(key, file)

    def _validate_schedule(self, key, file):
        sched = self.loss_schedule
        hint = "e.g. loss_schedule: [[0.1, 0.0], [0.9, 0.01], [1.0, 0.001]] (phase end as a fraction of training, loss)"

        def phase(i, ph):
            _check(0.0 <= ph[1] < 1.0, f"{key}.loss_schedule[{i}]", ph, "tolerated loss must be in [0, 1)", hint,
                   file=file)
        prev = _check_pairs(sched, f"{key}.loss_schedule", "until, tolerated_loss", MAX_LOSS_PHASES, hint, file,
                            increase="phase ends must increase within (0, 1]", x_max=1.0, point=phase)
        if sched:
            _check(prev == 1.0, f"{key}.loss_schedule", sched, "the last phase must end at 1.0 (all of training)",
                   hint, file=file)
            _check(self.loss_recovery == "bounded_loss", f"{key}.loss_schedule", sched,
                   "only a bounded_loss transport drops data", "remove it or set loss_recovery: bounded_loss", file=file)

    def phases(self) -> tuple:
        """((weight, tolerated_loss), ...): the schedule as fractions of training (one phase if none is given)."""
        if not self.loss_schedule:
            return ((1.0, float(self.tolerated_loss)),)
        out, prev = [], 0.0
        for until, q in self.loss_schedule:
            out.append((float(until) - prev, float(q)))
            prev = float(until)
        return tuple(out)


@dataclasses.dataclass(frozen=True)
class PriceSpec:
    """Infrastructure prices for co-design (cost/provision.py), per hour (amortized purchase plus operation)."""
    name: str = "prices"
    gpu_usd_per_hour: float = 0.0
    link_usd_per_GBps_hour: float = 0.0
    port_usd_per_hour: float = 0.0
    source: str = ""  # where the numbers come from, or that they are examples

    def validate(self, file=None):
        _ranges(self, "prices", "", file)


BEST_KERNEL = "best"
DP_CALLS = ("buckets", "layers")
# When ZeRO-3 issues the next layer's backward all-gather (PyTorch FSDP BackwardPrefetch; cost/dp.py)
BACKWARD_PREFETCH = ("pre", "post")
# How --tp-comm-overlap / async TP hides the tensor-parallel collectives (cost/tensor_parallel.py)
TP_OVERLAPS = ("userbuffers", "micro_pipeline", "none")


@dataclasses.dataclass(frozen=True)
class Framework:
    """A training software stack, described by how its kernels differ from the reference the per-GPU constants
    were fitted on (Megatron-Core with Transformer Engine: fused elementwise kernels, cuDNN/FlashAttention).

    attention_kernel names an entry of the GPU's ``attention_kernels`` (its speed relative to the calibrated
    kernel); elementwise_bytes_factor scales the HBM traffic of the memory-bound layer kernels (eager PyTorch
    runs norm, bias, activation, dropout and residual as separate kernels, each reading and writing the
    activations); layer_overhead_us adds a fixed time per layer and pass (eager launches, FSDP hooks);
    expert_gemm_us is what each local expert adds to each of an MoE layer's grouped GEMMs and moe_host_us what an
    MoE layer's forward waits on the host when no CUDA graph captures its router (cost/compute.py). dp_calls says
    how the data-parallel reductions and gathers are issued, each call paying the ring's step latencies
    (cost/dp.py): ``buckets`` (Megatron-Core DDP, max(40M, 1M x dp) parameters per bucket, one call without
    overlap) or ``layers`` (PyTorch FSDP / FSDP2: one call per wrapped transformer block). backward_prefetch says
    when ZeRO-3 issues the next layer's backward all-gather: ``pre``, before the current layer's gradient compute
    (FSDP BACKWARD_PRE, FSDP2's default), so it hides under it; ``post``, after it (FSDP BACKWARD_POST), behind the
    current reduce-scatter on the one NCCL stream, so both wait on the critical path (cost/dp.py)."""
    name: str = "megatron-te"
    attention_kernel: str = BEST_KERNEL
    elementwise_bytes_factor: float = 1.0
    layer_overhead_us: float = 0.0
    expert_gemm_us: float = 0.0
    moe_host_us: float = 0.0
    dp_calls: str = "buckets"
    backward_prefetch: str = "pre"
    # how it hides tensor-parallel collectives under the GEMMs when TP overlap is on (cost/tensor_parallel.py):
    # ``userbuffers`` (Transformer Engine, Megatron-Core's --tp-comm-overlap) or ``micro_pipeline`` (PyTorch's async
    # TP: Inductor's micro_pipeline_tp pass fuses an all-gather into the matmuls that read it and a reduce-scatter
    # into the one matmul that feeds it, over symmetric memory) or ``none`` (no mechanism: its TP collectives are
    # plain calls between the GEMMs, exposed whatever the design's overlap says; eager PyTorch)
    tp_overlap: str = "userbuffers"
    # whether its fused rotary-embedding kernel also applies a YaRN attention factor other than 1
    # (ModelSpec.rope_attention_factor). Megatron-Core's does not: apply_rotary_pos_emb falls back to the eager
    # PyTorch RoPE when mscale != 1 (models/common/embeddings/rope_utils.py: "mscale ... is not supported by TE's
    # fused RoPE. Using unfused implementation."), which GPT-OSS's YaRN (factor 32, mscale 1.347) always takes
    fused_scaled_rope: bool = False
    # whether the amax of a tensor an FP8 recipe scales is computed in the kernel that produces the tensor
    # (cost/quantize.py): torch.compile fuses the reduction into its pointwise producer; eager Transformer Engine
    # current scaling reads the tensor once for the amax and once more for the cast
    fused_amax: bool = False
    # whether its norm kernel computes the amax of its 16-bit output for an FP8 current-scaled cast, so the cast of
    # a norm-fed linear's input reads it once instead of twice (cost/quantize.py): Transformer Engine >= 2.7
    # (NVIDIA/TransformerEngine#2013, "Fuse amax computation into normalization kernel for current scaling",
    # 2025-07-31: pytorch/csrc/extensions/normalization.cpp create_hp_tensor_with_amax + quantize_with_amax), which
    # LayerNormLinear (Megatron-Core's QKV and FC1) calls; earlier versions ran nvte_compute_amax over the output
    norm_amax: bool = False
    # Eager PyTorch (no torch.compile, no fused kernels): HBM bytes its composite RMSNorm moves per hidden element
    # beyond a fused norm's read + write, and its rotary embedding per rotated query/key element, forward
    # (cost/compute.py; derived by counting the framework's ops in frameworks.yaml). 0: fused.
    eager_norm_bytes_per_element: float = 0.0
    eager_rope_bytes_per_element: float = 0.0
    description: str = ""

    def validate(self, file=None):
        _ranges(self, "framework", f"frameworks.{self.name}.", file)
        _check(self.dp_calls in DP_CALLS, f"frameworks.{self.name}.dp_calls", self.dp_calls,
               f"must be one of {', '.join(DP_CALLS)}", "buckets: Megatron-Core DDP; layers: PyTorch FSDP", file=file)
        _check(self.backward_prefetch in BACKWARD_PREFETCH, f"frameworks.{self.name}.backward_prefetch",
               self.backward_prefetch, f"must be one of {', '.join(BACKWARD_PREFETCH)}",
               "pre: FSDP BACKWARD_PRE / FSDP2; post: FSDP BACKWARD_POST (Composer's default)", file=file)
        _check(self.tp_overlap in TP_OVERLAPS, f"frameworks.{self.name}.tp_overlap", self.tp_overlap,
               f"must be one of {', '.join(TP_OVERLAPS)}",
               "userbuffers: Transformer Engine (Megatron-Core); micro_pipeline: PyTorch async TP (torchtitan); "
               "none: no TP overlap (eager PyTorch)", file=file)
        _check(isinstance(self.attention_kernel, str) and self.attention_kernel,
               f"frameworks.{self.name}.attention_kernel", self.attention_kernel, "must be a kernel name",
               f"{BEST_KERNEL!r} or a key of the GPU's attention_kernels (e.g. fa2, triton)", file=file)


CUDA_GRAPHS = ("none", "partial", "full")
# How a low-precision recipe scales its tensors (Training.fp8_scaling; the HBM passes each costs: cost/quantize.py)
FP8_SCALINGS = ("delayed", "current", "block", "rowwise")
PIPELINE_SPLITS = ("auto", "filled", "counted")
RECOMPUTE_MODULES = ("core_attn", "mlp", "moe", "moe_act", "shared_experts", "layernorm", "mla_up_proj", "elementwise",
                     "linear")


@dataclasses.dataclass(frozen=True)
class Training:
    global_batch_sequences: int
    seq_len: int
    precision: str = "bf16"
    param_bytes: float = 2.0  # 16-bit weights
    # Bytes per weight in the data-parallel parameter all-gathers (ZeRO-3/FSDP per microbatch, ZeRO-1/2 after the
    # step), when the framework casts the weights before gathering them: 1 for an FP8 all-gather (torchao Float8
    # enable_fsdp_float8_all_gather, which FSDP2 gathers as float8 and the GEMMs read as is; Megatron's
    # --fp8-param-gather). 0: the weights' own bytes (param_bytes).
    param_gather_bytes: float = 0.0
    grad_bytes: float = 4.0  # Megatron keeps fp32 main grads by default
    grad_reduce_bytes: float = 4.0  # bytes per gradient element on the wire
    optimizer_bytes_per_param: float = 12.0  # Adam: fp32 master + m + v
    sequence_parallel: bool = True
    flash_attention: bool = True
    allow_bounded_loss: bool = False  # bounded-loss transport changes training semantics
    # Interruptions and checkpoints (cost/goodput.py). Non-network failure rate: the Llama 3 405B run (Llama Team,
    # "The Llama 3 Herd of Models", 2024, Table 5) had 419 unexpected interruptions in 54 days on 16,384 H100s,
    # 35 of them network switch/cable (the network's share comes from the levels' link rates); the other 384 ->
    # 384 / (54 x 24 h x 16,384) = 1.81e-5 per GPU-hour (GPU and HBM3 faults dominate). Cross-check: Meta's research
    # clusters (Kokolis et al., HPCA 2025, arXiv 2410.21680, A100s, all causes) fit a job MTTF of 7.9 h at 1,024 GPUs
    # and 1.8 h at 16,384: 1.2e-4 and 3.4e-5 per GPU-hour, 2-7x this rate (shorter, less burnt-in jobs; every cause).
    gpu_failures_per_gpu_hour: float = 384.0 / (54 * 24 * 16384)
    # Time a checkpoint blocks training and time from a crash to training again. Assumptions (set per scenario):
    # an asynchronous checkpoint blocks for the device-to-host copy, tens of seconds for a 405B model's states
    # spread over the job; a restart (detect, reschedule onto spares, NCCL init, load the checkpoint) ~10 min.
    checkpoint_write_s: float = 30.0
    restart_s: float = 600.0
    checkpoint_interval_s: float = 0.0  # 0: the optimal interval (Daly 2006), else this fixed interval
    # Accuracy side of bounded-loss transports (cost/bursts.py): dropping a fraction d of the gradient and rescaling
    # the rest by 1/(1-d) keeps it unbiased and adds d/(1-d) |g|^2 of variance. The transport may drop at most
    # what keeps that below this tolerance, d <= tol/(1+tol), whatever its schedule allows. Assumption: 1 %.
    gradient_variance_tolerance: float = 0.01
    framework: "Framework" = None  # the software stack (None: the calibration reference, Megatron-TE)
    # LoRA fine-tuning (Hu et al. 2021, arXiv 2106.09685): base weights frozen, rank-r adapters A (in x r) and
    # B (r x out) on the QKV, attention-output, fc1 and fc2 linear layers of every layer (Megatron-Bridge LoRA
    # target_modules default: linear_qkv, linear_proj, linear_fc1, linear_fc2). 0: every weight trains.
    lora_rank: int = 0
    # Packed sequences (fine-tuning datasets of short examples concatenated into seq_len-token packs, attention kept
    # within each example: Transformer Engine's THD layout with cu_seqlens, FlashAttention's varlen kernels): the
    # length-weighted mean example length sum(L_i^2) / sum(L_i), in tokens. The fused attention kernel sweeps only
    # each example's own causal triangle, sum(L_i^2)/2 = L S/2 scores instead of S^2/2, in calls of L keys
    # (cost/compute.py). 0: one document per sequence (pre-training; a causal mask over the whole sequence).
    packed_doc_tokens: int = 0
    # What recompute "selective" recomputes (Megatron-Core --recompute-modules; its default core_attn): core_attn
    # the attention core, mlp the dense MLP layers, moe the MoE layers' experts, moe_act the experts' activation
    # function, shared_experts the shared experts, layernorm the norms, mla_up_proj MLA's up projections; and, for
    # op-level policies (torchtitan's selective op SAC), elementwise every elementwise kernel of the layer (norms,
    # RoPE, activation, residual adds, casts; it includes layernorm) and linear the linear layers' GEMMs, the share
    # recompute_linear_share of their FLOPs.
    recompute_modules: tuple = ("core_attn",)
    recompute_linear_share: float = 1.0
    # What recompute "full" recomputes: Megatron-Core --recompute-method block --recompute-num-layers N recomputes the
    # first N layers of each pipeline chunk from their input and keeps the others' activations; 0: every layer
    # (--recompute-method uniform, which recomputes all of them in groups of N)
    recompute_layers: int = 0
    # Low-precision recipes that keep the first / last layers' GEMMs in BF16 (Megatron-Bridge MixedPrecisionConfig
    # first_last_layers_bf16 with num_layers_at_start_in_bf16 / num_layers_at_end_in_bf16; e.g. Nemotron 3 Super's
    # NVFP4 recipe keeps the last 14 of 88 layers in BF16)
    bf16_layers_start: int = 0
    bf16_layers_end: int = 0
    # Multi-token prediction modules trained beside the model (DeepSeek-V3, arXiv 2412.19437, section 2.2;
    # Megatron-Core --mtp-num-layers): each one more layer and one more output layer + loss on the last stage
    mtp_layers: int = 0
    # Activation offloading (Transformer Engine's CPU offloading; Megatron-Core cpu_offloading_num_layers): the saved
    # activations of this many layers of each GPU's stage go to host memory during the forward and come back during
    # the backward (cost/offload.py); needs the GPU's host_GBps. Megatron-Core allows it only with pp = 1 and no
    # recomputation.
    offload_layers: int = 0
    # Megatron-Core --overlap-moe-expert-parallel-comm: the MoE all-to-alls of one microbatch run beside the
    # computation of another (the 1F1B steady state's merged forward/backward), as DeepSeek-V3's DualPipe overlaps
    # them (arXiv 2412.19437, section 3.2.1)
    ep_overlap: bool = False
    # A dispatcher that sends a token once to each destination node and forwards it to that node's experts over
    # NVLink (Megatron-Core's flex dispatcher with DeepEP or HybridEP; DeepEP's internode kernels, DeepSeek-V3
    # arXiv 2412.19437 section 3.2.2): what crosses the network is one copy per distinct remote node, and over
    # NVLink one per distinct destination GPU, not one per routed expert. False: the alltoall dispatcher (one copy
    # per routed expert, and with several local experts a sort of the received rows by expert and back: two more
    # memory passes, cost/compute.py alltoall_sort_bytes_per_token). Traced placements (expert_trace) always count
    # per-node and per-GPU copies.
    ep_dedup: bool = False
    # FP8 attention (Transformer Engine fp8_dot_product_attention: cuDNN's FP8 SDPA). Full attention runs at the
    # 16-bit attention rate either way: cuDNN's training benchmark times MXFP8 causal attention (forward +
    # backward, d 128) at 0.91-1.05x the BF16 kernel's speed on GB200 and GB300 from 2k to 8k keys. Its backward
    # does not skip the key blocks outside a sliding window, so a window layer's backward costs a full causal
    # layer's (cost/compute.py); the forward skips them as the 16-bit kernel does.
    fp8_attention: bool = False
    # CUDA graphs (Megatron-Core --cuda-graph-impl / --cuda-graph-scope): "none" launches every kernel from the host;
    # "partial": Transformer Engine graphs of the attention, router and MoE-preprocess scopes, the expert GEMMs
    # (dynamic token counts) still launched one by one; "full": one graph for the whole iteration (experts padded
    # to fixed shapes), no host launches left. What each one removes: cost/compute.py (host-launched MoE work).
    # Experts padded to capacity (token drop) need no host sync even without graphs ("partial"), and per-layer
    # graphs of such layers replay the expert GEMMs too ("full"); Megatron-Core's alltoall dispatcher, dropless,
    # syncs before its all-to-all under any partial graphs ("none"): validation.cuda_graphs_of.
    cuda_graphs: str = "none"
    # How an FP8/FP4 recipe scales the tensors it quantizes (cost/quantize.py): "delayed" (Transformer Engine's
    # DelayedScaling: the scale from an amax history, one cast pass), "current" (TE Float8CurrentScaling, torchao
    # tensorwise: an amax pass, then the cast; NVFP4's global amax likewise), "block" (MXFP8, DeepSeek-style
    # blockwise: each block's scale computed inside the one cast pass), "rowwise" (torchao rowwise: each operand
    # scaled along its reduction dimension, so inputs and gradients are scaled and cast once per orientation).
    # Ignored at 16 bits and above.
    fp8_scaling: str = "delayed"
    # Whether the run sets NVTE_NORM_FWD_USE_CUDNN, so Transformer Engine's LayerNormLinear normalizes with cuDNN
    # (pytorch/csrc/extensions/normalization.cpp): an MXFP8 cast then fuses into the norm, where TE's own norm kernel
    # writes the 16-bit output and casts it apart; an FP8 current-scaled input loses the amax the TE norm computes
    # (Framework.norm_amax) and pays its amax pass again. Delayed scaling fuses either way (cost/quantize.py).
    cudnn_norm: bool = False
    # How the layers are split over the pipeline's chunks (cost/stages.py): "filled": ceil(layers / chunks) per chunk
    # in order, the remainder in the last chunk (an explicit Megatron-Core pipeline_model_parallel_layout, as
    # Megatron-Bridge writes for DeepSeek-V3 and Kimi-K2); "counted": the embedding and the loss count as one layer
    # each (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split: the Llama 3 405B and
    # Qwen3-235B recipes); "auto": whichever makes the slowest stage faster, as a planner would choose.
    pipeline_split: str = "auto"
    # MoE parallel folding (Megatron-Core; Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960): the expert
    # layers get their own tensor-parallel size (expert_tensor_parallel_size) and their EP groups are formed over
    # all tp x cp x dp ranks of a stage instead of inside dp x cp. 0: no folding, experts split over the
    # attention's TP ranks and EP carved from dp (the model's layout before folding). Megatron-Bridge's MoE
    # benchmark recipes all set expert_tensor_parallel_size = 1.
    expert_tensor_parallel: int = 0
    # Low-communication training across buildings/regions (space axes dp_sync, sync_every, outer_precision;
    # cost/outer_sync.py). DiLoCo workers: one per building (campus and region levels are outer) or one per region
    # (only the region level is outer).
    diloco_workers: str = "building"
    # the shard group of sharding hsdp (HSDP_SHARD_LEVELS): ZeRO-3 inside it, the gradients all-reduced across the
    # replicas once per step
    hsdp_shard: str = "building"
    hsdp_outer: str = "replicate"  # HSDP_OUTER: across the shard groups
    # streaming DiLoCo (Douillard et al. 2025, arXiv 2501.18512): fragments synced in turn (the paper's strided
    # fragments of a few layers each) and the inner steps tau each fragment's sync overlaps. Assumptions: 4, 1.
    streaming_fragments: int = 4
    streaming_overlap_steps: float = 1.0
    # DiLoCo's outer state: the fp32 copy of the parameters at the last sync and the outer Nesterov momentum
    # (Douillard et al. 2023, Algorithm 1): 8 bytes per parameter, sharded like the inner optimizer
    outer_state_bytes_per_param: float = 8.0
    # tokens-to-target multiplier per H: ((H, multiplier), ...), H increasing from (1, 1.0); log-linear in between
    diloco_token_multiplier: tuple = DEFAULT_DILOCO_TOKENS
    # tokens of synchronous training to the target loss (time_to_target_s); example: 1T tokens
    target_tokens: float = 1e12

    def __post_init__(self):
        if self.framework is None:
            object.__setattr__(self, "framework", Framework())
        object.__setattr__(self, "recompute_modules", tuple(self.recompute_modules))
        if isinstance(self.diloco_token_multiplier, (list, tuple)):  # anything else fails validation, named
            object.__setattr__(self, "diloco_token_multiplier",
                               tuple(tuple(p) if isinstance(p, list) else p for p in self.diloco_token_multiplier))

    def _validate_diloco(self, file):
        _check(self.diloco_workers in DILOCO_WORKER_LEVELS, "training.diloco_workers", self.diloco_workers,
               "unknown worker level", f"use one of {', '.join(DILOCO_WORKER_LEVELS)}", file=file)
        tab = self.diloco_token_multiplier
        key, hint = "training.diloco_token_multiplier", "e.g. [[1, 1.0], [100, 1.02], [1000, 1.08]] (H, multiplier)"

        def point(i, pt):
            _check(0.1 <= pt[1] <= 100.0, f"{key}[{i}]", pt, "multiplier must be in [0.1, 100]", hint, file=file)
        _check_pairs(tab, key, "H, multiplier", MAX_TOKEN_POINTS, hint, file, min_n=1, increase="H must increase",
                     point=point)
        _check(tuple(tab[0]) == (1, 1.0), f"{key}[0]", tab[0], "must be [1, 1.0]: H = 1 is synchronous training",
               hint, file=file)

    def validate(self, file=None):
        _ranges(self, "training", "training.", file)
        _check(self.param_gather_bytes == 0 or self.param_gather_bytes >= 0.125, "training.param_gather_bytes",
               self.param_gather_bytes, "must be 0 (the weights' own bytes) or at least 0.125",
               "1 for an FP8 all-gather", file=file)
        bad = [m for m in self.recompute_modules if m not in RECOMPUTE_MODULES]
        _check(not bad, "training.recompute_modules", bad[0] if bad else None, "unknown module",
               f"use any of {', '.join(RECOMPUTE_MODULES)}", file=file)
        _check(not {"elementwise", "layernorm"} <= set(self.recompute_modules), "training.recompute_modules",
               list(self.recompute_modules), "elementwise already recomputes the norms",
               "list elementwise or layernorm, not both", file=file)
        self.framework.validate(file)
        self._validate_diloco(file)
        _check(self.hsdp_shard in HSDP_SHARD_LEVELS, "training.hsdp_shard", self.hsdp_shard, "unknown shard level",
               f"use one of {', '.join(HSDP_SHARD_LEVELS)}", file=file)
        _check(self.hsdp_outer in HSDP_OUTER, "training.hsdp_outer", self.hsdp_outer, "unknown outer strategy",
               f"use one of {', '.join(HSDP_OUTER)}", file=file)
        _check(self.precision in PRECISIONS, "training.precision", self.precision, "unknown precision",
               f"use one of {', '.join(PRECISIONS)}", file=file)
        _check(self.cuda_graphs in CUDA_GRAPHS, "training.cuda_graphs", self.cuda_graphs, "unknown CUDA-graph scope",
               f"use one of {', '.join(CUDA_GRAPHS)}", file=file)
        _check(self.fp8_scaling in FP8_SCALINGS, "training.fp8_scaling", self.fp8_scaling, "unknown scaling recipe",
               f"use one of {', '.join(FP8_SCALINGS)}", file=file)
        _check(self.pipeline_split in PIPELINE_SPLITS, "training.pipeline_split", self.pipeline_split,
               "unknown pipeline split", f"use one of {', '.join(PIPELINE_SPLITS)}", file=file)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_sequences * self.seq_len

"""Published training runs -> predicted vs measured metrics, errors and MAPE per dataset.

A *case* is one published run: model shape, GPU type and count, parallel layout, batch, the measured metric
and its source. Cases come from CSV files with the columns of ``configs/data/published_runs.csv`` (plus the
optional network columns below) or from YAML case files in ``configs/validation/`` that also carry a dataset
*profile*: the run settings the paper states for all its runs (flash attention, optimizer sharding, overlap)
and the documented defaults for cells it leaves empty. Empty cells are filled from the profile (or from
Megatron-LM's defaults for an unknown dataset) and every fill is reported with the case.

No per-case factors: the only tuned numbers are the per-GPU efficiency constants in configs/hardware/*.yaml,
fitted once by benchmarks/calibrate.py.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import glob
import hashlib
import math
import os
import re

import jax
import jax.numpy as jnp
import numpy as np

from . import specs as S
from .config import Scenario, load_framework, load_gpu, load_transports, read_yaml
from .cost import step_time
from .cost.compute import layer_flops, model_flops_per_sequence
from .params import build_params, model_params, stack_trees
from .resources import configs_dir
from .space import AXES, NUMERIC_AXES, Design, DesignSpace
from .uncertainty import model_class, scenario_is_moe, time_ratio

CONFIGS = configs_dir()  # bundled configs: the installed package data or the checkout's configs/
VALIDATION_DIR = os.path.join(CONFIGS, "validation")
COLUMNS = ("id", "dataset", "source", "model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
           "gated_mlp", "gpu", "n_gpus", "tp", "pp", "dp", "cp", "vpp", "mbs", "gbs", "recompute", "seq_parallel",
           "precision", "metric", "value", "notes")
OPTIONAL_COLUMNS = ("gpus_per_node", "link_gbps", "link_latency_ms")
# Columns of the public-run collection (configs/validation/data/): MoE shape, expert/FSDP layout, schedule, and
# the columns configs/validation/data/import_shared.py adds (head_dim, sharding, overlap, features, exclude).
EXTRA_COLUMNS = ("ep", "etp", "fsdp", "experts", "top_k", "moe_ffn", "shared_experts", "dense_layers", "schedule",
                 "head_dim", "sharding", "overlap", "features", "exclude")
INT_COLUMNS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "n_gpus", "tp", "pp", "dp", "cp",
               "vpp", "mbs", "gbs", "gpus_per_node", "ep", "etp", "experts", "top_k", "moe_ffn", "head_dim")
COUNT_COLUMNS = ("shared_experts", "dense_layers")  # whole numbers that may be 0
FLOAT_COLUMNS = ("value", "link_gbps", "link_latency_ms")
BOOL_COLUMNS = ("gated_mlp", "seq_parallel")
METRICS = ("iteration_s", "tflops_per_gpu", "tflops_per_gpu_hw", "mfu", "tokens_per_s")
# Megatron-LM's command-line defaults (megatron/training/arguments.py): --micro-batch-size 1 in its examples,
# no --num-layers-per-virtual-pipeline-stage (1F1B), no --recompute-granularity, no --sequence-parallel,
# context parallel 1, MHA (no --group-query-attention), GeLU MLP, bf16 in current examples.
GENERIC_DEFAULTS = {"kv_heads": None, "gated_mlp": "no", "cp": 1, "vpp": 1, "mbs": 1, "recompute": "none",
                    "seq_parallel": "no", "precision": "bf16", "source": "", "notes": "", "model": None}
GENERIC_PROFILE = {"flash_attention": True, "dropout": True, "defaults": {},
                   "design": {"sharding": "zero1", "overlap": "dp", "placement": "tp-cp-dp-pp"},
                   "defaults_source": "Megatron-LM command-line defaults"}
# Precision labels of the NVIDIA tables -> (the model's precision, its scaling recipe: Training.fp8_scaling). The
# model has one GEMM rate per precision (GpuSpec.peak_flops); the recipes differ in the HBM passes of their casts
# (cost/quantize.py). MXFP8 and DeepSeek-style blockwise FP8 compute each block's scale inside the cast; FP8-CS is
# current scaling; NVFP4's two-level scale needs the tensor's global amax before the cast (current). A plain "fp8"
# label takes a row feature (SCALING_FEATURES) or its dataset profile's fp8_scaling. Each mapping is reported.
PRECISION_ALIASES = {"mxfp8": ("fp8", "block"), "fp8-mx": ("fp8", "block"), "fp8-cs": ("fp8", "current"),
                     "fp8-blockwise": ("fp8", "block"), "nvfp4": ("fp4", "current")}
# `features` naming a run's FP8 scaling recipe where its dataset has more than one (import_shared.py)
SCALING_FEATURES = {"fp8-delayed": "delayed", "fp8-rowwise": "rowwise"}
# `features` of a run (configs/validation/data/import_shared.py) the model cannot represent: the run is reported
# as unsupported with this reason, never silently dropped and never scored.
UNSUPPORTED_FEATURES = {
    "shape-unknown": "model shape not published or not verified (data gap): nothing to evaluate",
}
# `features` whose widths the CSV columns do not carry: the row's model must have a bundled model file
# (configs/models/<model>.yaml) that gives them; its shape columns must agree with that file.
MODEL_FILE_FEATURES = {
    "mla": "multi-head latent attention widths (mla.*: q_lora_rank, kv_lora_rank, qk_nope/rope_head_dim, "
           "v_head_dim)",
    "sliding-window": "sliding-window attention (sliding_window.window, .layers, .sinks)",
    "hybrid-mamba": "hybrid Mamba-2/attention/MoE blocks (hybrid.pattern, Mamba-2 widths; moe.shared_expert_ffn, "
                    "moe.latent_size)",
    "compressed-attention": "DeepSeek-V4's compressed sparse / heavily compressed attention and hyper-connections "
                            "(compressed_attention.*, mla.shared_kv / o_lora_rank / o_groups, hyper_connections)",
}
# a multi-token-prediction layer the run trains but the model file does not carry (Nemotron-3 Super/Lightning)
MTP_APPROXIMATION = ("the run trains one multi-token-prediction layer (an attention and a MoE block and a second "
                     "output layer) that the model leaves out")
# Row columns that must equal the model file's fields (column -> ModelSpec / MoESpec attribute path)
MODEL_FILE_CHECKS = {"layers": "layers", "hidden": "hidden", "heads": "heads", "kv_heads": "kv_heads",
                     "head_dim": "head_dim", "ffn": "ffn", "vocab": "vocab",
                     "experts": "moe.experts", "top_k": "moe.top_k", "moe_ffn": "moe.expert_ffn",
                     "shared_experts": "moe.shared_experts", "dense_layers": "moe.first_dense_layers"}
# `features` of the run (not of the model) that a dataset profile parameterizes
RUN_FEATURES = {"lora": "LoRA fine-tuning: the adapter rank comes from the dataset profile (lora_rank)",
                "fp8-delayed": "FP8 with Transformer Engine's delayed scaling (NeMo's default recipe)",
                "fp8-rowwise": "FP8 with torchao's rowwise scaling",
                "eager": "run without torch.compile: its dataset framework's eager entry (<framework>-eager)",
                "fp8-all-gather": "FSDP gathers the weights in FP8 (torchao enable_fsdp_float8_all_gather): "
                                  "param_gather_bytes = 1",
                "fsdp-pure": "Composer FSDP mixed_precision PURE: gradients reduce-scattered in 16 bits "
                             "(grad_reduce_bytes = 2)",
                "hsdp-nvl-domain": "Megatron-FSDP HSDP: weights, gradients and optimizer state sharded inside each "
                                   "NVLink domain, the optimizer state also across the domains (sharding hsdp, "
                                   "hsdp_shard node, hsdp_outer optim)"}
# `features` naming the run's software stack apart from its dataset's: the framework gets this suffix
# (configs/frameworks.yaml torchtitan / torchtitan-eager: torchtitan's tables mix eager and torch.compile runs)
FRAMEWORK_FEATURES = {"eager": "-eager"}
UNSUPPORTED_PRECISIONS: dict = {}  # every precision label of the collection maps to a model precision now
# `features` the model represents only approximately: the run is scored and the approximation is reported.
APPROXIMATED_FEATURES = {
    "sac-op": "torchtitan op-level selective activation checkpointing is modelled as recompute 'selective' with "
              "modules elementwise and linear (sac_op_linear_share); its stored activations are approximated by "
              "dropping the elementwise outputs and the recomputed GEMMs' outputs from those of no recompute",
    "sac-layer": "torchtitan layer-level selective activation checkpointing (every 2nd block recomputed) is "
                 "modelled as recompute 'half'; exact up to the stage's layer split",
    "compressed-attention": "DeepSeek-V4's sparse attention (per-query gathered keys) runs at the dense flash "
                            "kernel's efficiency for its mean key count, and its hyper-connections cost their memory "
                            "traffic only; not modelled: the indexer's training loss (dsa_indexer_loss_coeff), the "
                            "Sinkhorn normalization kernels, the compressors' pooling and hash routing",
}
# `features` that name the board a run used when its `gpu` column gives the stock part: the row is evaluated on the
# named hardware file. torchtitan's Grand Teton H100s run at 500 W with HBM2e (configs/hardware/H100-GT-96GB.yaml).
GPU_VARIANT_FEATURES = {"h100-96gb": "H100-GT-96GB"}
# torchtitan's layer-level selective activation checkpointing (every 2nd block): recompute "half" (space.Recompute)
SAC_FEATURES = {"sac-layer"}


def sac_op_linear_share(v: dict) -> float:
    """Share of a dense layer's linear-layer FLOPs torchtitan's op-level SAC recomputes (pytorch/torchtitan at
    9dec370 and e7c0cae, _apply_ac_to_transformer_block: _save_list holds aten.mm, the SDPA flash/efficient
    attention ops, reduce_scatter and max; every second aten.mm of a block's forward is recomputed anyway, and every
    op outside the list is too: torch.compile's partitioner treats PREFER_RECOMPUTE as must-recompute). The block's
    matmuls run wq, wk, wv, wo, w1, w3, w2 (gated; w1, w2 otherwise), so the 2nd, 4th and 6th are wk, wo and one
    h x ffn matrix. A torchao Float8 linear counts the same: its forward calls torch.mm on Float8Tensor operands
    (torchao/float8/float8_linear.py, manual_float8_matmul_with_args_in_float8 and matmul_with_hp_or_float8_args),
    and the checkpoint's policy, a TorchDispatchMode (torch.utils.checkpoint _CachingTorchDispatchMode), sees that
    aten.mm.default before the subclass turns it into aten._scaled_mm (a dispatch mode runs ahead of a tensor
    subclass's __torch_dispatch__; under compile it tags the nodes traced inside that call with its policy, through
    fx_traceback.current_meta["recompute"])."""
    h, a, g, ffn = v["hidden"], v["heads"], v["kv_heads"] or v["heads"], v["ffn"]
    d = v.get("head_dim") or h // a
    mats = 3 if v["gated_mlp"] else 2
    even = g * d * h + a * d * h + h * ffn
    return even / (h * (a * d + 2 * g * d) + a * d * h + mats * h * ffn)
# The GPU's standard cluster: node and building latencies (and the fabric) of its reference system.
STANDARD_CLUSTER = {"A100-SXM-80GB": "selene-a100.yaml", "H100-SXM-80GB": "h100-building.yaml",
                    "H100-GT-96GB": "h100-building.yaml"}
DEFAULT_LATENCY_US = (3.0, 8.0)  # NVSwitch and a 3-tier fat tree incl. NCCL software (configs/systems)


class Unsupported(Exception):
    """A real run the model cannot represent (or a row excluded on purpose): reported with its reason, counted,
    never scored."""

    def __init__(self, file, row, id_, dataset, reason, excluded=False):
        self.file, self.row, self.id, self.dataset, self.reason, self.excluded = file, row, id_, dataset, reason, \
            excluded
        super().__init__(f"{file}: row {row} ({id_}): {reason}")

    def as_dict(self):
        return {"id": self.id, "dataset": self.dataset, "file": os.path.relpath(self.file, CONFIGS)
                if os.path.abspath(self.file).startswith(CONFIGS) else self.file, "row": self.row,
                "reason": self.reason}


class CaseError(ValueError):
    """A bad input row: names the file, the row, the column and the value."""

    def __init__(self, file, row, column, value, problem):
        self.file, self.row, self.column, self.value = file, row, column, value
        super().__init__(f"{file}: row {row}, column '{column}': {problem} (got {value!r})")


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    dataset: str
    source: str
    metric: str
    measured: float
    scenario: Scenario
    design: dict  # axis -> value
    filled: tuple  # human notes on every value not given by the source
    notes: str = ""
    approximations: tuple = ()  # what the model represents only approximately for this run
    group: tuple = ()  # ranking group key: same dataset, model shape, GPU, GPU count, seq, batch, precision


# ------------------------------------------------------------------------------------------------ reading
def _profiles() -> dict:
    out = {}
    for path in sorted(glob.glob(os.path.join(VALIDATION_DIR, "*.yaml"))):
        data = read_yaml(path)
        if "dataset" in data and "profile" in data:
            out[data["dataset"]] = data["profile"]
        for name, prof in (data.get("profiles") or {}).items():  # public_runs.yaml: one profile per dataset
            out[name] = prof
    return out


def read_csv(path: str) -> tuple[list, list]:
    """(rows, errors): each row a (file, row number, {column: text}) triple; header errors up front."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        rows = [(path, i + 2, {k: (v or "").strip() for k, v in r.items() if k is not None})
                for i, r in enumerate(reader)]
    if not header or not rows:
        raise S.ConfigError(path, None, "no header" if not header else "header only",
                            "the CSV file has no runs", "give one header line and at least one row with the "
                            "columns of configs/data/published_runs.csv (bundled)")
    unknown = [c for c in header if c not in COLUMNS + OPTIONAL_COLUMNS + EXTRA_COLUMNS]
    missing = [c for c in COLUMNS if c not in header]
    errors = [CaseError(path, 1, c, c, "unknown column; columns are those of configs/data/published_runs.csv (bundled) "
                                       f"plus {', '.join(OPTIONAL_COLUMNS + EXTRA_COLUMNS)}") for c in unknown]
    if missing:
        # a missing column is a missing cell in every row: rows that can do without it still run
        rows = [(f, n, {**r, **{c: "" for c in missing}}) for f, n, r in rows]
        errors += [CaseError(path, 1, c, None, "required column is missing from the header") for c in missing]
    return rows, errors


def read_yaml_cases(path: str) -> list:
    data = read_yaml(path)
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise S.ConfigError(path, "cases", cases, "must be a list of runs")
    out = []
    for i, c in enumerate(cases):
        row = {k: ("" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
               for k, v in c.items() if k != "design"}
        row.setdefault("dataset", str(data.get("dataset", "")))
        out.append((path, f"{i + 1} ({c.get('id', '?')})", row, dict(c.get("design") or {})))
    return out


def _files(p) -> list:
    """Case files of a path: a directory's YAML case files and CSVs, then the CSVs of its data/ folder."""
    if os.path.isdir(p):
        files = sorted([f for f in glob.glob(os.path.join(p, "*.yaml")) if "cases" in read_yaml(f)]
                       + glob.glob(os.path.join(p, "*.csv")))
        return files + sorted(glob.glob(os.path.join(p, "data", "*.csv")))
    if os.path.exists(p):
        return [p]
    from .resources import _bundled_fallback  # `configs/validation/...` outside a clone: the bundled copy
    found = _bundled_fallback(os.fspath(p), "validation")
    if found is not None:
        return _files(found)
    raise S.ConfigError(p, None, p, "no such file or directory", "give case files, directories or CSVs")


@dataclasses.dataclass
class Loaded:
    cases: list  # of Case
    errors: list  # of CaseError: bad input rows
    unsupported: list  # of Unsupported: real runs the model cannot represent
    excluded: list  # of Unsupported(excluded=True): rows kept out of scoring on purpose, with the reason


def load_all(paths=None, dataset: str | None = None) -> Loaded:
    """Cases, bad rows, unsupported runs and excluded rows from case files, directories of them and CSVs.
    An unknown `dataset` is a ConfigError that lists the known ones."""
    paths = list(paths or [VALIDATION_DIR])
    profiles = _profiles()
    raw, errors = [], []
    for p in paths:
        for f in _files(p):
            if f.endswith(".csv"):
                rows, errs = read_csv(f)
                raw += [(a, b, r, {}) for a, b, r in rows]
                errors += errs
            else:
                raw += read_yaml_cases(f)
    known = sorted({r.get("dataset") or "(none)" for _, _, r, _ in raw})
    if dataset and dataset not in known:
        raise S.ConfigError(", ".join(paths), "--dataset", dataset, "unknown dataset",
                            f"known datasets: {', '.join(known)}")
    out = Loaded([], errors, [], [])
    last_source, gpus = {}, {}
    for file, rownum, row, design in raw:
        if row.get("source", "").lower() == "same":  # published_runs.csv: "same as the row above"
            row = {**row, "source": last_source.get((file, row.get("dataset")), "")}
        last_source[(file, row.get("dataset"))] = row.get("source", "")
        if dataset and (row.get("dataset") or "(none)") != dataset:
            continue
        try:
            out.cases.append(build_case(row, file, rownum, profiles, design, gpus=gpus))
        except CaseError as err:
            out.errors.append(err)
        except Unsupported as u:
            (out.excluded if u.excluded else out.unsupported).append(u)
    return out


def load_cases(paths=None, dataset: str | None = None) -> tuple[list, list]:
    """(cases, errors) from case files, directories of them and CSV files; bad rows become errors
    (unsupported and excluded runs are left out: see load_all)."""
    loaded = load_all(paths, dataset)
    return loaded.cases, loaded.errors


# ------------------------------------------------------------------------------------------------ building
def _value(row, col, file, n, profile, filled):
    text = row.get(col, "")
    if text == "":
        run = profile.get("run_settings", {}).get(row.get("id"), {})  # documented settings of that run
        dflt = {**GENERIC_DEFAULTS, **profile.get("defaults", {}), **run}
        if col not in dflt:
            raise CaseError(file, n, col, text, "required value is missing")
        if dflt[col] is None:
            return None
        text = str(dflt[col])
        if col not in ("source", "notes", "model"):
            why = profile.get("run_settings_source" if col in run else "defaults_source", "default")
            filled.append(f"{col}={text} ({why})")
    if col in INT_COLUMNS or col in FLOAT_COLUMNS:
        try:
            v = float(text)
        except ValueError:
            raise CaseError(file, n, col, text, "must be a number") from None
        if not (math.isfinite(v) and v > 0 and (col not in INT_COLUMNS or v.is_integer())):
            raise CaseError(file, n, col, text, "must be a positive " + ("whole " if col in INT_COLUMNS else "")
                            + "number")
        return int(v) if col in INT_COLUMNS else v
    if col in BOOL_COLUMNS:
        t = text.lower()
        if t not in ("yes", "no", "true", "false", "1", "0"):
            raise CaseError(file, n, col, text, "must be yes or no")
        return t in ("yes", "true", "1")
    return text


# Training fields a profile's run_settings may state for one run (bytes per parameter of each model-state copy)
RUN_STATE_BYTES = ("param_bytes", "grad_bytes", "optimizer_bytes_per_param")


def _run_state_bytes(profile, rid, file, n, filled) -> dict:
    """The state bytes a run's run_settings give (RUN_STATE_BYTES), each reported as filled; any run_settings key
    that is neither one of them, a design axis nor a table column is refused, so a typo cannot pass unnoticed."""
    run = profile.get("run_settings", {}).get(rid, {})
    out = {}
    for k, val in run.items():
        if k in RUN_STATE_BYTES:
            rng = S.RANGES["training"][k]  # the range a scenario's training section is held to
            if not rng.ok(val):
                raise CaseError(file, n, f"run_settings.{rid}.{k}", val, f"must be {rng.describe()} ({rng.why})")
            out[k] = float(val)
            filled.append(f"{k}={val:g} ({profile.get('run_settings_source', 'default')})")
        elif k not in AXES and k not in COLUMNS + OPTIONAL_COLUMNS + EXTRA_COLUMNS:
            raise CaseError(file, n, f"run_settings.{rid}.{k}", val,
                            f"unknown setting; use a design axis, a table column or one of {', '.join(RUN_STATE_BYTES)}")
    return out


def _count(row, col, file, n):
    """A whole number >= 0 (shared_experts, dense_layers); empty -> 0."""
    text = row.get(col, "")
    if text == "":
        return 0
    try:
        v = float(text)
    except ValueError:
        raise CaseError(file, n, col, text, "must be a number") from None
    if not (math.isfinite(v) and v >= 0 and v.is_integer()):
        raise CaseError(file, n, col, text, "must be a whole number >= 0")
    return int(v)


def rack_gpus_per_node(gpu: S.GpuSpec, n_gpus: int) -> int:
    """NVLink-domain GPUs a job uses per node when the row does not say. 8-GPU boxes: the box. Rack-scale domains
    (NVL72, 4 GPUs per tray): NVIDIA's perf launcher rule (Megatron-Bridge scripts/performance/utils/executors.py,
    Slurm --segment): all the job's trays if <= 18, else the largest divisor of the tray count <= 18, so 128 and
    256 GPUs use 64 GPUs of each 72-GPU rack."""
    if gpu.nvl_domain_gpus <= 8 or n_gpus <= gpu.nvl_domain_gpus or n_gpus % 4:
        return gpu.nvl_domain_gpus
    trays, per_rack = n_gpus // 4, gpu.nvl_domain_gpus // 4
    return 4 * max(d for d in range(1, per_rack + 1) if trays % d == 0)


def _system(gpu: S.GpuSpec, n_gpus, gpn, link_gbps, latency_ms, file, n) -> S.SystemSpec:
    lat = DEFAULT_LATENCY_US
    if gpu.name in STANDARD_CLUSTER:
        lv = read_yaml(os.path.join(CONFIGS, "systems", STANDARD_CLUSTER[gpu.name]))["levels"]
        lat = (float(lv[0]["latency_us"]), float(lv[1]["latency_us"]))
    gpn = gpn or gpu.nvl_domain_gpus
    node = min(gpn, n_gpus)
    if n_gpus % node:
        raise CaseError(file, n, "n_gpus", n_gpus, f"must be a multiple of gpus_per_node={node}")
    levels = (S.Level("node", node, gpu.nvlink_GBps, lat[0]),
              S.Level("building", n_gpus // node, link_gbps / 8.0 if link_gbps else gpu.nic_GBps,
                      latency_ms * 1e3 if latency_ms else lat[1]))
    return S.SystemSpec(name=f"{n_gpus}x{gpu.name}", gpu=gpu, levels=levels)


_TRANSPORTS = {}


def build_case(row: dict, file: str, n, profiles: dict, design_extra: dict | None = None,
               gpu: S.GpuSpec | None = None, gpus: dict | None = None) -> Case:
    """One row -> Case (raises CaseError naming the row and column, or Unsupported with the reason)."""
    ds = row.get("dataset", "")
    rid = row.get("id", "") or f"row {n}"
    if row.get("exclude", ""):
        raise Unsupported(file, n, rid, ds or "(none)", row["exclude"], excluded=True)
    feats = [f.strip() for f in row.get("features", "").split(";") if f.strip()]
    known_features = {**UNSUPPORTED_FEATURES, **APPROXIMATED_FEATURES, **MODEL_FILE_FEATURES, **RUN_FEATURES,
                      **GPU_VARIANT_FEATURES}
    unknown = [f for f in feats if f not in known_features]
    if unknown:
        raise CaseError(file, n, "features", unknown[0], "unknown feature; known: " + ", ".join(sorted(known_features)))
    bad = [UNSUPPORTED_FEATURES[f] for f in feats if f in UNSUPPORTED_FEATURES]
    if row.get("precision", "").lower() in UNSUPPORTED_PRECISIONS:
        bad.append(UNSUPPORTED_PRECISIONS[row["precision"].lower()])
    if bad:
        raise Unsupported(file, n, rid, ds or "(none)", "; ".join(bad))
    approx = [APPROXIMATED_FEATURES[f] for f in feats if f in APPROXIMATED_FEATURES]
    profile = profiles.get(ds, GENERIC_PROFILE)
    filled: list = []
    if "hybrid-mamba" in feats:
        if "MTP layer" in row.get("notes", ""):
            approx.append(MTP_APPROXIMATION)
        if row.get("ffn", "") == "":
            # a hybrid model without dense MLP blocks has no dense ffn; the model file's placeholder is unused
            row = {**row, "ffn": str(_model_file(row, feats, file, n, rid, ds).ffn)}
            filled.append(f"ffn={row['ffn']} (hybrid model without dense MLP blocks: unused)")
    prec = row.get("precision", "").lower()
    scaling = None
    if prec in PRECISION_ALIASES:
        model_prec, scaling = PRECISION_ALIASES[prec]
        row = {**row, "precision": model_prec}
        approx.append(f"precision {prec} is modelled as {model_prec} with {scaling} scaling (one {model_prec} GEMM "
                      "rate for every linear layer)")
    by_feature = [SCALING_FEATURES[f] for f in feats if f in SCALING_FEATURES]
    if by_feature:
        scaling = by_feature[0]
        filled.append(f"fp8_scaling={scaling} (row feature fp8-{scaling})")
    elif scaling is None and row.get("precision", "").lower() in S.LOW_PRECISION_GEMMS:
        scaling = profile.get("fp8_scaling", "delayed")
        filled.append(f"fp8_scaling={scaling} ({profile.get('fp8_scaling_source', 'Transformer Engine default recipe')})")
    v = {c: _value(row, c, file, n, profile, filled) for c in COLUMNS + OPTIONAL_COLUMNS
         if c in COLUMNS or row.get(c, "") != ""}
    x = {c: _value(row, c, file, n, profile, filled) for c in EXTRA_COLUMNS
         if c in INT_COLUMNS and row.get(c, "") != ""}
    x.update({c: _count(row, c, file, n) for c in COUNT_COLUMNS})
    recipe = RECIPES().get(rid)
    recipe_training = _apply_recipe(recipe, row, v, filled, approx)
    if cudnn_norm_of(recipe, row, prec):
        recipe_training["cudnn_norm"] = True
        filled.append("cudnn_norm=yes (Megatron-Bridge's performance launcher keeps NVTE_NORM_FWD_USE_CUDNN for this "
                      "run: validation._CUDNN_NORM_RULES)")
    if v["metric"] not in METRICS:
        raise CaseError(file, n, "metric", v["metric"], f"unknown metric; use one of {', '.join(METRICS)}")
    if v["recompute"] not in ("none", "selective", "full", "half"):
        raise CaseError(file, n, "recompute", v["recompute"], "must be none, selective, full or half")
    if SAC_FEATURES & set(feats):
        v["recompute"] = "half"  # every second block recomputed whole (space.Recompute)
    if "sac-op" in feats:
        v["recompute"] = "selective"
        share = sac_op_linear_share({**v, "head_dim": x.get("head_dim")})
        recipe_training.update(recompute_modules=("elementwise", "linear"), recompute_linear_share=share)
        filled.append(f"recompute_modules=elementwise,linear, recompute_linear_share={share:.3f} (row feature sac-op)")
    if v["precision"] not in S.PRECISIONS:
        raise CaseError(file, n, "precision", v["precision"], f"use one of {', '.join(S.PRECISIONS)}")
    variant = [GPU_VARIANT_FEATURES[f] for f in feats if f in GPU_VARIANT_FEATURES]
    if variant and variant[0] != v["gpu"]:
        filled.append(f"gpu={variant[0]} (feature; the gpu column says {v['gpu']})")
        v["gpu"] = variant[0]
    if gpu is None:
        path = os.path.join(CONFIGS, "hardware", f"{v['gpu']}.yaml")
        if gpus is not None and path in gpus:
            gpu = gpus[path]
        else:
            if not os.path.exists(path):
                known = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(CONFIGS, "hardware")))
                raise CaseError(file, n, "gpu", v["gpu"], f"unknown GPU; known: {', '.join(known)}")
            gpu = load_gpu(path)
            if gpus is not None:
                gpus[path] = gpu
    kv = v["kv_heads"] or v["heads"]
    head_dim = x.get("head_dim")
    if v["heads"] % kv or (head_dim is None and v["hidden"] % v["heads"]):
        raise CaseError(file, n, "heads", v["heads"], "must divide hidden and be a multiple of kv_heads")
    if v["heads"] % v["tp"]:
        raise CaseError(file, n, "tp", v["tp"], f"must divide heads={v['heads']} (tensor parallelism splits "
                                                 "the attention heads)")
    moe = None
    if x.get("experts"):
        for c in ("top_k", "moe_ffn"):
            if c not in x:
                raise CaseError(file, n, c, row.get(c, ""), "required for a MoE model (experts is given)")
        if x["dense_layers"] >= v["layers"]:
            raise CaseError(file, n, "dense_layers", x["dense_layers"], f"must be below layers={v['layers']}")
        # Megatron-Bridge MoE benchmarks force-balance the routing (page footnote): imbalance 1
        moe = S.MoESpec(experts=x["experts"], top_k=x["top_k"], expert_ffn=x["moe_ffn"],
                        shared_experts=x["shared_experts"], first_dense_layers=x["dense_layers"])
    elif x.get("ep", 1) > 1:
        raise CaseError(file, n, "ep", x["ep"], "expert parallelism needs a MoE model (experts is empty)")
    model = S.ModelSpec(name=v["model"] or v["id"], layers=v["layers"], hidden=v["hidden"], heads=v["heads"],
                        kv_heads=kv, head_dim=head_dim or v["hidden"] // v["heads"], ffn=v["ffn"],
                        gated_mlp=v["gated_mlp"], vocab=v["vocab"], source=v["source"], moe=moe,
                        tied_embeddings=tied_embeddings_of(v["model"] or ""),
                        dropout=bool(profile.get("dropout", GENERIC_PROFILE["dropout"])))
    needs_file = [f for f in feats if f in MODEL_FILE_FEATURES]
    if needs_file:
        model = _with_model_file(model, row, x, needs_file, file, n, rid, ds)
    if v["tp"] * v["pp"] * v["dp"] * v["cp"] != v["n_gpus"]:
        raise CaseError(file, n, "n_gpus", v["n_gpus"], f"is not tp x pp x dp x cp = "
                                                        f"{v['tp'] * v['pp'] * v['dp'] * v['cp']}")
    ep = x.get("ep", 1)
    # MoE parallel folding (Training.expert_tensor_parallel): the row's etp column, else the dataset profile's
    etp = 0
    if moe is not None:
        etp = x.get("etp") or int(profile.get("expert_tensor_parallel", 0))
        if etp and "etp" not in x:
            filled.append(f"expert_tensor_parallel={etp} ({profile.get('expert_tensor_parallel_source', 'profile')})")
        ranks = v["tp"] * v["dp"] * v["cp"] if etp else v["dp"] * v["cp"]
        if moe.experts % ep or ranks % (ep * (etp or 1)):
            raise Unsupported(file, n, rid, ds or "(none)", f"ep={ep} does not divide experts={moe.experts} or "
                              + (f"etp x ep={etp * ep} does not divide tp x dp x cp={ranks}" if etp else
                                 f"dp x cp={ranks} (and no expert tensor parallel size folds the experts)"))
    gpn = v.get("gpus_per_node")
    if gpn is None and rack_gpus_per_node(gpu, v["n_gpus"]) != gpu.nvl_domain_gpus:
        gpn = rack_gpus_per_node(gpu, v["n_gpus"])
        filled.append(f"gpus_per_node={gpn} (NVIDIA perf launcher: GPUs per NVLink segment, "
                      "rack_gpus_per_node)")
    system = _system(gpu, v["n_gpus"], gpn, v.get("link_gbps"), v.get("link_latency_ms"), file, n)
    # Megatron-LM gradient buffers: fp16 runs keep and all-reduce 16-bit grads unless
    # --accumulate-allreduce-grads-in-fp32; bf16 forces fp32 accumulation and reduction (arguments.py). A profile
    # whose framework says otherwise states its gradient bytes (Megatron-Bridge / NeMo perf recipes:
    # grad_reduce_in_fp32 = False, 16-bit gradient buffers).
    # A run's documented state precisions (run_settings: the optimizer's own dtype, FP8 primary weights) win over
    # the profile's; the gradient bytes on the wire follow the gradient buffer's.
    run_state = _run_state_bytes(profile, v["id"], file, n, filled)
    gbytes = run_state.pop("grad_bytes", None)
    if gbytes is None:
        gbytes = float(profile.get("grad_bytes", 2.0 if v["precision"] == "fp16" else 4.0))
        if "grad_bytes" in profile:
            filled.append(f"grad_bytes={gbytes:g} ({profile.get('grad_bytes_source', 'profile')})")
    lora_rank = 0
    if "lora" in feats:
        if not profile.get("lora_rank"):
            raise Unsupported(file, n, rid, ds or "(none)", "LoRA run whose dataset profile gives no lora_rank "
                              "(configs/validation/public_runs.yaml)")
        lora_rank = int(profile["lora_rank"])
        filled.append(f"lora_rank={lora_rank} ({profile.get('lora_rank_source', 'profile')})")
    feature_training = {}  # Training fields a row's features set
    if "fp8-all-gather" in feats:
        feature_training["param_gather_bytes"] = 1.0
        filled.append("param_gather_bytes=1 (row feature fp8-all-gather)")
    if "hsdp-nvl-domain" in feats:
        feature_training.update(hsdp_shard="node", hsdp_outer="optim")
        filled.append("hsdp_shard=node, hsdp_outer=optim (row feature hsdp-nvl-domain: Megatron-FSDP's shard group is "
                      "the NVLink domain, its optimizer state sharded across the domains too)")
    reduce_bytes = gbytes
    if "fsdp-pure" in feats:
        reduce_bytes = 2.0
        filled.append("grad_reduce_bytes=2 (row feature fsdp-pure)")
    framework = profile.get("framework", "megatron-te")
    for f in feats:
        if f in FRAMEWORK_FEATURES:
            framework += FRAMEWORK_FEATURES[f]
            filled.append(f"framework={framework} (row feature {f})")
    doc_tokens = int(profile.get("packed_doc_tokens", 0))
    if doc_tokens:
        filled.append(f"packed_doc_tokens={doc_tokens} ({profile.get('packed_doc_tokens_source', 'profile')})")
    training = S.Training(global_batch_sequences=v["gbs"], seq_len=v["seq"], precision=v["precision"],
                          lora_rank=lora_rank, packed_doc_tokens=doc_tokens, expert_tensor_parallel=etp, **recipe_training,
                          **feature_training,
                          fp8_scaling=scaling or "delayed",
                          grad_bytes=gbytes, grad_reduce_bytes=reduce_bytes, sequence_parallel=v["seq_parallel"],
                          **run_state,
                          flash_attention=bool(profile["flash_attention"]),
                          framework=_framework(framework, file))
    tpath = os.path.join(CONFIGS, "network", "transports.yaml")
    if tpath not in _TRANSPORTS:
        _TRANSPORTS[tpath] = load_transports(tpath)
    transports = _TRANSPORTS[tpath]
    run = {k: val for k, val in profile.get("run_settings", {}).get(v["id"], {}).items() if k in AXES}
    for k, val in run.items():
        filled.append(f"{k}={val} ({profile.get('run_settings_source', 'default')})")
    by_prec = {k: val for k, val in (profile.get("design_by_precision") or {}).get(prec, {}).items() if k in AXES}
    for k, val in by_prec.items():
        filled.append(f"{k}={val} for {prec} ({profile.get('design_by_precision_source', 'profile')})")
    design = {**GENERIC_PROFILE["design"], **profile.get("design", {}), **by_prec, **run, **(design_extra or {})}
    design.update(tp=v["tp"], pp=v["pp"], dp=v["dp"], cp=v["cp"], vpp=v["vpp"], mbs=v["mbs"],
                  recompute=v["recompute"], schedule="interleaved" if v["vpp"] > 1 else "1f1b")
    if ep > 1:
        design["ep"] = ep
    sched = row.get("schedule", "").lower()
    if sched:
        if sched not in ("1f1b", "interleaved", "gpipe", "zb-h1", "zb-h2", "latency-aware"):
            raise CaseError(file, n, "schedule", sched, "unknown schedule")
        if (sched == "interleaved") != (v["vpp"] > 1):
            raise CaseError(file, n, "schedule", sched, f"does not match vpp={v['vpp']} (interleaved <=> vpp > 1)")
        design["schedule"] = sched
    fsdp = row.get("fsdp", "").lower()
    if row.get("sharding", ""):
        design["sharding"] = row["sharding"].lower()
    elif fsdp in ("yes", "true") or (fsdp.isdigit() and int(fsdp) > 1 and int(fsdp) == v["dp"]):
        design["sharding"] = "fsdp"
    elif fsdp.isdigit() and int(fsdp) > 1:
        raise Unsupported(file, n, rid, ds or "(none)", f"FSDP over {fsdp} of dp={v['dp']} ranks (HSDP with a "
                          "given shard group) is not modelled: the model's hsdp shards within a building")
    elif fsdp not in ("", "no", "false", "1", "0"):
        raise CaseError(file, n, "fsdp", fsdp, "must be yes, no or the FSDP degree")
    if row.get("overlap", ""):
        design["overlap"] = row["overlap"].lower()
    space = DesignSpace.from_dict({}, tuple(t.name for t in transports), file)
    scen = Scenario(name=v["id"], path=file, model=model, system=system, training=training,
                    transports=transports, space=space, objective="step_time_s", baselines={},
                    default_baseline="")
    try:
        space.design(design, file=file)
    except S.ConfigError as err:
        raise CaseError(file, n, err.key or "design", err.value, str(err)) from None
    shape = (model.layers, model.hidden, model.heads, model.kv_heads, model.head_dim, model.ffn, model.vocab,
             model.gated_mlp, moe)
    group = (ds or "(none)", v["model"] or "", shape, gpu.name, v["n_gpus"], v["seq"], v["gbs"], prec)
    return Case(id=v["id"], dataset=ds or "(none)", source=v["source"], metric=v["metric"], measured=v["value"],
                scenario=scen, design=design, filled=tuple(filled), notes=v["notes"],
                approximations=tuple(approx), group=group)


def _with_model_file(model, row, x, features, file, n, rid, ds):
    """The row's model with the architecture its `features` name taken from configs/models/<model>.yaml (the CSV
    has no columns for them); a missing file makes the run unsupported, a shape column that disagrees with the
    file is a bad row."""
    spec = _model_file(row, features, file, n, rid, ds)
    path = os.path.join(CONFIGS, "models", f"{row['model']}.yaml")
    for col, attr in MODEL_FILE_CHECKS.items():
        cell = row.get(col, "")
        if cell == "":
            continue
        obj = spec
        for part in attr.split("."):
            obj = getattr(obj, part) if obj is not None else None
        got = x.get(col, x.get(col)) if col in x else int(float(cell))
        if obj is None or int(got) != int(obj):
            raise CaseError(file, n, col, cell, f"disagrees with {os.path.relpath(path, CONFIGS)} ({attr} = {obj})")
    # a hybrid model's MoE blocks carry widths the CSV has no columns for (shared-expert width, LatentMoE)
    moe = spec.moe if spec.hybrid is not None else model.moe
    # so does the rotary embedding's YaRN scaling (GPT-OSS)
    return dataclasses.replace(model, mla=spec.mla, sliding_window=spec.sliding_window, hybrid=spec.hybrid, moe=moe,
                               rope_attention_factor=spec.rope_attention_factor,
                               compressed_attention=spec.compressed_attention,
                               hyper_connections=spec.hyper_connections)


# Models without a bundled model file whose output layer has its own weights (the CSV has no column for it):
# Llama 2 / 3 / 3.1 (Meta's released configs: tie_word_embeddings false), Qwen3 MoE (Qwen3-30B-A3B's config: false),
# NeMo's Nemotron and Nemotron-4 (share_embeddings_and_output_weights false; Nemotron-4 340B report: "untied input
# and output embeddings"). The rest share them: Megatron's GPTs (Megatron-LM ties unless
# --untie-embeddings-and-output-weights), MPT (llm-foundry's MPT reuses wte for the logits), OPT.
UNTIED_PREFIXES = ("llama2-", "llama3", "qwen3", "nemotron-", "nemotron4-")


@functools.lru_cache(maxsize=None)
def tied_embeddings_of(name: str) -> bool:
    """Whether the row's model shares its input embedding with the output layer: its bundled model file says so;
    without one, UNTIED_PREFIXES."""
    from .config import load_model
    path = os.path.join(CONFIGS, "models", f"{name}.yaml")
    if name and os.path.exists(path):
        return load_model(path).tied_embeddings
    return not name.lower().startswith(UNTIED_PREFIXES)


def _model_file(row, features, file, n, rid, ds) -> S.ModelSpec:
    """configs/models/<model>.yaml of the row (Unsupported, naming what it would give, when there is none)."""
    from .config import load_model
    name = row.get("model", "")
    path = os.path.join(CONFIGS, "models", f"{name}.yaml")
    if not name or not os.path.exists(path):
        raise Unsupported(file, n, rid, ds or "(none)", "; ".join(
            f"{MODEL_FILE_FEATURES[f]} come from the bundled model file configs/models/{name or '<model>'}.yaml, "
            "which does not exist" for f in features if f in MODEL_FILE_FEATURES))
    return load_model(path)


_FRAMEWORKS: dict = {}
RECIPES_CSV = os.path.join(CONFIGS, "validation", "recipes", "recipes.csv")


@functools.lru_cache(maxsize=1)
def RECIPES() -> dict:
    """configs/validation/recipes/recipes.csv: per Megatron-Bridge row, the settings of the benchmark recipe that
    produced it (read from the recipe code at the release's tag; recipes.md says how)."""
    if not os.path.exists(RECIPES_CSV):
        return {}
    with open(RECIPES_CSV, newline="") as fh:
        return {r["id"]: r for r in csv.DictReader(fh)}


def cuda_graphs_of(recipe_value: str, static_experts: bool = False, alltoall_dispatcher: bool = False) -> str:
    """recipes.csv cuda_graph (impl:scope) as Training.cuda_graphs: a full-iteration graph is "full"; Transformer
    Engine graphs whose scope takes in the MoE router (or every layer: scope default) are "partial"; graphs of
    other scopes only (e.g. Mamba mixers) leave the MoE path eager: "none".

    static_experts: the recipe pads every expert's input to a fixed capacity (Megatron-Core
    moe_pad_expert_input_to_capacity, Megatron-Bridge apply_moe_token_drop; recipes.csv token_drop). Its alltoall
    dispatcher then knows the token counts without asking the GPU (moe/token_dispatcher.py: drop_and_pad skips the
    device-to-host copy and sync), so the MoE forward never waits on the host: "partial" even without graphs. And
    Megatron-Core's per-layer graphs (enable_cuda_graph, scope "full": the whole transformer layer; recipes.csv
    "local:full") then replay the fixed-shape expert GEMMs too: "full", every host launch of the MoE path gone.

    alltoall_dispatcher: the recipe runs Megatron-Core's alltoall dispatcher (not the flex one). Dropless, it waits on
    the host in every forward whatever the graph scope: token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess
    sets the sync point "before_ep_alltoall" (with EP or TP > 1; "before_finish" without) because its all-to-all
    takes the split sizes as host values, and a graphed moe_preprocess scope only moves the device-to-host copy to
    that point (cuda_dtoh_point). So Transformer Engine's router/preprocess graphs leave its MoE path eager:
    "none"."""
    impl, _, scope = recipe_value.partition(":")
    if impl == "" or impl == "none":
        return "partial" if static_experts else "none"
    if "full_iteration" in (impl, scope):
        return "full"
    if alltoall_dispatcher and not static_experts:
        return "none"
    if impl == "local" and scope == "full":
        return "full" if static_experts else "partial"
    scopes = set(scope.split("+"))
    return "partial" if scopes & {"moe_router", "default"} or static_experts else "none"


# How Megatron-Bridge's recipes split the layers over the pipeline (Training.pipeline_split, cost/stages.py), by the
# recipe's model: explicit layouts that fill the chunks in order for DeepSeek-V3 and Kimi-K2
# (recipes/deepseek/deepseek_v3.py set_deepseek_v3_pipeline_model_parallel_layout, recipes/kimi/kimi_k2.py
# _get_kimi_k2_pipeline_layout: 61 layers at PP 4 x VP 4 as 16, 16, 16, 13 + MTP + loss), the embedding and the loss
# counted as layers for Llama 3.1 405B and Qwen3-235B (recipes/llama/llama3.py, recipes/qwen/qwen3_moe.py:
# account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split). Others: layers that divide.
RECIPE_PIPELINE_SPLITS = (("deepseek_v3", "filled"), ("kimi_k2", "filled"), ("llama31_405b", "counted"),
                          ("qwen3_235b", "counted"))


# Which Megatron-Bridge runs normalize with cuDNN (Training.cudnn_norm). The performance launcher's PERF_ENV_VARS set
# NVTE_NORM_FWD_USE_CUDNN=1 and its plugin deletes it again unless the run is one of a few (scripts/performance/
# perf_plugins.py, PerfEnvPlugin._set_model_specific_environment_variables, `del_cudnn_ln`, at v0.2.0-v0.5.1 =
# 25.11-26.06.01); 25.09's runner (v0.1.0rc3) sets no such variable; from 26.08 (v0.6.0) each perf recipe function
# carries its own environment. Keys: (model, compute dtype, task, GPUs or None for any); the rules each release adds.
_CUDNN_NORM_RULES = {
    "25.11": (("llama3-8B", ("fp8_cs",), "pretrain", ("h100",)),
              ("llama3-70B", ("bf16", "fp8_cs"), "pretrain", ("gb200", "gb300")),
              ("llama3-405B", ("fp8_cs",), "pretrain", ("gb200", "gb300"))),
    "26.02": (("deepseek-v3", ("fp8_mx",), None, ("gb200", "gb300")),),
    "26.02.01": (("kimi-k2", ("fp8_mx",), None, ("gb200", "gb300")),
                 ("llama3-8B", None, "sft", None), ("llama3-70B", None, "sft", None),
                 ("llama3-405B", None, "sft", None), ("nemotron3-nano-30b-a3b", None, None, None)),
}
_CUDNN_NORM_RELEASES = ("25.11", "26.02", "26.02.01", "26.04", "26.04.01", "26.06", "26.06.01")
# v0.6.0 (26.08): the perf recipe functions whose env dict sets NVTE_NORM_FWD_USE_CUDNN, among those of the table's
# rows (src/megatron/bridge/perf_recipes/{deepseek,nemotronh}/{gb200,gb300}/*.py)
_CUDNN_NORM_FUNCTIONS_2608 = ("deepseek_v3_pretrain_256gpu_gb200_fp8mx_config",
                              "deepseek_v3_pretrain_256gpu_gb300_fp8mx_config",
                              "nemotron_3_nano_pretrain_8gpu_gb300_fp8mx_config",
                              "nemotron_3_5_lightning_pretrain_8gpu_gb200_fp8mx_config")
_COMPUTE_DTYPE = {"fp8": "fp8_cs", "fp8-cs": "fp8_cs", "fp8-mx": "fp8_mx", "mxfp8": "fp8_mx", "bf16": "bf16",
                  "nvfp4": "nvfp4", "fp8-blockwise": "fp8_block"}


def cudnn_norm_of(recipe, row, precision_label) -> bool:
    """Whether a Megatron-Bridge row's run kept NVTE_NORM_FWD_USE_CUDNN (_CUDNN_NORM_RULES): the release is the
    second field of the row's id (mb-RELEASE-gpu-...), recipe its recipes.csv entry or None; precision_label: the
    table's precision as written (fp8-cs, mxfp8, ...), before the model's aliases."""
    if not row.get("source", "").startswith("NVIDIA-NeMo/Megatron-Bridge"):
        return False
    release = row.get("id", "").split("-")[1] if row.get("id", "").count("-") > 1 else ""
    if release == "26.08":
        return recipe is not None and recipe["recipe"].split("::")[-1] in _CUDNN_NORM_FUNCTIONS_2608
    if release not in _CUDNN_NORM_RELEASES:
        return False
    rules = [r for rel, rs in _CUDNN_NORM_RULES.items()
             if _CUDNN_NORM_RELEASES.index(rel) <= _CUDNN_NORM_RELEASES.index(release) for r in rs]
    dtype = _COMPUTE_DTYPE.get(precision_label)
    task = next((t for t in ("pretrain", "sft", "lora") if f"-{t}-" in row.get("id", "")), None)
    gpu = _gpu_token(row.get("gpu", ""))
    return any(row.get("model") == m and (d is None or dtype in d) and (t is None or task == t)
               and (g is None or gpu in g) for m, d, t, g in rules)


def _apply_recipe(recipe, row, v, filled, approx) -> dict:
    """The recipe's recompute, BF16 layers, MTP and EP overlap for a row whose table does not give them (the
    table's own values win); returns the Training fields. Each setting is reported with the recipe it came from."""
    if recipe is None:
        return {}
    src = recipe["recipe"]
    out: dict = {}
    if row.get("recompute", "") == "":
        gran = recipe["recompute_granularity"]
        mods = tuple(m for m in recipe["recompute_modules"].split(";") if m)
        # Megatron-Core: granularity selective with no modules recomputes nothing
        rec = "full" if gran == "full" else "selective" if gran == "selective" and mods else "none"
        v["recompute"] = rec
        if rec == "selective":
            out["recompute_modules"] = mods
        filled[:] = [f for f in filled if not f.startswith("recompute=")]
        filled.append(f"recompute={rec}" + (f" [{', '.join(mods)}]" if rec == "selective" else "")
                      + f" (recipe {src})")
        n_layers = recipe["recompute_num_layers"]
        if rec == "full" and recipe["recompute_method"] == "block" and n_layers:
            # Megatron-Core block method: the first N layers of each pipeline chunk recomputed, the rest stored
            out["recompute_layers"] = int(n_layers)
            filled.append(f"recompute_layers={int(n_layers)} (recipe {src}: recompute_method block)")
        elif recipe["recompute_method"]:
            approx.append(f"recompute_method {recipe['recompute_method']} with recompute_num_layers "
                          f"{n_layers or '?'} is modelled as every layer recomputed")
    for col, key in (("bf16_layers_start", "bf16_layers_start"), ("bf16_layers_end", "bf16_layers_end"),
                     ("mtp_layers", "mtp_layers")):
        if recipe[col] not in ("", "0"):
            out[key] = int(recipe[col])
            filled.append(f"{key}={out[key]} (recipe {src})")
    if "mtp_layers" in out and MTP_APPROXIMATION in approx:
        approx.remove(MTP_APPROXIMATION)
    if recipe["ep_overlap"] == "true":
        out["ep_overlap"] = True
        filled.append(f"ep_overlap=yes (recipe {src}: overlap_moe_expert_parallel_comm)")
    if recipe["dispatcher"] == "flex":
        out["ep_dedup"] = True
        filled.append(f"ep_dedup=yes (recipe {src}: flex dispatcher, {recipe['flex_backend'] or '?'})")
    if recipe.get("fp8_attention") == "true":
        # cuDNN's FP8 SDPA (Training.fp8_attention): full attention at the 16-bit rate, which cuDNN's training
        # benchmark supports for MXFP8 on Blackwell (0.91-1.05x BF16's speed, 2k-8k keys; at the FP8 tensor rate, 2x,
        # these runs moved from -1..+25% to -16..+13%); a sliding-window layer's backward as a full causal layer's
        out["fp8_attention"] = True
        filled.append(f"fp8_attention=yes (recipe {src}: fp8_dot_product_attention)")
        approx.append("FP8 attention (fp8_dot_product_attention) is modelled at the 16-bit attention rate (cuDNN "
                      "MXFP8 SDPA: 0.91-1.05x BF16 on GB200/GB300), a window layer's backward as full causal")
    static = recipe.get("token_drop") == "true"
    # (a dense model has no dispatcher: its graphs only matter to MoE layers, and its report names no dispatcher)
    alltoall = recipe["dispatcher"] != "flex" and row.get("experts", "").strip() not in ("", "0")
    graphs = cuda_graphs_of(recipe["cuda_graph"], static, alltoall_dispatcher=alltoall)
    if graphs != "none":
        out["cuda_graphs"] = graphs
        how = "; ".join(x for x in (recipe["cuda_graph"], "experts padded to capacity" if static else "") if x)
        filled.append(f"cuda_graphs={graphs} (recipe {src}: {how})")
    elif recipe["cuda_graph"] not in ("", "none") and cuda_graphs_of(recipe["cuda_graph"], static) != "none":
        filled.append(f"cuda_graphs=none (recipe {src}: {recipe['cuda_graph']} with the alltoall dispatcher, which "
                      "still waits on the host before its all-to-all)")
    if recipe["offload"]:
        m = re.fullmatch(r"cpu_offloading_num_layers=(\d+)", recipe["offload"])
        if m and int(v.get("pp", 1)) == 1:
            out["offload_layers"] = int(m.group(1))
            filled.append(f"offload_layers={out['offload_layers']} (recipe {src}: cpu_offloading_num_layers)")
        elif m:  # Megatron-Core's TransformerConfig refuses CPU offloading with pipeline parallelism
            approx.append(f"the recipe's activation offloading ({recipe['offload']}) cannot run with the row's "
                          f"pp {v.get('pp')} (Megatron-Core allows it only with pp 1): not applied")
        else:
            approx.append(f"offloading ({recipe['offload']}) is not modelled")
    function = recipe["recipe"].split("::")[-1]
    for name, split in RECIPE_PIPELINE_SPLITS:
        if name in function and int(v.get("pp", 1)) > 1:
            out["pipeline_split"] = split
            filled.append(f"pipeline_split={split} (recipe {src}: {name}'s pipeline layout)")
    if recipe["mismatch"]:
        approx.append(f"the recipe's defaults differ from the row ({recipe['mismatch']}): the run overrode them; "
                      "its recompute and precision settings are taken as the recipe's")
    return out


def _framework(name, file) -> S.Framework:
    if name not in _FRAMEWORKS:
        _FRAMEWORKS[name] = load_framework(name, file, key="framework")
    return _FRAMEWORKS[name]


# ------------------------------------------------------------------------------------------------ evaluating
_eval_cases = jax.jit(jax.vmap(step_time, in_axes=(0, 0)))


BATCH_MULTIPLE = 32  # pad the case batch so any number of cases up to 32 shares one compilation


def case_arrays(cases, gpu_override=None, pad=False):
    """(params, designs) stacked over cases; gpu_override maps GPU name -> GpuSpec (for calibration).
    pad=True repeats the last case up to a multiple of BATCH_MULTIPLE (results beyond len(cases) are junk)."""
    params, designs = [], []
    n_pad = -len(cases) % BATCH_MULTIPLE if pad else 0
    for c in list(cases) + [cases[-1]] * n_pad:
        scen = c.scenario
        if gpu_override and scen.system.gpu.name in gpu_override:
            system = dataclasses.replace(scen.system, gpu=gpu_override[scen.system.gpu.name])
            scen = dataclasses.replace(scen, system=system)
        p = build_params(scen)
        # one program for cases of every model: the expert sync is compiled in (it adds zero for dense models)
        params.append(p._replace(topology=dataclasses.replace(p.topology, expert_sync=True)))
        d = scen.space.design(c.design)
        designs.append(Design(*[jnp.asarray(getattr(d, ax), jnp.float32 if ax in NUMERIC_AXES else jnp.int32)
                                for ax in AXES]))
    return stack_trees(params), stack_trees(designs)


@jax.jit
def _sequence_flops(model, seq):
    """(model FLOPs of one sequence, (qkv, proj, mlp, attn) forward FLOPs of one layer on one sequence), as one
    compiled program: counted eagerly, these few dozen scalar jnp operations each dispatched (and on first use
    compiled) on their own, ~7 ms per case and ~20 one-operation programs per process."""
    return model_flops_per_sequence(seq, model), layer_flops(1.0, seq, model, model.moe_fraction)


def _host_flops(case):
    """_sequence_flops of a case's model and sequence length (float64 when x64 is on)."""
    dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    # a float sequence length: s * s of a large int sequence would overflow int32 (compute.window_keys_ratio)
    seq = jnp.asarray(float(case.scenario.training.seq_len), dtype)
    total, parts = _sequence_flops(model_params(case.scenario.model, dtype), seq)
    return float(total), tuple(float(x) for x in parts)


def _hw_flops(case, total, parts) -> float:
    qkv, proj, mlp, attn = parts
    full = qkv + proj + mlp + attn
    t = case.scenario.training
    mods = t.recompute_modules
    # selective: Megatron's attention core, or an op-level policy's share of the linear layers
    selective = (qkv + proj + mlp) * t.recompute_linear_share if "linear" in mods else attn
    extra = {"full": full, "half": 0.5 * full, "selective": selective, "none": 0.0}[case.design["recompute"]]
    return total + case.scenario.model.layers * extra


def hw_flops_per_sequence(case) -> float:
    """Model FLOPs plus what recomputation adds: a transformer-layer forward (full) or the attention core
    (selective); Narayanan et al. 2021's 96 B s l h^2 (1 + s/6h + V/16lh) for full recompute."""
    return _hw_flops(case, *_host_flops(case))


def metrics_of(case, step_s: float, feasible: bool) -> dict:
    sc = case.scenario
    gbs, n = sc.training.global_batch_sequences, sc.system.n_gpus
    total, parts = _host_flops(case)
    model = total * gbs
    hw = _hw_flops(case, total, parts) * gbs
    t = step_s if step_s > 0 and math.isfinite(step_s) else float("nan")
    return {"iteration_s": t, "tflops_per_gpu": model / t / n / 1e12, "tflops_per_gpu_hw": hw / t / n / 1e12,
            "mfu": model / t / n / sc.system.gpu.peak_flops(sc.training.precision),
            "tokens_per_s": gbs * sc.training.seq_len / t, "feasible": feasible}


def _step_time_error(metric: str, predicted: float, measured: float):
    """The model's step time over the one the run's figure implies, minus 1, whatever the metric: positive where
    the model is slower than the run (``error`` keeps the metric's own sign: a throughput metric's is positive where
    the model is faster). The ratio is the uncertainty bands' residual (uncertainty.time_ratio)."""
    ratio = time_ratio({"metric": metric, "predicted": predicted, "measured": measured})
    return None if ratio is None else ratio - 1.0


def evaluate_cases(cases, gpu_override=None) -> list:
    """Batched, jitted evaluation: cases go in blocks of BATCH_MULTIPLE (all share shapes: two levels, the same
    transports), so any number of cases uses one compilation, and a case's prediction does not depend on how
    many other cases run with it (the first 32 cases are one block exactly as when they run alone)."""
    if not cases:
        return []
    out = []
    for start in range(0, len(cases), BATCH_MULTIPLE):
        block = list(cases[start:start + BATCH_MULTIPLE])
        params, designs = case_arrays(block, gpu_override, pad=True)
        cost = _eval_cases(params, designs)
        raw = np.asarray(cost.raw_step_time_s, np.float64)
        feas = np.asarray(cost.feasible)
        viol = np.asarray(cost.violation)
        mem = np.asarray(cost.memory_bytes)
        brk = {k: np.asarray(x) for k, x in cost.breakdown._asdict().items()}
        for i, c in enumerate(block):
            met = metrics_of(c, float(raw[i]), bool(feas[i]))
            pred = met[c.metric]
            out.append({"id": c.id, "dataset": c.dataset, "metric": c.metric, "predicted": pred,
                        "measured": c.measured, "error": (pred - c.measured) / c.measured,
                        "step_time_error": _step_time_error(c.metric, pred, c.measured), "metrics": met,
                        "violation": int(viol[i]), "breakdown": {k: float(x[i]) for k, x in brk.items()},
                        "memory_GiB": float(mem[i]) / 2**30})
    return out


def _stats(errs) -> dict:
    return {"n": len(errs), "mape": float(np.mean(errs)), "max_abs_error": float(np.max(errs))} if errs else \
        {"n": 0}


def summarize(results, held_out: set | None = None) -> dict:
    """Per dataset: n, MAPE and max |error| (fractions), and the mean signed step-time error (``step_time_bias``:
    positive where the model is slower than the runs on average); with held_out ids, also over those only."""
    out = {}
    for ds in sorted({r["dataset"] for r in results}):
        errs = [abs(r["error"]) for r in results if r["dataset"] == ds]
        out[ds] = _stats(errs)
        signed = [r["step_time_error"] for r in results if r["dataset"] == ds and r.get("step_time_error") is not None]
        if signed:
            out[ds]["step_time_bias"] = float(np.mean(signed))
        if held_out is not None:
            out[ds]["held_out"] = _stats([abs(r["error"]) for r in results
                                          if r["dataset"] == ds and r["id"] in held_out])
    return out


# Design features whose runs the model may err on as a group (a search exploits a term the model gets wrong for a
# whole class of layouts): each maps a case to the label of its group. Values as the design dict spells them.
def _tp_label(d) -> str:
    tp = d.get("tp", 1)
    return "tp=1" if tp <= 1 else ("tp=2-8" if tp <= 8 else "tp>8")


FEATURES = {
    "recompute": lambda c: f"recompute={c.design.get('recompute', 'none')}",
    "sharding": lambda c: f"sharding={c.design.get('sharding', 'zero1')}",
    "schedule": lambda c: f"schedule={c.design.get('schedule', '1f1b')}" if c.design.get("pp", 1) > 1 else "pp=1",
    "tp": lambda c: _tp_label(c.design),
    "cp": lambda c: "cp=1" if c.design.get("cp", 1) <= 1 else "cp>1",
    "framework": lambda c: f"framework={c.scenario.training.framework.name}",
}


def summarize_by(cases, results, label, held_out: set | None = None) -> dict:
    """summarize() over the runs grouped by label(case) instead of by dataset."""
    by_id = {c.id: c for c in cases}
    return summarize([{**r, "dataset": label(by_id[r["id"]])} for r in results], held_out)


def by_feature(cases, results, held_out: set | None = None) -> dict:
    """summarize_by each design feature in turn ({feature: {label: stats}}): where the model errs for a whole kind
    of layout or software stack, its signed step_time_bias shows it (e.g. how fast the model is on interleaved
    pipelines, on context parallelism, on full recompute)."""
    return {name: summarize_by(cases, results, label, held_out) for name, label in FEATURES.items()}


def _calibration_yaml() -> dict:
    path = os.path.join(VALIDATION_DIR, "calibration.yaml")
    return read_yaml(path) if os.path.exists(path) else {}


def calibration_subset() -> dict:
    """{gpu name: [case ids used for fitting]} as recorded in configs/validation/calibration.yaml."""
    data = _calibration_yaml()
    return {k: list(v["fit_cases"]) for k, v in data["gpus"].items()} if data else {}


def split_member(case_id: str, fraction: float) -> bool:
    """The documented hash rule of calibration.yaml's `split`: sha256(id)[:8] / 2^32 < fraction."""
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) / 2**32 < fraction


def calibration_split(cases) -> set:
    """Ids of the cases in the named calibration split: the per-GPU fit_cases for the datasets listed as
    `explicit`, the sha256 rule for every other dataset (configs/validation/calibration.yaml)."""
    data = _calibration_yaml()
    fit = {i for ids in calibration_subset().values() for i in ids}
    split = data.get("split") or {}
    explicit = set(split.get("explicit") or [])
    frac = float(split.get("fraction", 0.0))
    return {c.id for c in cases if (c.id in fit if c.dataset in explicit or not split
                                    else split_member(c.id, frac))}


def rankdata(x) -> np.ndarray:
    """Ranks 1..n, ties get the average of the ranks they span."""
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        tie = x == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(a, b) -> float:
    """Spearman rank correlation with average ranks for ties; nan when either side is constant."""
    ra, rb = rankdata(a), rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = math.sqrt(float(np.sum(ra * ra) * np.sum(rb * rb)))
    return float(np.sum(ra * rb) / den) if den > 0 else float("nan")


LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "mbs", "recompute", "sharding", "schedule", "overlap")
MIN_GROUP = 3


def _usable(r) -> bool:
    """A prediction that a rank or a ratio can use: finite and positive."""
    return r["predicted"] is not None and math.isfinite(r["predicted"]) and r["predicted"] > 0


def _per_gpu_tflops(r) -> tuple:
    """(predicted, measured) model TFLOP/s per GPU of a result: the ranked quantity. For a time metric the
    measured value is the predicted TFLOP/s scaled by predicted/measured time, for a throughput metric by
    measured/predicted (the same model-FLOP count on both sides, so only the measurement differs)."""
    pred = r["metrics"]["tflops_per_gpu"]
    ratio = r["predicted"] / r["measured"] if r["metric"] == "iteration_s" else r["measured"] / r["predicted"]
    return pred, pred * ratio


PAIR_GAPS = (0.0, 0.01, 0.02, 0.05)  # measured-rate gaps at which pairwise order is reported


def concordance(pairs, min_gap: float) -> dict:
    """Share of run pairs whose predicted order matches the measured one, over the pairs whose measured rates
    differ by more than min_gap (|m_a / m_b - 1|). pairs: (predicted a, measured a, predicted b, measured b).
    A pair the model predicts equal counts half (Kendall's convention for ties)."""
    n, agree = 0, 0.0
    for pa, ma, pb, mb in pairs:
        if ma == mb or abs(ma / mb - 1.0) <= min_gap:
            continue
        n += 1
        agree += 0.5 if pa == pb else float((pa > pb) == (ma > mb))
    return {"min_gap": min_gap, "pairs": n, "concordant": agree, "share": agree / n if n else None}


def ranking(cases, results) -> dict:
    """Spearman of predicted vs measured per layout group: >= 3 runs of one model shape on one GPU type from one
    table (same dataset and source, i.e. one software release and cluster; same sequence length and precision
    label) with at least two layouts (tp, pp, dp, cp, ep, vpp, mbs,
    recompute, sharding, schedule, overlap, GPUs per node; the GPU count and batch may differ). Ranked quantity:
    model TFLOP/s per GPU, which compares layouts at different GPU counts and batches on one scale."""
    by_id = {c.id: c for c in cases}
    groups = {}
    for r in results:
        if not _usable(r):
            continue
        ds, model, shape, gpu, _, seq, _, prec = by_id[r["id"]].group
        groups.setdefault((ds, by_id[r["id"]].source, model, shape, gpu, seq, prec), []).append(r)
    out, pairs = [], []
    for key, rs in groups.items():
        layouts = {tuple(str(by_id[r["id"]].design.get(k, "")) for k in LAYOUT_KEYS)
                   + (by_id[r["id"]].scenario.system.gpus_per_node,) for r in rs}
        if len(rs) < MIN_GROUP or len(layouts) < 2:
            continue
        ds, _, model, _, gpu, seq, prec = key
        # to 6 significant digits: runs whose published times and batches scale together (weak scaling) have
        # equal measured TFLOP/s that float rounding would otherwise split into a spurious order
        pm = [tuple(float(f"{x:.6g}") for x in _per_gpu_tflops(r)) for r in rs]
        rho = spearman([p for p, _ in pm], [m for _, m in pm])
        pairs += [(pa, ma, pb, mb) for i, (pa, ma) in enumerate(pm) for pb, mb in pm[i + 1:]]
        out.append({"name": f"{ds}: {model} on {gpu}, seq {seq}, {prec}", "dataset": ds, "n": len(rs),
                    "layouts": len(layouts), "gpu_counts": sorted({by_id[r["id"]].scenario.system.n_gpus
                                                                   for r in rs}),
                    "spearman": rho, "ids": [r["id"] for r in rs]})
    out.sort(key=lambda g: g["name"])
    rhos = [g["spearman"] for g in out if math.isfinite(g["spearman"])]
    return {"groups": out, "n_groups": len(out), "n_defined": len(rhos),
            "mean_spearman": float(np.mean(rhos)) if rhos else None,
            "median_spearman": float(np.median(rhos)) if rhos else None,
            # what a planner acts on: of two layouts whose measured rates differ by more than a gap (run-to-run
            # noise of a published table is ~1%), how often the model puts the faster one first
            "pairwise": [concordance(pairs, g) for g in PAIR_GAPS],
            "rule": "same dataset and source (one table: software release, cluster), model shape, GPU type, seq "
                    "and precision label; >= 3 runs, >= 2 layouts; "
                    "ranked: model TFLOP/s per GPU, predicted vs measured; average ranks for ties; a group whose "
                    "predictions (or measurements) are all equal has no Spearman (null), left out of the mean"}


def weak_scaling(cases, results) -> dict:
    """How much the step time grows per doubling of the GPUs when each GPU's work stays the same: pairs of runs of
    one table (dataset and source), model shape, GPU type, sequence and precision label, with one layout but the
    data-parallel size (LAYOUT_KEYS less dp, GPUs per node) and the same microbatches per data-parallel rank
    (gbs / (dp x mbs)), at consecutive GPU counts of that series. Per pair: ln(t2 / t1) / log2(n2 / n1), measured and
    predicted (iteration times only). A model whose collectives, stragglers and fixed costs grow too little with N
    shows a predicted slope below the measured one; a design extrapolated past the validated GPU counts inherits it."""
    by_id = {c.id: c for c in cases}
    series = {}
    for r in results:
        if not _usable(r) or r["metric"] != "iteration_s":
            continue
        c = by_id[r["id"]]
        ds, model, shape, gpu, n, seq, gbs, prec = c.group
        d = c.design
        layout = (tuple(str(d.get(k, "")) for k in LAYOUT_KEYS if k != "dp")
                  + (c.scenario.system.gpus_per_node, gbs / (float(d["dp"]) * float(d["mbs"]))))
        series.setdefault((ds, c.source, model, shape, gpu, seq, prec, layout), []).append(
            (n, r["measured"], r["predicted"], r["id"]))
    pairs = []
    for runs in series.values():
        runs.sort()
        for (n1, m1, p1, i1), (n2, m2, p2, i2) in zip(runs, runs[1:]):
            if n2 > n1:
                doublings = math.log2(n2 / n1)
                pairs.append({"ids": [i1, i2], "gpus": [n1, n2], "measured": math.log(m2 / m1) / doublings,
                              "predicted": math.log(p2 / p1) / doublings})
    med = (lambda k: float(np.median([p[k] for p in pairs])) if pairs else None)
    return {"pairs": pairs, "n_pairs": len(pairs), "median_measured": med("measured"),
            "median_predicted": med("predicted"),
            "rule": "same dataset and source, model shape, GPU type, seq and precision label; one layout but dp "
                    "(and GPUs per node); equal microbatches per data-parallel rank; consecutive GPU counts; "
                    "slope = ln(t2/t1) / log2(n2/n1), iteration times"}


def _gpu_token(gpu_name: str) -> str:
    """How a run id names its GPU type: the name's first segment, lower case (H100-SXM-80GB -> h100, GB200)."""
    return gpu_name.split("-")[0].lower()


def hardware_pairs(cases, results) -> dict:
    """The same run on two GPU types: rows of one table whose ids differ only in the GPU (NVIDIA's tables name
    every row release-gpu-model-...; the GPU token replaced, the rest equal) and that ran the same layout
    (LAYOUT_KEYS), GPU count and batch. A planner choosing hardware acts on the speedup of one part over the
    other; per ordered pair of GPU types (by name), the measured and predicted speedups of the second over the
    first (model TFLOP/s per GPU, so a time and a throughput metric compare on one scale) and their medians."""
    by_id = {c.id: c for c in cases}
    groups = {}
    for r in results:
        if not _usable(r):
            continue
        c = by_id[r["id"]]
        gpu = c.scenario.system.gpu.name
        token = f"-{_gpu_token(gpu)}-"
        if token not in c.id:
            continue
        layout = tuple(str(c.design.get(k, "")) for k in LAYOUT_KEYS)
        key = (c.id.replace(token, "-*-", 1), layout, c.scenario.system.n_gpus,
               c.scenario.training.global_batch_sequences)
        groups.setdefault(key, {})[gpu] = r
    pairs = {}
    for runs in groups.values():
        gpus = sorted(runs)
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                pa, ma = _per_gpu_tflops(runs[a])
                pb, mb = _per_gpu_tflops(runs[b])
                pairs.setdefault((a, b), []).append({"ids": [runs[a]["id"], runs[b]["id"]],
                                                     "measured_speedup": mb / ma, "predicted_speedup": pb / pa})
    out = []
    for (a, b), runs in sorted(pairs.items()):
        meas = [p["measured_speedup"] for p in runs]
        pred = [p["predicted_speedup"] for p in runs]
        out.append({"gpus": [a, b], "n": len(runs), "measured_speedup_median": float(np.median(meas)),
                    "predicted_speedup_median": float(np.median(pred)),
                    "ratio_error_median": float(np.median(np.array(pred) / np.array(meas)) - 1.0),
                    "runs": sorted(runs, key=lambda p: p["ids"][0])})
    return {"pairs": out, "n_pairs": len(out), "n_runs": sum(p["n"] for p in out),
            "rule": "rows whose ids differ only in the GPU token, with the same layout, GPU count and batch; "
                    "speedup of the second GPU type over the first: model TFLOP/s per GPU, measured and "
                    "predicted; ratio_error = predicted speedup / measured speedup - 1 (median over the runs)"}


def _family(source: str) -> str:
    """The publication a row comes from: the repository (before '@') or the paper (before the first ',')."""
    return re.split(r"@|,| \||:docs| Table", source)[0].strip()


def _clean(x):
    """JSON-safe: non-finite floats -> None, recursively."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def validate(paths=None, dataset: str | None = None) -> dict:
    """Python API: the object `sax validate --json` prints. "datasets": per dataset n, MAPE and max |error| over
    all scored runs and over the held-out runs (not in the named calibration split), plus unsupported and
    excluded counts; "overall": the same over all datasets (with "by_class": dense vs MoE, and "by_feature": by
    recompute, sharding, pipeline schedule, TP and CP size and framework); "cases" (each with its GPU and GPU count); "ranking" (Spearman per layout group);
    "hardware_pairs" (the same run on two GPU types: measured vs predicted speedup);
    "unsupported" and "excluded" runs with their reasons; "errors": bad input rows."""
    loaded = load_all(paths, dataset)
    cases = loaded.cases
    results = evaluate_cases(cases)
    fit = {i for ids in calibration_subset().values() for i in ids}
    split = calibration_split(cases)
    held = {r["id"] for r in results} - split
    by_id = {c.id: c for c in cases}
    datasets = summarize(results, held)
    for ds in sorted({u.dataset for u in loaded.unsupported + loaded.excluded} - set(datasets)):
        datasets[ds] = {"n": 0, "held_out": {"n": 0}}
    for name, s in datasets.items():
        s["unsupported"] = sum(u.dataset == name for u in loaded.unsupported)
        s["excluded"] = sum(u.dataset == name for u in loaded.excluded)
        s["approximated"] = sum(bool(c.approximations) for c in cases if c.dataset == name)
        s["calibration_split"] = sum(c.id in split for c in cases if c.dataset == name)
        # real runs the model calls infeasible (e.g. over memory): scored on their raw step time, counted here
        s["model_infeasible"] = sum(not r["metrics"]["feasible"] for r in results if r["dataset"] == name)
    errs = [abs(r["error"]) for r in results]
    mapes = [s["mape"] for s in datasets.values() if s["n"]]
    held_mapes = [s["held_out"]["mape"] for s in datasets.values() if s["held_out"]["n"]]
    signed = [r["step_time_error"] for r in results if r.get("step_time_error") is not None]
    overall = {**_stats(errs), "held_out": _stats([abs(r["error"]) for r in results if r["id"] in held]),
               "step_time_bias": float(np.mean(signed)) if signed else None,
               "datasets": sum(1 for s in datasets.values() if s["n"]),
               "mean_dataset_mape": float(np.mean(mapes)) if mapes else None,
               "mean_dataset_mape_held_out": float(np.mean(held_mapes)) if held_mapes else None,
               "unsupported": len(loaded.unsupported), "excluded": len(loaded.excluded), "errors": len(loaded.errors),
               "approximated": sum(bool(c.approximations) for c in cases),
               "model_infeasible": sum(not r["metrics"]["feasible"] for r in results),
               "sources": sorted({_family(c.source) for c in cases if c.source})}
    overall["n_sources"] = len(overall["sources"])
    # dense vs MoE (routed experts): the model's error differs by class, and uncertainty.py bands by it; the
    # per-dataset summary over the runs relabelled by class
    moe_ids = {c.id for c in cases if scenario_is_moe(c.scenario)}
    overall["by_class"] = summarize_by(cases, results, lambda c: model_class(c.id in moe_ids), held)
    # the same by design feature (recompute, sharding, pipeline schedule, TP and CP size, framework)
    overall["by_feature"] = by_feature(cases, results, held)
    return _clean({
        "datasets": datasets,
        "overall": overall,
        "cases": [{**{k: r[k] for k in ("id", "dataset", "metric", "predicted", "measured", "error",
                                        "step_time_error")},
                   "used_for_fitting": r["id"] in fit, "calibration_split": r["id"] in split,
                   "violation": r["violation"],
                   "filled": list(by_id[r["id"]].filled), "approximations": list(by_id[r["id"]].approximations),
                   "design": {k: by_id[r["id"]].design[k] for k in ("tp", "pp", "dp", "cp", "vpp", "mbs",
                                                                     "recompute", "sharding", "overlap")
                              if k in by_id[r["id"]].design}
                   | {k: by_id[r["id"]].design[k] for k in ("ep", "schedule") if k in by_id[r["id"]].design},
                   "metrics": r["metrics"], "breakdown": r["breakdown"], "source": by_id[r["id"]].source,
                   "gpu": by_id[r["id"]].scenario.system.gpu.name,
                   "n_gpus": by_id[r["id"]].scenario.system.n_gpus,
                   "precision": by_id[r["id"]].scenario.training.precision,
                   "lora": by_id[r["id"]].scenario.training.lora_rank > 0,
                   "moe": r["id"] in moe_ids} for r in results],
        "ranking": ranking(cases, results),
        "weak_scaling": weak_scaling(cases, results),
        "hardware_pairs": hardware_pairs(cases, results),
        "unsupported": [u.as_dict() for u in loaded.unsupported],
        "excluded": [u.as_dict() for u in loaded.excluded],
        "errors": [str(e) for e in loaded.errors],
    })

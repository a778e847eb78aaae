"""Published training runs -> predicted vs measured metrics, errors and MAPE per dataset.

A *case* is one published run: model shape, GPU type and count, parallel layout, batch, the measured metric
and its source. Cases come from CSV files with the columns of ``shared/data/published_runs.csv`` (plus the
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
import glob
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from . import specs as S
from .config import Scenario, load_gpu, load_transports, read_yaml
from .cost import step_time
from .cost.compute import layer_flops, model_flops_per_sequence
from .params import build_params
from .resources import configs_dir
from .space import AXES, NUMERIC_AXES, Design, DesignSpace

CONFIGS = configs_dir()  # bundled configs: the installed package data or the checkout's configs/
VALIDATION_DIR = os.path.join(CONFIGS, "validation")
COLUMNS = ("id", "dataset", "source", "model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
           "gated_mlp", "gpu", "n_gpus", "tp", "pp", "dp", "cp", "vpp", "mbs", "gbs", "recompute", "seq_parallel",
           "precision", "metric", "value", "notes")
OPTIONAL_COLUMNS = ("gpus_per_node", "link_gbps", "link_latency_ms")
INT_COLUMNS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "n_gpus", "tp", "pp", "dp", "cp",
               "vpp", "mbs", "gbs", "gpus_per_node")
FLOAT_COLUMNS = ("value", "link_gbps", "link_latency_ms")
BOOL_COLUMNS = ("gated_mlp", "seq_parallel")
METRICS = ("iteration_s", "tflops_per_gpu", "tflops_per_gpu_hw", "mfu", "tokens_per_s")
# Megatron-LM's command-line defaults (megatron/training/arguments.py): --micro-batch-size 1 in its examples,
# no --num-layers-per-virtual-pipeline-stage (1F1B), no --recompute-granularity, no --sequence-parallel,
# context parallel 1, MHA (no --group-query-attention), GeLU MLP, bf16 in current examples.
GENERIC_DEFAULTS = {"kv_heads": None, "gated_mlp": "no", "cp": 1, "vpp": 1, "mbs": 1, "recompute": "none",
                    "seq_parallel": "no", "precision": "bf16", "source": "", "notes": "", "model": None}
GENERIC_PROFILE = {"flash_attention": True, "defaults": {},
                   "design": {"sharding": "zero1", "overlap": "dp", "placement": "tp-cp-dp-pp"},
                   "defaults_source": "Megatron-LM command-line defaults"}
# The GPU's standard cluster: node and building latencies (and the fabric) of its reference system.
STANDARD_CLUSTER = {"A100-SXM-80GB": "selene-a100.yaml", "H100-SXM-80GB": "h100-building.yaml"}
DEFAULT_LATENCY_US = (3.0, 8.0)  # NVSwitch and a 3-tier fat tree incl. NCCL software (configs/systems)


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


# ------------------------------------------------------------------------------------------------ reading
def _profiles() -> dict:
    out = {}
    for path in sorted(glob.glob(os.path.join(VALIDATION_DIR, "*.yaml"))):
        data = read_yaml(path)
        if "dataset" in data and "profile" in data:
            out[data["dataset"]] = data["profile"]
    return out


def read_csv(path: str) -> tuple[list, list]:
    """(rows, errors): each row a (file, row number, {column: text}) triple; header errors up front."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        rows = [(path, i + 2, {k: (v or "").strip() for k, v in r.items() if k is not None})
                for i, r in enumerate(reader)]
    unknown = [c for c in header if c not in COLUMNS + OPTIONAL_COLUMNS]
    missing = [c for c in COLUMNS if c not in header]
    errors = [CaseError(path, 1, c, c, "unknown column; columns are those of shared/data/published_runs.csv "
                                       f"plus {', '.join(OPTIONAL_COLUMNS)}") for c in unknown]
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


def load_cases(paths=None, dataset: str | None = None) -> tuple[list, list]:
    """(cases, errors) from case files, directories of them and CSV files; bad rows become errors."""
    paths = list(paths or [VALIDATION_DIR])
    profiles = _profiles()
    raw, errors = [], []
    for p in paths:
        if os.path.isdir(p):
            files = sorted([f for f in glob.glob(os.path.join(p, "*.yaml")) if "cases" in read_yaml(f)]
                           + glob.glob(os.path.join(p, "*.csv")))
        elif os.path.exists(p):
            files = [p]
        else:
            raise S.ConfigError(p, None, p, "no such file or directory", "give case files, directories or CSVs")
        for f in files:
            if f.endswith(".csv"):
                rows, errs = read_csv(f)
                raw += [(a, b, r, {}) for a, b, r in rows]
                errors += errs
            else:
                raw += read_yaml_cases(f)
    cases, last_source = [], {}
    for file, rownum, row, design in raw:
        if row.get("source", "").lower() == "same":  # published_runs.csv: "same as the row above"
            row = {**row, "source": last_source.get((file, row.get("dataset")), "")}
        last_source[(file, row.get("dataset"))] = row.get("source", "")
        if dataset and row.get("dataset") != dataset:
            continue
        try:
            cases.append(build_case(row, file, rownum, profiles, design))
        except CaseError as err:
            errors.append(err)
    return cases, errors


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


def build_case(row: dict, file: str, n, profiles: dict, design_extra: dict | None = None,
               gpu: S.GpuSpec | None = None) -> Case:
    """One row -> Case (raises CaseError naming the row and column)."""
    ds = row.get("dataset", "")
    profile = profiles.get(ds, GENERIC_PROFILE)
    filled: list = []
    v = {c: _value(row, c, file, n, profile, filled) for c in COLUMNS + OPTIONAL_COLUMNS
         if c in COLUMNS or row.get(c, "") != ""}
    if v["metric"] not in METRICS:
        raise CaseError(file, n, "metric", v["metric"], f"unknown metric; use one of {', '.join(METRICS)}")
    if v["recompute"] not in ("none", "selective", "full"):
        raise CaseError(file, n, "recompute", v["recompute"], "must be none, selective or full")
    if v["precision"] not in S.PRECISIONS:
        raise CaseError(file, n, "precision", v["precision"], f"use one of {', '.join(S.PRECISIONS)}")
    if gpu is None:
        path = os.path.join(CONFIGS, "hardware", f"{v['gpu']}.yaml")
        if not os.path.exists(path):
            known = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(CONFIGS, "hardware")))
            raise CaseError(file, n, "gpu", v["gpu"], f"unknown GPU; known: {', '.join(known)}")
        gpu = load_gpu(path)
    kv = v["kv_heads"] or v["heads"]
    if v["heads"] % kv or v["hidden"] % v["heads"]:
        raise CaseError(file, n, "heads", v["heads"], "must divide hidden and be a multiple of kv_heads")
    model = S.ModelSpec(name=v["model"] or v["id"], layers=v["layers"], hidden=v["hidden"], heads=v["heads"],
                        kv_heads=kv, head_dim=v["hidden"] // v["heads"], ffn=v["ffn"], gated_mlp=v["gated_mlp"],
                        vocab=v["vocab"], source=v["source"])
    if v["tp"] * v["pp"] * v["dp"] * v["cp"] != v["n_gpus"]:
        raise CaseError(file, n, "n_gpus", v["n_gpus"], f"is not tp x pp x dp x cp = "
                                                        f"{v['tp'] * v['pp'] * v['dp'] * v['cp']}")
    system = _system(gpu, v["n_gpus"], v.get("gpus_per_node"), v.get("link_gbps"), v.get("link_latency_ms"),
                     file, n)
    # Megatron-LM gradient buffers: fp16 runs keep and all-reduce 16-bit grads unless
    # --accumulate-allreduce-grads-in-fp32; bf16 forces fp32 accumulation and reduction (arguments.py).
    gbytes = 2.0 if v["precision"] == "fp16" else 4.0
    training = S.Training(global_batch_sequences=v["gbs"], seq_len=v["seq"], precision=v["precision"],
                          grad_bytes=gbytes, grad_reduce_bytes=gbytes, sequence_parallel=v["seq_parallel"],
                          flash_attention=bool(profile["flash_attention"]))
    transports = load_transports(os.path.join(CONFIGS, "network", "transports.yaml"))
    run = {k: x for k, x in profile.get("run_settings", {}).get(v["id"], {}).items() if k in AXES}
    for k, x in run.items():
        filled.append(f"{k}={x} ({profile.get('run_settings_source', 'default')})")
    design = {**GENERIC_PROFILE["design"], **profile.get("design", {}), **run, **(design_extra or {})}
    design.update(tp=v["tp"], pp=v["pp"], dp=v["dp"], cp=v["cp"], vpp=v["vpp"], mbs=v["mbs"],
                  recompute=v["recompute"], schedule="interleaved" if v["vpp"] > 1 else "1f1b")
    space = DesignSpace.from_dict({}, tuple(t.name for t in transports), file)
    scen = Scenario(name=v["id"], path=file, model=model, system=system, training=training,
                    transports=transports, space=space, objective="step_time_s", baselines={},
                    default_baseline="")
    try:
        space.design(design, file=file)
    except S.ConfigError as err:
        raise CaseError(file, n, err.key or "design", err.value, str(err)) from None
    return Case(id=v["id"], dataset=ds or "(none)", source=v["source"], metric=v["metric"], measured=v["value"],
                scenario=scen, design=design, filled=tuple(filled), notes=v["notes"])


# ------------------------------------------------------------------------------------------------ evaluating
def _stack(trees):
    return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *trees)


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
        params.append(build_params(scen))
        d = scen.space.design(c.design)
        designs.append(Design(*[jnp.asarray(getattr(d, ax), jnp.float32 if ax in NUMERIC_AXES else jnp.int32)
                                for ax in AXES]))
    return _stack(params), _stack(designs)


def hw_flops_per_sequence(case) -> float:
    """Model FLOPs plus what recomputation adds: a transformer-layer forward (full) or the attention core
    (selective); Narayanan et al. 2021's 96 B s l h^2 (1 + s/6h + V/16lh) for full recompute."""
    P = build_params(case.scenario, jnp.float64) if jax.config.jax_enable_x64 else build_params(case.scenario)
    m = P.model
    seq = case.scenario.training.seq_len
    qkv, proj, mlp, attn = (float(x) for x in layer_flops(1.0, seq, m, m.moe_fraction))
    extra = {"full": qkv + proj + mlp + attn, "selective": attn, "none": 0.0}[case.design["recompute"]]
    return float(model_flops_per_sequence(seq, m)) + case.scenario.model.layers * extra


def metrics_of(case, step_s: float, feasible: bool) -> dict:
    sc = case.scenario
    gbs, n = sc.training.global_batch_sequences, sc.system.n_gpus
    model = float(model_flops_per_sequence(sc.training.seq_len, build_params(sc).model)) * gbs
    hw = hw_flops_per_sequence(case) * gbs
    t = step_s if step_s > 0 and math.isfinite(step_s) else float("nan")
    return {"iteration_s": t, "tflops_per_gpu": model / t / n / 1e12, "tflops_per_gpu_hw": hw / t / n / 1e12,
            "mfu": model / t / n / sc.system.gpu.peak_flops(sc.training.precision),
            "tokens_per_s": gbs * sc.training.seq_len / t, "feasible": feasible}


def evaluate_cases(cases, gpu_override=None) -> list:
    """One batched, jitted call over all cases (they share shapes: two levels, the same transports)."""
    if not cases:
        return []
    params, designs = case_arrays(cases, gpu_override, pad=True)
    cost = _eval_cases(params, designs)
    raw = np.asarray(cost.raw_step_time_s, np.float64)
    feas = np.asarray(cost.feasible)
    out = []
    for i, c in enumerate(cases):
        met = metrics_of(c, float(raw[i]), bool(feas[i]))
        pred = met[c.metric]
        out.append({"id": c.id, "dataset": c.dataset, "metric": c.metric, "predicted": pred,
                    "measured": c.measured, "error": (pred - c.measured) / c.measured, "metrics": met,
                    "violation": int(np.asarray(cost.violation)[i]),
                    "breakdown": {k: float(np.asarray(x)[i]) for k, x in cost.breakdown._asdict().items()},
                    "memory_GiB": float(np.asarray(cost.memory_bytes)[i]) / 2**30})
    return out


def summarize(results, held_out: set | None = None) -> dict:
    """Per dataset: n, MAPE and max |error| (fractions); with held_out ids, also over those only."""
    out = {}
    for ds in sorted({r["dataset"] for r in results}):
        errs = [abs(r["error"]) for r in results if r["dataset"] == ds]
        out[ds] = {"n": len(errs), "mape": float(np.mean(errs)), "max_abs_error": float(np.max(errs))}
        if held_out is not None:
            ho = [abs(r["error"]) for r in results if r["dataset"] == ds and r["id"] in held_out]
            out[ds]["held_out"] = ({"n": len(ho), "mape": float(np.mean(ho)), "max_abs_error": float(np.max(ho))}
                                   if ho else {"n": 0})
    return out


def calibration_subset() -> dict:
    """{gpu name: [case ids used for fitting]} as recorded in configs/validation/calibration.yaml."""
    path = os.path.join(VALIDATION_DIR, "calibration.yaml")
    return {k: list(v["fit_cases"]) for k, v in read_yaml(path)["gpus"].items()} if os.path.exists(path) else {}


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
    """Python API: {"datasets", "cases", "errors"} as `sax validate --json` prints it (errors are relative,
    signed per case; MAPE and max |error| per dataset, and over the cases not used for fitting)."""
    cases, errors = load_cases(paths, dataset)
    results = evaluate_cases(cases)
    fit = {i for ids in calibration_subset().values() for i in ids}
    held = {r["id"] for r in results} - fit
    by_id = {c.id: c for c in cases}
    return _clean({
        "datasets": summarize(results, held),
        "cases": [{**{k: r[k] for k in ("id", "dataset", "metric", "predicted", "measured", "error")},
                   "used_for_fitting": r["id"] in fit, "filled": list(by_id[r["id"]].filled),
                   "design": {k: by_id[r["id"]].design[k] for k in ("tp", "pp", "dp", "cp", "vpp", "mbs",
                                                                     "recompute", "sharding", "overlap")},
                   "metrics": r["metrics"], "source": by_id[r["id"]].source} for r in results],
        "errors": [str(e) for e in errors],
    })

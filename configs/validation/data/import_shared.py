"""Rebuild nvidia_perf.csv and other.csv here from the project's shared collection (shared/data/).

    python3 configs/validation/data/import_shared.py /path/to/shared/data

Rows are copied verbatim (every row keeps its `source` and `notes`); this script only ADDS columns that make
explicit what the collection states in prose, so that `sax validate` does not have to parse notes:

* `head_dim`:  the attention head width where it differs from hidden/heads (stated as `head_dim=N` in notes).
* `sharding`:  llm-foundry's FSDP sharding strategy from notes (FULL_SHARD -> fsdp, SHARD_GRAD_OP -> zero2).
* `overlap`:   torchtitan AsyncTP rows (id ends in `asynctp`): TP communication overlapped -> `dp+tp`.
* `features`:  architecture/run features beyond a standard dense or MoE GQA transformer, `;`-separated:
               mla (DeepSeek-V3 / Kimi-K2 latent attention), hybrid-mamba (Nemotron-3 Mamba-2 blocks),
               sliding-window (GPT-OSS alternating 128-token windows, attention sinks), shape-unknown (model
               shape not published/verified), lora (frozen base weights), sac-op / sac-layer (torchtitan
               selective activation checkpointing variants), h100-96gb (Meta Grand Teton H100 96 GB HBM2e 500 W),
               fp8-delayed (an FP8 row from NeMo's tables: Transformer Engine's DelayedScaling), fp8-rowwise
               (torchtitan's float8 rowwise rows), eager (a torchtitan run without torch.compile), fp8-all-gather
               (a torchtitan FP8 run whose FSDP gathers the weights in float8: FP8_ALL_GATHER_CONFIGS),
               fsdp-pure (an llm-foundry run with Composer FSDP mixed_precision PURE: gradients reduced in 16 bits).
               sax_jax/validation.py decides which of these the model supports, approximates or cannot represent.
* `dataset`:   fine-tuning rows (notes start `task=sft` or `task=lora`) move to dataset `nvidia-finetune`, so
               that the pretraining datasets' MAPE is not mixed with fine-tuning (their id still names the
               release and system).
* `exclude`:   a reason, for rows that must not be scored (see EXCLUDE and KNOWN_REGRESSION below); the row
               stays in the file.

Cells are corrected where a primary source settles what the collection left open (CORRECT below): the new
value replaces the old and the notes say why, with the source. Model shapes the collection could not find and a later
public copy of the released config settled are filled the same way (FILL below).

Kept-out sources (the project's independent check, never validation data): MLPerf Training results and the
Llama 3, MegaScale, BLOOM, MT-NLG and DS3Lab decentralized-training (Yuan et al. 2022) papers. The shared
collection already dropped its one MLPerf-derived row (public_runs_nvidia_perf.md: "327 rows (one row that used
the MLPerf GPT-3 setup removed)"); KEPT_OUT below is checked on every row's source and notes anyway.
"""
import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KEPT_OUT = re.compile(r"mlperf|mlcommons|megascale|\bbloom\b|mt-nlg|megatron-turing|llama 3 herd|2407\.21783|"
                      r"yuan et al|ds3lab|decentralized training of foundation models", re.I)
EXCLUDE = {  # rows flagged CHECK: in the collection (the source contradicts itself); not corrected, not scored
    "mb-25.11-gb300-qwen3-235b-a22b-pretrain-bf16-256g-gbs8192":
        "CHECK: the 25.11 table's GA (32) contradicts gbs/(mbs*dp) (64); which of gbs/mbs is wrong is unknown",
    "mb-25.11-h100-gpt-oss-120b-pretrain-bf16-64g-gbs512":
        "CHECK: the 25.11 table's GA (2) contradicts gbs/(mbs*dp) (8); which of gbs/mbs is wrong is unknown",
}
# Rows whose published layout cannot hold the model on the GPU: the table's parallelism columns are wrong, so the
# number measured some other layout (not corrected, not scored). Checked against the source table itself.
_GB300_70B = ("the 26.02.01 table's layout cannot hold Llama 3 70B on 64 GB300 (288 GB): {what}; the same "
              "recipe at 26.02 and 26.04 (LLAMA3_70B_PRETRAIN_CONFIG_GB300_{prec}_V2) is TP1 PP4 VP5 MBS1 and "
              "runs {near}, so this row's FSDP/PP/VP/MBS columns do not describe the run")
EXCLUDE.update({
    "mb-26.02.01-gb300-llama3-70B-pretrain-nvfp4-64g-gbs256": _GB300_70B.format(
        what="TP1 PP1 without FSDP replicates every weight and its gradient, 70.6e9 x (2 + 4) bytes = 424 GB",
        prec="NVFP4", near="4.82 and 4.43 s against this row's 4.68 s"),
    "mb-26.02.01-gb300-llama3-70B-pretrain-mxfp8-64g-gbs256": _GB300_70B.format(
        what="PP4 with MBS 2 and no VP keeps 4 microbatches of 20 layers' activations, 3.6 GiB per layer each "
             "(Korthikanti et al. 2022 with FP8 linear inputs), ~290 GiB before the 120 GB of weights, gradients "
             "and optimizer state",
        prec="FP8_MX", near="7.13 and 6.91 s against this row's 6.83 s"),
})
# A 25.09 "alt" row takes its layout from the table cells' parenthesised values; the EP cell has none, so the row
# carries the base variant's EP, which its own PP cannot hold: the table does not say which EP the alt run used.
EXCLUDE["mb-25.09-gb200-deepseek-v3-pretrain-fp8-mx-256g-gbs2048-alt"] = (
    "the 25.09 table gives the FP8-MX variant PP 8 (with DP 32 and GA 64, consistent with each other) but only the "
    "base variant's EP 64, which PP 8 on 256 GPUs cannot hold: a pipeline stage has 256 / 8 = 32 ranks, and "
    "Megatron-Core needs the world size divisible by pp x etp x ep = 8 x 1 x 64 = 512; which EP the run used is "
    "not in the source (the recipe, deepseek_v3_llm_pretrain.yaml perf_matrix.gb200 at v0.1.0rc3, has PP 4)")
# A run its release's own known-issues page says could not use what its recipe asked for: the number measures the
# fallback, not the recipe. The 26.02 recipe (v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1) is the only
# 26.02 row whose recipe requests the DeepEP flex backend on H100 (configs/validation/recipes/recipes.csv).
EXCLUDE["mb-26.02-h100-qwen3-30b-a3b-pretrain-fp8-16g-gbs1024"] = (
    "its release cannot run what its recipe asks for: Megatron-Bridge docs/releases/known-issues.md (v0.3.0, 26.02): "
    "'DeepEP is not supported in the current NeMo framework 26.02 container (nvcr.io/nvidia/nemo:26.02), which "
    "results in reduced DSv3 performance compared to the NeMo framework 25.09 container ... on H100 machines', and "
    "this row's recipe (v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1) sets moe_flex_dispatcher_backend "
    "'deepep'; the patch release 26.02.01 (v0.3.1) moved the recipe to HybridEP and its table, same GPUs, batch and "
    "parallelism columns, reads 28.94 s against this row's 51.27 s")
# Cells a primary source settles that the collection left open: {id: {column: (value, why)}}
CORRECT = {
    "opt-175b-992": {"metric": (
        "tflops_per_gpu_hw",
        "metric corrected from tflops_per_gpu: OPT's 147 TFLOP/s counts recomputation FLOPs. metaseq "
        "projects/OPT/chronicles/final_update.md: the run 'required ~4.30E+23 FLOPs of compute, or roughly ~33 days "
        "of continuous training on 1024 80GB A100s'; 4.30e23 / (33 d x 86,400 s x 1024) = 147 TFLOP/s per GPU, and "
        "4.30e23 / 300e9 tokens = 1.43e12 FLOPs per token, Narayanan et al. 2021's full-recompute count "
        "96 l h^2 (1 + s/6h + V/16lh) for OPT-175B's shape (1.434e12), where the model-FLOPs count is 1.08e12")},
    # A TFLOP/s figure is only comparable under the FLOP count that produced it. The 25.09 table counts
    # 338e12 / 1297 = 2.61e11 FLOPs per DeepSeek-V3 token (its base FP8 row gives both figures; Megatron-LM counts
    # the causal half of attention since 8873b55, 2025-03), sax_jax's model-FLOPs count 2.81e11 (the whole score
    # matrix, as Megatron counted before): scored as TFLOP/s the row was off by that 7.6% before any model error.
    # The same table's two figures of the same model, sequence and GPUs convert it exactly.
    "mb-25.09-h100-deepseek-v3-pretrain-fp8-blockwise-1024g-gbs8192-alt": {
        "metric": ("iteration_s",
                   "metric corrected from tflops_per_gpu: the table's FLOP count per token is its own (the base FP8 "
                   "row of the same model, sequence and 1024 GPUs: 338 TFLOP/s at 1297 tokens/s/GPU); tokens/s/GPU = "
                   "1297 x 330 / 338 = 1266.3, iteration_s = 8192 x 4096 / (1266.3 x 1024)"),
        "value": ("25.8769", "value = that iteration_s")},
}
# Model shapes the collection left empty ("config.json not found in a public repo") that public copies of the released
# config.json settled later (configs/models/deepseek-v4-flash.yaml and nemotron3-ultra.yaml say which copies): the
# cells filled and the notes clause that now says where the shape comes from. {id: (cells, (clause was, clause now))}
_V4_FLASH = ({"layers": "43", "hidden": "4096", "heads": "64", "kv_heads": "1", "ffn": "2048", "vocab": "129280",
              "gated_mlp": "yes", "experts": "256", "top_k": "6", "moe_ffn": "2048", "shared_experts": "1",
              "dense_layers": "0", "head_dim": "512", "features": "mla;compressed-attention"},
             ("official config.json not found in a public repo -> shape left empty",
              "shape from public copies of the released config.json (configs/models/deepseek-v4-flash.yaml: 43 layers = "
              "2 window-only + 21 CSA + 20 HCA, hidden 4096, 64 heads x 512 over one shared key/value vector, q_lora "
              "1024, grouped low-rank output 8 x 1024, 256 experts top 6 of width 2048 + 1 shared, hc_mult 4, vocab "
              "129280; 284.3B parameters)"))
_ULTRA = ({"layers": "108", "hidden": "8192", "heads": "64", "kv_heads": "2", "vocab": "131072", "gated_mlp": "no",
           "experts": "512", "top_k": "22", "moe_ffn": "5120", "shared_experts": "1", "dense_layers": "0",
           "sharding": "hsdp", "features": "hybrid-mamba;hsdp-nvl-domain"},
          ("Nemotron 3 Ultra 550B-A55B hybrid Mamba-Transformer MoE (HF nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16); "
           "config.json not found in a public repo -> shape left empty",
           "HYBRID LatentMoE: 108 blocks = 48 Mamba-2 + 48 MoE + 12 attention (HF nvidia/NVIDIA-Nemotron-3-Ultra-550B-"
           "A55B-BF16, config.json as reproduced in public copies: configs/models/nemotron3-ultra.yaml); "
           "moe_latent_size 2048; shared-expert width 10240; 1 MTP layer; head_dim 128; standard transformer shape "
           "formulas do not apply; Megatron-FSDP HSDP (optim_grads_params inside each 64-GPU NVLink domain, optimizer "
           "sharded across domains: perf_recipes/nemotronh/common.py _apply_nemotron_3_ultra_fsdp_hsdp)"))
FILL = {f"mb-26.08-{gpu}-{model}": shape for gpu in ("gb300", "gb200")
        for model, shape in (("deepseek-v4-flash-pretrain-mxfp8-128g-gbs2048", _V4_FLASH),
                             ("nemotron3-ultra-pretrain-mxfp8-256g-gbs256", _ULTRA))}
# A number its own source footnotes as a known software regression measures the bug, not the software stack the
# model represents (the next container's row of the same recipe is the one to score)
KNOWN_REGRESSION = re.compile(r"table footnote: [^;]*regression is a known issue[^;]*", re.I)
NEW = ("head_dim", "sharding", "overlap", "features", "exclude")
# torchtitan train configs that turn on FSDP's float8 all-gather ([float8] enable_fsdp_float8_all_gather = true), by
# model, at the commits the rows cite for the settings their tables leave out: llama3_405b.toml at 3faaa1a (the
# 2024-08 performance table) and at 9dec370 (the 2024-12 benchmark). llama3_8b/70b.toml at those commits leave float8
# off (the tables turn it on from the command line, the all-gather not said) and at 820504e (the Async-TP table)
# set it false: those rows gather in 16 bits unless their notes say otherwise.
FP8_ALL_GATHER_CONFIGS = {"llama3.1-405B"}


def features(r) -> list:
    n, m, out = r["notes"], r["model"], []
    if m.startswith(("deepseek-v3", "kimi-k2")):
        out.append("mla")
    if m.startswith("nemotron3") and "HYBRID" in n:
        out.append("hybrid-mamba")
    if "sliding-window" in n:
        out.append("sliding-window")
    if not r["layers"] or not r["hidden"]:
        out.append("shape-unknown")
    if n.startswith("task=lora"):
        out.append("lora")
    if r["recompute"] == "selective" and r["dataset"].startswith("torchtitan"):
        out.append("sac-layer" if "layer-level SAC" in n or "layer SAC" in n else "sac-op")
    if r["dataset"].startswith("torchtitan") and re.search(r"\beager\b", n):
        out.append("eager")
    if "96GB HBM2e" in n or "HBM2e" in n and "H100" in r["gpu"]:
        out.append("h100-96gb")
    if r["dataset"].startswith("llm-foundry") and "mixed_precision PURE" in n:
        # Composer's PURE mixed precision: param, reduce and buffer dtypes all the autocast dtype
        # (composer/distributed/mosaic_parallelism.py get_mixed_precision)
        out.append("fsdp-pure")
    if r["precision"].lower() == "fp8":
        # NeMo's FP8 rows (24.07 tables; the long-sequence table, container 25.04): Transformer Engine's
        # DelayedScaling, its only FP8 recipe before TE 2.2 and NeMo 2's default (MegatronMixedPrecision
        # fp8_recipe "delayed"; the performance scripts' --fp8_recipe ds)
        if r["source"].startswith("NVIDIA/NeMo@"):
            out.append("fp8-delayed")
        if "float8 rowwise" in n:
            out.append("fp8-rowwise")
        if r["dataset"].startswith("torchtitan") and ("float8 all-gather" in n or m in FP8_ALL_GATHER_CONFIGS):
            out.append("fp8-all-gather")
    return out


def convert(src: str, dst: str):
    with open(src, newline="") as fh:
        reader = csv.DictReader(fh)
        cols = list(reader.fieldnames) + [c for c in NEW if c not in reader.fieldnames]
        rows = list(reader)
    for r in rows:
        hd = re.search(r"head_dim[= ](\d+)", r["notes"])
        r["head_dim"] = hd.group(1) if hd and r["hidden"] and r["heads"] and \
            int(hd.group(1)) * int(r["heads"]) != int(r["hidden"]) else ""
        sh = re.search(r"sharding (FULL_SHARD|SHARD_GRAD_OP)", r["notes"])
        r["sharding"] = {"FULL_SHARD": "fsdp", "SHARD_GRAD_OP": "zero2"}[sh.group(1)] if sh else ""
        r["overlap"] = "dp+tp" if r["id"].endswith("asynctp") else ""
        r["features"] = ";".join(features(r))
        for col, (value, why) in CORRECT.get(r["id"], {}).items():
            r[col] = value
            r["notes"] = f"{r['notes']}; {why}"
        if r["id"] in FILL:
            cells, (was, now) = FILL[r["id"]]
            if was not in r["notes"]:
                raise SystemExit(f"{r['id']}: FILL expects the notes clause {was!r}")
            r["notes"] = r["notes"].replace(was, now)
            r.update(cells)
        r["exclude"] = EXCLUDE.get(r["id"], "")
        reg = KNOWN_REGRESSION.search(r["notes"])
        if reg and not r["exclude"]:
            r["exclude"] = "the source footnotes this number as a known software regression: " + reg.group(0)
        if r["notes"].startswith(("task=sft", "task=lora")):
            r["dataset"] = "nvidia-finetune"
        if KEPT_OUT.search(r["source"] + " " + r["notes"]):
            r["exclude"] = "kept-out source (the project's independent check): " + KEPT_OUT.search(
                r["source"] + " " + r["notes"]).group(0)
        if "CHECK:" in r["notes"] and not r["exclude"]:
            raise SystemExit(f"{r['id']}: flagged CHECK: but neither excluded nor corrected")
    with open(dst, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{dst}: {len(rows)} rows, {sum(bool(r['exclude']) for r in rows)} excluded")


if __name__ == "__main__":
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "..", "shared", "data")
    convert(os.path.join(shared, "public_runs_nvidia_perf.csv"), os.path.join(HERE, "nvidia_perf.csv"))
    convert(os.path.join(shared, "public_runs_other.csv"), os.path.join(HERE, "other.csv"))

"""Release 25.09's Megatron-Bridge runs: their recipe settings, read by hand from run_script.py and the YAML
perf_matrix at v0.1.0rc3 (configs/validation/recipes/derive_recipes.py H_MATRIX, hand_row), reach the runs."""
import csv
import importlib.util
import os

import pytest

from sax_jax import validation as V
from sax_jax.resources import configs_dir

RECIPES_DIR = os.path.join(configs_dir(), "validation", "recipes")


@pytest.fixture(scope="module")
def cases():
    out = {}
    for ds in ("megatron-bridge-h100", "megatron-bridge-b200", "megatron-bridge-gb200"):
        loaded, _ = V.load_cases(dataset=ds)
        out.update({c.id: c for c in loaded if c.id.startswith("mb-25.09-")})
    return out


def _derive():
    path = os.path.join(RECIPES_DIR, "derive_recipes.py")
    if not os.path.exists(path):
        pytest.skip("derive_recipes.py is not bundled with the installed package")
    spec = importlib.util.spec_from_file_location("derive_recipes", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_2509_row_has_a_recipe(cases):
    # 28 rows; the GB200 DeepSeek-V3 MXFP8 row (pp 8 x ep 64 on 256 GPUs: dp 32 < ep) is unsupported, before and after
    assert len(cases) == 27
    for c in cases.values():
        assert any("recipe scripts/performance/run_script.py@v0.1.0rc3" in f for f in c.filled), c.id


def test_deepseek_on_h100_ran_deepep_with_the_all_to_all_overlapped(cases):
    """run_script.py main(): enable_deepep and A2A_1F1B on H100 only, recompute mla_up_proj and mlp, MTP 1."""
    t = cases["mb-25.09-h100-deepseek-v3-pretrain-fp8-1024g-gbs8192"].scenario.training
    assert t.ep_dedup and t.ep_overlap and t.mtp_layers == 1
    assert cases["mb-25.09-h100-deepseek-v3-pretrain-fp8-1024g-gbs8192"].design["recompute"] == "selective"
    assert set(t.recompute_modules) == {"mla_up_proj", "mlp"}
    assert t.pipeline_split == "filled"  # layout "Et|(tt|)*30mL"
    b = cases["mb-25.09-b200-deepseek-v3-pretrain-fp8-256g-gbs2048"].scenario.training
    assert not b.ep_dedup and not b.ep_overlap  # token drop on B200: the alltoall dispatcher


def test_padded_experts_and_per_layer_graphs(cases):
    """Token drop pads every expert to capacity: no host sync ("partial") without graphs, everything replayed
    ("full") under the perf_matrix's per-layer graphs; DeepSeek-V3 on B200 cannot have had both graphs and its
    recompute (Megatron-Core refuses the pair), so no graphs are taken there."""
    graphs = {i: c.scenario.training.cuda_graphs for i, c in cases.items()}
    assert graphs["mb-25.09-gb200-qwen3-235b-a22b-pretrain-fp8-64g-gbs1024"] == "full"
    assert graphs["mb-25.09-b200-qwen3-30b-a3b-pretrain-fp8-8g-gbs512"] == "full"
    assert graphs["mb-25.09-h100-qwen3-235b-a22b-pretrain-fp8-256g-gbs2048"] == "partial"
    assert graphs["mb-25.09-b200-deepseek-v3-pretrain-fp8-256g-gbs2048"] == "partial"
    assert graphs["mb-25.09-h100-deepseek-v3-pretrain-fp8-1024g-gbs8192"] == "none"  # dropless, no graphs
    assert graphs["mb-25.09-h100-llama3-70B-pretrain-fp8-64g-gbs128"] == "none"


def test_gb200_fsdp_runs_offload_what_the_perf_matrix_says(cases):
    assert cases["mb-25.09-gb200-llama3-70B-pretrain-fp8-64g-gbs128"].scenario.training.offload_layers == 40
    assert cases["mb-25.09-gb200-llama3-405B-pretrain-fp8-128g-gbs64"].scenario.training.offload_layers == 95


def test_recipes_csv_holds_what_hand_row_derives():
    """recipes.csv's 25.09 rows are exactly derive_recipes.hand_row's output (the rest needs the Megatron-Bridge
    mirror to regenerate; these need only the rows)."""
    mod = _derive()
    data = os.path.join(configs_dir(), "validation", "data", "nvidia_perf.csv")
    rows = [r for r in csv.DictReader(open(data)) if r["id"].startswith("mb-25.09-")]
    csv_rows = {r["id"]: r for r in csv.DictReader(open(os.path.join(RECIPES_DIR, "recipes.csv")))}
    assert len(rows) == 28
    for r in rows:
        assert mod.hand_row(r) == csv_rows[r["id"]], r["id"]
    # a row of another release is not the hand table's
    other = next(r for r in csv.DictReader(open(data)) if r["id"].startswith("mb-26.04-"))
    assert mod.hand_row(other) is None


def test_hand_table_flags_layouts_the_row_disagrees_with():
    mod = _derive()
    row = {"id": "mb-25.09-b200-qwen3-30b-a3b-pretrain-fp8-8g-gbs512", "model": "qwen3-30b-a3b", "gpu": "B200",
           "precision": "fp8", "tp": "1", "pp": "1", "cp": "1", "vpp": "", "ep": "8", "mbs": "1"}
    out = mod.hand_row(row)
    assert out["mismatch"] == "pp recipe=8 row=1; vpp recipe=12 row=None"
    assert out["token_drop"] == "true" and out["cuda_graph"] == "local:full"

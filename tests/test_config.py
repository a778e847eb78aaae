"""Configs load; bad input gives one clear error naming file, key and value."""
import glob
import os

import pytest

import sax_jax as sx
from sax_jax.config import load_model, load_system

from conftest import CONFIGS


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(CONFIGS, "scenarios", "*.yaml"))))
def test_every_bundled_scenario_loads(path):
    sc = sx.load_scenario(path)
    assert sc.space.size >= 1
    assert sc.default_baseline in sc.baselines


# models whose published attention width is not hidden: MLA (per-head widths in mla.*), GPT-OSS (config.json head_dim
# 64 x 64 heads = 4096 query width on a 2880-wide residual stream), Nemotron-3 (head_dim 128 x 32 heads = 4096 on
# 2688 (Nano) and 4096 (Super, equal)), DeepSeek-V4 (64 x 512 over 4096)
DECOUPLED_HEAD_WIDTH = {"deepseek-v3", "deepseek-v4-flash", "kimi-k2", "gpt-oss-120b", "gpt-oss-20b",
                        "nemotron3-nano-30b-a3b", "nemotron3.5-lightning", "qwen3-235b-a22b"}  # Qwen3: 64 x 128 query width over 4096


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(CONFIGS, "models", "*.yaml"))))
def test_every_model_loads(path):
    m = load_model(path)
    assert m.hidden == m.heads * m.head_dim or m.name in DECOUPLED_HEAD_WIDTH


def test_default_scenario_is_llama405b_on_two_buildings(default_scenario):
    sc = default_scenario
    assert sc.system.n_gpus == 16384
    assert [lv.name for lv in sc.system.levels] == ["node", "building", "campus"]
    assert abs(sc.model.n_params / 1e9 - 405.9) < 1.0  # Llama 3 405B
    assert sc.space.size >= 10**6


def _scenario(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


BASE = f"""
name: t
model: {CONFIGS}/models/llama3-8B.yaml
system: {CONFIGS}/systems/h100-building.yaml
transports: {CONFIGS}/network/transports.yaml
training: {{global_batch_sequences: 1024, seq_len: 4096}}
space: {{tp: [1, 2, 4, 8], pp: [1, 2]}}
"""


def test_base_scenario_is_valid(tmp_path):
    assert sx.load_scenario(_scenario(tmp_path, BASE)).space.size == 8


def _error(tmp_path, text, name="s.yaml"):
    path = _scenario(tmp_path, text, name)
    with pytest.raises(sx.ConfigError) as exc:
        sx.load_scenario(path)
    return str(exc.value), path


def test_misspelled_key(tmp_path):
    msg, path = _error(tmp_path, BASE.replace("seq_len", "seq_lenght"))
    assert path in msg and "training.seq_lenght" in msg and "unknown key" in msg and "seq_len" in msg


def test_misspelled_axis(tmp_path):
    msg, _ = _error(tmp_path, BASE.replace("pp: [1, 2]", "ppp: [1, 2]"))
    assert "space.ppp" in msg and "unknown axis" in msg


def test_missing_file(tmp_path):
    msg, path = _error(tmp_path, BASE.replace("llama3-8B.yaml", "llama9-8B.yaml"))
    assert path in msg and "'model'" in msg and "llama9-8B.yaml" in msg and "not found" in msg


def test_missing_scenario_file():
    with pytest.raises(sx.ConfigError, match="file not found"):
        sx.load_scenario("/nonexistent/scenario.yaml")


def test_negative_bandwidth(tmp_path):
    sysf = tmp_path / "sys.yaml"
    sysf.write_text(open(os.path.join(CONFIGS, "systems", "h100-building.yaml")).read()
                    .replace("bandwidth_GBps: 50", "bandwidth_GBps: -50")
                    .replace("../hardware/", f"{CONFIGS}/hardware/"))
    msg, _ = _error(tmp_path, BASE.replace(f"{CONFIGS}/systems/h100-building.yaml", str(sysf)))
    assert str(sysf) in msg and "levels.building.bandwidth_GBps" in msg and "-50" in msg


def test_tp_not_dividing_heads_in_baseline(tmp_path):
    text = BASE + "baselines:\n  prod: {tp: 16, pp: 1}\n"  # llama3-8B: 32 heads, 8 kv heads
    msg, path = _error(tmp_path, text)
    assert path in msg and "baselines.prod.tp" in msg and "kv_heads=8" in msg and "16" in msg


def test_gpu_count_that_does_not_factor(tmp_path):
    msg, path = _error(tmp_path, BASE.replace("tp: [1, 2, 4, 8], pp: [1, 2]", "tp: [3], pp: [5]"))
    assert path in msg and "space.tp/cp/pp/dp" in msg and "8192 GPUs" in msg


def test_yaml_syntax_error(tmp_path):
    msg, path = _error(tmp_path, BASE.replace("space: {tp:", "space: {tp:: ["))
    assert path in msg and "YAML syntax error" in msg and "line" in msg


def test_unknown_option_name(tmp_path):
    msg, _ = _error(tmp_path, BASE.replace("pp: [1, 2]}", "pp: [1, 2], schedule: [1f1b, pipedream]}"))
    assert "space.schedule" in msg and "pipedream" in msg and "1f1b" in msg


def test_level_order_checked(tmp_path):
    sysf = tmp_path / "sys.yaml"
    sysf.write_text(f"""
name: bad
gpu: {CONFIGS}/hardware/H100-SXM-80GB.yaml
levels:
  - {{name: building, size: 4, bandwidth_GBps: 50, latency_us: 5}}
  - {{name: node, size: 8, bandwidth_GBps: 450, latency_us: 2}}
""")
    with pytest.raises(sx.ConfigError, match="inner to outer"):
        load_system(str(sysf))


def test_readme_documents_every_range():
    """Each field of specs.RANGES is in the README table with the same bounds."""
    from sax_jax.specs import ARCH_RANGES, RANGES
    from conftest import ROOT
    readme = open(os.path.join(ROOT, "README.md")).read()
    for fields in list(RANGES.values()) + list(ARCH_RANGES.values()):
        for name, rng in fields.items():
            desc = rng.describe().replace("a whole number in ", "int ").replace("a finite number in ", "")
            assert f"`{name}` {desc}" in readme, (name, desc)
    assert "shared/" not in readme  # users of the package have no shared/ directory

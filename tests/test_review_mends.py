"""Review findings: bad input in system buildings, DiLoCo tables, MoE traces and moe.node_limit is a ConfigError
naming file, key and value; `sax sweep --cheapest` checks prices before sweeping and says when its answer is not
exact; `sax eval`'s placement record compiles nothing new; placement tables are cached by the trace's content."""
import os
import types

import numpy as np
import pytest

import sax_jax as sx
from sax_jax.config import load_model, load_system
from sax_jax.moe.traces import from_fields, load_trace
from sax_jax.specs import ConfigError

from conftest import CONFIGS

HW = os.path.join(CONFIGS, "hardware")
HETERO_SYSTEM = os.path.join(CONFIGS, "systems", "h100-b200-buildings.yaml")


def _system(tmp_path, edit):
    text = open(HETERO_SYSTEM).read().replace("../hardware", HW)
    p = tmp_path / "sys.yaml"
    p.write_text(edit(text))
    return str(p)


def _system_error(tmp_path, edit):
    path = _system(tmp_path, edit)
    with pytest.raises(ConfigError) as exc:
        load_system(path)
    return exc.value, path


def _without_buildings(text, replacement):
    return text[:text.index("buildings:")] + replacement


# ------------------------------------------------------------------------------------------------ 2. buildings
@pytest.mark.parametrize("tail", ["buildings: []\n", "buildings:\n"], ids=["empty", "null"])
def test_empty_buildings_without_gpu_is_a_named_error(tmp_path, tail):
    err, path = _system_error(tmp_path, lambda t: _without_buildings(t, tail))
    assert err.file == path and err.key == "buildings" and err.value in ([], None)
    assert path in str(err) and "'buildings'" in str(err)


def test_empty_buildings_with_gpu_names_the_buildings(tmp_path):
    err, path = _system_error(tmp_path, lambda t: _without_buildings(t, f"gpu: {HW}/B200.yaml\nbuildings: []\n"))
    assert err.file == path and err.key == "buildings" and "one entry per building" in str(err)


def test_building_override_numbers_parse_like_levels(tmp_path):
    """PyYAML reads 1e3 as a string: accepted in a building's levels as in the system's."""
    sys_ = load_system(_system(tmp_path, lambda t: t.replace("bandwidth_GBps: 900", "bandwidth_GBps: 1e3")))
    assert sys_.buildings[1].levels[0].bandwidth_GBps == 1000.0
    assert sys_.buildings[0].levels[0].bandwidth_GBps == 450


@pytest.mark.parametrize("value, problem", [("abc", "must be a number"), ("-5", "must be a finite number")])
def test_building_override_errors_name_the_building(tmp_path, value, problem):
    err, path = _system_error(tmp_path, lambda t: t.replace("bandwidth_GBps: 900", f"bandwidth_GBps: {value}"))
    assert err.file == path and err.key == "buildings[1].levels.node.bandwidth_GBps" and problem in err.problem
    assert str(err.value) == value


def test_levels_are_validated_before_the_buildings(tmp_path):
    err, path = _system_error(tmp_path, lambda t: t.replace("name: campus", "name: campsu"))
    assert err.file == path and err.key == "levels.campsu.name" and err.value == "campsu"
    text = open(HETERO_SYSTEM).read().replace("../hardware", HW)
    no_levels = text[:text.index("levels:")] + "levels: []\n" + text[text.index("buildings:"):]
    err, _ = _system_error(tmp_path, lambda t: no_levels)
    assert err.key == "levels" and err.value == []


# ------------------------------------------------------------------------------------------------ 3. DiLoCo table
BASE = f"""
name: t
model: {CONFIGS}/models/llama3-8B.yaml
system: {CONFIGS}/systems/h100-building.yaml
transports: {CONFIGS}/network/transports.yaml
training: {{global_batch_sequences: 1024, seq_len: 4096, diloco_token_multiplier: TABLE}}
space: {{tp: [1, 2, 4, 8], pp: [1, 2]}}
"""


@pytest.mark.parametrize("table, value", [("5", 5), ("null", None), ("[[1, 1.0], [1, 2.0]]", (1, 2.0))])
def test_bad_diloco_table_names_the_key(tmp_path, table, value):
    p = tmp_path / "s.yaml"
    p.write_text(BASE.replace("TABLE", table))
    with pytest.raises(ConfigError) as exc:
        sx.load_scenario(str(p))
    err = exc.value
    assert err.file == str(p) and err.key.startswith("training.diloco_token_multiplier") and err.value == value


def test_loss_schedule_messages_are_unchanged():
    from sax_jax.specs import TransportSpec
    t = TransportSpec(name="b", load_balancing="spray", loss_recovery="bounded_loss",
                      loss_schedule=((0.5, 0.01), (0.4, 0.0)))
    with pytest.raises(ConfigError, match=r"phase ends must increase within \(0, 1\] \(previous 0.5\)"):
        t.validate("t.yaml")


# ------------------------------------------------------------------------------------------------ 4. traces
def _fields(**over):
    base = dict(model="mixtral-8x7B", experts=8, top_k=2, domains=["code", "chat"], tokens=[10, 20],
                layers=list(range(32)), counts=np.full((32, 2, 8), 2, np.int64).tolist())
    base.update(over)
    return base


@pytest.mark.parametrize("field, value", [("experts", "abc"), ("experts", [4]), ("experts", 4.5),
                                          ("top_k", True), ("top_k", None)])
def test_trace_whole_number_fields(field, value):
    with pytest.raises(ConfigError) as exc:
        from_fields(_fields(**{field: value}), "bad.json")
    err = exc.value
    assert err.file == "bad.json" and err.key == field and err.value == value and "whole number" in err.problem


def test_trace_whole_number_fields_accept_whole_floats():
    assert from_fields(_fields(experts=8.0, top_k="2"), "ok.json").experts == 8


@pytest.mark.parametrize("content", [b"not an archive", b"PK\x03\x04truncated"])
def test_unreadable_npz_is_a_config_error(tmp_path, content):
    p = tmp_path / "t.npz"
    p.write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        load_trace(str(p))
    assert exc.value.file == str(p) and ".npz" in exc.value.problem


def test_missing_trace_file_is_reported_like_other_references(tmp_path):
    src = open(os.path.join(CONFIGS, "scenarios", "mixtral-moe.yaml")).read().replace("../", CONFIGS + "/")
    p = tmp_path / "s.yaml"
    p.write_text(src.replace("traces/mixtral-8x7B.npz", "traces/nope.npz"))
    with pytest.raises(ConfigError) as exc:
        sx.load_scenario(str(p))
    err = exc.value
    assert err.file == str(p) and err.key == "expert_trace" and err.value.endswith("traces/nope.npz")
    assert err.problem == "referenced file not found" and "looked for" in err.hint


# ------------------------------------------------------------------------------------------------ 7. node_limit
@pytest.mark.parametrize("value", [-1, 4.5, 200_000])
def test_node_limit_range(tmp_path, value):
    src = open(os.path.join(CONFIGS, "models", "mixtral-8x7B.yaml")).read()
    assert "moe:" in src
    p = tmp_path / "m.yaml"
    p.write_text(src.replace("moe:", f"moe:\n  node_limit: {value}", 1))
    with pytest.raises(ConfigError) as exc:
        load_model(str(p))
    err = exc.value
    assert err.file == str(p) and err.key == "moe.node_limit" and err.value == value


# ------------------------------------------------------------------------------------------------ 5. --cheapest
def test_cheapest_without_prices_fails_before_any_sweep(monkeypatch, capsys):
    from sax_jax.cli import main
    from sax_jax.search import exhaustive

    def no_sweep(*a, **k):
        raise AssertionError("swept before checking prices")
    monkeypatch.setattr(exhaustive, "sweep", no_sweep)
    assert main(["sweep", "default", "--cheapest", "90", "--no-progress"]) == 2
    assert "prices" in capsys.readouterr().err


def _fake_result(complete=True, truncated=False):
    rec = dict(feasible=True, step_time_s=1.0, cost_usd_per_hour=1.0, index=0, design={})
    return types.SimpleNamespace(top=[rec], pareto={"time_vs_cost": [rec]}, complete=complete, n_designs=10,
                                 space_size=20 if not complete else 10, truncated={"time_vs_cost": truncated})


@pytest.mark.parametrize("complete, truncated, exact", [(True, False, True), (False, False, False),
                                                        (True, True, False)])
def test_cheapest_says_when_it_is_not_exact(monkeypatch, complete, truncated, exact):
    from sax_jax import codesign
    from sax_jax.search import exhaustive
    monkeypatch.setattr(exhaustive, "sweep", lambda *a, **k: _fake_result())  # the single-building reference
    sc = sx.load_scenario(os.path.join(CONFIGS, "scenarios", "codesign.yaml"))
    ans = codesign.cheapest_network(sc, 90, _fake_result(complete, truncated))
    assert ans["exact"] is exact and bool(ans["caveats"]) is not exact and ans["best"] is not None


# ------------------------------------------------------------------------------------------------ 1. eval placement
def test_placement_record_compiles_nothing_new():
    from sax_jax.evaluate import evaluate_batch, evaluate_one
    from sax_jax.moe.report import placement_record
    sc = sx.load_scenario("mixtral-moe")
    design = sc.baseline_design()
    cost = evaluate_one(sc, design)
    before = evaluate_batch._cache_size()
    rec = placement_record(sc, sc.space.to_dict(design), cost)
    assert evaluate_batch._cache_size() == before
    chosen = next(r for r in rec["rows"] if r["policy"] == rec["chosen"])
    assert chosen["step_time_s"] == (cost["step_time_s"] if cost["feasible"] else None)


# ------------------------------------------------------------------------------------------------ 9. tables cache
def test_placement_tables_cached_by_trace_content():
    from sax_jax.moe.tables import placement_tables
    path = os.path.join(CONFIGS, "traces", "mixtral-8x7B.npz")
    a, b = load_trace(path), load_trace(path)
    assert a is not b
    assert placement_tables(a, [1, 2, 4, 8], 8) is placement_tables(b, [8, 4, 2], 8)

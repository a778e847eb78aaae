"""The `sax` command line: eval and space, human and JSON output, errors as one clean line."""
import json
import subprocess
import sys

import pytest

from sax_jax.cli import main

from conftest import DEFAULT


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_eval_json_default(capsys):
    r = run_json(capsys, "eval", DEFAULT, "--json")
    for key in ("step_time_s", "tokens_per_s", "mfu", "memory_bytes", "breakdown", "feasible", "violation"):
        assert key in r
    assert r["feasible"] and r["violation"] == 0 and r["step_time_s"] > 0
    assert sum(r["breakdown"].values()) == pytest.approx(r["step_time_s"], rel=1e-4)
    assert r["crossings"]["pp"]["campus"] == 2  # production: pipeline crosses the buildings
    assert "campus" not in r["crossings"]["dp"]


def test_eval_set_placement_moves_groups_across_buildings(capsys):
    # 1F1B: a pipeline hop carries each microbatch once each way (interleaved with vpp 8, as the production
    # baseline, crosses 8 times and outweighs the gradient reduction)
    one_f = ["--set", "schedule=1f1b", "--set", "vpp=1"]
    base = run_json(capsys, "eval", DEFAULT, "--json", *one_f)
    moved = run_json(capsys, "eval", DEFAULT, "--json", "--set", "placement=tp-cp-pp-dp", *one_f)
    assert moved["crossings"]["dp"]["campus"] == 2 and "campus" not in moved["crossings"]["pp"]
    assert moved["step_time_s"] != base["step_time_s"]
    assert moved["cross_building_bytes"] > base["cross_building_bytes"]


def test_eval_infeasible_explains(capsys):
    r = run_json(capsys, "eval", DEFAULT, "--json", "--set", "tp=16")
    assert not r["feasible"] and r["step_time_s"] is None
    assert any("tp does not divide" in x for x in r["reasons"])


def test_eval_table_output(capsys):
    assert main(["eval", DEFAULT]) == 0
    out = capsys.readouterr().out
    assert "step time" in out and "bubble" in out and "campus" in out


def test_space_json(capsys):
    r = run_json(capsys, "space", DEFAULT, "--json")
    assert r["size"] == 8_748_000 and r["n_gpus"] == 16384
    assert r["axes"]["schedule"] == ["gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "latency-aware"]


def test_bad_input_is_one_line_error(capsys):
    assert main(["eval", DEFAULT, "--set", "schedule=pipedream"]) == 2
    err = capsys.readouterr().err
    assert "pipedream" in err and "Traceback" not in err


def test_console_script_installed():
    out = subprocess.run([sys.executable, "-m", "sax_jax.cli", "space", DEFAULT, "--json"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout)["size"] == 8_748_000

"""`sax study` (sax_jax.study): on a tiny study (four-buildings, 2 cross-building latencies, 1 bandwidth) each
point's best is the direct sweep of the modified scenario, the baselines are evaluate_one under it, speedups are
the ratios, the summary is numpy's max / median, the JSON has no NaN; bad study configs exit 2 naming the key."""
import json
import math

import numpy as np
import pytest

import sax_jax as sx
from sax_jax.cli import main
from sax_jax.engine import Engine
from sax_jax.evaluate import evaluate_one
from sax_jax.search.exhaustive import sweep
from sax_jax.sensitivity import parse_vary, with_value
from sax_jax.study import load_study, run_study

REL = 1e-6  # float32 step times computed twice by the same program
TINY = """name: tiny
grid:
  campus.latency_us: [100, 20000]
  campus.bandwidth_GBps: [25]
models:
  - scenario: four-buildings
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("study") / "tiny.yaml"
    path.write_text(TINY)
    header, models = load_study(str(path))
    return path, run_study(header, models, engine=Engine())


def test_points_match_direct_evaluation(tiny):
    _, result = tiny
    base = sx.load_scenario("four-buildings")
    assert [p["values"]["campus.latency_us"] for p in result["points"]] == [100, 20000]
    for p in result["points"]:
        sc = base
        for name, v in p["values"].items():
            sc = with_value(sc, parse_vary(f"{name}={v}"), v)
        direct = sweep(sc, top_k=1)
        assert p["best_s"] == pytest.approx(direct.top[0]["step_time_s"], rel=REL)
        for key, name in (("production_s", "production"), ("sota_s", "crosspipe")):
            cost = evaluate_one(sc, sc.baseline_design(name))
            assert p[key] == pytest.approx(cost["step_time_s"], rel=REL)
        assert p["sota"] == "crosspipe"
        assert p["speedup_vs_production"] == pytest.approx(p["production_s"] / p["best_s"])
        assert p["speedup_vs_sota"] == pytest.approx(p["sota_s"] / p["best_s"])
        assert set(p["decisions"]) == {"placement", "schedule", "transport"}


def test_summary_is_numpys(tiny):
    _, result = tiny
    s = result["summary"]["four-buildings"]
    for key, field in (("vs_production", "speedup_vs_production"), ("vs_sota", "speedup_vs_sota")):
        xs = np.array([p[field] for p in result["points"]])
        assert s[key]["max"] == pytest.approx(np.max(xs))
        assert s[key]["median"] == pytest.approx(np.median(xs))


def test_cli_json_and_out(tiny, tmp_path, capsys):
    path, _ = tiny
    out = tmp_path / "out"
    assert main(["study", str(path), "--json", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"JSON has {c}"))
    assert data["study"]["name"] == "tiny" and len(data["points"]) == 2
    assert not any(isinstance(v, float) and not math.isfinite(v) for p in data["points"] for v in p.values())
    assert {"result.json", "points.csv", "heatmap_four-buildings.png", "breakdown.png"} <= {
        f.name for f in out.iterdir()}
    assert len((out / "points.csv").read_text().splitlines()) == 3


@pytest.mark.parametrize("text, key", [
    (TINY.replace("four-buildings", "no-such-scenario"), "models[0].scenario"),
    (TINY.replace("campus.bandwidth_GBps", "campus.bandwidth_xyz"), "grid.campus.bandwidth_xyz"),
    (TINY.replace("campus.bandwidth_GBps", "mars.bandwidth_GBps"), "grid.mars.bandwidth_GBps"),
    (TINY.replace("[100, 20000]", "[100, -5]"), "grid.campus.latency_us"),
])
def test_bad_study_exits_2_naming_the_key(tmp_path, capsys, text, key):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["study", str(path)]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err


def test_bad_out_and_unknown_study(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("")
    assert main(["study", "tiny-nonexistent"]) == 2
    assert "study" in capsys.readouterr().err
    assert main(["study", "default", "--out", str(f)]) == 2
    assert "--out" in capsys.readouterr().err

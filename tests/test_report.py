"""`sax report` (sax_jax.report_data, sax_jax.report_html, sax_jax.commands.report): the page's numbers are the
sweep's, the baselines' and the sensitivity study's; the page is self-contained (no network fetch) and renders in
a real headless browser with no script error (skipped, with the reason, where no chromium is installed).

h100-building (110,592 designs, two levels) keeps the sweeps small; its best design changes with the building's
bandwidth, so the sensitivity study has a crossover.
"""
import json
import os
import re
import shutil
import subprocess

import pytest

import sax_jax as sx
from sax_jax import report_data as R
from sax_jax.cli import main
from sax_jax.compare import evaluate_designs
from sax_jax.engine import Engine
from sax_jax.evaluate import evaluate_one
from sax_jax.report_html import render
from sax_jax.search.exhaustive import sweep
from sax_jax.sensitivity import Vary, parse_vary, with_value


REL = 1e-6  # float32 step times computed twice by the same program
BANDWIDTH = "building.bandwidth_GBps=6.25,12.5,25,50"


@pytest.fixture(scope="module")
def building():
    return sx.load_scenario("h100-building")


@pytest.fixture(scope="module")
def engine():
    return Engine()


@pytest.fixture(scope="module")
def data(building, engine):
    return R.collect(building, top_k=8, varies=[parse_vary(BANDWIDTH)], engine=engine)


@pytest.fixture(scope="module")
def page(data):
    return render(data, "test")


def test_best_and_top_are_the_sweeps(building, engine, data):
    ref = sweep(building, top_k=8, progress=False, engine=engine)
    assert data["method"]["method"] == "sweep"
    assert [r["design"] for r in data["top"]] == [r["design"] for r in ref.top]
    assert [r["step_time_s"] for r in data["top"]] == pytest.approx([r["step_time_s"] for r in ref.top], rel=REL)
    assert set(data["pareto"]) == set(ref.pareto)
    for name, recs in ref.pareto.items():
        assert [r["step_time_s"] for r in data["pareto"][name]] == pytest.approx(
            [r["step_time_s"] for r in recs], rel=REL)


def test_goodput_of_the_best_is_reported(building, data, page):
    best = data["top"][0]
    t = evaluate_one(building, building.space.design(best["design"]))
    assert best["goodput_tokens_per_s"] == pytest.approx(t["goodput_tokens_per_s"], rel=REL)
    assert best["goodput_tokens_per_s"] <= best["tokens_per_s"] * (1 + REL)  # ETTR <= 1
    assert f"{best['goodput_tokens_per_s']:,.0f}" in page


def test_speedups_are_baseline_over_best(building, data):
    best = data["top"][0]["step_time_s"]
    for name in building.baselines:
        t = evaluate_one(building, building.baseline_design(name))["step_time_s"]
        assert data["baselines"][name]["step_time_s"] == pytest.approx(t, rel=REL)
        assert data["speedup_vs"][name] == pytest.approx(t / best, rel=REL)
        band = data["speedups"][name]["band"]
        assert band[0] < data["speedup_vs"][name] < band[1]
        assert data["speedups"][name]["tie"] == (band[0] <= 1.0 <= band[1])


def test_near_optimal_ties_from_the_documented_band(data):
    near = data["near_optimal"]
    best = data["top"][0]["step_time_s"]
    ties = [r for r in data["top"] if r["step_time_s"] <= best * (1 + near["within"])]
    assert near["n"] == len(ties)
    for ax, v in near["shared"].items():
        assert all(r["design"][ax] == v for r in ties)


def test_breakdowns_sum_to_step_times(data):
    cmp = data["compare"]
    assert [r["label"] for r in cmp["designs"]] == ["best"] + list(data["baselines"])
    for rec in cmp["designs"]:
        assert sum(rec["breakdown"].values()) == pytest.approx(rec["raw_step_time_s"], rel=1e-5)


def test_sensitivity_curves_match_direct_evaluation(building, data, engine):
    (study,) = data["sensitivity"]
    vary = parse_vary(BANDWIDTH)
    assert study["values"] == list(vary.values)
    for i, value in enumerate(vary.values):
        sc = with_value(building, vary, value)
        # the re-optimized best is the sweep's best at that value ...
        ref = sweep(sc, top_k=1, progress=False, engine=engine)
        assert study["best_s"][i] == pytest.approx(ref.top[0]["step_time_s"], rel=REL)
        # ... and each held-fixed design is evaluated directly, never faster than the best at that value
        for name, ys in study["fixed_s"].items():
            design = data["top"][0]["design"] if name == "best" else building.space.to_dict(
                building.baseline_design(name))
            t = evaluate_one(sc, sc.space.design(design))
            assert ys[i] == (pytest.approx(t["step_time_s"], rel=REL) if t["feasible"] else None)
            if ys[i] is not None:
                assert study["best_s"][i] <= ys[i] * (1 + REL)
    # the held-fixed best at the nominal value is the best itself
    nominal = study["values"].index(study["nominal"])
    assert study["fixed_s"]["best"][nominal] == pytest.approx(data["top"][0]["step_time_s"], rel=REL)
    # a crossover changes the best design between the two values it names
    assert study["crossovers"], "h100-building's best placement changes with the building bandwidth"
    for c in study["crossovers"]:
        i = study["values"].index(c["between"][0])
        assert study["best_designs"][i][c["axis"]] == c["from"]
        assert study["best_designs"][i + 1][c["axis"]] == c["to"]


def test_default_studies_bracket_the_nominal_values(building):
    studies = R.default_varies(building)
    outer = building.system.levels[-1]
    assert [(v.target, v.field) for v in studies] == [(outer.name, "latency_us"), (outer.name, "bandwidth_GBps")]
    for v in studies:
        nominal = getattr(outer, v.field)
        assert nominal in v.values and min(v.values) < nominal < max(v.values)


def test_large_space_is_searched_not_swept(building, engine):
    d = R.collect(building, top_k=5, varies=[Vary("building", "latency_us", (4.0, 8.0, 16.0))], engine=engine,
                  search_budget=500, sweep_limit=1000)
    assert d["method"]["method"] == "search" and "more than" in d["method"]["why"]
    assert d["pareto"] == {} and "near_optimal" not in d and len(d["top"]) == 1
    t = evaluate_one(building, building.space.design(d["top"][0]["design"]))
    assert d["top"][0]["step_time_s"] == pytest.approx(t["step_time_s"], rel=REL)
    (study,) = d["sensitivity"]
    assert study["method"] == "search"  # re-optimized at each value by search, not by sweep
    assert set(study["fixed_s"]) == {"best", *building.baselines}
    for i, t in enumerate(study["best_s"]):  # the fastest found design there: never slower than the fixed best
        assert t <= study["fixed_s"]["best"][i] * (1 + REL)
    page = render(d, "test")
    assert "too large to sweep" in page and 'id="chart-pareto"' not in page


def test_page_is_self_contained_and_carries_its_data(page, data):
    # no script, style or image fetched from anywhere: the page works offline
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=["\']?(https?:)?//', page)
    embedded = re.search(r'<script type="application/json" id="sax-data">(.*?)</script>', page, re.S).group(1)
    back = json.loads(embedded.replace("<\\/", "</"))
    assert back["top"][0]["design"] == data["top"][0]["design"]
    assert back["speedup_vs"] == pytest.approx(data["speedup_vs"], rel=1e-12)
    assert "Plotly.newPlot" in page
    expected = int(re.search(r"var EXPECTED = (\d+);", page).group(1))
    # near-optimal, breakdowns, Pareto fronts, one sensitivity chart
    assert expected == len(re.findall(r'<div id="chart-[a-z0-9-]+"', page)) == 4
    for section in ("summary", "scenario", "near-optimal-designs", "breakdowns", "pareto-fronts", "sensitivity"):
        assert f'<section id="{section}">' in page


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_chromium() is None, reason="no chromium on PATH (Debian: apt-get install chromium): the page's "
                                                "rendering in a real browser is not checked here")
def test_page_renders_in_headless_chromium(page, tmp_path):
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--virtual-time-budget=15000", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(flags + ["--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120).stdout
    charts = re.search(r'data-sax-charts="(\d+)/(\d+)"', dom)
    assert charts, "the page's self-check never ran (a script failed before the load event)"
    assert charts.group(1) == charts.group(2) == "4"
    errors = json.loads(re.search(r'data-sax-errors="([^"]*)"', dom).group(1).replace("&quot;", '"'))
    assert errors == []
    shot = tmp_path / "report.png"
    subprocess.run(flags + ["--window-size=1280,6000", f"--screenshot={shot}", path.as_uri()],
                   capture_output=True, timeout=120)
    from PIL import Image
    img = Image.open(shot).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)
    # text and charts: thousands of distinct colours; a blank page has one
    assert colours is not None and len(colours) > 500
    # the breakdown chart's compute bars are drawn: its colour covers a real area
    assert sum(n for n, c in colours if c == (0, 114, 178)) > 5000


def test_cli_writes_the_page_and_json(tmp_path, capsys):
    out = tmp_path / "r.html"
    # --top 8 as the data fixture's top_k: the same sweep program (from the session's compile cache)
    assert main(["report", "h100-building", "-o", str(out), "--top", "8", "--no-sensitivity", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["out"] == str(out) and rec["bytes"] == out.stat().st_size
    assert rec["sensitivity"] == [] and len(rec["top"]) == 8
    assert not os.path.exists(str(out) + ".tmp")


@pytest.mark.parametrize("argv, names", [
    (["-o", "r.txt"], "--out"),
    (["-o", "/nonexistent-dir/r.html"], "does not exist"),
    (["--top", "0"], "--top"),
    (["--vary", "nowhere.latency_us=1,2"], "no level 'nowhere'"),
    (["--vary", "building.colour=1,2"], "unknown field 'colour'"),
    (["--vary", "building.latency_us=-5,2"], "--vary"),
    (["--vary", "building.latency_us=1,2", "--no-sensitivity"], "conflicts"),
    (["--budget", "0"], "--budget"),
])
def test_bad_input_names_the_flag(argv, names, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "h100-building", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and names in err and "Traceback" not in err


def test_fixed_curves_batch_equals_loop(building, engine):
    vary = parse_vary("building.latency_us=4,8,32")
    designs = {n: building.space.to_dict(building.baseline_design(n)) for n in building.baselines}
    curves = R.fixed_curves(building, vary, designs, engine)
    for i, v in enumerate(vary.values):
        sc = with_value(building, vary, v)
        one = evaluate_designs(sc, [sc.space.design(d) for d in designs.values()], engine)
        for (name, _), c in zip(designs.items(), one):
            assert curves[name][i] == (c["step_time_s"] if c["feasible"] else None)


def test_page_without_a_feasible_design_says_so(data):
    empty = {**data, "top": [], "pareto": {}, "sensitivity": [], "published": None,
             "speedup_vs": {n: None for n in data["speedup_vs"]}}
    for key in ("band", "speedups", "near_optimal"):
        empty.pop(key, None)
    page = render(empty, "test")
    assert "No feasible design" in page and "var EXPECTED = 1;" in page  # only the baselines' breakdowns

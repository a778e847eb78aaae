"""`sax sensitivity` (sax_jax.sensitivity): each point is the exhaustive sweep of the modified scenario, baselines are
evaluated under the same system, crossovers agree with direct evaluation, a latency or bandwidth study compiles
once, bad --vary values exit 2 naming the flag.

Two bundled scenarios keep it small: h100-building (110,592 designs, two levels; its best design changes with the
building latency and bandwidth) and two-regions (622,080 designs; cross-region latency and bandwidth).
"""
import io
import itertools
import json
import math
import pathlib

import pytest
from rich.console import Console

import sax_jax as sx
from sax_jax.cli import main
from sax_jax.commands.sensitivity import print_study
from sax_jax.engine import Engine
from sax_jax.evaluate import evaluate_one
from sax_jax.sensitivity import find_crossovers, parse_vary, sensitivity, with_value
from sax_jax.specs import ConfigError

from conftest import CONFIGS

REL = 1e-6  # float32 step times computed twice by the same program


@pytest.fixture(scope="module")
def building():
    return sx.load_scenario("h100-building")


@pytest.fixture(scope="module")
def engine():
    return Engine()


@pytest.fixture(scope="module")
def latency_study(building, engine):
    return sensitivity(building, parse_vary("building.latency_us=8,100,1000,10000"), engine=engine)


@pytest.fixture(scope="module")
def bandwidth_study(building, engine, latency_study):  # after the latency study: the same compiled program
    return sensitivity(building, parse_vary("building.bandwidth_GBps=200,5,25,50"), engine=engine)


def _direct_s(scenario, vary, value, design: dict) -> float:
    """Step time of one design at one value, evaluated directly (what `sax eval` computes)."""
    sc = with_value(scenario, vary, value)
    return sx.evaluate_one(sc, sc.space.design(design))["step_time_s"]


def _times(study):
    return [p["best"]["step_time_s"] for p in study["points"]]


def test_one_compile_for_latency_and_bandwidth(latency_study, bandwidth_study, engine):
    """Eight sweeps over two fields differ only in parameter values: one compiled program (engine.compiles)."""
    assert len(latency_study["points"]) == len(bandwidth_study["points"]) == 4
    assert engine.compiles == 1


def test_values_sorted_and_schema(bandwidth_study):
    assert bandwidth_study["vary"] == {"level": "building", "field": "bandwidth_GBps",
                                       "values": [5.0, 25.0, 50.0, 200.0]}
    p = bandwidth_study["points"][0]
    assert set(p["best"]) >= {"design", "step_time_s", "mfu", "breakdown"}
    assert set(p["baselines"]) == {"production"}
    assert math.isclose(sum(p["best"]["breakdown"].values()), p["best"]["step_time_s"], rel_tol=1e-4)


@pytest.mark.parametrize("study_name", ["latency_study", "bandwidth_study"])
def test_best_equals_direct_sweep(request, building, engine, study_name):
    """Each point's best is the best of a sweep of the modified scenario (same design, same step time)."""
    study = request.getfixturevalue(study_name)
    vary = parse_vary("{level}.{field}=1".format(**study["vary"]))
    for p in study["points"]:
        top = sx.sweep(with_value(building, vary, p["value"]), top_k=1, progress=False, engine=engine).top[0]
        assert top["design"] == p["best"]["design"]
        assert top["step_time_s"] == pytest.approx(p["best"]["step_time_s"], rel=REL)


def test_modified_scenario_equals_yaml(building, tmp_path):
    """with_value builds the same scenario as a system YAML with that latency (the fingerprint covers every spec)."""
    text = pathlib.Path(CONFIGS, "systems", "h100-building.yaml").read_text()
    assert "    latency_us: 8\n" in text
    text = text.replace("    latency_us: 8\n", "    latency_us: 1000.0\n")
    text = text.replace("gpu: ../hardware/", f"gpu: {CONFIGS}/hardware/")
    (tmp_path / "system.yaml").write_text(text)
    scen = pathlib.Path(CONFIGS, "scenarios", "h100-building.yaml").read_text()
    scen = scen.replace("../systems/h100-building.yaml", str(tmp_path / "system.yaml"))
    scen = scen.replace("../", f"{CONFIGS}/")
    (tmp_path / "scenario.yaml").write_text(scen)
    from_yaml = sx.load_scenario(str(tmp_path / "scenario.yaml"))
    modified = with_value(building, parse_vary("building.latency_us=1000"), 1000.0)
    assert modified.fingerprint == from_yaml.fingerprint
    assert building.system.levels[1].latency_us == 8  # the input is untouched (frozen specs, replaced)


def test_baselines_equal_evaluate_one(building, latency_study):
    vary = parse_vary("building.latency_us=1")
    for p in latency_study["points"]:
        sc = with_value(building, vary, p["value"])
        cost = sx.evaluate_one(sc, sc.baseline_design("production"))
        b = p["baselines"]["production"]
        assert b["step_time_s"] == pytest.approx(cost["step_time_s"], rel=REL)
        assert b["speedup"] == pytest.approx(cost["step_time_s"] / p["best"]["step_time_s"], rel=REL)
        assert b["speedup"] >= 1 - 1e-6  # the exhaustive best is never slower than a design of the space


def test_monotone_in_building_latency_and_bandwidth(latency_study, bandwidth_study):
    """More latency never makes the best design faster; more bandwidth never slower (min over designs that are
    each monotone)."""
    lat, bw = _times(latency_study), _times(bandwidth_study)
    assert all(b >= a * (1 - REL) for a, b in itertools.pairwise(lat)), lat
    assert all(b <= a * (1 + REL) for a, b in itertools.pairwise(bw)), bw
    assert lat[-1] > lat[0] and bw[-1] < bw[0]  # and the study sees an effect at all


def test_monotone_cross_region():
    """Cross-region (WAN) latency and bandwidth on two-regions: one more program (four levels), shared by both."""
    sc, eng = sx.load_scenario("two-regions"), Engine()
    lat = _times(sensitivity(sc, parse_vary("region.latency_us=1000,10000,50000"), engine=eng, refine=False))
    bw = _times(sensitivity(sc, parse_vary("region.bandwidth_GBps=2,12.5,50"), engine=eng, refine=False))
    assert all(b >= a * (1 - REL) for a, b in itertools.pairwise(lat)), lat
    assert all(b <= a * (1 + REL) for a, b in itertools.pairwise(bw)), bw
    assert eng.compiles == 1


def test_crossovers_match_points_and_direct_evaluation(building, latency_study, bandwidth_study):
    """Every pair of consecutive points whose best designs differ is reported, axis by axis; the bisected
    crossover flips the order of the two designs (direct evaluation at both ends of its bracket) and the step
    time reported there is theirs."""
    n_refined = 0
    for study in (latency_study, bandwidth_study):
        points, name = study["points"], "{level}.{field}".format(**study["vary"])
        vary = parse_vary(name + "=1")
        expect = {(a["value"], b["value"], ax) for a, b in itertools.pairwise(points) for ax in sx.AXES
                  if a["best"]["design"][ax] != b["best"]["design"][ax]
                  and _direct_s(building, vary, b["value"], a["best"]["design"]) > b["best"]["step_time_s"]}
        got = {(c["between"][0], c["between"][1], c["axis"]) for c in study["crossovers"]}
        assert got == expect and expect
        by_value = {p["value"]: p["best"]["design"] for p in points}
        for c in study["crossovers"]:
            da, db = by_value[c["between"][0]], by_value[c["between"][1]]
            assert (c["from"], c["to"]) == (da[c["axis"]], db[c["axis"]])
            lo, hi = c["bracket"]
            assert c["between"][0] <= lo < c["at"] < hi <= c["between"][1]
            assert hi - lo <= 2e-3 * hi
            (a_lo, b_lo), (a_hi, b_hi), (a_at, b_at) = (
                (_direct_s(building, vary, v, da), _direct_s(building, vary, v, db)) for v in (lo, hi, c["at"]))
            assert a_lo <= b_lo and a_hi >= b_hi
            assert c["step_time_s"] == pytest.approx(min(a_at, b_at), rel=REL)
            assert a_at == pytest.approx(b_at, rel=2e-3)  # a continuous swap, not a jump
            n_refined += 1
    assert n_refined > 0


def test_whole_number_field_not_refined(building, engine):
    """The batch is a whole number: between two values divisibility changes feasibility, so no bisection;
    the same compiled program as the latency study."""
    study = sensitivity(building, parse_vary("training.global_batch_sequences=512,2048"), engine=engine)
    assert study["vary"]["level"] == "training"
    assert study["crossovers"] and all(c["at"] is None and c["bracket"] is None for c in study["crossovers"])
    assert engine.compiles == 1


def test_ties_are_not_crossovers(building, engine):
    """At batch 1024 the best (zero1) ties with its zero2 twin (the sweep keeps the lower index). A next point whose
    best is the twin is no crossover: the previous best is still as fast there. The real change to 2048 is (the
    layout: CP 2 x PP 4 -> CP 1 x PP 2, once a larger batch fills a shorter pipeline)."""
    vary = parse_vary("training.global_batch_sequences=1024,2048")
    study = sensitivity(building, vary, engine=engine)
    a, b = study["points"]
    assert {c["axis"] for c in study["crossovers"]} >= {"cp", "pp"}
    twin = {**a["best"]["design"], "sharding": "zero2"}
    assert a["best"]["design"]["sharding"] == "zero1"
    assert _direct_s(building, vary, 1024, twin) == pytest.approx(a["best"]["step_time_s"], rel=1e-7)
    tied = [a, {**a, "best": {**a["best"], "design": twin}}]  # the same value twice, the twin best the second time
    assert find_crossovers(building, vary, tied, engine=engine) == []


def test_table_output(latency_study, building):
    buf = io.StringIO()
    print_study(latency_study, building.space, Console(file=buf, width=200))
    text = buf.getvalue()
    # with every data-parallel call paying its ring's hop latencies, an interleaved pipeline (a smaller DP ring) takes
    # over from TP 4 alone between 8 and 100 us (at 8 us the 70B model fits on TP 4 with ZeRO-2 and no pipeline:
    # 2.5 GiB of reserve, not 8% of HBM), and from 100 us to 1 ms ZB-H2 over a deeper pipeline with CP
    flat = " ".join(text.split())  # the console wraps long crossover lines
    assert "between 8 and 100, crossover at building.latency_us = " in flat
    assert "the best pp changes from 1 to 4" in flat
    assert "the best schedule changes from interleaved to zb-h2" in flat
    assert "time breakdown of the best design" in text


def test_cli_json_and_plot(tmp_path, capsys):
    plot = tmp_path / "lat.png"
    rc = main(["sensitivity", "h100-building", "--vary", "building.latency_us=100,1000", "--top", "2", "--json",
               "--plot", str(plot)])
    out = capsys.readouterr().out
    assert rc == 0

    def no_nan(name):
        raise AssertionError(f"{name} in JSON")

    study = json.loads(out, parse_constant=no_nan)
    assert study["scenario"] == "h100-building"
    assert study["vary"] == {"level": "building", "field": "latency_us", "values": [100.0, 1000.0]}
    for p in study["points"]:
        assert len(p["top"]) == 2 and p["top"][0]["step_time_s"] <= p["top"][1]["step_time_s"]
        assert p["top"][0]["design"] == p["best"]["design"]
    c = study["crossovers"][0]
    assert set(c) >= {"axis", "from", "to", "between", "at"} and c["between"] == [100.0, 1000.0]
    assert plot.stat().st_size > 10_000


def _expect_user_error(capsys, argv, *must_contain):
    rc = main(list(argv))
    out = capsys.readouterr()
    assert rc == 2, (rc, out.err)
    assert "Traceback" not in out.err and len(out.err.strip().splitlines()) == 1, out.err
    for m in must_contain:
        assert m in out.err, (m, out.err)


@pytest.mark.parametrize("vary,expect", [
    ("region.latency_us=100", ("--vary", "no level 'region'", "node, building")),
    ("rack.latency_us=100", ("--vary", "no level 'rack'")),
    ("building.latency=100", ("--vary", "unknown field 'latency'", "latency_us")),
    ("training.precision=1", ("--vary", "unknown field 'precision'", "global_batch_sequences")),
    ("building.loss_rate=0.9", ("--vary", "building.loss_rate must be", "[0, 0.5)", "0.9")),
    ("building.latency_us=0", ("--vary", "(0, 1,000,000]", "'0'")),
    ("building.size=2.5", ("--vary", "whole number", "2.5")),
    ("building.bandwidth_GBps=nan", ("--vary", "nan")),
    ("building.latency_us=", ("--vary", "comma-separated list")),
    ("building.latency_us=1,,2", ("--vary", "none empty")),
    ("building.latency_us=fast", ("--vary", "not a number", "fast")),
    ("building.latency_us=5,5.0", ("--vary", "listed twice")),
    ("latency_us=5", ("--vary", "LEVEL.FIELD")),
    ("building.latency_us", ("--vary", "LEVEL.FIELD=V1,V2")),
    ("training.global_batch_sequences=3", ("--vary", "space.mbs", "3")),
])
def test_bad_vary(capsys, vary, expect):
    _expect_user_error(capsys, ["sensitivity", "h100-building", "--vary", vary], *expect)


@pytest.mark.parametrize("argv,flag", [
    (["--top", "0"], "--top"), (["--top", "1000"], "--top"), (["--plot", "/nonexistent/x.png"], "--plot"),
    (["--plot", "x.txt"], "--plot"),
])
def test_bad_flags(capsys, argv, flag):
    _expect_user_error(capsys, ["sensitivity", "h100-building", "--vary", "building.latency_us=8", *argv], flag)


def test_missing_vary_is_usage_error(capsys):
    assert main(["sensitivity", "h100-building"]) == 2
    assert "--vary" in capsys.readouterr().err


def test_parse_vary_library_errors_are_config_errors():
    with pytest.raises(ConfigError, match="--vary"):
        parse_vary("campus.oversubscription=0.5")
    v = parse_vary("campus.failure_rate_per_hour=2,0,1e1")
    assert v.values == (0.0, 2.0, 10.0) and v.continuous
    assert parse_vary("building.size=4,1e0").values == (1, 4) and not parse_vary("building.size=1").continuous


def test_huge_exhaustive_study_refused_before_any_sweep(capsys, monkeypatch):
    """Were 1.3e15 designs per value swept, the study would run for years: exit 2 naming the space."""
    from sax_jax.commands import sensitivity as cmd
    monkeypatch.setattr(cmd, "SWEEP_LIMIT", 1e16)  # force the exhaustive path
    assert main(["sensitivity", "huge-four-buildings", "--vary", "campus.bandwidth_GBps=10,50"]) == 2
    err = capsys.readouterr().err
    assert "space" in err and "too large" in err and "1.34e+15" in err


def test_huge_space_is_searched_at_each_value(engine):
    """Above SWEEP_LIMIT each value is searched; every design found is evaluated at every value and the fastest
    kept, so each point's best is never slower than any found design there (checked by direct evaluation)."""
    huge = sx.load_scenario("huge-four-buildings")
    vary = parse_vary("campus.latency_us=100,500,20000")
    study = sensitivity(huge, vary, engine=engine, search_budget=1500, seed=0)
    assert study["method"] == "search" and study["search"]["budget"] == 1500
    found = [p["best"]["design"] for p in study["points"] if p["best"]]
    assert found, "the search found no feasible design"
    for p in study["points"]:
        sc = with_value(huge, vary, p["value"])
        times = [evaluate_one(sc, sc.space.design(d), engine) for d in found]
        fastest = min(t["step_time_s"] for t in times if t["feasible"])
        assert p["best"]["step_time_s"] == pytest.approx(fastest, rel=REL)
        for name, b in p["baselines"].items():
            t = evaluate_one(sc, sc.baseline_design(name), engine)["step_time_s"]
            assert b["step_time_s"] == pytest.approx(t, rel=REL)

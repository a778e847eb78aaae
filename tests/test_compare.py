"""`sax compare`: the same numbers as `sax eval`, term deltas that add up to the step-time delta, clean errors.

Designs per scenario are kept to one batch size each (3 on default, 2 elsewhere) so the module compiles the
batched model once per scenario, plus `sax eval`'s batch of one.
"""
import json
import re

import pytest

import sax_jax as sx
from sax_jax import uncertainty
from sax_jax.cli import main
from sax_jax.compare import compare, differing_axes

from conftest import DEFAULT

THREE = ["production", "crosspipe", "tp=4,placement=tp-cp-pp-dp"]


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    out = capsys.readouterr().out

    def refuse(constant):  # NaN / Infinity are not JSON
        raise AssertionError(f"non-JSON constant {constant} in the output")
    return json.loads(out, parse_constant=refuse)


@pytest.fixture(scope="module")
def three():
    sc = sx.load_scenario(DEFAULT)
    designs = [sc.space.to_dict(sc.baseline_design("production")), sc.space.to_dict(sc.baseline_design("crosspipe")),
               sc.space.to_dict(sc.baseline_design(None, {"tp": 4, "placement": "tp-cp-pp-dp"}))]
    return sc, compare(sc, designs, labels=THREE)


def test_records_equal_eval_of_each_design(capsys):
    r = run_json(capsys, "compare", DEFAULT, *THREE, "--json")
    evals = [run_json(capsys, "eval", DEFAULT, "--json"),
             run_json(capsys, "eval", DEFAULT, "--json", "--baseline", "crosspipe"),
             run_json(capsys, "eval", DEFAULT, "--json", "--set", "tp=4", "--set", "placement=tp-cp-pp-dp")]
    assert r["reference"] == "production" and [d["label"] for d in r["designs"]] == THREE
    for rec, ev in zip(r["designs"], evals):
        assert rec["design"] == ev["design"]
        assert rec["feasible"] == ev["feasible"] and rec["violations"] == ev["reasons"]
        # one batch of three vs a batch of one: the same program up to float32 ulps
        for key in ("step_time_s", "raw_step_time_s", "tokens_per_s", "mfu", "cross_building_bytes"):
            # an infeasible design's step time is null in both (pytest >= 9.2 refuses approx(None))
            assert (rec[key] is None) if ev[key] is None else rec[key] == pytest.approx(ev[key], rel=1e-6), key
        assert rec["memory_GiB"] == pytest.approx(ev["memory_bytes"] / 2**30, rel=1e-6)
        assert rec["breakdown"] == pytest.approx(ev["breakdown"], rel=1e-6)


def test_records_equal_evaluate_one(three):
    sc, r = three
    for rec in r["designs"]:
        one = sx.evaluate_one(sc, sc.baseline_design(None, rec["design"]))
        assert rec["raw_step_time_s"] == pytest.approx(one["raw_step_time_s"], rel=1e-6)
        assert rec["breakdown"] == pytest.approx(one["breakdown"], rel=1e-6)


def check_differences(r):
    """Term deltas add up to the step-time delta; shares add up to one; speedup is the ratio of step times."""
    ref = r["designs"][0]
    assert len(r["differences"]) == len(r["designs"]) - 1
    for diff, rec in zip(r["differences"], r["designs"][1:]):
        assert diff["design"] == rec["label"]
        assert diff["delta_s"] == rec["raw_step_time_s"] - ref["raw_step_time_s"]
        deltas = [t["delta_s"] for t in diff["terms"]]
        assert sum(deltas) == pytest.approx(diff["delta_s"], rel=1e-5)
        assert sum(t["share"] for t in diff["terms"]) == pytest.approx(1.0, rel=1e-5)
        assert diff["speedup"] == pytest.approx(ref["raw_step_time_s"] / rec["raw_step_time_s"], rel=1e-12)
        assert [abs(d) for d in deltas] == sorted((abs(d) for d in deltas), reverse=True)
        assert {t["term"] for t in diff["terms"]} == set(sx.BREAKDOWN_KEYS)
        # the speedup's 80% band from the validation's run pairs (as a sweep's): a tie when it contains 1
        band = uncertainty.speedup_band(uncertainty.bands(), diff["speedup"])
        assert diff["speedup_band"] == pytest.approx(band, rel=1e-12)
        assert diff["speedup_band"][0] < diff["speedup"] < diff["speedup_band"][1]
        assert diff["tie"] == (band[0] <= 1.0 <= band[1])
        for t in diff["terms"]:
            assert t["delta_s"] == rec["breakdown"][t["term"]] - ref["breakdown"][t["term"]]


def test_term_deltas_sum_to_step_time_delta(three):
    _, r = three
    check_differences(r)
    # crosspipe is 0.78x of production on default, well outside the +-3.5% band: not a tie
    assert not r["differences"][0]["tie"] and r["differences"][0]["speedup_band"][1] < 1.0
    assert r["designs"][1]["step_time_s"] > r["designs"][0]["step_time_s"]  # crosspipe: slower on default
    assert r["differences"][0]["terms"][0]["term"] == "bubble"  # vpp 8 -> 1: the bubble explains it


@pytest.mark.parametrize("scenario, designs, set_axes", [
    ("huge-four-buildings", ["production", "crosspipe:qps=4"], ["vpp", "qps", "schedule"]),
    ("two-regions", ["crosspipe", "production:pp=4,mbs=2"], ["pp", "vpp", "mbs", "schedule"]),
])
def test_other_scenarios(capsys, scenario, designs, set_axes):
    r = run_json(capsys, "compare", scenario, *designs, "--json")
    check_differences(r)
    assert r["differing_axes"] == set_axes


def test_differing_axes_are_exactly_the_ones_set(three):
    sc, r = three
    base = r["designs"][0]["design"]
    assert r["differences"][1]["changed"] == {"tp": [8, 4], "placement": ["tp-cp-dp-pp", "tp-cp-pp-dp"]}
    crosspipe = sc.space.to_dict(sc.baseline_design("crosspipe"))
    assert r["differences"][0]["changed"] == {ax: [base[ax], crosspipe[ax]] for ax in sx.AXES
                                              if crosspipe[ax] != base[ax]} == \
        {"vpp": [8, 1], "schedule": ["interleaved", "latency-aware"]}
    assert r["differing_axes"] == differing_axes([d["design"] for d in r["designs"]]) == \
        ["tp", "vpp", "placement", "schedule"]


def test_same_design_twice_and_infeasible(capsys):
    r = run_json(capsys, "compare", DEFAULT, "production", "tp=16", "production:tp=8", "--json")
    kinds = [w["kind"] for w in r["warnings"]]
    assert "same_design" in kinds and "infeasible_design" in kinds
    infeasible, same = r["differences"]
    assert r["designs"][1]["step_time_s"] is None and not r["designs"][1]["feasible"]
    assert any("tp does not divide" in v for v in r["designs"][1]["violations"])
    assert infeasible["speedup"] < 1  # compared on what it would take if it ran
    assert same["delta_s"] == 0 and same["speedup"] == 1 and same["changed"] == {}
    assert same["tie"]  # a design ties with itself
    assert all(t["delta_s"] == 0 and t["share"] is None for t in same["terms"])


def test_table_output(capsys):
    assert main(["compare", DEFAULT, *THREE]) == 0
    out = capsys.readouterr().out
    for text in ("what explains the difference", "* placement", "speedup", "bubble", "step time", "tokens/s",
                 "80% band from the validation's run pairs"):
        assert text in out, text
    assert re.search(r"speedup \d\.\d{3}x \[\d\.\d{3}x, \d\.\d{3}x\]", out)  # each speedup with its band


@pytest.mark.parametrize("argv, named", [
    (["production"], "at least two designs"),
    (["production", "nope"], "nope"),
    (["production", "nope:tp=4"], "crosspipe"),  # the known baselines are listed
    (["production", "zz=1"], "zz"),
    (["production", "tp=0"], "axis tp"),
    (["production", "tp=1.5"], "axis tp"),
    (["production", "mbs=100000"], "axis mbs"),
    (["production", "schedule=pipedream"], "pipedream"),
    (["production", "schedule=0"], "axis schedule"),
    (["production", "tp=8,placement=tp,cp,pp,dp"], "axis=value"),
    (["production", "tp=4,tp=8"], "axis tp"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, named):
    assert main(["compare", DEFAULT, *argv]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and len(err.strip().splitlines()) == 1

"""`sax eval` reads its prediction against the validation set's measurements of the same model and GPU."""
import pytest

from sax_jax import validation as V
from sax_jax.published import measured_step_s, published_for


@pytest.fixture(scope="module")
def mcore():
    cases, errors = V.load_cases(dataset="megatron-core-h100")
    assert cases and not errors
    return cases


def test_measured_step_time_reproduces_the_published_metric(mcore):
    for case in mcore:
        t = measured_step_s(case)
        assert V.metrics_of(case, t, True)[case.metric] == pytest.approx(case.measured, rel=1e-9)


def test_a_published_layout_finds_its_run(mcore):
    case = mcore[0]
    design = {**case.design, "schedule": "interleaved" if float(case.design.get("vpp", 1)) > 1 else "1f1b"}
    pub = published_for(case.scenario, design)
    assert case.id in [r["id"] for r in pub["exact"]]
    run = next(r for r in pub["exact"] if r["id"] == case.id)
    assert run["measured_step_s"] == pytest.approx(measured_step_s(case))
    k = pub["class"]
    assert k["runs"] >= 1 and k["mfu_range"][0] <= run["measured_mfu"] <= k["mfu_range"][1]
    other = {**design, "tp": float(design["tp"]) * 2}
    assert case.id not in [r["id"] for r in published_for(case.scenario, other)["exact"]]


def test_eval_json_carries_the_published_context(capsys):
    import json
    from sax_jax.cli import main
    assert main(["eval", "default", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["published"]["class"]["model"] == "llama3-405B" and rec["published"]["class"]["runs"] >= 1



def test_a_design_above_every_published_run_is_set_beside_the_best():
    """versus_ceiling sets a design predicted above the best published MFU of its class beside that run's
    prediction: its shares of the step and both compute-only MFUs (mfu x step / compute); none at or below it.
    (`sax eval`'s output of it: tests/test_trust.py, on the default scenario's production layout.)"""
    from sax_jax import uncertainty
    from sax_jax.published import versus_ceiling
    from conftest import DEFAULT
    import sax_jax as sx
    sc = sx.load_scenario(DEFAULT)
    top = uncertainty.bands()["published_mfu"][uncertainty.mfu_class("H100-SXM-80GB", "bf16")]
    breakdown = {"compute": 4.0, "tp": 0.5, "bubble": 0.5, "cp": 0.0}
    assert versus_ceiling(sc, top["max"], breakdown) is None
    vs = versus_ceiling(sc, top["max"] * 1.01, breakdown)
    assert (vs["id"], vs["measured_mfu"], vs["shares"]) == (top["max_id"], top["max"], top["max_shares"])
    assert sum(vs["shares"].values()) == pytest.approx(1.0)
    assert vs["design"]["shares"] == {"compute": pytest.approx(0.8), "tp": pytest.approx(0.1),
                                      "bubble": pytest.approx(0.1)}
    assert vs["design"]["compute_mfu"] == pytest.approx(top["max"] * 1.01 * 5.0 / 4.0)

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


def test_a_design_above_every_published_run_is_set_beside_the_best(capsys):
    """`sax eval` of a design predicted above the best published MFU of its class puts that run's predicted shares
    of the step beside the design's, with both compute-only MFUs (mfu x step / compute); none at or below it."""
    import json
    from sax_jax import uncertainty
    from sax_jax.cli import main
    from sax_jax.published import versus_ceiling
    from conftest import DEFAULT
    import sax_jax as sx
    assert main(["eval", "default", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    top = uncertainty.bands()["published_mfu"][uncertainty.mfu_class("H100-SXM-80GB", "bf16")]
    assert rec["mfu"] > top["max"]  # production's 51.5% against the BF16 dense H100 runs' best
    vs = rec["versus_published"]
    assert (vs["id"], vs["measured_mfu"]) == (top["max_id"], top["max"])
    assert sum(vs["shares"].values()) == pytest.approx(1.0)
    assert sum(vs["design"]["shares"].values()) == pytest.approx(1.0)
    step = sum(rec["breakdown"].values())
    assert step == pytest.approx(rec["raw_step_time_s"], rel=1e-5)
    assert vs["design"]["compute_mfu"] == pytest.approx(rec["mfu"] * step / rec["breakdown"]["compute"], rel=1e-6)
    sc = sx.load_scenario(DEFAULT)
    assert versus_ceiling(sc, top["max"], rec["breakdown"]) is None
    assert versus_ceiling(sc, top["max"] * 1.01, rec["breakdown"])["id"] == top["max_id"]
    assert main(["eval", "default"]) == 0
    out = capsys.readouterr().out
    assert f"share, {top['max_id']}" in out and "above the best published run of its class" in out

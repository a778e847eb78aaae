"""Infrastructure co-design (cost/provision.py, codesign.py): network axes are neutral at "auto", priced, and the
time-vs-cost front and the cheapest-network answer agree with brute force over a small space."""
import dataclasses
import os

import numpy as np
import pytest

import sax_jax as sx
from sax_jax.codesign import cheapest_from_front, single_building
from sax_jax.evaluate import evaluate, evaluate_one
from sax_jax.space import AXES
from sax_jax.specs import ConfigError

from conftest import CONFIGS

CODESIGN = os.path.join(CONFIGS, "scenarios", "codesign.yaml")


@pytest.fixture(scope="module")
def sc():
    return sx.load_scenario(CODESIGN)


@pytest.fixture(scope="module")
def small(sc):
    """960 designs: two layouts x schedules x the 60 networks."""
    keep = {"pp": (8.0, 16.0), "cp": (2.0,), "vpp": (1.0, 8.0), "schedule": None, "sharding": (0,), "transport": (0,)}
    opts = []
    for ax, o in zip(AXES, sc.space.options):
        if ax == "schedule":
            o = o[1:]  # interleaved, latency-aware
        elif ax in keep and keep[ax] is not None:
            o = tuple(v for v in o if v in keep[ax]) if ax not in ("sharding", "transport") else o[:1]
        opts.append(tuple(o))
    return dataclasses.replace(sc, name="codesign-small", space=dataclasses.replace(sc.space, options=tuple(opts)))


def test_network_axes_at_auto_are_the_system_files_network(sc, default_scenario):
    """two-buildings-h100's campus level: 50 GB/s per GPU, 1 plane, 1:4."""
    auto = sc.baseline_design("production", {"xb_bandwidth_GBps": "auto", "xb_planes": "auto", "xb_oversub": "auto"})
    a, b = evaluate(sc, auto), evaluate(sc, sc.baseline_design("production"))
    for k in ("step_time_s", "memory_bytes", "cross_building_bytes", "goodput_tokens_per_s", "cost_usd_per_hour"):
        np.testing.assert_array_equal(np.asarray(getattr(a, k)), np.asarray(getattr(b, k)), err_msg=k)
    assert sx.build_params(sc).topology.provisioned and not sx.build_params(default_scenario).topology.provisioned
    c = evaluate_one(default_scenario, default_scenario.baseline_design("production"))
    assert c["cost_usd_per_hour"] == 0.0  # no prices file: no prices


def test_eval_refuses_network_axes_the_scenario_does_not_provision(default_scenario):
    from sax_jax.design_args import resolve_design
    with pytest.raises(ConfigError, match="--set xb_planes"):
        resolve_design(default_scenario, None, {"xb_planes": 2})


def test_prices_by_hand(sc):
    """configs/prices/example.yaml: $2/GPU-h, $0.02 per GB/s-h of uplink, $0.05 per port-h; 16384 GPUs."""
    c = evaluate_one(sc, sc.baseline_design("production"))  # 50 GB/s, 1 plane, 1:4
    network = 16384 * 50 / 4 * 0.02 + 16384 * 1 * 0.05
    assert c["network_usd_per_hour"] == pytest.approx(network, rel=1e-6)
    assert c["cost_usd_per_hour"] == pytest.approx(16384 * 2.0 + network, rel=1e-6)
    assert c["train_cost_usd"] == pytest.approx(c["cost_usd_per_hour"] * c["time_to_target_s"] / 3600, rel=1e-6)


@pytest.mark.parametrize("placement", ["tp-cp-dp-pp", "tp-cp-pp-dp"])
def test_more_cross_building_bandwidth_never_slower_and_costs_more(sc, placement):
    t, usd = [], []
    for bw in (3.125, 6.25, 12.5, 25, 50, 100):
        c = evaluate_one(sc, sc.baseline_design("production", {"xb_bandwidth_GBps": bw, "placement": placement}))
        t.append(c["step_time_s"])
        usd.append(c["cost_usd_per_hour"])
    assert all(b <= a * (1 + 1e-6) for a, b in zip(t, t[1:])), t
    assert all(b > a for a, b in zip(usd, usd[1:]))


def _brute_front(t, y):
    """Distinct (t, y) of feasible designs that no other dominates, each by its lowest index (pareto.py)."""
    out = []
    for i in np.argsort(t, kind="stable"):
        if not np.isfinite(t[i]):
            break
        dominated = np.any((t <= t[i]) & (y <= y[i]) & ((t < t[i]) | (y < y[i])))
        if not dominated and not any(t[j] == t[i] and y[j] == y[i] for j in out):
            out.append(i)
    return sorted(out, key=lambda i: (t[i], i))


def test_cost_front_and_cheapest_network_match_brute_force(small):
    res = sx.sweep(small, top_k=4, progress=False)
    assert res.complete and "time_vs_cost" in res.pareto
    idx = np.arange(small.space.size)
    cost = evaluate(small, small.space.decode(idx))
    t, y = np.asarray(cost.step_time_s, np.float64), np.asarray(cost.cost_usd_per_hour, np.float64)
    t = np.where(np.asarray(cost.feasible), t, np.inf)
    front = res.pareto["time_vs_cost"]
    assert [r["index"] for r in front] == _brute_front(t, y)
    # the cheapest design within a limit lies on the front: compare with the cheapest of all designs
    best_t = float(np.min(t))
    for pct in (50, 80, 95, 99, 100):
        limit = best_t / (pct / 100)
        ok = np.flatnonzero(t <= limit)
        want = min(ok, key=lambda i: (y[i], t[i], i))
        got = cheapest_from_front(front, best_t, pct)
        assert got["cost_usd_per_hour"] == pytest.approx(y[want], rel=1e-6)
        assert got["step_time_s"] <= limit


def test_single_building_reference_is_never_slower(small):
    one = single_building(small)
    ref = sx.sweep(one, top_k=1, progress=False).top[0]["step_time_s"]
    best = sx.sweep(small, top_k=1, progress=False).top[0]["step_time_s"]
    assert ref <= best * (1 + 1e-6)
    assert all(lv.bandwidth_GBps == 50 and lv.latency_us == 8 for lv in one.system.levels[1:])


def test_default_sweep_keeps_two_fronts(default_scenario):
    res = sx.sweep(default_scenario, top_k=1, max_designs=20_000, progress=False)
    assert set(res.pareto) == {"time_vs_memory", "time_vs_cross_building"}


@pytest.mark.parametrize("field, value", [("gpu_usd_per_hour", -1), ("link_usd_per_GBps_hour", "cheap"),
                                          ("port_usd", 1.0)])
def test_bad_prices_name_file_key_and_value(tmp_path, field, value):
    import yaml
    prices = yaml.safe_load(open(os.path.join(CONFIGS, "prices", "example.yaml")))
    prices[field] = value
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(prices))
    scen = yaml.safe_load(open(CODESIGN))
    for k in ("model", "system", "transports"):
        scen[k] = os.path.join(CONFIGS, "scenarios", scen[k])
    scen["prices"] = str(path)
    spath = tmp_path / "scen.yaml"
    spath.write_text(yaml.safe_dump(scen))
    with pytest.raises(ConfigError) as err:
        sx.load_scenario(str(spath))
    assert str(path) in str(err.value) and field in str(err.value)


def test_bad_network_axis_value_is_refused(tmp_path):
    import yaml
    scen = yaml.safe_load(open(CODESIGN))
    for k in ("model", "system", "transports", "prices"):
        scen[k] = os.path.join(CONFIGS, "scenarios", scen[k])
    scen["space"]["xb_planes"] = [1, 2.5]
    spath = tmp_path / "scen.yaml"
    spath.write_text(yaml.safe_dump(scen))
    with pytest.raises(ConfigError, match="space.xb_planes"):
        sx.load_scenario(str(spath))


def test_progress_bar_shows_each_objective_positive_with_its_unit():
    """The top-k key is the objective for minimized ones and its negation otherwise: the bar undoes exactly that."""
    from sax_jax.search.exhaustive import MINIMIZED, _objective_key
    from sax_jax.search.progress import _UNITS, _fmt_best
    assert set(_UNITS) == set(MINIMIZED)

    class Cost:
        time_to_target_s, train_cost_usd, step_time_s, goodput_tokens_per_s = 1.774e6, 3.5e6, 5.25, 2.7e6

    assert _fmt_best("time_to_target_s", _objective_key(Cost, "time_to_target_s")) == "1.774e+06 s"
    assert _fmt_best("train_cost_usd", _objective_key(Cost, "train_cost_usd")) == "3.5e+06 USD"
    assert _fmt_best("step_time_s", _objective_key(Cost, "step_time_s")) == "5.25 s"
    assert _fmt_best("goodput_tokens_per_s", _objective_key(Cost, "goodput_tokens_per_s")) == "2.7e+06"

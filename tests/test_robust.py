"""Robust optimum (sax_jax.robust, `sax sweep --robust`): the batched designs x samples evaluation against a loop
over samples, the nominal sample against the sweep, determinism, the ranking against numpy, the distribution."""
import json

import jax
import numpy as np
import pytest

import sax_jax as sx
from sax_jax import robust
from sax_jax.cli import main
from sax_jax.evaluate import evaluate
from sax_jax.params import build_params
from sax_jax.search.baselines import baseline_costs
from sax_jax.search.exhaustive import sweep
from sax_jax.space import stack

SCENARIO = "two-regions"  # node, building, campus and region: both kinds of noisy level, lossy and failing links
K = 5  # candidates; the CLI test uses the same K and N, so it reuses the compiled programs
N = 16  # samples


@pytest.fixture(scope="module")
def setup():
    sc = sx.load_scenario(SCENARIO)
    result = sweep(sc, top_k=K, progress=False)
    params = build_params(sc)
    designs = [sc.space.design(r["design"]) for r in result.top] + [sc.baseline_design(n) for n in sc.baselines]
    return sc, result, params, stack(designs)


def _at(sampled, s):
    return jax.tree_util.tree_map(lambda x: x[s], sampled)


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b)))


def test_batched_equals_loop_over_samples(setup):
    sc, _, params, designs = setup
    sampled = robust.sample_params(params, N, seed=3)
    times = robust.evaluate_samples(sampled, designs)
    loop = np.stack([np.asarray(evaluate(sc, designs, _at(sampled, s)).step_time_s) for s in range(N)])
    assert times.shape == (N, K + len(sc.baselines)) and np.isfinite(times).all()
    assert _rel(times, loop) < 1e-5
    # blocks of samples (5 per call, the last padded) give the same matrix as one call
    assert _rel(robust.evaluate_samples(sampled, designs, max_cells=5 * times.shape[1]), times) < 1e-6
    # the noise does something: the samples differ from the nominal system
    assert np.ptp(times, axis=0).min() > 0


def test_sample_0_is_the_nominal_sweep(setup):
    sc, result, params, _ = setup
    sampled = robust.sample_params(params, N, seed=7)
    for got, want in zip(jax.tree_util.tree_leaves(_at(sampled, 0)), jax.tree_util.tree_leaves(params)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    rec = robust.robust_ranking(sc, params, [r["design"] for r in result.top], {}, N, seed=7)
    nominal = np.array([c["nominal_s"] for c in rec["candidates"]])
    assert _rel(nominal, [r["step_time_s"] for r in result.top]) < 1e-5


def test_seed_determinism_and_the_distribution(setup):
    _, _, params, _ = setup
    a, b = (robust.sample_params(params, N, seed=11) for _ in range(2))
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    c = robust.sample_params(params, N, seed=12)
    net, nom = a.net, params.net
    network = np.asarray(nom.is_network, bool)
    assert not np.allclose(np.asarray(net.latency_s)[1:, network], np.asarray(c.net.latency_s)[1:, network])
    # the NVLink level keeps its numbers; bandwidth never above nominal; loss stays in [0, 0.5)
    np.testing.assert_array_equal(np.asarray(net.latency_s)[:, ~network], np.broadcast_to(
        np.asarray(nom.latency_s)[~network], (N, int((~network).sum()))))
    assert (np.asarray(net.bw_Bps) <= np.asarray(nom.bw_Bps)).all()
    assert (np.asarray(net.bw_Bps)[1:, network] < np.asarray(nom.bw_Bps)[network]).all()
    loss = np.asarray(net.loss)
    assert (loss >= 0).all() and (loss < 0.5).all()
    # cross-building latency spreads more than inside-building latency (sigma 0.5 vs 0.2)
    spread = np.log(np.asarray(robust.sample_params(params, 4096, seed=0).net.latency_s) / np.asarray(nom.latency_s))
    cross = np.asarray(nom.cross_building, bool)
    assert np.allclose(spread[1:, cross].std(axis=0), 0.5, rtol=0.05)
    assert np.allclose(spread[1:, network & ~cross].std(axis=0), 0.2, rtol=0.05)


def test_ranking_equals_numpy(setup):
    _, _, params, designs = setup
    times = robust.evaluate_samples(robust.sample_params(params, N, seed=5), designs)
    times = np.concatenate([times, np.full((N, 1), np.inf)], axis=1)  # an infeasible design ranks last, no NaN
    r = robust.rank(times)
    finite = times[:, :-1]
    np.testing.assert_allclose(r["mean_s"][:-1], finite.mean(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(r["p90_s"][:-1], np.percentile(finite, 90, axis=0, method="inverted_cdf"))
    np.testing.assert_array_equal(r["nominal_s"], times[0])
    for key in ("mean", "p90"):
        order = np.argsort(r[f"{key}_s"], kind="stable")
        np.testing.assert_array_equal(np.argsort(r[f"{key}_rank"]), order)
        assert r[f"{key}_rank"][-1] == times.shape[1] and np.isinf(r[f"{key}_s"][-1])
    assert not any(np.isnan(v).any() for v in r.values())


def test_zero_sigmas_give_the_nominal_system(setup):
    _, _, params, designs = setup
    zero = {kind: {q: 0.0 for q in robust.QUANTITIES} for kind in robust.DISTRIBUTION}
    times = robust.evaluate_samples(robust.sample_params(params, N, seed=1, distribution=zero), designs)
    np.testing.assert_array_equal(times, np.broadcast_to(times[0], times.shape))


def test_more_latency_is_never_faster(setup):
    _, _, params, designs = setup
    sampled = robust.sample_params(params, N, seed=9)
    slower = sampled._replace(net=sampled.net._replace(latency_s=sampled.net.latency_s * 3.0))
    base, slow = (robust.evaluate_samples(p, designs) for p in (sampled, slower))
    assert (slow >= base * (1 - 1e-6)).all()
    assert (slow > base).any()


def test_cli_json(setup, capsys):
    sc, result, _, _ = setup
    rc = main(["sweep", SCENARIO, "--robust", "--samples", str(N), "--robust-top", str(K), "--top", "3",
               "--seed", "4", "--json", "--no-progress", "--no-compile-cache"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [r["design"] for r in out["top"]] == [r["design"] for r in result.top[:3]]  # --top still rules the list
    rob = out["robust"]
    assert rob["samples"] == N and rob["seed"] == 4 and rob["distribution"]["sigma"] == robust.DISTRIBUTION
    assert len(rob["candidates"]) == K and set(rob["baselines"]) == set(sc.baselines)
    assert _rel([c["nominal_s"] for c in rob["candidates"]], [r["step_time_s"] for r in result.top]) < 1e-5
    assert rob["best_mean"]["mean_s"] == min(c["mean_s"] for c in rob["candidates"])
    assert rob["best_p90"]["p90_s"] == min(c["p90_s"] for c in rob["candidates"])
    nominal = baseline_costs(sc)  # the baselines' sample 0 is their nominal time
    for name, b in rob["baselines"].items():
        assert abs(b["nominal_s"] / nominal[name]["step_time_s"] - 1) < 1e-5


@pytest.mark.parametrize("argv,flag", [
    (["--robust", "--samples", "0"], "--samples"),
    (["--robust", "--samples", "100001"], "--samples"),
    (["--robust", "--samples", "2.5"], "--samples"),
    (["--robust", "--robust-top", "0"], "--robust-top"),
    (["--robust", "--robust-top", "10001"], "--robust-top"),
    (["--robust", "--seed", "-1"], "--seed"),
    (["--robust", "--seed", str(2**32)], "--seed"),
    (["--samples", "16"], "--samples"),
    (["--robust-top", "5"], "--robust-top"),
    (["--seed", "1"], "--seed"),
])
def test_bad_flags_exit_2(capsys, argv, flag):
    rc = main(["sweep", "h100-building", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and flag in err and "Traceback" not in err, (rc, err)


def test_search_robust_ranks_the_found_design_and_its_neighbours(capsys):
    """`sax search --robust` (spaces too large to sweep): candidates are the found design and feasible designs
    that differ from it in exactly one axis, nominal-fastest first; the ranking is robust_ranking's."""
    from sax_jax.space import AXES
    assert main(["search", "four-buildings", "--budget", "400", "--robust", "--samples", "16", "--robust-top", "12",
                 "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    cands = rec["robust"]["candidates"]
    assert cands[0]["design"] == rec["best"]["design"] and len(cands) == 12
    for c in cands[1:]:
        assert sum(c["design"][ax] != rec["best"]["design"][ax] for ax in AXES) == 1
    nominal = [c["nominal_s"] for c in cands[1:]]
    assert nominal == sorted(nominal)
    assert {c["mean_rank"] for c in cands} == set(range(1, 13))


def test_search_robust_flags_need_robust(capsys):
    assert main(["search", "four-buildings", "--samples", "16"]) == 2
    assert "--samples" in capsys.readouterr().err

"""Exhaustive sweep (sax_jax.search.exhaustive): exact against brute force, sharded, resumable, beyond int32."""
import json
import os
import signal
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from sax_jax.evaluate import evaluate_batch
from sax_jax.report import fmt_time
from sax_jax.search import checkpoint as ckpt
from sax_jax.search.exhaustive import FRONTS, sweep

import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "configs")
CHUNK = 16  # small blocks: many blocks per sweep, so merges across blocks are exercised

# what the small and huge sweep scenarios share: GPT-3 175B on the 1024-GPU Selene slice
HEADER = """
model: {configs}/models/gpt3-175B.yaml
system: {configs}/systems/selene-a100.yaml
transports: {configs}/network/transports.yaml
training: {{global_batch_sequences: 1536, seq_len: 2048, precision: fp16, flash_attention: false}}
"""

SMALL = HEADER + """
name: sweep-small
space:
  tp: [1, 2, 4, 8]
  pp: [1, 2, 4, 8, 16, 32]
  vpp: [1, 2, 3]
  mbs: [1, 2, 4, 8]
  schedule: [1f1b, interleaved, zb-h1]
  recompute: [none, selective, full]
  sharding: [zero0, zero1]
  placement: [tp-cp-dp-pp, tp-cp-pp-dp]
  overlap: [none, dp]
objective: {objective}
"""


def _write(tmp_path, name="small.yaml", objective="step_time_s", **fmt):
    path = tmp_path / name
    path.write_text(SMALL.format(configs=CONFIGS, objective=objective, **fmt))
    return str(path)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("scen"))


@pytest.fixture(scope="module")
def small_scenario(small):
    return sx.load_scenario(small)


BRUTE_BATCH = 8192  # one compile of the plain evaluate path for every brute-force check


def _brute(scenario, start=0, n=None):
    """Cost of designs [start, start + n) through the plain evaluate path, as numpy."""
    space = scenario.space
    n = space.size - start if n is None else n
    base = jnp.asarray(space.digits_of(start), jnp.int32)
    params = sx.build_params(scenario)
    keys = ("step_time_s", "memory_bytes", "cross_building_bytes", "feasible", "tokens_per_s")
    parts = {k: [] for k in keys}
    for off in range(0, n, BRUTE_BATCH):
        offs = jnp.arange(off, off + BRUTE_BATCH, dtype=jnp.int32)
        design, _ = space.decode_from(base, jnp.minimum(offs, n - 1))
        cost = evaluate_batch(params, design)
        for k in keys:
            parts[k].append(np.asarray(getattr(cost, k)))
    return {k: np.concatenate(v)[:n] for k, v in parts.items()}


def _brute_top(c, k, start=0, key="step_time_s"):
    v = np.where(c["feasible"], c[key] if key == "step_time_s" else -c[key], np.inf)
    order = np.lexsort((np.arange(len(v)), v))
    return [start + int(i) for i in order[:k] if np.isfinite(v[i])]


def _brute_distinct_top(c, k, start=0):
    """The k best distinct step times, each by its lowest-index design."""
    v = np.where(c["feasible"], c["step_time_s"], np.inf)
    out, seen = [], set()
    for i in np.lexsort((np.arange(len(v)), v)):
        if not np.isfinite(v[i]) or len(out) == k:
            break
        if v[i] not in seen:
            seen.add(v[i])
            out.append(start + int(i))
    return out


def _brute_front(c, metric, start=0):
    """Distinct non-dominated (t, y) vectors of feasible designs, lowest index each, by increasing t."""
    t, y = c["step_time_s"], c[metric]
    idx = np.nonzero(c["feasible"])[0]
    order = idx[np.lexsort((idx, y[idx], t[idx]))]
    out, best = [], np.inf
    for i in order:
        if y[i] < best:
            out.append(start + int(i))
            best = y[i]
    return out


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """Subprocess sweeps of the same program share XLA's persistent cache: one compile, not one per run."""
    return str(tmp_path_factory.mktemp("xla_cache"))


@pytest.fixture(scope="module")
def small_result(small, cache_dir, tmp_path_factory):
    """The uninterrupted reference run, through the CLI (JSON), one device."""
    out_dir = str(tmp_path_factory.mktemp("reference"))
    p = _cli([small, "--top", "12", "--chunk", str(CHUNK), "--json", "--no-progress", "--out", out_dir],
             env=_env(cache_dir))
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    return json.loads(out), out_dir


@pytest.fixture(scope="module")
def small_brute(small_scenario):
    return _brute(small_scenario)


def _digest(res: dict) -> dict:
    """What must be identical between runs: counts, top-k and fronts (indices and values)."""
    return {"n_designs": res["n_designs"], "n_feasible": res["n_feasible"],
            "top": [(r["index"], r["step_time_s"], r["memory_bytes"]) for r in res["top"]],
            "pareto": {k: [(r["index"], r["step_time_s"]) for r in v] for k, v in res["pareto"].items()}}


def test_top_k_and_counts_match_brute_force(small_scenario, small_result, small_brute):
    r, _ = small_result
    assert r["n_designs"] == small_scenario.space.size == 20736
    assert r["n_feasible"] == int(small_brute["feasible"].sum()) > 12
    expect = _brute_top(small_brute, 12)
    assert [t["index"] for t in r["top"]] == expect
    # records are evaluated alone (batch of one): equal to the batched brute force up to float32 rounding
    np.testing.assert_allclose([t["step_time_s"] for t in r["top"]], small_brute["step_time_s"][expect], rtol=1e-6)
    assert r["complete"] and r["devices"] == 1
    # reported as a speedup over the scenario's baselines (here the implicit first-options design)
    base = small_scenario.baseline_design()
    base_t = sx.evaluate_one(small_scenario, base)
    expected = base_t["step_time_s"] / r["top"][0]["step_time_s"] if base_t["feasible"] else None
    assert r["speedup_vs"]["first-options"] == (pytest.approx(expected, rel=1e-5) if expected else None)


def test_bands_in_json_and_result_json(small_scenario, small_result):
    """Uncertainty from validation: the best step time's band, speedups with their bands and the near-optimal
    set, in --json and in result.json (sax_jax.uncertainty; the old keys stay as they were)."""
    from sax_jax import uncertainty
    from sax_jax.commands.sweep import varied_axes

    r, out_dir = small_result
    b = uncertainty.bands()
    best = r["top"][0]["step_time_s"]
    expected = uncertainty.absolute_band(b, "A100-SXM-80GB", 1024, best)
    assert set(r["band"]) == set(expected)  # compared key by key: pytest >= 9.2 refuses nested approx
    for key, value in expected.items():
        assert r["band"][key] == (pytest.approx(value) if isinstance(value, (int, float, list)) else value), key
    assert r["band"]["group"] == "A100, dense, 65-1024 GPUs"  # the Selene slice: 1024 A100s, a dense GPT
    lo, hi = r["band"]["measured_s"]
    assert lo < best < hi
    expect = uncertainty.near_optimal(b, r["top"], varied_axes(small_scenario.space))
    assert r["near_optimal"] == expect
    assert set(r["near_optimal"]["shared"]) | set(r["near_optimal"]["free"]) == set(varied_axes(small_scenario.space))
    for name, s in r["speedup_vs"].items():
        sp = r["speedups"][name]
        assert sp is None if s is None else sp["band"] == pytest.approx(uncertainty.speedup_band(b, s))
    with open(os.path.join(out_dir, "result.json")) as fh:
        saved = json.load(fh)
    assert {k: saved[k] for k in ("band", "speedups", "near_optimal")} == \
        {k: r[k] for k in ("band", "speedups", "near_optimal")}
    # the best design's MFU against the highest published run of its class (trust.py above_published_mfu)
    ceiling = b["published_mfu"][uncertainty.mfu_class("A100-SXM-80GB", small_scenario.training.precision)]
    flagged = [w for w in r["warnings"] if w["kind"] == "above_published_mfu"]
    assert bool(flagged) == (r["top"][0]["mfu"] > ceiling["max"]) and saved["warnings"] == r["warnings"]
    assert not flagged or f"highest {100 * ceiling['max']:.1f}%: {ceiling['max_id']}" in flagged[0]["message"]


def test_pareto_fronts_match_brute_force(small_result, small_brute):
    r, _ = small_result
    for name, metric in FRONTS.items():
        got = [p["index"] for p in r["pareto"][name]]
        assert got == _brute_front(small_brute, metric), name
        assert not r["pareto_truncated"][name]
    assert len(r["pareto"]["time_vs_memory"]) >= 3


@pytest.mark.parametrize("candidates", [1, 7])
def test_crowded_blocks_and_merge_rounds_match_brute_force(monkeypatch, small_scenario, small_brute, candidates):
    """With a tiny candidate buffer every block is "crowded" (the block's own staircase filters it) and its
    survivors take many merge rounds with re-filtering in between: still exactly the brute-force result."""
    from sax_jax.search import fold
    monkeypatch.setattr(fold, "CANDIDATES", candidates)
    r = sweep(small_scenario, top_k=12, chunk_size=4096, progress=False)
    assert r.n_feasible == int(small_brute["feasible"].sum())
    assert [t["index"] for t in r.top] == _brute_top(small_brute, 12)
    for name, metric in FRONTS.items():
        assert [p["index"] for p in r.pareto[name]] == _brute_front(small_brute, metric), name


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    """The small space with a placement that equals another one when cp = 1 (cp-tp-dp-pp = tp-cp-dp-pp): every
    design of that placement has an exact twin, so a plain top-k lists each step time twice."""
    path = tmp_path_factory.mktemp("tied") / "tied.yaml"
    text = SMALL.format(configs=CONFIGS, objective="step_time_s")
    path.write_text(text.replace("placement: [tp-cp-dp-pp, tp-cp-pp-dp]",
                                 "placement: [tp-cp-dp-pp, tp-cp-pp-dp, cp-tp-dp-pp]"))
    sc = sx.load_scenario(str(path))
    return sc, _brute(sc)


@pytest.mark.parametrize("chunk", [16, 4096])
def test_distinct_top_matches_brute_force(tied, chunk):
    """--distinct: the k best distinct step times, each by its lowest-index design, whatever the block size."""
    sc, brute = tied
    plain = _brute_top(brute, 12)
    assert len(set(brute["step_time_s"][plain])) == 6  # the plain top-12: six values, twice each
    r = sweep(sc, top_k=12, chunk_size=chunk, progress=False, distinct=True)
    assert [t["index"] for t in r.top] == _brute_distinct_top(brute, 12) and r.distinct
    assert len({t["step_time_s"] for t in r.top}) == 12


def test_throughput_objective_matches_brute_force(tmp_path, small_brute):
    """A larger-is-better objective takes the separate key path (its own grid output, grouped top-k)."""
    sc = sx.load_scenario(_write(tmp_path, objective="tokens_per_s"))
    r = sweep(sc, top_k=12, chunk_size=4096, progress=False)
    assert [t["index"] for t in r.top] == _brute_top(small_brute, 12, key="tokens_per_s")
    assert r.top[0]["tokens_per_s"] == max(t["tokens_per_s"] for t in r.top)
    for name, metric in FRONTS.items():  # the fronts are the same whatever the objective
        assert [p["index"] for p in r.pareto[name]] == _brute_front(small_brute, metric), name


def test_best_point_evaluated_alone_gives_same_cost(small_scenario, small_result):
    best = small_result[0]["top"][0]
    alone = sx.evaluate_one(small_scenario, sx.design_from_dict(small_scenario, best["design"]))
    # the same float32 program on one point or in a block: equal up to fusion-order rounding (exact on CPU; the
    # H200 differed in the last bits: 18.98352813720703 vs 18.983537673950195), so compare in float32 ulps
    for k in ("step_time_s", "tokens_per_s", "mfu", "memory_bytes", "cross_building_bytes"):
        np.testing.assert_array_max_ulp(np.float32(alone[k]), np.float32(best[k]), maxulp=16)
    assert alone["feasible"]


def _cli(args, env=None, **kw):
    cmd = [sys.executable, "-m", "sax_jax.cli", "sweep"] + args
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _env(cache_dir, devices=1):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # piped: the 120-column default
    env["XLA_FLAGS"] = xla_flags.with_flags(f"--xla_force_host_platform_device_count={devices}")
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_COMPILATION_CACHE_DIR"] = cache_dir
    return env


def test_four_devices_identical_to_one(small, small_result, cache_dir):
    p = _cli([small, "--top", "12", "--chunk", "128", "--json", "--no-progress"], env=_env(cache_dir, 4))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    res = json.loads(out)
    assert res["devices"] == 4
    assert _digest(res) == _digest(small_result[0])


def test_text_report(small, small_result, cache_dir):
    """The human-readable report: counts, the top rows (settings they share printed once), fronts, speedup."""
    p = _cli([small, "--top", "12", "--chunk", "4096", "--no-progress"], env=_env(cache_dir))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    ref = small_result[0]
    assert f"{ref['n_designs']:,} designs ({ref['n_feasible']:,} feasible)" in out
    assert "top 12 by step_time_s" in out
    best = ref["top"][0]
    assert f"{best['tokens_per_s']:,.0f}" in out
    # one table row per design (a design value too wide for its column folds onto a line with an empty "#")
    assert sum(line.startswith("│") and line[1:].split("│")[0].strip() != "" for line in out.splitlines()) == 12
    for name, recs in ref["pareto"].items():
        assert f"Pareto front {name}: {len(recs)} points" in out
    assert "best vs baseline first-options" in out
    assert f"best step time {fmt_time(best['step_time_s'])}: 80% band [" in out
    assert f"near-optimal: {ref['near_optimal']['n']} of the top 12 tie with the best" in out


def test_numbers_stay_whole_on_a_narrow_terminal(small, small_result, cache_dir):
    """At 50 columns the design columns fold; the numbers are never cut to '164,41...'."""
    env = dict(_env(cache_dir), COLUMNS="50")
    # --top 12 --chunk 4096 as test_text_report: the same sweep program, from the module's compile cache
    p = _cli([small, "--top", "12", "--chunk", "4096", "--no-progress"], env=env)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert len(small_result[0]["top"]) == 12
    for r in small_result[0]["top"]:
        assert f"{r['tokens_per_s']:,.0f}" in out and f"{100 * r['mfu']:.1f}%" in out
    assert not any("\u2026" in line for line in out.splitlines() if line.startswith("\u2502"))  # no cut cell


def test_kill_and_resume_identical(small, small_result, cache_dir, tmp_path):
    out_dir = str(tmp_path / "run")
    args = [small, "--top", "12", "--chunk", "16", "--out", out_dir, "--no-progress", "--json"]
    p = _cli(args + ["--checkpoint-every", "0"], env=_env(cache_dir))
    cursor, deadline = 0, time.time() + 240
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(ckpt.path(out_dir)):
            try:
                cursor = int(ckpt.load(out_dir)[0]["cursor"])
            except Exception:  # noqa: BLE001 (replaced while reading)
                cursor = 0
            if cursor > 0:
                break
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    meta, _ = ckpt.load(out_dir)
    assert 0 < int(meta["cursor"]) < small_result[0]["n_designs"], "the sweep was not killed mid-way"
    q = _cli(args + ["--resume"], env=_env(cache_dir))
    out, err = q.communicate(timeout=300)
    assert q.returncode == 0, err
    assert _digest(json.loads(out)) == _digest(small_result[0])
    for name in ("top.csv", "top.json", "result.json", "pareto_time_vs_memory.csv", "pareto_time_vs_memory.json"):
        assert os.path.exists(os.path.join(out_dir, name))


def test_changed_scenario_refuses_resume(tmp_path, small_scenario, small_result, cache_dir):
    _, out_dir = small_result
    meta, _ = ckpt.load(out_dir)
    assert meta["cursor"] == str(small_scenario.space.size) and meta["fingerprint"] == small_scenario.fingerprint
    path = _write(tmp_path, "changed.yaml")
    with open(path) as fh:
        text = fh.read().replace("seq_len: 2048", "seq_len: 4096")
    with open(path, "w") as fh:
        fh.write(text)
    changed = sx.load_scenario(path)
    with pytest.raises(ckpt.ResumeError, match="scenario changed"):
        sweep(changed, top_k=12, chunk_size=CHUNK, progress=False, out_dir=out_dir, resume=True)
    with pytest.raises(ckpt.ResumeError, match="--top differs"):
        sweep(small_scenario, top_k=3, chunk_size=CHUNK, progress=False, out_dir=out_dir, resume=True)
    with pytest.raises(ckpt.ResumeError, match="--distinct differs"):
        sweep(small_scenario, top_k=12, chunk_size=CHUNK, progress=False, out_dir=out_dir, resume=True, distinct=True)
    p = _cli([path, "--top", "12", "--out", out_dir, "--resume", "--no-progress"], env=_env(cache_dir))
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2 and "cannot resume" in err


HUGE = HEADER + """
name: sweep-huge
space:
  tp: [1, 2, 4, 8]
  cp: [1, 2, 4]
  pp: [1, 2, 4, 8, 16, 32]
  dp: [auto, 8, 16, 32, 64, 128, 256, 512]
  vpp: [1, 2, 3, 4, 6]
  mbs: [1, 2, 3, 4, 6, 8, 12, 16]
  qps: [auto, 1, 2, 4, 8, 16, 32, 64]
  channels: [auto, 1, 2, 4, 8, 16, 32, 64]
  schedule: [gpipe, 1f1b, interleaved, zb-h1, zb-h2, latency-aware]
  recompute: [none, selective, full]
  sharding: [zero0, zero1, zero2, fsdp, hsdp]
  placement: [tp-cp-dp-pp, tp-cp-pp-dp, tp-pp-cp-dp, tp-dp-cp-pp, cp-tp-dp-pp, tp-pp-dp-cp]
  transport: [ecmp_gbn, ecmp_qp4, spray_sr]
  dp_algo: [ring, tree, hierarchical]
  overlap: [none, dp, dp+tp]
"""


def test_space_beyond_int32(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text(HUGE.format(configs=CONFIGS))
    sc = sx.load_scenario(str(path))
    assert sc.space.size > 10**10
    want = {"tp": 8, "cp": 1, "pp": 8, "dp": "auto", "vpp": 1, "mbs": 1, "recompute": "full",
            "placement": "tp-cp-pp-dp", "transport": "ecmp_gbn"}  # a feasible neighbourhood, far beyond 2**31
    digits = [sc.space.option_names(ax).index(want.get(ax, sc.space.option_names(ax)[0])) for ax in sx.AXES]
    start = sc.space.encode(digits) + 777
    r = sweep(sc, top_k=6, chunk_size=1024, progress=False, start=start, max_designs=6000)
    c = _brute(sc, start, 6000)
    assert r.n_designs == 6000 and r.n_feasible == int(c["feasible"].sum()) > 0
    assert [t["index"] for t in r.top] == _brute_top(c, 6, start)
    assert all(t["index"] > 2**33 for t in r.top)
    for name, metric in FRONTS.items():
        assert [p["index"] for p in r.pareto[name]] == _brute_front(c, metric, start)


@pytest.mark.skipif(not os.environ.get("SAX_TEST_MULTIPROCESS"), reason="two extra compiles; SAX_TEST_MULTIPROCESS=1")
def test_two_processes_identical_to_one(small, small_result, cache_dir):
    """jax.distributed over two local CPU processes (one device each): the same result on every process."""
    port = 12000 + os.getpid() % 20000
    procs = [_cli([small, "--top", "12", "--chunk", "512", "--json", "--no-progress", "--coordinator",
                   f"localhost:{port}", "--num-processes", "2", "--process-id", str(i)], env=_env(cache_dir))
             for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        res = json.loads(out[out.index("{"):])  # gloo may print a "[Gloo] Rank ... connected" line first
        assert res["devices"] == 2
        assert _digest(res) == _digest(small_result[0])

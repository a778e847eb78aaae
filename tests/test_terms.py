"""The step as named terms: categorical codes by name, feasibility as a table, params by keyword, the static
topology, traffic counted from the same collectives that are timed, and one engine that compiles a program
once per shape."""
import dataclasses
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from sax_jax.cost.context import context
from sax_jax.cost.feasibility import CHECKS, VIOLATIONS, violation_count
from sax_jax.cost.step import step_time
from sax_jax.cost.terms import BREAKDOWN_KEYS
from sax_jax.engine import Engine
from sax_jax.params import ModelP, Topology, _arrays
from sax_jax.search.genome import INFEASIBLE, PER_VIOLATION, penalized_fitness
from sax_jax.space import (DP_ALGOS, OVERLAP, RECOMPUTE, SCHEDULES, SHARDING, DpAlgo, Overlap, Recompute,
                           Schedule, Sharding)

from conftest import CONFIGS

PKG = os.path.join(os.path.dirname(CONFIGS), "sax_jax")

# 8 GPUs: nodes of 2, buildings of 2 nodes, 2 buildings on a campus. tp 8 spans every level.
TINY_SYSTEM = """
name: tiny-campus
gpu: {configs}/hardware/H100-SXM-80GB.yaml
levels:
  - {{name: node, size: 2, bandwidth_GBps: 450, latency_us: 3}}
  - {{name: building, size: 2, bandwidth_GBps: 50, latency_us: 8}}
  - {{name: campus, size: 2, bandwidth_GBps: 25, latency_us: 200}}
"""
TINY = """
name: tiny
model: {configs}/models/gpt-1.7B.yaml
system: {system}
transports: {configs}/network/transports.yaml
training: {{global_batch_sequences: 16, seq_len: 2048, precision: bf16, sequence_parallel: {sp}}}
space:
  tp: [1, 2, 8]
  pp: [1]
  sharding: [zero0, zero1, fsdp, hsdp]
  recompute: [none, full]
  placement: [tp-cp-dp-pp]
objective: step_time_s
"""


def _scenario(tmp_path, system=TINY_SYSTEM, sp="true", name="tiny.yaml"):
    sys_path = tmp_path / f"sys-{name}"
    sys_path.write_text(system.format(configs=CONFIGS))
    path = tmp_path / name
    path.write_text(TINY.format(configs=CONFIGS, system=sys_path, sp=sp))
    return sx.load_scenario(str(path))


def _one(sc, **values):
    params = sx.build_params(sc)
    d = sc.space.design(values)
    return params, d, jax.tree_util.tree_map(lambda x: np.asarray(x), step_time(params, d))


# ------------------------------------------------------------------------------------------------ codes
def test_option_tuples_come_from_the_enums():
    for enum_cls, labels in ((Schedule, SCHEDULES), (Recompute, RECOMPUTE), (Sharding, SHARDING),
                             (DpAlgo, DP_ALGOS), (Overlap, OVERLAP)):
        assert labels == tuple(m.label for m in enum_cls)
        for m in enum_cls:
            assert labels[m] == m.label and int(m) == labels.index(m.label)


def test_no_integer_literal_compares_a_categorical_axis():
    pattern = re.compile(r"\b(schedule|sched|recompute|sharding|dp_algo|algo|overlap|placement|transport)\s*"
                         r"(==|!=|>=|<=|>|<)\s*\d")
    offenders = []
    for root, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                text = open(os.path.join(root, f)).read()
                offenders += [f"{f}: {m.group(0)}" for m in pattern.finditer(text)]
    assert offenders == []


# ------------------------------------------------------------------------------------------------ params
def test_params_are_built_by_keyword():
    with pytest.raises(TypeError, match="missing"):
        _arrays(ModelP, jnp.float32, layers=1)
    fields = {k: 1.0 for k in ModelP._fields}
    with pytest.raises(TypeError, match="unknown"):
        _arrays(ModelP, jnp.float32, **fields, bogus=2.0)
    assert float(_arrays(ModelP, jnp.float32, **fields).vocab) == 1.0


def test_topology_names_the_levels():
    topo = Topology(("node", "building", "campus", "region"))
    assert topo.building_level == 1 and topo.cross_building == (False, False, True, True)
    assert topo.is_network == (False, True, True, True)
    assert Topology(("node", "campus")).building_level == 0
    assert Topology(("node",)).inside_building == (True,)


def test_node_campus_system_keeps_hsdp_shards_inside_the_node(tmp_path):
    """On a `node, campus` system the building is the node: HSDP shards inside it and replicates across the
    campus, so it holds more state than FSDP (which shards over all 8 GPUs). Level index 1 used to be taken
    for the building, which put the campus inside the HSDP shard group (HSDP == FSDP)."""
    system = """
name: node-campus
gpu: {configs}/hardware/H100-SXM-80GB.yaml
levels:
  - {{name: node, size: 4, bandwidth_GBps: 450, latency_us: 3}}
  - {{name: campus, size: 2, bandwidth_GBps: 25, latency_us: 200}}
"""
    sc = _scenario(tmp_path, system=system, name="nc.yaml")
    params, d, hsdp = _one(sc, tp=1, sharding="hsdp")
    ctx = context(params, d)
    assert np.asarray(ctx.grad_k_building).tolist() == [4.0, 1.0]
    assert np.asarray(ctx.grad_k_across).tolist() == [1.0, 2.0]
    _, _, fsdp = _one(sc, tp=1, sharding="fsdp")
    assert hsdp.memory_bytes > fsdp.memory_bytes
    # optimizer update sharded over the 4 GPUs of a node under hsdp, over 8 under fsdp
    assert float(hsdp.breakdown.optimizer) == pytest.approx(2.0 * float(fsdp.breakdown.optimizer), rel=1e-6)


def test_hsdp_shard_node_keeps_zero3_inside_the_nvlink_domain(tmp_path):
    """training.hsdp_shard node (PyTorch HYBRID_SHARD's shard group, Megatron-FSDP HSDP inside an NVL72 domain):
    on the tiny campus (nodes of 2, 2 nodes a building, 2 buildings) the shard group is the node's 2 GPUs instead of
    the building's 4. Golden state bytes per GPU: weights + grads + optimizer (2 + 4 + 12 B per parameter) over the
    shard group; hsdp_outer optim keeps the 12 B of optimizer state over all 8 dp ranks and updates 1/8 of them."""
    sc = _scenario(tmp_path)
    node = dataclasses.replace(sc, training=dataclasses.replace(sc.training, hsdp_shard="node"))
    optim = dataclasses.replace(node, training=dataclasses.replace(node.training, hsdp_outer="optim"))
    base = {"tp": 1, "cp": 1, "pp": 1, "sharding": "hsdp"}
    (pb, db, building), (pn, dn, inside_node), (po, do, outer) = (_one(s, **base) for s in (sc, node, optim))
    assert np.asarray(context(pb, db).grad_k_building).tolist() == [2.0, 2.0, 1.0]
    assert np.asarray(context(pn, dn).grad_k_building).tolist() == [2.0, 1.0, 1.0]
    assert np.asarray(context(pn, dn).grad_k_across).tolist() == [1.0, 2.0, 2.0]
    n_params = float(context(pb, db).params_dense)
    state = {name: float(_dp_state(p, d)) for name, (p, d) in
             {"building": (pb, db), "node": (pn, dn), "optim": (po, do)}.items()}
    t = pb.train  # 2-byte weights, 4-byte gradients (the default), 12 bytes of Adam state per parameter
    assert (float(t.param_bytes), float(t.grad_bytes), float(t.opt_bytes)) == (2.0, 4.0, 12.0)
    assert state["building"] == pytest.approx(18.0 * n_params / 4, rel=1e-6)
    assert state["node"] == pytest.approx(18.0 * n_params / 2, rel=1e-6)
    assert state["optim"] == pytest.approx(6.0 * n_params / 2 + 12.0 * n_params / 8, rel=1e-6)
    # the optimizer update: a quarter, a half, an eighth of the weights
    opt = [float(c.breakdown.optimizer) for c in (building, inside_node, outer)]
    assert opt[1] == pytest.approx(2.0 * opt[0], rel=1e-6) and opt[2] == pytest.approx(opt[1] / 4.0, rel=1e-6)
    # ZeRO-3's per-microbatch traffic stays inside either shard group; the campus carries the step's gradient
    # all-reduce, which reaches it reduced to a quarter either way: the building's shards (1/4 each) or the node's
    # (1/2) once the building level has halved them (hierarchical accounting), so the cross-building bytes agree
    assert float(inside_node.cross_building_bytes) == pytest.approx(float(building.cross_building_bytes), rel=1e-6)
    assert float(building.cross_building_bytes) > 0.0


def test_hsdp_settings_are_validated(tmp_path):
    path = tmp_path / "bad.yaml"
    sys_path = tmp_path / "sys.yaml"
    sys_path.write_text(TINY_SYSTEM.format(configs=CONFIGS))
    text = TINY.format(configs=CONFIGS, system=sys_path, sp="true")
    for key, value in (("hsdp_shard", "rack"), ("hsdp_outer", "optimizer")):
        path.write_text(text.replace("training: {", f"training: {{{key}: {value}, "))
        with pytest.raises(sx.ConfigError) as e:
            sx.load_scenario(str(path))
        assert "bad.yaml" in str(e.value) and f"training.{key}" in str(e.value) and value in str(e.value)


def _dp_state(params, d):
    from sax_jax.cost.dp import dp_term
    ctx = context(params, d)
    return dp_term(ctx, d, params.train, params.gpu).memory_bytes - _zero3_buffers(ctx, params)


def _zero3_buffers(ctx, params):
    # dp_term's memory adds ZeRO-3's two gathered layers (the one computing, the one prefetched)
    return 2.0 * (ctx.params_dense + ctx.params_expert) / ctx.layers_first * params.train.param_gather_bytes


# ------------------------------------------------------------------------------------------------ feasibility
def test_violation_bits_come_from_the_checks_table():
    assert [name for name, _ in VIOLATIONS] == [c.name for c in CHECKS]
    assert len({c.name for c in CHECKS}) == len(CHECKS)
    mask = jnp.asarray([0, 1, 0b101, (1 << len(CHECKS)) - 1], jnp.int32)
    assert np.asarray(violation_count(mask)).tolist() == [0.0, 1.0, 2.0, float(len(CHECKS))]
    assert sx.violation_reasons(0b101) == [CHECKS[0].message, CHECKS[2].message]


def test_search_penalty_counts_every_violated_check(default_scenario, default_params):
    d = default_scenario.space.design({"tp": 3, "pp": 128, "vpp": 2})  # not a divisor, too deep, no interleave
    cost = sx.evaluate(default_scenario, d, default_params)
    n = bin(int(cost.violation[0])).count("1")
    assert n >= 3
    f = float(penalized_fitness(cost, default_params.gpu.hbm_bytes)[0])
    excess = np.log(max(float(cost.memory_bytes[0]) / float(default_params.gpu.hbm_bytes), 1.0))
    expected = np.log(float(cost.raw_step_time_s[0])) + INFEASIBLE + PER_VIOLATION * n + excess
    assert f == pytest.approx(expected, rel=1e-5)


# ------------------------------------------------------------------------------------------------ terms
def test_breakdown_keys_are_the_term_names_and_sum_to_the_step(tmp_path):
    sc = _scenario(tmp_path)
    _, _, c = _one(sc, tp=2, sharding="fsdp")
    assert BREAKDOWN_KEYS == c.breakdown._fields
    total = sum(float(getattr(c.breakdown, k)) for k in BREAKDOWN_KEYS)
    assert total == pytest.approx(float(c.step_time_s), rel=1e-5)


@pytest.mark.parametrize("sp", ["true", "false"])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_tp_traffic_counts_the_collectives_it_times(tmp_path, sp, recompute):
    """tp = 8 over the whole tiny campus, zero0, pp = 1: every cross-building byte is TP's or DP's (dp = 1:
    none). Per layer and microbatch: 2 all-reduces forward, 2 backward, 1 more with sequence parallelism (the
    backward's re-gather of the scattered input), 2 more under full recompute; an all-reduce moves
    2 (k-1)/k S / (members inside) bytes per GPU over the campus level (k = 2 there, 4 members inside)."""
    sc = _scenario(tmp_path, sp=sp, name=f"tp-{sp}-{recompute}.yaml")
    params, d, c = _one(sc, tp=8, sharding="zero0", recompute=recompute)
    seq, hidden, layers, gbs = 2048, 2304, 24, 16
    act = 1 * seq * hidden * 2.0  # mbs 1, 16-bit
    per_allreduce = 2.0 * (2 - 1) / 2 * act / 4.0
    allreduces = 4 + (1 if sp == "true" else 0) + (2 if recompute == "full" else 0)
    expected = gbs * layers * allreduces * per_allreduce * 8
    assert float(c.cross_building_bytes) == pytest.approx(expected, rel=1e-6)


def test_dp_traffic_by_sharding(tmp_path):
    """tp = 1, dp = 8 across the campus: zero0 all-reduces the gradients (fp32 reduce: 4 B/param), zero1
    reduce-scatters them and all-gathers 16-bit weights (half an all-reduce each), fsdp does that per
    microbatch with two gathers (forward and backward), hsdp all-reduces 1/4 of the gradients across."""
    sc = _scenario(tmp_path, name="dp.yaml")
    out = {s: _one(sc, tp=1, sharding=s) for s in ("zero0", "zero1", "fsdp", "hsdp")}
    params, d, _ = out["zero0"]
    ctx = context(params, d)
    n_params = float(ctx.params_dense + ctx.params_expert)
    micro = float(ctx.microbatches)
    assert micro == 2.0
    # campus level: k = 2 participants, 4 members inside each building
    ar = lambda size: 2.0 * (2 - 1) / 2 * size / 4.0 * 8  # noqa: E731 (whole job)
    grad, weights = 4.0 * n_params, 2.0 * n_params
    xb = {s: float(c.cross_building_bytes) for s, (_, _, c) in out.items()}
    assert xb["zero0"] == pytest.approx(ar(grad), rel=1e-6)
    assert xb["zero1"] == pytest.approx(0.5 * (ar(grad) + ar(weights)), rel=1e-6)
    assert xb["fsdp"] == pytest.approx(micro * 0.5 * (2.0 * ar(weights) + ar(grad)), rel=1e-6)
    # hsdp: shards over the 4 GPUs of a building, all-reduces the shard across: k = 2, nothing inside
    assert xb["hsdp"] == pytest.approx(2.0 * (2 - 1) / 2 * grad / 4.0 * 8, rel=1e-6)


def test_cross_building_traffic_is_the_sum_of_the_terms(default_scenario, default_params):
    from sax_jax.cost.compute import compute_term
    from sax_jax.cost.context_parallel import cp_term
    from sax_jax.cost.dp import dp_term
    from sax_jax.cost.moe import ep_term
    from sax_jax.cost.tensor_parallel import tp_term
    p = default_params
    for base in ("production", "dp-across"):
        d = default_scenario.baseline_design(base)
        ctx = context(p, d)
        c = step_time(p, d)
        stage = [compute_term(ctx, d, p.model), tp_term(ctx, d, p.train, p.gpu, p.model)[0],
                 cp_term(ctx, d, p.model, p.train, p.gpu)[0], ep_term(ctx, d, p.model, p.train, p.gpu)[0],
                 dp_term(ctx, d, p.train, p.gpu)]
        without_pp = sum(float(t.cross_bytes) for t in stage)
        assert float(c.cross_building_bytes) >= without_pp
        assert float(c.cross_building_bytes) > 0


# ------------------------------------------------------------------------------------------------ engine
def test_a_bandwidth_study_compiles_the_sweep_once(tmp_path):
    engine = Engine()
    times, prints = [], set()
    for bw in (25, 12.5, 50):
        path = tmp_path / f"sys-bw-{bw}.yaml"
        path.write_text(TINY_SYSTEM.replace("bandwidth_GBps: 25", f"bandwidth_GBps: {bw}").format(configs=CONFIGS))
        scen = tmp_path / f"bw-{bw}.yaml"
        scen.write_text(TINY.format(configs=CONFIGS, system=path, sp="true"))
        s = sx.load_scenario(str(scen))
        prints.add(s.fingerprint)
        res = sx.sweep(s, top_k=3, progress=False, engine=engine)
        times.append(res.top[0]["step_time_s"])
        del s
    assert len(prints) == 3  # three different scenarios...
    assert engine.compiles == 1 and engine.n_programs == 1  # ...one compiled program
    # every design of this space crosses the campus (tp 8, or dp 4 or 8): halving its bandwidth costs time;
    # doubling it helps at most as far as the building level (then the bottleneck of the ring) allows
    assert times[1] > times[0] >= times[2]


def test_engine_caches_are_bounded():
    engine = Engine(max_programs=2)
    for i in range(5):
        assert engine.program(("k", i), lambda i=i: i) == i
    assert engine.n_programs == 2 and engine.compiles == 5
    assert engine.program(("k", 4), lambda: -1) == 4 and engine.compiles == 5
    with pytest.raises(ValueError):
        Engine(max_programs=0)


def test_nccl_launch_latency_per_call(default_scenario, default_params):
    """With free bandwidth and zero hop latency a TP group still pays NCCL's fixed 8.4 us per collective call
    (tuning model baseLat, ring/Simple): per layer and microbatch, under sequence parallelism, 2 x (AG + RS) in the
    forward, 2 x (AG + RS) + 2 re-gathers in the backward; the production baseline does no recompute."""
    from sax_jax.cost.collectives import NCCL_BASE_LATENCY_S, launch_s
    assert float(launch_s(jnp.asarray([1.0, 1.0]), 3.0)) == 0.0
    assert float(launch_s(jnp.asarray([8.0, 1.0]), 3.0)) == pytest.approx(3 * 8.4e-6)
    p = default_params
    free = p._replace(net=p.net._replace(bw_Bps=p.net.bw_Bps * 1e9, latency_s=p.net.latency_s * 0.0))
    d = default_scenario.baseline_design("production", {"overlap": "dp", "recompute": "none"})
    assert float(p.train.seq_parallel) == 1.0
    ctx = context(free, d)
    c = step_time(free, d)
    calls = 2 * 2 + (2 * 2 + 2)
    expected = float(ctx.microbatches) * float(ctx.layers_stage) * calls * NCCL_BASE_LATENCY_S
    assert float(c.breakdown.tp) == pytest.approx(expected, rel=1e-3)

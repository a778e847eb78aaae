"""Streaming exhaustive sweep: every design of a scenario's space, on every device, resumable.

The flat index range [0, end) is cut into blocks of ``devices x rows x inner_n`` designs. One jitted SPMD
program (``shard_map`` over a 1-D mesh of all devices, across hosts under ``jax.distributed``) takes the running
state and the block's start digits; device j grid-evaluates rows [j*rows, (j+1)*rows) of the block
(``grid.grid_costs``: decode on device, no host-side design arrays), and every device folds the block into the
same running top-k and Pareto fronts (all-gathered candidates, order-independent merges). Host memory is
constant in the space size: the host only keeps the cursor (a Python int, so 10**10 and beyond work).

The host loop keeps one block in flight while it waits for the previous one, reports progress, and every
``checkpoint_every_s`` writes the last finished state; ``resume=True`` continues from it and gives exactly the
result of an uninterrupted run (top-k ties and front duplicates are broken by index, never by arrival order).
"""
from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..cost.terms import REPORT_FIELDS
from ..engine import DEFAULT_ENGINE, shape_key
from ..evaluate import cost_to_dict, evaluate
from ..space import AXES
from . import checkpoint as ckpt
from . import pareto, topk
from .pareto import FRONT_SIZE
from .grid import IDX_BITS, MAX_BLOCK, choose_layout, global_index, grid_costs, join_index, positions, split_index
from . import fold
from .progress import SweepProgress

FRONTS = {"time_vs_memory": "memory_bytes", "time_vs_cross_building": "cross_building_bytes"}
# with infrastructure prices (co-design, cost/provision.py): step time vs what the GPUs and the network cost per hour
COST_FRONTS = {"time_vs_cost": "cost_usd_per_hour"}


def fronts_of(scenario) -> dict:
    """The Pareto fronts a sweep of ``scenario`` keeps: FRONTS, and COST_FRONTS when it has prices."""
    return {**FRONTS, **(COST_FRONTS if getattr(scenario, "prices", None) is not None else {})}
GROUP_MIN = 8  # designs per group of the block's two-level selections (top-k, front candidates)
CPU_CHUNK = 1 << 20  # designs per device per block
ACCEL_CHUNK = 1 << 23
_shard_map = getattr(jax, "shard_map", None)
if _shard_map is None:  # older JAX
    from jax.experimental.shard_map import shard_map as _shard_map



class State(NamedTuple):
    top: topk.TopK
    fronts: tuple  # of pareto.Front, in FRONTS order
    feas_hi: jnp.ndarray  # feasible count = hi * 2**30 + lo
    feas_lo: jnp.ndarray


@dataclasses.dataclass
class SweepResult:
    scenario: str
    objective: str
    space_size: int
    n_designs: int  # designs covered by the result (incl. those of a resumed checkpoint)
    n_feasible: int
    seconds: float  # wall time of this run (compile included)
    compile_s: float
    designs_per_s: float  # designs this run / (seconds - compile_s)
    top: list
    pareto: dict
    complete: bool  # the whole requested range was swept
    truncated: dict  # front name -> True when the front held more than FRONT_SIZE points
    devices: int
    device_kind: str
    chunk_designs: int  # designs per block (all devices)
    distinct: bool = False  # the top-k holds distinct objective values

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


MINIMIZED = ("step_time_s", "time_to_target_s", "train_cost_usd")  # the other objectives: larger is better


def _objective_key(cost, objective: str):
    if objective in MINIMIZED:
        return getattr(cost, objective)
    return -getattr(cost, objective)  # tokens_per_s, mfu, goodput/effective tokens per s: larger is better


def _resolve_devices(devices):
    if devices is None:
        return list(jax.devices())
    if isinstance(devices, int):
        avail = jax.devices()
        if not 1 <= devices <= len(avail):
            raise ValueError(f"--devices {devices}: this process sees {len(avail)} device(s)")
        return list(avail[:devices])
    return list(devices)


def _default_chunk(devs) -> int:
    return CPU_CHUNK if devs[0].platform == "cpu" else ACCEL_CHUNK


def _build_step(space, objective: str, layout, rows: int, mesh, distinct: bool = False, fronts=None):
    """jit(shard_map(block -> new state)); arguments: state (stacked per device), scalars, params.

    Per device: grid-evaluate its rows into the negated objective and step time and the front metrics (the
    only outputs of the grid: the full Cost is never written), count the feasible designs, and fold the block
    into the running state (``fold.fold_block``), skipped when no device has a feasible design in it.
    """
    n_axes, radices = len(AXES), space.radices
    n_loc = rows * layout.inner_n
    metrics = tuple((fronts or FRONTS).values())
    group = 1  # consecutive designs per selection group: the last inner axes, at least GROUP_MIN designs
    for i in reversed(layout.inner_axes):
        if group >= GROUP_MIN:
            break
        group *= radices[i]

    def body(state, scal, params):
        state = jax.tree_util.tree_map(lambda x: x[0], state)
        base, start_hi, start_lo, first, limit = (scal[:n_axes], scal[n_axes], scal[n_axes + 1],
                                                  scal[n_axes + 2], scal[n_axes + 3])
        dev_off = jax.lax.axis_index("d").astype(jnp.int32) * n_loc

        # jnp's own jitted helpers (where, clip, ...) would each be re-batched at every one of the ~12 nested
        # vmap levels; inlined, tracing takes 3.7 s instead of 5.9 s. Same primitives, same numbers.
        with jax.disable_jit():
            cost = grid_costs(params, space, layout, base, dev_off // layout.inner_n, rows)
        pos = dev_off + positions(layout, radices, rows)
        ok = (pos >= first) & (pos < limit) & cost.feasible
        neg_t = -topk.clean_key(cost.step_time_s, ok)
        # a second grid output would be a second fusion that evaluates the whole model again
        neg_key = (neg_t if objective == "step_time_s"
                   else -topk.clean_key(_objective_key(cost, objective), ok))
        ys = [jnp.where(ok, getattr(cost, m), jnp.inf) for m in metrics]
        n_ok = jax.lax.psum(jnp.sum(ok, dtype=jnp.int32), "d")

        def fold_in(top, fronts, neg_key, neg_t, ys):
            return fold.fold_block(
                top, fronts, neg_key, neg_t, ys,
                index_of=lambda ids: global_index(start_hi, start_lo, dev_off + ids.astype(jnp.int32)),
                gather=lambda x: jax.lax.all_gather(x, "d", tiled=True),
                anywhere=lambda c: jax.lax.pmax(c.astype(jnp.int32), "d") > 0, group=group, distinct=distinct)

        top, fronts = jax.lax.cond(n_ok > 0, fold_in, lambda top, fronts, *_: (top, fronts),
                                   state.top, state.fronts, neg_key, neg_t, ys)
        feas_lo = state.feas_lo + n_ok
        new = State(top, fronts, state.feas_hi + (feas_lo >> IDX_BITS), feas_lo & ((1 << IDX_BITS) - 1))
        return jax.tree_util.tree_map(lambda x: x[None], new)

    return jax.jit(_shard_map(body, mesh=mesh, in_specs=(PartitionSpec("d"), PartitionSpec(), PartitionSpec()), out_specs=PartitionSpec("d")))


def _global(arr, sharding):
    arr = np.asarray(arr)
    return jax.make_array_from_callback(arr.shape, sharding, lambda idx: arr[idx])


def _init_state(k: int, fronts=None) -> State:
    return State(topk.init(k), tuple(pareto.init(FRONT_SIZE) for _ in (fronts or FRONTS)), np.int32(0), np.int32(0))


def _to_host(state) -> State:
    """Device 0's copy of the (identical on every device) state, as numpy."""
    return jax.tree_util.tree_map(lambda x: np.asarray(x.addressable_shards[0].data)[0], state)


def _flatten(state: State) -> dict:
    leaves = jax.tree_util.tree_leaves(state)
    return {f"a{i}": np.asarray(x) for i, x in enumerate(leaves)}


def _unflatten(arrays: dict, k: int, fronts=None) -> State:
    treedef = jax.tree_util.tree_structure(_init_state(k, fronts))
    return jax.tree_util.tree_unflatten(treedef, [arrays[f"a{i}"] for i in range(len(arrays))])


def _records(scenario, indices: list, params) -> list:
    """Host records of designs by flat index, each evaluated alone (batch of one, exactly what ``sax eval`` and
    ``evaluate_one`` compute: XLA may round a batch-of-one program differently in the last bit). All are
    dispatched before any is fetched, and a design listed twice (top-k and fronts) is evaluated once."""
    space = scenario.space
    designs = {int(i): space.decode_digits(np.asarray(space.digits_of(int(i)), np.int32)) for i in indices}
    costs = jax.device_get({i: evaluate(scenario, d, params) for i, d in designs.items()})
    out = []
    for idx in indices:
        c = cost_to_dict(costs[int(idx)], 0)
        rec = {"index": int(idx), "design": space.to_dict(designs[int(idx)])}
        rec.update({k: c[k] for k in REPORT_FIELDS})
        out.append(rec)
    return out


def _result_lists(scenario, host: State, params):
    fronts_named = fronts_of(scenario)
    top_idx = [join_index(h, l) for kk, h, l in zip(host.top.key, host.top.hi, host.top.lo) if np.isfinite(kk)]
    front_idx = {name: [join_index(h, l) for t, h, l in zip(fr.t, fr.hi, fr.lo) if np.isfinite(t)]
                 for name, fr in zip(fronts_named, host.fronts)}
    everything = top_idx + [i for idx in front_idx.values() for i in idx]
    by_index = {r["index"]: r for r in _records(scenario, everything, params)}
    copy = lambda i: {**by_index[i], "design": dict(by_index[i]["design"])}  # noqa: E731 (lists never alias)
    top = [copy(i) for i in top_idx]
    fronts = {name: [copy(i) for i in idx] for name, idx in front_idx.items()}
    truncated = {name: bool(fr.truncated) for name, fr in zip(fronts_named, host.fronts)}
    return top, fronts, truncated


def sweep(scenario, top_k=10, chunk_size=None, out_dir=None, resume=False, devices=None, progress=True,
          max_designs=None, *, checkpoint_every_s: float = 5.0, start: int = 0,
          distinct: bool = False, engine=None) -> SweepResult:
    """Evaluate every design of ``scenario.space`` (or the first ``max_designs``) and keep the best.

    top_k: designs kept by the scenario's objective; chunk_size: designs per device per block (rounded to whole
    grid rows; default 2**20 on CPU, 2**23 on accelerators); out_dir: checkpoint there every
    ``checkpoint_every_s`` seconds and on Ctrl-C; resume: continue from out_dir's checkpoint (refused if the
    scenario changed); devices: None (all), a count, or a list of jax devices; start: first index swept (the
    range is [start, start + max_designs), e.g. to split a space by hand); the result covers only that range;
    distinct: the top-k lists the k best distinct objective values, each by its lowest-index design (designs
    that tie with a listed one, e.g. differing only in a knob the model ignores at that point, are left out);
    engine: the ``engine.Engine`` whose compiled programs and params this sweep uses (default: the process's);
    a sweep of a scenario that differs from an earlier one only in parameter values reuses its program.
    """
    engine = DEFAULT_ENGINE if engine is None else engine
    t_start = time.perf_counter()
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    space = scenario.space
    start = int(start)
    if not 0 <= start < space.size:
        raise ValueError(f"start {start} outside the space [0, {space.size})")
    end = space.size if max_designs is None else min(start + int(max_designs), space.size)
    if end <= start:
        raise ValueError(f"max_designs must be >= 1, got {max_designs}")
    devs = _resolve_devices(devices)
    n_dev = len(devs)
    chunk = int(chunk_size or _default_chunk(devs))
    layout = choose_layout(space.radices, max(1, min(chunk, MAX_BLOCK // n_dev)))
    total_rows = -(-(end - start) // layout.inner_n) + 1
    rows = max(1, min(chunk // layout.inner_n, -(-total_rows // n_dev), MAX_BLOCK // (n_dev * layout.inner_n)))
    block = n_dev * rows * layout.inner_n
    mesh = Mesh(np.array(devs), ("d",))
    rep, per_dev = NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("d"))
    is_main = jax.process_index() == 0
    meta_expected = {"fingerprint": scenario.fingerprint, "space_size": str(space.size), "top_k": int(top_k),
                     "distinct": bool(distinct),
                     "front_size": FRONT_SIZE, "objective": scenario.objective, "start": str(start)}

    fronts = fronts_of(scenario)
    cursor, host_state, prev_seconds = start, _init_state(top_k, fronts), 0.0
    if resume:
        if not out_dir:
            raise ValueError("resume needs out_dir (the --out of the interrupted sweep)")
        meta, arrays = ckpt.load(out_dir)
        ckpt.check_compatible(meta, meta_expected, ckpt.path(out_dir))
        cursor, host_state = min(int(meta["cursor"]), end), _unflatten(arrays, top_k, fronts)
        prev_seconds = float(meta.get("seconds", 0.0))

    params_host = engine.params(scenario)
    params = jax.tree_util.tree_map(lambda x: _global(x, rep), params_host)
    state = jax.tree_util.tree_map(lambda x: _global(np.stack([np.asarray(x)] * n_dev), per_dev), host_state)

    def scalars(start):
        aligned = start - start % layout.inner_n
        hi, lo = split_index(aligned)
        row = space.digits_of(aligned) + [hi, lo, start - aligned, min(block, end - aligned)]
        return _global(np.asarray(row, np.int32), rep)

    t_c = time.perf_counter()
    # the program depends on the options (constants of the grid), shapes and the reduction, not on params' values
    cache_key = ("sweep", space, scenario.objective, layout, rows, top_k, distinct, fold.CANDIDATES, tuple(fronts),
                 tuple(d.id for d in devs), jax.process_count(), shape_key(params_host))
    compiled = engine.program(cache_key, lambda: _build_step(space, scenario.objective, layout, rows, mesh, distinct, fronts)
                              .lower(state, scalars(min(cursor, end - 1)), params).compile())
    compile_s = time.perf_counter() - t_c

    def save(st, cur, elapsed):
        if out_dir and is_main:
            meta = dict(meta_expected, cursor=str(cur), end=str(end), seconds=elapsed, scenario=scenario.path)
            ckpt.save(out_dir, meta, _flatten(_to_host(st)))

    bar = SweepProgress(end, scenario.objective, enabled=bool(progress) and is_main, done=cursor)
    start_cursor, done_cursor, done_state = cursor, cursor, state
    pending = []  # [(state, cursor after it)], at most two in flight
    t_loop = time.perf_counter()
    last_ck = last_bar = t_loop
    try:
        while cursor < end or pending:
            if cursor < end:
                aligned = cursor - cursor % layout.inner_n
                nxt = min(aligned + block, end)
                state = compiled(state, scalars(cursor), params)
                pending.append((state, nxt))
                cursor = nxt
            if len(pending) > 1 or cursor >= end:
                done_state, done_cursor = pending.pop(0)
                jax.block_until_ready(done_state.feas_lo)
            now = time.perf_counter()
            if now - last_bar > 0.25 and bar.enabled:
                h = _to_host(done_state)
                n_f = (int(h.feas_hi) << IDX_BITS) | int(h.feas_lo)
                bar.update(done_cursor, (done_cursor - start_cursor) / max(now - t_loop, 1e-9), n_f, done_cursor,
                           float(h.top.key[0]))
                last_bar = now
            if out_dir and now - last_ck > checkpoint_every_s:
                save(done_state, done_cursor, prev_seconds + now - t_start)
                last_ck = now
    except KeyboardInterrupt:
        for st, cur in pending:  # already dispatched: let them finish, keep the latest
            jax.block_until_ready(st.feas_lo)
            done_state, done_cursor = st, cur
        save(done_state, done_cursor, prev_seconds + time.perf_counter() - t_start)
        bar.close()
        raise
    seconds = time.perf_counter() - t_start
    host = _to_host(done_state)
    bar.update(done_cursor, (done_cursor - start_cursor) / max(time.perf_counter() - t_loop, 1e-9),
               (int(host.feas_hi) << IDX_BITS) | int(host.feas_lo), done_cursor, float(host.top.key[0]))
    bar.close()
    save(done_state, done_cursor, prev_seconds + seconds)
    top, fronts, truncated = _result_lists(scenario, host, params_host)
    swept = done_cursor - start_cursor
    return SweepResult(
        scenario=scenario.name, objective=scenario.objective, space_size=space.size, n_designs=done_cursor - start,
        n_feasible=(int(host.feas_hi) << IDX_BITS) | int(host.feas_lo), seconds=seconds, compile_s=compile_s,
        designs_per_s=swept / max(seconds - compile_s, 1e-9), top=top, pareto=fronts,
        complete=done_cursor >= end, truncated=truncated, devices=n_dev, device_kind=devs[0].device_kind,
        chunk_designs=block, distinct=bool(distinct))

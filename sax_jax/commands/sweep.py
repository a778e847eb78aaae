"""`sax sweep SCENARIO [--top K] [--out DIR] [--resume] [--devices N] [--json] [--robust [--samples N]
[--robust-top K] [--seed S]]`: exhaustive streaming sweep; --robust re-ranks its best designs under sampled
system numbers (sax_jax.robust)."""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import signal
import sys

from rich.console import Console
from rich.table import Table

from . import output_console, print_json, whole_number
from .. import robust, uncertainty
from ..config import OBJECTIVES, load_scenario
from ..engine import DEFAULT_ENGINE
from ..search.baselines import baseline_costs, speedups
from ..report import fmt_time, json_safe
from ..search.checkpoint import ResumeError
from ..codesign import XB_AXES, check_percent, check_prices, cheapest_network
from ..space import AXES
from ..specs import ConfigError
from ..trust import feasible_mfu, print_warnings, warnings_for

OBJECTIVE_ALIASES = {"goodput": "goodput_tokens_per_s", "step_time": "step_time_s", "throughput": "tokens_per_s"}

# JAX's persistent compilation cache: a repeated sweep of the same shapes skips the ~10 s compile. Off with
# --no-compile-cache or SAX_COMPILE_CACHE=0; elsewhere with JAX_COMPILATION_CACHE_DIR or SAX_COMPILE_CACHE_DIR.
CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "sax_jax", "xla")
MAX_TOP = 10_000
MAX_SAMPLES = 100_000
MAX_ROBUST_TOP = 10_000
MAX_SEED = 2**32 - 1  # jax.random.PRNGKey takes a 32-bit seed
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def setup_compile_cache(jax, enabled: bool = True) -> str | None:
    """Turn on JAX's persistent compilation cache (unless disabled or already configured); its directory."""
    if not enabled or os.environ.get("SAX_COMPILE_CACHE", "1").strip().lower() in ("0", "off", "no", "false"):
        return None
    configured = os.environ.get("JAX_COMPILATION_CACHE_DIR") or getattr(jax.config, "jax_compilation_cache_dir",
                                                                         None)
    if configured:
        return configured
    cache = os.environ.get("SAX_COMPILE_CACHE_DIR") or CACHE_DIR
    jax.config.update("jax_compilation_cache_dir", cache)
    return cache

COLUMNS = ("index", "step_time_s", "tokens_per_s", "mfu", "memory_bytes", "cross_building_bytes",
           "goodput_tokens_per_s", "ettr")


def _row(rec: dict) -> dict:
    out = {k: rec[k] for k in COLUMNS}
    out.update(rec["design"])
    return out


def write_outputs(result, out_dir: str, warnings=None, bands=None) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "result.json"), "w") as fh:
        json.dump(json_safe({**summary(result, warnings), **(bands or {})}), fh, indent=2, allow_nan=False,
                  default=str)
    for name, recs in list(result.pareto.items()) + [("top", result.top)]:
        stem = name if name == "top" else f"pareto_{name}"
        with open(os.path.join(out_dir, stem + ".json"), "w") as fh:
            json.dump(json_safe(recs), fh, indent=2, allow_nan=False, default=str)
        rows = [_row(r) for r in recs]
        with open(os.path.join(out_dir, stem + ".csv"), "w", newline="") as fh:
            fields = list(rows[0]) if rows else list(COLUMNS)
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)


def summary(result, warnings=None) -> dict:
    return json_safe({"scenario": result.scenario, "objective": result.objective, "space_size": result.space_size,
            "n_designs": result.n_designs, "n_feasible": result.n_feasible, "seconds": result.seconds,
            "compile_s": result.compile_s, "designs_per_s": result.designs_per_s, "complete": result.complete,
            "distinct": result.distinct,
            "devices": result.devices, "device_kind": result.device_kind, "top": result.top,
            "pareto": result.pareto, "pareto_truncated": result.truncated,
            "warnings": list(warnings or [])})


def varied_axes(space) -> list:
    return [ax for ax, r in zip(AXES, space.radices) if r > 1] if space is not None else list(AXES)


def sweep_bands(scenario, result, speedup_vs: dict) -> dict:
    """{"band", "speedups", "near_optimal"} from the validation residuals (sax_jax.uncertainty); {} without a
    feasible design or without the bands file."""
    b = uncertainty.bands()
    if b is None or not result.top:
        return {}
    return uncertainty.for_sweep(b, scenario, result.top, speedup_vs, varied_axes(scenario.space))


def print_bands(bands: dict, console: Console) -> None:
    band, near = bands["band"], bands["near_optimal"]
    lo, hi = band["measured_s"]
    console.print(f"best step time {fmt_time(band['step_time_s'])}: {100 * band['level']:.0f}% band "
                  f"[{fmt_time(lo)}, {fmt_time(hi)}] (validation residuals of {band['n_runs']} runs: "
                  f"{band['group']})", soft_wrap=True)
    more = " (all listed: a larger --top may find more)" if near["top_k_limited"] else ""
    console.print(f"near-optimal: {near['n']} of the top {near['n_listed']} tie with the best (within "
                  f"{100 * near['within']:.1f}%){more}", soft_wrap=True)
    if near["shared"]:
        console.print("  every near-optimal design keeps " + ", ".join(f"{ax}={v}" for ax, v in near["shared"].items()),
                      soft_wrap=True)
    if near["free"]:
        console.print("  decisions that do not matter there: " + ", ".join(near["free"]), soft_wrap=True)


def print_result(result, console: Console, space=None) -> None:
    rate = (f"{result.designs_per_s:,.0f} designs/s" if result.designs_per_s > 0
            else "nothing left to evaluate (resumed a finished sweep)")
    console.print(f"[bold]{result.scenario}[/bold]: {result.n_designs:,} designs ({result.n_feasible:,} feasible) in "
                  f"{result.seconds:.2f} s (compile {result.compile_s:.1f} s), {rate} "
                  f"on {result.devices} x {result.device_kind}")
    varied = varied_axes(space)
    designs = [r["design"] for r in result.top]
    # settings every listed design shares are printed once; the table keeps the ones that tell them apart
    shared = [ax for ax in varied if designs and all(d[ax] == designs[0][ax] for d in designs)]
    differ = [ax for ax in varied if ax not in shared]
    kind = "distinct values of " if result.distinct else ""
    tab = Table(title=f"top {len(result.top)} by {kind}{result.objective}")
    good = result.objective == "goodput_tokens_per_s"
    numeric = ("#", "step time", "tokens/s", "MFU", "mem/GPU GiB", "x-bldg TB") + (("goodput", "ETTR") if good else ())
    # enough decimals that different step times never print alike (twins differing in the 4th digit are common)
    times = [r["step_time_s"] for r in result.top]
    digits = 3
    while digits < 6 and len({f"{t:.{digits}f}" for t in times}) < len(set(times)):
        digits += 1
    show = lambda t: f"{t:.{digits}f} s" if 1 <= t < float("inf") else fmt_time(t)  # noqa: E731
    rows = [(str(i + 1), show(r["step_time_s"]), f"{r['tokens_per_s']:,.0f}", f"{100 * r['mfu']:.1f}%",
             f"{r['memory_bytes'] / 2**30:.1f}", f"{r['cross_building_bytes'] / 1e12:.3f}",
             *((f"{r['goodput_tokens_per_s']:,.0f}", f"{100 * r['ettr']:.1f}%") if good else ()),
             *[str(r["design"][ax]) for ax in differ]) for i, r in enumerate(result.top)]
    # numbers are never cut ("164,41..."): on a narrow terminal the design columns fold onto more lines instead
    for j, col in enumerate(numeric):
        tab.add_column(col, justify="right", no_wrap=True, min_width=max([len(row[j]) for row in rows], default=1))
    for ax in differ:
        tab.add_column(ax, justify="left", overflow="fold")
    for row in rows:
        tab.add_row(*row)
    if shared:
        console.print("all listed designs: " + ", ".join(f"{ax}={designs[0][ax]}" for ax in shared))
    console.print(tab)
    for name, recs in result.pareto.items():
        trunc = " (truncated)" if result.truncated.get(name) else ""
        console.print(f"Pareto front {name}: {len(recs)} points{trunc}")


def print_robust(ranking: dict, console: Console, space, rows: int) -> None:
    """The robust ranking (its first ``rows`` by mean), its best vs the nominal best and vs the baselines."""
    cands = ranking["candidates"]
    if not cands:
        console.print("robust: no feasible design to re-rank")
        return
    by_mean = sorted(cands, key=lambda c: c["mean_rank"])[:rows]
    differ = [ax for ax in varied_axes(space) if len({str(c["design"][ax]) for c in by_mean}) > 1]
    tab = Table(title=f"robust: top {len(by_mean)} of {len(cands)} by mean step time over {ranking['samples']} "
                      f"sampled systems (seed {ranking['seed']})")
    for col in ("#", "nominal #", "change", "nominal", "mean", "p90", "p90 #"):
        tab.add_column(col, justify="right")
    for ax in differ:
        tab.add_column(ax, justify="left")
    for c in by_mean:
        change = c["nominal_rank"] - c["mean_rank"]
        tab.add_row(str(c["mean_rank"]), str(c["nominal_rank"]), f"{change:+d}" if change else "=",
                    fmt_time(c["nominal_s"]), fmt_time(c["mean_s"]), fmt_time(c["p90_s"]), str(c["p90_rank"]),
                    *[str(c["design"][ax]) for ax in differ])
    console.print(tab)
    nominal = cands[0]
    for stat, best in (("mean", ranking["best_mean"]), ("p90", ranking["best_p90"])):
        key = f"{stat}_s"
        gain = nominal[key] / best[key] if best[key] > 0 else float("nan")
        same = "the nominal best itself" if best is nominal else f"nominal #{best['nominal_rank']}"
        console.print(f"robust best by {stat}: {same}, {stat} {fmt_time(best[key])} vs the nominal best's "
                      f"{fmt_time(nominal[key])} ({gain:.3f}x)", soft_wrap=True)
    for name, b in ranking["baselines"].items():
        if not math.isfinite(b["mean_s"]):  # infeasible: no speedup to state
            console.print(f"robust best vs baseline {name}: the baseline is infeasible")
            continue
        ratios = [b[f"{s}_s"] / ranking[f"best_{s}"][f"{s}_s"] for s in ("mean", "p90")]
        console.print(f"robust best vs baseline {name} (mean {fmt_time(b['mean_s'])}, p90 {fmt_time(b['p90_s'])}): "
                      f"{ratios[0]:.2f}x faster in mean, {ratios[1]:.2f}x in p90", soft_wrap=True)


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def check_args(args, n_devices: int | None = None) -> None:
    """Every flag checked before anything is read or compiled: a bad flag costs nothing."""
    if not 1 <= args.top <= MAX_TOP:
        raise ConfigError(None, "--top", args.top, f"must be a whole number in [1, {MAX_TOP:,}]",
                          "the number of best designs to keep")
    if args.resume and not args.out:
        raise ConfigError(None, "--resume", True, "needs --out DIR (the directory of the interrupted sweep)")
    if args.out is not None:
        if args.out.strip() == "":
            raise ConfigError(None, "--out", args.out, "is empty", "give a directory for results and checkpoints")
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise ConfigError(None, "--out", args.out, "exists and is not a directory",
                              "--out names a directory for result.json, top.csv, ... and the checkpoint")
        parent = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(args.out) and os.path.exists(parent) and not os.access(parent, os.W_OK):
            raise ConfigError(None, "--out", args.out, f"cannot create it: {parent} is not writable")
    if args.plot is not None:
        parent = os.path.dirname(os.path.abspath(args.plot))
        if not args.plot.lower().endswith(PLOT_SUFFIXES):
            raise ConfigError(None, "--plot", args.plot, "unknown image type",
                              f"end the name in one of {', '.join(PLOT_SUFFIXES)}")
        if os.path.isdir(args.plot):
            raise ConfigError(None, "--plot", args.plot, "is a directory", "give a file name, e.g. fronts.png")
        if not os.path.isdir(parent):
            raise ConfigError(None, "--plot", args.plot, f"directory {parent} does not exist",
                              "create it first or write the plot elsewhere")
        if not os.access(parent, os.W_OK):
            raise ConfigError(None, "--plot", args.plot, f"directory {parent} is not writable")
    if not (math.isfinite(args.checkpoint_every) and 0 <= args.checkpoint_every <= 86_400):
        raise ConfigError(None, "--checkpoint-every", args.checkpoint_every, "must be seconds in [0, 86400]",
                          "0 checkpoints after every block")
    if (args.num_processes is not None or args.process_id is not None) and not args.coordinator:
        raise ConfigError(None, "--num-processes/--process-id", (args.num_processes, args.process_id),
                          "only with --coordinator HOST:PORT", "or use --distributed on a cluster")
    if args.coordinator:
        if args.num_processes is None or args.process_id is None:
            raise ConfigError(None, "--coordinator", args.coordinator, "needs --num-processes and --process-id")
        if args.num_processes < 1:
            raise ConfigError(None, "--num-processes", args.num_processes, "must be >= 1")
        if not 0 <= args.process_id < args.num_processes:
            raise ConfigError(None, "--process-id", args.process_id,
                              f"must be in [0, {args.num_processes - 1}] (--num-processes {args.num_processes})")
        host, _, port = args.coordinator.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(None, "--coordinator", args.coordinator, "must be HOST:PORT", "e.g. node0:1234")
    if args.cheapest is not None:
        check_percent(args.cheapest)
    if args.objective is not None and args.objective not in OBJECTIVES + tuple(OBJECTIVE_ALIASES):
        raise ConfigError(None, "--objective", args.objective, "unknown objective",
                          f"one of {', '.join(OBJECTIVES + tuple(OBJECTIVE_ALIASES))}")
    # --robust's flags: (value, lowest, highest); None when not given
    robust_flags = {"--samples": (args.samples, 1, MAX_SAMPLES), "--robust-top": (args.robust_top, 1, MAX_ROBUST_TOP),
                    "--seed": (args.seed, 0, MAX_SEED)}
    for flag, (value, lo, hi) in robust_flags.items():
        if value is not None and not args.robust:
            raise ConfigError(None, flag, value, "only with --robust", f"sax sweep SCENARIO --robust {flag} ...")
        if value is not None and not lo <= value <= hi:
            raise ConfigError(None, flag, value, f"must be a whole number in [{lo}, {hi:,}]")
    if args.devices is not None and n_devices is not None and not 1 <= args.devices <= n_devices:
        raise ConfigError(None, "--devices", args.devices, f"must be in [1, {n_devices}]",
                          f"this machine has {n_devices} local device(s)")


def run(args) -> int:
    check_args(args)  # flags first: nothing is read, initialized or compiled for a bad one
    import jax

    from ..search.exhaustive import sweep  # jax import only when the command runs

    if args.coordinator or args.distributed:  # multi-host: every process runs this same command
        try:
            jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU hosts need a collective backend
        except (AttributeError, ValueError):
            pass
        kw = {} if not args.coordinator else {"coordinator_address": args.coordinator,
                                              "num_processes": args.num_processes, "process_id": args.process_id}
        jax.distributed.initialize(**kw)  # without arguments: SLURM / Open MPI / TPU environments
    if args.devices is not None:
        check_args(args, len(jax.local_devices()))
    setup_compile_cache(jax, not args.no_compile_cache)

    scenario = load_scenario(args.scenario)
    if args.cheapest is not None:
        check_prices(scenario)  # before the main sweep, not after it
    if args.objective is not None:  # overrides the scenario's (the fingerprint changes with it: --resume checks)
        scenario = dataclasses.replace(scenario, objective=OBJECTIVE_ALIASES.get(args.objective, args.objective))
    console = output_console(args.json)
    try:
        signal.signal(signal.SIGTERM, _sigterm)
    except ValueError:  # not the main thread
        pass
    robust_top = (args.robust_top or robust.DEFAULT_TOP) if args.robust else 0
    try:
        result = sweep(scenario, top_k=max(args.top, robust_top), chunk_size=args.chunk, out_dir=args.out,
                       resume=args.resume,
                       devices=args.devices, progress=not args.no_progress, max_designs=args.max_designs,
                       checkpoint_every_s=args.checkpoint_every, distinct=args.distinct)
    except ResumeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        where = f"; resume with: sax sweep {args.scenario} --out {args.out} --resume" if args.out else ""
        print(f"interrupted{where}", file=sys.stderr)
        return 130
    cheapest = None
    if args.cheapest is not None:  # the single-building reference is one more sweep; the answer is on the cost front
        cheapest = cheapest_network(scenario, args.cheapest, result, chunk_size=args.chunk, devices=args.devices)
    ranking = {}
    if args.robust:
        # the sweep kept max(--top, --robust-top) designs: the robust ranking takes the first --robust-top, the
        # rest of the output the first --top, as without --robust
        ranking = robust.robust_ranking(scenario, DEFAULT_ENGINE.params(scenario),
                                        [r["design"] for r in result.top[:robust_top]],
                                        {n: scenario.baseline_design(n) for n in scenario.baselines},
                                        args.samples or robust.DEFAULT_SAMPLES, args.seed or 0)
        result = dataclasses.replace(result, top=result.top[:args.top])
    base = baseline_costs(scenario)
    warnings = warnings_for(scenario, [r["design"] for r in result.top],
                            feasible_mfu(result.top[0] if result.top else None))
    best_s = result.top[0]["step_time_s"] if result.top else None
    speedup_vs = speedups(base, best_s)
    bands = sweep_bands(scenario, result, speedup_vs)
    if args.out:
        write_outputs(result, args.out, warnings, {**bands, **({"robust": ranking} if ranking else {})})
    if args.json:
        print_json({**summary(result, warnings), "baselines": {n: b["step_time_s"] for n, b in base.items()},
                    "speedup_vs": speedup_vs, **bands, **({"robust": ranking} if ranking else {}),
                    **({"cheapest": cheapest} if cheapest else {})})
    else:
        print_result(result, console, scenario.space)
        for name, ratio in speedup_vs.items():
            t = base[name]["step_time_s"]
            sp = (bands.get("speedups") or {}).get(name)
            band = (f" [{sp['band'][0]:.2f}x, {sp['band'][1]:.2f}x] ({100 * sp['level']:.0f}% band from "
                    f"{sp['n_pairs']} run pairs{'; a tie' if sp['tie'] else ''})") if sp else ""
            console.print(f"best vs baseline {name} ({fmt_time(t) if t else 'infeasible'}): "
                          + (f"{ratio:.2f}x faster{band}" if ratio else "n/a"))
            g_base, g_best = base[name].get("goodput_tokens_per_s"), (result.top or [{}])[0].get("goodput_tokens_per_s")
            if result.objective == "goodput_tokens_per_s" and g_base and g_best:
                console.print(f"  goodput {g_best:,.0f} vs {g_base:,.0f} tokens/s: {g_best / g_base:.2f}x")
            # objectives other than the step: the ratio that ranks them (DiLoCo trades a faster step for more tokens)
            o_base, o_best = base[name].get(result.objective), (result.top or [{}])[0].get(result.objective)
            if result.objective in ("time_to_target_s", "train_cost_usd") and base[name]["feasible"] and o_best:
                fmt = (lambda x: f"{x / 86400:,.2f} days") if result.objective == "time_to_target_s" else \
                    (lambda x: f"${x:,.0f}")
                console.print(f"  {result.objective}: {fmt(o_best)} vs {fmt(o_base)}: {o_base / o_best:.2f}x less")
        if bands:
            print_bands(bands, console)
        if ranking:
            print_robust(ranking, console, scenario.space, args.top)
        if cheapest:
            print_cheapest(cheapest, console, scenario.space)
        print_warnings(warnings, console)
        if args.out:
            console.print(f"wrote {args.out}/result.json, top.csv/json, pareto_*.csv/json")
    if args.plot:
        from ..plots import plot_sweep
        console.print(f"wrote {plot_sweep(result, args.plot, base)}")
    return 0


def print_cheapest(ans: dict, console: Console, space) -> None:
    console.print(f"single-building reference: {fmt_time(ans['reference_step_time_s'])} per step; "
                  f"{ans['percent']:g}% of its throughput = at most {fmt_time(ans['limit_s'])}", soft_wrap=True)
    best = ans["best"]
    if best is None:
        console.print(f"no design of the space reaches it ({ans['front_points']} points on the time-vs-cost front)")
        _print_inexact(ans, console)
        return
    d = best["design"]
    net = ", ".join(f"{ax}={d[ax]}" for ax in XB_AXES)
    rest = ", ".join(f"{ax}={d[ax]}" for ax in varied_axes(space) if ax not in XB_AXES)
    console.print(f"cheapest network: {net}: {fmt_time(best['step_time_s'])} per step, "
                  f"${best['cost_usd_per_hour']:,.0f}/h (network ${best['network_usd_per_hour']:,.0f}/h) with {rest}",
                  soft_wrap=True)
    _print_inexact(ans, console)


def _print_inexact(ans: dict, console: Console) -> None:
    if not ans.get("exact", True):
        console.print(f"[yellow]warning:[/yellow] not exact ({'; '.join(ans['caveats'])}): a cheaper design "
                      "within the limit may exist", soft_wrap=True)


def _count(text: str) -> int:
    v = float(text)
    if not (math.isfinite(v) and v >= 1 and v == int(v)):
        raise ValueError(text)
    return int(v)


def register(sub):
    p = sub.add_parser("sweep", help="exhaustive streaming sweep: running top-k and Pareto fronts, resumable")
    p.add_argument("scenario", help="scenario: a bundled name (default, huge-four-buildings, ...) or a YAML path")
    p.add_argument("--top", type=whole_number, default=10, metavar="K",
                   help=f"designs to keep by the objective, 1 to {MAX_TOP:,} (default 10)")
    p.add_argument("--distinct", action="store_true",
                   help="top-k of distinct objective values: one design (the lowest index) per value, so designs "
                        "that differ only in knobs without effect there do not fill the list")
    p.add_argument("--objective", default=None, metavar="NAME",
                   help="rank by this instead of the scenario's objective: step_time_s, tokens_per_s, mfu, "
                        "goodput_tokens_per_s (or goodput: tokens/s after failures and checkpoints), "
                        "effective_tokens_per_s or time_to_target_s (time to the synchronous run's loss: DiLoCo's "
                        "tokens multiplier included)")
    p.add_argument("--cheapest", type=float, default=None, metavar="PCT",
                   help="co-design (a scenario with prices): the cheapest design, network included, within PCT%% of "
                        "the single-building throughput (one more sweep finds that reference)")
    p.add_argument("--out", default=None, metavar="DIR", help="checkpoint and result directory")
    p.add_argument("--resume", action="store_true", help="continue the sweep checkpointed in --out")
    p.add_argument("--devices", type=whole_number, default=None, metavar="N", help="use the first N devices (default all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", default=None, metavar="PNG", help="write the Pareto fronts, top-k and baselines as a plot")
    p.add_argument("--max-designs", type=_count, default=None, metavar="N", help="sweep only the first N designs")
    p.add_argument("--chunk", type=_count, default=None, metavar="N", help="designs per device per block")
    p.add_argument("--checkpoint-every", type=float, default=5.0, metavar="S",
                   help="seconds between checkpoints, 0 to 86400 (0: after every block; default 5)")
    p.add_argument("--robust", action="store_true",
                   help="re-rank the best --robust-top designs by mean and p90 step time over sampled system numbers "
                        "(latency, bandwidth, loss, failure rates; sax_jax.robust); --top rows are printed")
    p.add_argument("--samples", type=whole_number, default=None, metavar="N",
                   help=f"with --robust: systems sampled, 1 to {MAX_SAMPLES:,}; the first is the nominal one "
                        f"(default {robust.DEFAULT_SAMPLES})")
    p.add_argument("--robust-top", type=whole_number, default=None, metavar="K",
                   help=f"with --robust: designs re-ranked, 1 to {MAX_ROBUST_TOP:,} (default {robust.DEFAULT_TOP})")
    p.add_argument("--seed", type=whole_number, default=None, metavar="S",
                   help="with --robust: random seed of the samples (default 0); same seed, same samples")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-compile-cache", action="store_true",
                   help=f"do not use JAX's persistent compilation cache (default: {CACHE_DIR}; also "
                        "SAX_COMPILE_CACHE=0, or another directory with SAX_COMPILE_CACHE_DIR)")
    p.add_argument("--distributed", action="store_true",
                   help="multi-host: jax.distributed.initialize() from the cluster environment (SLURM, MPI)")
    p.add_argument("--coordinator", default=None, metavar="HOST:PORT", help="multi-host by hand: coordinator address")
    p.add_argument("--num-processes", type=whole_number, default=None, metavar="N", help="with --coordinator")
    p.add_argument("--process-id", type=whole_number, default=None, metavar="I", help="with --coordinator")
    p.set_defaults(func=run)

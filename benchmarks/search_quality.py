"""Search quality: how often each search lands within 1% of the exhaustive optimum, at what cost.

    python benchmarks/search_quality.py --json                 # full suite, all methods, budget 10000
    python benchmarks/search_quality.py --scenarios h100-llama8b 2b-llama405b --methods relaxed random
    python benchmarks/search_quality.py --hard --json          # 22 spaces of 1.26e9, budget 1e-4 of each
    python benchmarks/search_quality.py --speed-only --json    # sweep vs search designs/s on one scenario
    python benchmarks/search_quality.py --pareto memory --json # NSGA-II fronts vs the sweep's exact fronts

``--hard``: the exact optimum of each 1.26e9-design variant comes from the streaming sweep, cached under
sweeps/search_suite/ by scenario fingerprint (the first run builds it: ~30 s per scenario on 2 CPU cores);
every search gets ``--fraction`` (default 1e-4) of the space. Searches evaluate sub-grids (``search/subgrid.py``)
unless ``--flat``. ``speed`` compares, on ``--speed-scenario`` (default: the bundled ``default``), the sweep's
designs/s with an evolution search's (warm, budget ``--speed-budget``), both measured in this process.

For every scenario of ``search_suite.SUITE`` (>= 20 variants, 1.24M points each) the exact optimum comes from a
brute-force pass; every method then runs at the same evaluation budget (random search is the floor). Per method:
``success_rate`` (fraction of scenarios within ``--tolerance`` of the optimum), ``mean_evaluations``,
``fraction_of_space`` and ``seconds`` (mean warm wall time per search; compilation is reported apart, under
``compile_seconds``). Prints one JSON object with ``--json``, a table otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from search_suite import brute_force, exact_optimum, load_suite, problems  # noqa: E402
from sax_jax.search.evolution import DEFAULT_STRATEGY, STRATEGIES, evolve  # noqa: E402
from sax_jax.search.genome import design_dict  # noqa: E402
from sax_jax.search.exhaustive import FRONTS  # noqa: E402
from sax_jax.search.runner import PARETO, problem_for  # noqa: E402
from sax_jax.search.random_search import random_search  # noqa: E402
from sax_jax.search.relaxed import relaxed_search  # noqa: E402

METHODS = tuple(f"evolution/{s}" for s in STRATEGIES) + ("relaxed", "random")


def _max_map_count() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 65530


def _maps_in_use() -> int:
    """Memory mappings of this process (Linux; 0 where /proc is absent)."""
    try:
        with open("/proc/self/maps") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


MAP_BUDGET = _max_map_count() // 2


def run_method(method: str, problem, budget: int, seed: int):
    if method.startswith("evolution/"):
        return evolve(problem, method.split("/", 1)[1], budget=budget, seed=seed)
    if method == "relaxed":
        return relaxed_search(problem, budget=budget, seed=seed)
    if method == "random":
        return random_search(problem, budget=budget, seed=seed)
    raise ValueError(f"unknown method {method!r}; methods: {', '.join(METHODS)}")


def speed(scenario_name: str, budget: int, repeat: int = 3) -> dict:
    """Designs/s of the sweep (the whole space, warm) and of an evolution search (DE, warm) on one scenario,
    alternated ``repeat`` times (the best of each: a shared machine's load hits both alike)."""
    from sax_jax import load_scenario
    from sax_jax.engine import Engine
    from sax_jax.search.exhaustive import sweep
    sc = load_scenario(scenario_name)
    engine = Engine()
    sweep(sc, top_k=10, progress=False, engine=engine)  # compiles
    pb = problem_for(sc, budget)
    evolve(pb, DEFAULT_STRATEGY, budget=budget, seed=1)  # compiles
    sw, se = [], []
    for i in range(repeat):
        t = time.perf_counter()
        r = sweep(sc, top_k=10, progress=False, engine=engine)
        sw.append(r.n_designs / (time.perf_counter() - t))
        s = evolve(pb, DEFAULT_STRATEGY, budget=budget, seed=i)
        se.append(s.evaluations / s.seconds)
    return {"scenario": sc.name, "space_size": sc.space.size, "sweep_designs_per_s": max(sw),
            "search_designs_per_s": max(se), "search_to_sweep": max(se) / max(sw), "search_budget": budget,
            "search_evaluations": s.evaluations, "designs_per_point": pb.point_designs,
            "inner_axes": list(pb.full.names[pb.subgrid.split:]) if pb.subgrid else [],
            "sweep_runs": sw, "search_runs": se}


# --pareto metric -> the sweep's front of the same Cost field (goodput has no sweep front)
PARETO_FRONTS = {m: front for m, (field, _) in PARETO.items() for front, f in FRONTS.items() if f == field}


def pareto_quality(metric: str, hard: bool, names, budget: int, fraction: float, seed: int, log) -> dict:
    """NSGA-II (``search/multiobjective.py``, single designs) against the sweep's exact front of each scenario:
    coverage (share of exact-front points some found point matches within 1% in both objectives) and the
    hypervolume ratio (reference: 1.1 x the exact front's largest values)."""
    from sax_jax.search.genome import scenario_problem
    from sax_jax.search.multiobjective import coverage, hypervolume, pareto_search
    rows = []
    for sc in load_suite(names, hard=hard):
        truth = exact_optimum(sc, log=log)
        exact = np.asarray(truth["pareto"][PARETO_FRONTS[metric]], np.float64).reshape(-1, 2)
        b = int(fraction * sc.space.size) if hard else budget
        r = pareto_search(scenario_problem(sc), metric, budget=b, seed=seed)
        found = np.asarray([[p["step_time_s"], p[r["field"]]] for p in r["front"]], np.float64).reshape(-1, 2)
        ref = (exact[:, 0].max() * 1.1, exact[:, 1].max() * 1.1 + 1.0) if len(exact) else (1.0, 1.0)
        hv = hypervolume(exact, ref)
        row = {"name": sc.name, "exact_points": len(exact), "found_points": len(found),
               "coverage_1pct": coverage(found, exact, 0.01), "coverage_5pct": coverage(found, exact, 0.05),
               "hypervolume_ratio": hypervolume(found, ref) / hv if hv > 0 else 1.0,
               "evaluations": r["evaluations"], "seconds": r["seconds"]}
        log(f"{sc.name:22s} pareto {metric}: {row['found_points']} found, {row['exact_points']} exact, coverage "
            f"{row['coverage_1pct']:.2f} (1%) {row['coverage_5pct']:.2f} (5%), hv {row['hypervolume_ratio']:.4f}")
        rows.append(row)
    mean = lambda k: float(np.mean([r[k] for r in rows])) if rows else None  # noqa: E731
    return {"metric": metric, "suite": "hard" if hard else "small", "n_scenarios": len(rows),
            "mean_coverage_1pct": mean("coverage_1pct"), "mean_coverage_5pct": mean("coverage_5pct"),
            "mean_hypervolume_ratio": mean("hypervolume_ratio"),
            "all_covered_1pct": sum(r["coverage_1pct"] == 1.0 for r in rows), "scenarios": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--budget", type=int, default=10000, help="evaluations per search (default 10000: 0.8%% of each space)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds per scenario and method (default 1)")
    ap.add_argument("--tolerance", type=float, default=0.01, help="success: within this of the optimum")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), help=f"subset of {', '.join(METHODS)}")
    ap.add_argument("--scenarios", nargs="+", default=None, help="subset of suite names")
    ap.add_argument("--hard", action="store_true", help="the 1.26e9-design suite (exact optima from the sweep, cached)")
    ap.add_argument("--fraction", type=float, default=1e-4, help="with --hard: budget as a fraction of the space")
    ap.add_argument("--flat", action="store_true", help="searches evaluate single designs, not sub-grids")
    ap.add_argument("--speed-scenario", default="default", help="scenario of the sweep vs search speed comparison")
    ap.add_argument("--speed-budget", type=float, default=2e6, help="designs of the timed search")
    ap.add_argument("--speed-only", action="store_true", help="only the speed comparison")
    ap.add_argument("--no-speed", action="store_true", help="skip the speed comparison")
    ap.add_argument("--pareto", choices=tuple(PARETO_FRONTS), default=None,
                    help="only the multi-objective search: its fronts against the sweep's exact fronts")
    args = ap.parse_args(argv)
    for m in args.methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}; methods: {', '.join(METHODS)}")
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else print

    t0 = time.perf_counter()
    if args.pareto:
        rec = pareto_quality(args.pareto, args.hard, args.scenarios, args.budget, args.fraction, 0, log)
        print(json.dumps({"benchmark": "search_quality", "device": jax.devices()[0].device_kind,
                          "budget": None if args.hard else args.budget, "fraction": args.fraction if args.hard
                          else None, "pareto": rec, "total_seconds": time.perf_counter() - t0}, indent=1,
                         default=float))
        return 0
    speed_rec = None if args.no_speed else speed(args.speed_scenario, int(args.speed_budget))
    if speed_rec:
        log(f"speed on {speed_rec['scenario']}: sweep {speed_rec['sweep_designs_per_s']:.3g} designs/s, search "
            f"{speed_rec['search_designs_per_s']:.3g} ({100 * speed_rec['search_to_sweep']:.0f}%)")
    if args.speed_only:
        print(json.dumps({"benchmark": "search_quality", "device": jax.devices()[0].device_kind,
                          "speed": speed_rec}, indent=1, default=float))
        return 0
    if args.hard:
        args.budget = None
        suite = []
        for sc in load_suite(args.scenarios, hard=True):
            truth = exact_optimum(sc, log=log)
            budget = int(args.fraction * sc.space.size)
            suite.append((sc, problem_for(sc, 1 if args.flat else budget), truth, budget))
    else:
        suite = [(sc, pb, None, args.budget) for sc, pb in problems(args.scenarios)]
    rows, warm = [], set()
    stats = {m: {"ok": 0, "runs": 0, "evals": 0, "seconds": 0.0, "compile": 0.0, "ratios": []} for m in args.methods}
    for sc, pb, truth, budget in suite:
        t = time.perf_counter()
        if truth is None:
            truth = brute_force(pb)
            truth["design"] = design_dict(pb, truth["digits"])
            truth["sweep_seconds"] = time.perf_counter() - t
        row = {"name": sc.name, "model": sc.model.name, "system": sc.system.name, "n_gpus": sc.system.n_gpus,
               "size": sc.space.size, "n_feasible": truth["n_feasible"], "optimum_step_time_s": truth["value"],
               "optimum_design": truth["design"], "exhaustive_seconds": truth["sweep_seconds"],
               "budget": budget, "designs_per_point": pb.point_designs, "results": {}}
        shape = (len(sc.system.levels), tuple(pb.radices))
        for m in args.methods:
            st = stats[m]
            if (m, shape) not in warm:  # compile once per space/system shape, timed apart
                t = time.perf_counter()
                run_method(m, pb, budget, 10_000)
                st["compile"] += time.perf_counter() - t
                warm.add((m, shape))
            res = []
            for seed in range(args.seeds):
                r = run_method(m, pb, budget, seed)
                ratio = r.value / truth["value"]
                ok = bool(ratio <= 1.0 + args.tolerance)
                st["ok"] += ok
                st["runs"] += 1
                st["evals"] += r.evaluations
                st["seconds"] += r.seconds
                st["ratios"].append(ratio)
                res.append({"seed": seed, "step_time_s": r.value if np.isfinite(r.value) else None,
                            "ratio_to_optimum": ratio if np.isfinite(ratio) else None, "success": ok,
                            "evaluations": r.evaluations, "seconds": r.seconds})
            row["results"][m] = res
            log(f"{sc.name:20s} {m:22s} " + " ".join(f"{x['ratio_to_optimum'] or float('inf'):.4f}" for x in res))
        rows.append(row)
        # On CPU every XLA executable keeps its code in memory mappings of its own; the suite's programs pass the
        # kernel's limit (vm.max_map_count, 65,530 by default) after about 18 scenarios and LLVM then fails with
        # "Cannot allocate memory" while RAM is free. Past half the limit, drop the compiled programs: later
        # scenarios compile again, timed apart as the first were.
        if _maps_in_use() > MAP_BUDGET:
            jax.clear_caches()
            warm.clear()

    methods = {}
    for m, st in stats.items():
        n = max(st["runs"], 1)
        mean_evals = st["evals"] / n
        ratios = np.asarray(st["ratios"])
        methods[m] = {"success_rate": st["ok"] / n, "mean_evaluations": mean_evals,
                      "fraction_of_space": mean_evals / float(np.mean([sc.space.size for sc, *_ in suite])),
                      "designs_per_s": st["evals"] / max(st["seconds"], 1e-9),
                      "seconds": st["seconds"] / n, "compile_seconds": st["compile"],
                      "median_ratio_to_optimum": float(np.median(ratios)) if len(ratios) else None,
                      "worst_ratio_to_optimum": float(np.max(ratios)) if len(ratios) else None, "runs": st["runs"]}
    evo = [m for m in methods if m.startswith("evolution/")]
    if f"evolution/{DEFAULT_STRATEGY}" in methods:  # `evolution` = what `sax search --method evolution` runs
        methods["evolution"] = dict(methods[f"evolution/{DEFAULT_STRATEGY}"], strategy=DEFAULT_STRATEGY)
    elif evo:
        methods["evolution"] = dict(methods[evo[0]], strategy=evo[0].split("/", 1)[1])
    out = {"benchmark": "search_quality", "device": jax.devices()[0].device_kind, "budget": args.budget,
           "suite": "hard" if args.hard else "small", "fraction": args.fraction if args.hard else None,
           "subgrid": not args.flat, "speed": speed_rec,
           "seeds": args.seeds, "tolerance": args.tolerance, "n_scenarios": len(rows),
           "total_seconds": time.perf_counter() - t0, "methods": methods, "scenarios": rows}
    if args.json:
        print(json.dumps(out, indent=1, allow_nan=False, default=float))
    else:
        print(f"{'method':22s} {'success':>8s} {'evals':>8s} {'% space':>8s} {'s/search':>9s} {'compile s':>9s}")
        for m, s in methods.items():
            print(f"{m:22s} {s['success_rate']:8.2f} {s['mean_evaluations']:8.0f} "
                  f"{100 * s['fraction_of_space']:8.3f} {s['seconds']:9.2f} {s['compile_seconds']:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

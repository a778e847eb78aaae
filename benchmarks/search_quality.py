"""Search quality: how often each search lands within 1% of the exhaustive optimum, at what cost.

    python benchmarks/search_quality.py --json                 # full suite, all methods, budget 10000
    python benchmarks/search_quality.py --scenarios h100-llama8b 2b-llama405b --methods relaxed random

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

from search_suite import brute_force, problems  # noqa: E402
from sax_jax.search.evolution import DEFAULT_STRATEGY, STRATEGIES, evolve  # noqa: E402
from sax_jax.search.genome import design_dict  # noqa: E402
from sax_jax.search.random_search import random_search  # noqa: E402
from sax_jax.search.relaxed import relaxed_search  # noqa: E402

METHODS = tuple(f"evolution/{s}" for s in STRATEGIES) + ("relaxed", "random")


def run_method(method: str, problem, budget: int, seed: int):
    if method.startswith("evolution/"):
        return evolve(problem, method.split("/", 1)[1], budget=budget, seed=seed)
    if method == "relaxed":
        return relaxed_search(problem, budget=budget, seed=seed)
    if method == "random":
        return random_search(problem, budget=budget, seed=seed)
    raise ValueError(f"unknown method {method!r}; methods: {', '.join(METHODS)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--budget", type=int, default=10000, help="evaluations per search (default 10000: 0.8%% of each space)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds per scenario and method (default 1)")
    ap.add_argument("--tolerance", type=float, default=0.01, help="success: within this of the optimum")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), help=f"subset of {', '.join(METHODS)}")
    ap.add_argument("--scenarios", nargs="+", default=None, help="subset of suite names")
    args = ap.parse_args(argv)
    for m in args.methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}; methods: {', '.join(METHODS)}")
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else print

    t0 = time.perf_counter()
    suite = problems(args.scenarios)
    rows, warm = [], set()
    stats = {m: {"ok": 0, "runs": 0, "evals": 0, "seconds": 0.0, "compile": 0.0, "ratios": []} for m in args.methods}
    for sc, pb in suite:
        t = time.perf_counter()
        truth = brute_force(pb)
        row = {"name": sc.name, "model": sc.model.name, "system": sc.system.name, "n_gpus": sc.system.n_gpus,
               "size": pb.size, "n_feasible": truth["n_feasible"], "optimum_step_time_s": truth["value"],
               "optimum_design": design_dict(pb, truth["digits"]), "exhaustive_seconds": time.perf_counter() - t,
               "results": {}}
        shape = (len(sc.system.levels), tuple(pb.radices))
        for m in args.methods:
            st = stats[m]
            if (m, shape) not in warm:  # compile once per space/system shape, timed apart
                t = time.perf_counter()
                run_method(m, pb, args.budget, 10_000)
                st["compile"] += time.perf_counter() - t
                warm.add((m, shape))
            res = []
            for seed in range(args.seeds):
                r = run_method(m, pb, args.budget, seed)
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

    methods = {}
    for m, st in stats.items():
        n = max(st["runs"], 1)
        mean_evals = st["evals"] / n
        ratios = np.asarray(st["ratios"])
        methods[m] = {"success_rate": st["ok"] / n, "mean_evaluations": mean_evals,
                      "fraction_of_space": mean_evals / float(np.mean([pb.size for _, pb in suite])),
                      "seconds": st["seconds"] / n, "compile_seconds": st["compile"],
                      "median_ratio_to_optimum": float(np.median(ratios)) if len(ratios) else None,
                      "worst_ratio_to_optimum": float(np.max(ratios)) if len(ratios) else None, "runs": st["runs"]}
    evo = [m for m in methods if m.startswith("evolution/")]
    if f"evolution/{DEFAULT_STRATEGY}" in methods:  # `evolution` = what `sax search --method evolution` runs
        methods["evolution"] = dict(methods[f"evolution/{DEFAULT_STRATEGY}"], strategy=DEFAULT_STRATEGY)
    elif evo:
        methods["evolution"] = dict(methods[evo[0]], strategy=evo[0].split("/", 1)[1])
    out = {"benchmark": "search_quality", "device": jax.devices()[0].device_kind, "budget": args.budget,
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

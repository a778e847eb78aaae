"""Seconds to sweep Calculon's gpt3-175B / 1,024 A100 search space completely (~7.3M candidates), and the best.

Calculon enumerates this space with Python loops and a process pool (about 315 configurations/s on 2 cores:
hours). Prints JSON {"n_designs", "seconds", "best": {...}, ...}; ``seconds`` is a warm run (program
compiled), ``first_run_seconds`` includes the compile (``compile_s``).
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=os.path.join(ROOT, "configs", "scenarios", "calculon-gpt3-1024.yaml"))
    ap.add_argument("--chunk", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="(output is always JSON)")
    args = ap.parse_args(argv)

    import jax
    import sax_jax as sx
    from sax_jax.search.exhaustive import sweep

    sc = sx.load_scenario(args.scenario)
    first = sweep(sc, top_k=10, chunk_size=args.chunk, progress=False)
    t = time.perf_counter()
    r = sweep(sc, top_k=10, chunk_size=args.chunk, progress=False)
    seconds = time.perf_counter() - t
    best = r.top[0] if r.top else None
    print(json.dumps({
        "benchmark": "calculon_space", "scenario": sc.name, "n_designs": r.n_designs, "n_feasible": r.n_feasible,
        "seconds": seconds, "designs_per_s": r.n_designs / seconds, "first_run_seconds": first.seconds,
        "compile_s": first.compile_s, "device_kind": jax.devices()[0].device_kind, "devices": r.devices,
        "best": {k: best[k] for k in ("index", "design", "step_time_s", "tokens_per_s", "mfu", "memory_bytes")}
        if best else None,
        "pareto_sizes": {k: len(v) for k, v in r.pareto.items()},
    }, indent=2))


if __name__ == "__main__":
    main()

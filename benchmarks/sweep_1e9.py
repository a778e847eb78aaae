"""A 10**9-point sweep: the default scenario's space widened (mbs, cp, vpp, qps, channels) to 1.12e9 designs.

Prints JSON {"n_designs", "seconds", "designs_per_s", "compile_s", ...}. ``--max-designs N`` sweeps only the
first N and adds ``extrapolated_1e9_s`` (= compile + 1e9 / steady rate), clearly labelled as an extrapolation.
``--max-designs 1e10`` (the accelerator target) widens the space further with an explicit dp axis (1.12e10).

    python benchmarks/sweep_1e9.py --json                       # CPU: 1e9 designs
    python benchmarks/sweep_1e9.py --max-designs 1e10 --json    # one H100/H200: 1e10 designs
"""
import argparse
import json
import os
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

WIDER = {"cp": [1, 2, 4, 8], "vpp": [1, 2, 3, 4], "mbs": [1, 2, 4, 8],
         "qps": ["auto", 1, 2, 4, 8, 16, 32, 64], "channels": ["auto", 2, 4, 8, 16, 32]}
# x10 for the 1e10 run: an explicit data-parallel degree besides "auto" (mostly infeasible: the GPU count fixes it)
WIDEST = dict(WIDER, dp=["auto", 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384])


def scenario_file(widen: dict = WIDER) -> str:
    scen_dir = os.path.join(ROOT, "configs", "scenarios")
    with open(os.path.join(scen_dir, "default.yaml")) as fh:
        data = yaml.safe_load(fh)
    data["name"] = "default-1e9" if widen is WIDER else "default-1e10"
    data["space"].update(widen)
    for k in ("model", "system", "transports"):  # keep the relative includes valid from a temp file
        data[k] = os.path.normpath(os.path.join(scen_dir, data[k]))
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix="sax-1e9-")
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(data, fh)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-designs", type=float, default=1e9)
    ap.add_argument("--chunk", type=int, default=None)
    ap.add_argument("--space", choices=("1e9", "1e10"), default=None,
                    help="which widened space (default: 1e10 when --max-designs exceeds 1.12e9)")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--json", action="store_true", help="(output is always JSON)")
    args = ap.parse_args(argv)

    import jax
    import sax_jax as sx
    from sax_jax.search.exhaustive import sweep

    wide = args.space == "1e10" or (args.space is None and args.max_designs > 1.2e9)
    path = scenario_file(WIDEST if wide else WIDER)
    try:
        sc = sx.load_scenario(path)
    finally:
        os.unlink(path)
    n = int(args.max_designs)
    r = sweep(sc, top_k=10, chunk_size=args.chunk, progress=args.progress, max_designs=n)
    out = {"benchmark": "sweep_1e9", "space_size": sc.space.size, "n_designs": r.n_designs,
           "n_feasible": r.n_feasible, "seconds": r.seconds, "compile_s": r.compile_s,
           "designs_per_s": r.designs_per_s, "device_kind": jax.devices()[0].device_kind, "devices": r.devices,
           "best": {"index": r.top[0]["index"], "step_time_s": r.top[0]["step_time_s"]} if r.top else None}
    target = 10**10 if wide else 10**9
    if r.n_designs < target:
        name = f"extrapolated_1e{len(str(target)) - 1}_s"
        out[name] = r.compile_s + target / r.designs_per_s
        out["note"] = f"swept {r.n_designs:.3g} designs; {name} = compile + {target:.0e} / steady rate"
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

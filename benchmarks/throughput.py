"""Designs/s of the full step-time model on the default scenario's space, through the exhaustive sweep engine.

Prints JSON: n_designs, designs_per_s (steady state: the median of --repeat runs of the compiled program, with
their range), compile_s (first run), seconds, device_kind, devices, flops_per_design (XLA cost analysis of the
block program / designs per block) and the achieved fraction of the device's peak FLOP/s (peak from
--peak-flops or a table by device kind), and the achieved fraction of a measured ceiling: a fused fp32 FMA chain
(``fma_ceiling``; ~263 FLOPs per design, so ceiling / 263 is the evaluator's designs/s limit).

    python benchmarks/throughput.py --json                 # the whole default space (6.56M designs)
    python benchmarks/throughput.py --max-designs 2000000
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# fp32 (non-tensor-core) peak FLOP/s: the model is elementwise float32 work
PEAK_FP32 = {"H100": 67e12, "H200": 67e12, "A100": 19.5e12, "B200": 80e12, "GB200": 80e12}
CPU_FLOPS_PER_CYCLE_CORE = 32  # AVX2: 2 FMA units x 8 float32 lanes x 2 flops


def peak_flops(device) -> tuple:
    kind = device.device_kind
    for name, v in PEAK_FP32.items():
        if name in kind:
            return v, f"{name} fp32 datasheet"
    if device.platform == "cpu":
        ghz = 3.0
        try:
            with open("/proc/cpuinfo") as fh:
                mhz = [float(l.split(":")[1]) for l in fh if l.startswith("cpu MHz")]
            ghz = max(mhz) / 1e3 if mhz else ghz
        except OSError:
            pass
        cores = os.cpu_count() or 1
        return cores * ghz * 1e9 * CPU_FLOPS_PER_CYCLE_CORE, f"{cores} cores x {ghz:.2f} GHz x 32 fp32 flops/cycle"
    return float("nan"), "unknown"


def fma_ceiling(device, n: int | None = None, steps: int = 256, repeat: int = 5) -> float:
    """Measured fp32 FLOP/s ceiling: a fused chain of ``steps`` FMAs (x = x * a + b) per element over ``n``
    float32 elements, one XLA fusion (the chain is unrolled, so nothing but FMAs and one read/write of x).
    2 FLOPs per FMA; the best of ``repeat`` warm runs."""
    import jax
    import jax.numpy as jnp
    n = n or (1 << 16 if device.platform == "cpu" else 1 << 24)

    @jax.jit
    def chain(x, a, b):
        for _ in range(steps):
            x = x * a + b
        return x

    x = jax.device_put(jnp.linspace(0.0, 1.0, n, dtype=jnp.float32), device)
    a, b = jnp.float32(0.999), jnp.float32(1e-3)
    chain(x, a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        chain(x, a, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2.0 * steps * n / best


def block_flops(engine, result) -> float:
    """FLOPs of the engine's latest compiled block program (XLA's cost analysis), per design of the block."""
    comp = engine.latest_program
    ca = comp.cost_analysis()
    ca = ca[0] if isinstance(ca, (list, tuple)) else ca
    return float(ca.get("flops", float("nan"))) / result.chunk_designs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=os.path.join(ROOT, "configs", "scenarios", "default.yaml"))
    ap.add_argument("--max-designs", type=float, default=None, help="default: the whole space")
    ap.add_argument("--chunk", type=int, default=None, help="designs per device per block")
    ap.add_argument("--devices", type=int, default=None)
    ap.add_argument("--peak-flops", type=float, default=None)
    ap.add_argument("--repeat", type=int, default=5, help="steady-state runs (the median is reported)")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the fused-FMA ceiling microbenchmark")
    ap.add_argument("--json", action="store_true", help="(output is always JSON; kept for the documented command)")
    args = ap.parse_args(argv)

    import jax
    import sax_jax as sx
    from sax_jax.engine import Engine
    from sax_jax.search.exhaustive import sweep

    sc = sx.load_scenario(args.scenario)
    n = None if args.max_designs is None else int(args.max_designs)
    engine = Engine()
    kw = dict(top_k=10, chunk_size=args.chunk, devices=args.devices, progress=False, max_designs=n, engine=engine)
    first = sweep(sc, **kw)  # compiles
    walls = []
    for _ in range(max(1, args.repeat)):  # same program, already compiled; shared machines are noisy
        t = time.perf_counter()
        steady = sweep(sc, **kw)
        walls.append(time.perf_counter() - t)
    wall = statistics.median(walls)
    dev = jax.devices()[0]
    peak, peak_src = (args.peak_flops, "--peak-flops") if args.peak_flops else peak_flops(dev)
    fpd = block_flops(engine, steady)
    ceiling = float("nan") if args.no_ceiling else fma_ceiling(dev)  # after the sweeps: their timing is untouched
    out = {
        "benchmark": "throughput", "scenario": sc.name, "n_designs": steady.n_designs,
        "n_feasible": steady.n_feasible, "designs_per_s": steady.n_designs / wall, "seconds": wall,
        "designs_per_s_range": [steady.n_designs / max(walls), steady.n_designs / min(walls)], "repeats": len(walls),
        "compile_s": first.compile_s, "first_run_seconds": first.seconds, "device_kind": dev.device_kind,
        "platform": dev.platform, "devices": steady.devices, "chunk_designs": steady.chunk_designs,
        "flops_per_design": fpd, "achieved_flops_per_s": fpd * steady.n_designs / wall, "peak_flops": peak,
        "peak_source": peak_src, "fraction_of_peak": fpd * steady.n_designs / wall / peak,
        "ceiling_flops_per_s": ceiling, "fraction_of_ceiling": fpd * steady.n_designs / wall / ceiling,
        "ceiling_source": "fused fp32 FMA chain (fma_ceiling), measured here",
        "best": {"index": steady.top[0]["index"], "step_time_s": steady.top[0]["step_time_s"],
                 "design": steady.top[0]["design"]} if steady.top else None,
        "jax": jax.__version__,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

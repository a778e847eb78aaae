"""Record the model's numbers as a golden file (tests/data/golden_model.npz): every bundled scenario on a fixed
sample of designs (flat evaluation), the grid path of a short sweep, a seeded search, and the 27 validation
cases. Run once before a refactor that must not change numbers; tests/test_golden.py compares against it.

    python tests/record_golden.py            # writes tests/data/golden_model.npz
    python tests/record_golden.py --validate-27 "<why>"   # rewrites tests/data/validate_27_before.json

Both record under the suite's XLA flags (tests/xla_flags.py), so they compare bit for bit on this machine.
"""
import glob
import os
import sys

import xla_flags

XLA_FLAGS = xla_flags.apply()  # the suite's flags (tests/xla_flags.py), before jax starts its backend

import jax  # noqa: E402
import jax.numpy as jnp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import sax_jax as sx  # noqa: E402

SAMPLE = 1024


def scenario_paths():
    return sorted(glob.glob(os.path.join(ROOT, "configs", "scenarios", "*.yaml")))


def sample_indices(size: int) -> np.ndarray:
    rng = np.random.default_rng(1234)
    n = min(SAMPLE, size)
    hi = min(size, 2 ** 31 - 1)
    return np.sort(rng.choice(hi, size=n, replace=False) if hi <= 10 * n else rng.integers(0, hi, n))


def cost_arrays(prefix: str, cost) -> dict:
    out = {}
    c = jax.device_get(cost)
    for name in ("step_time_s", "raw_step_time_s", "tokens_per_s", "mfu", "memory_bytes", "cross_building_bytes",
                 "violation", "feasible"):
        out[f"{prefix}/{name}"] = np.asarray(getattr(c, name))
    for k, v in c.breakdown._asdict().items():
        out[f"{prefix}/breakdown/{k}"] = np.asarray(v)
    return out


def record() -> dict:
    out = {}
    for path in scenario_paths():
        name = os.path.splitext(os.path.basename(path))[0]
        sc = sx.load_scenario(path)
        idx = sample_indices(sc.space.size)
        out[f"{name}/indices"] = idx
        cost = sx.evaluate(sc, sc.space.decode(jnp.asarray(idx, jnp.int32)))
        out.update(cost_arrays(name, cost))
    # the grid path: a short sweep of the default scenario from a fixed start
    sc = sx.load_scenario(os.path.join(ROOT, "configs", "scenarios", "default.yaml"))
    res = sx.sweep(sc, top_k=8, max_designs=600_000, start=1_000_000, progress=False, chunk_size=1 << 17)
    out["sweep/top_index"] = np.asarray([r["index"] for r in res.top])
    out["sweep/top_step_time_s"] = np.asarray([r["step_time_s"] for r in res.top])
    out["sweep/n_feasible"] = np.asarray(res.n_feasible)
    for fname, recs in res.pareto.items():
        out[f"sweep/{fname}/index"] = np.asarray([r["index"] for r in recs])
        out[f"sweep/{fname}/step_time_s"] = np.asarray([r["step_time_s"] for r in recs])
    # a seeded search
    huge = sx.load_scenario(os.path.join(ROOT, "configs", "scenarios", "huge-four-buildings.yaml"))
    rec = sx.search(huge, "evolution", strategy="de", budget=1500, seed=0)
    out["search/step_time_s"] = np.asarray(rec["best"]["step_time_s"])
    out["search/history"] = np.asarray([np.inf if x is None else x for x in rec["history"]])
    out["search/baselines"] = np.asarray([rec["baselines"][k] for k in sorted(rec["baselines"])])
    # validation cases
    rep = sx.validate()
    cases = rep["cases"] if isinstance(rep, dict) else rep.cases
    out["validate/ids"] = np.asarray([c["id"] for c in cases])
    out["validate/predicted"] = np.asarray([c["predicted"] for c in cases], np.float64)
    out["meta/jax"] = np.asarray(jax.__version__)
    out["meta/cpu"] = np.asarray(cpu_fingerprint())
    out["meta/xla_flags"] = np.asarray(XLA_FLAGS)
    return out


def record_validate_27(why: str) -> None:
    """Re-record tests/data/validate_27_before.json (test_validate.test_27_predictions_unchanged) under the suite's
    flags: the 27 original runs' predictions and per-dataset figures; ``why`` (the deliberate change) is appended to
    its recorded_from."""
    import json
    from test_validate import BEFORE, ORIGINAL
    rep = sx.validate(ORIGINAL)
    with open(BEFORE) as fh:
        data = json.load(fh)
    data["predicted"] = {c["id"]: c["predicted"] for c in rep["cases"]}
    data["datasets"] = rep["datasets"]
    data["recorded_from"] = data["recorded_from"] + "; again " + why
    with open(BEFORE, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")


def cpu_fingerprint() -> str:
    """The host CPU as XLA's CPU backend compiles for it: the model name and its vector extensions. XLA vectorizes
    float32 reductions to the host's vector width, so another CPU (AVX2 vs AVX-512) sums in another order and
    moves the last bits of a long reduction (the expert-trace scenarios sum 58 layers x 256 experts)."""
    import platform
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for key, _, value in (line.partition(":") for line in f):
                info.setdefault(key.strip(), value.strip())  # the first core's entries
    except OSError:
        pass
    name = f"model:{info['model name']}" if "model name" in info else platform.processor() or platform.machine()
    flags = " ".join(sorted(x for x in info.get("flags", "").split() if x.startswith(("avx", "fma"))))
    return f"{name} | {flags}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--validate-27"]:  # python tests/record_golden.py --validate-27 "<the deliberate change>"
        why = " ".join(sys.argv[2:]).strip()
        if not why:
            sys.exit("say why: --validate-27 <the deliberate change>")
        record_validate_27(why)
        print(f"27 predictions recorded with jax {jax.__version__}")
        sys.exit(0)
    data = record()
    np.savez_compressed(os.path.join(ROOT, "tests", "data", "golden_model.npz"), **data)
    print(f"{len(data)} arrays recorded with jax {jax.__version__}")

"""Sweep plots: a PNG with both fronts, the top-k and the baselines."""
from types import SimpleNamespace

from sax_jax.plots import plot_sweep


def _rec(t, mem, xb):
    return {"step_time_s": t, "memory_bytes": mem * 2**30, "cross_building_bytes": xb * 1e12}


def test_plot_sweep_writes_png(tmp_path):
    front = [_rec(5.0, 70, 3.0), _rec(6.0, 20, 1.0), _rec(9.0, 5, 1.0)]
    result = SimpleNamespace(scenario="t", top=front[:1],
                             pareto={"time_vs_memory": front, "time_vs_cross_building": front[:2]})
    base = {"production": {**_rec(14.0, 24, 1.1)}, "infeasible": {"step_time_s": None}}
    path = plot_sweep(result, str(tmp_path / "f.png"), base)
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000

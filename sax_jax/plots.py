"""Plots of sweep results (matplotlib, file output only: no display needed)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless: sweeps run on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402

_AXIS = {"memory_bytes": ("memory per GPU (GiB)", 2**30), "cross_building_bytes": ("cross-building traffic "
                                                                                  "per step (TB)", 1e12)}


def plot_sweep(result, path: str, baselines: dict | None = None) -> str:
    """Pareto fronts (step time vs each front metric) with the top-k and the baselines marked; writes `path`."""
    from .search.exhaustive import FRONTS
    fig, axes = plt.subplots(1, len(FRONTS), figsize=(6 * len(FRONTS), 4.5), squeeze=False)
    for ax, (name, metric) in zip(axes[0], FRONTS.items()):
        label, scale = _AXIS[metric]
        front = sorted(result.pareto.get(name, []), key=lambda r: r["step_time_s"])
        ax.step([r[metric] / scale for r in front], [r["step_time_s"] for r in front], where="post",
                marker="o", ms=3, label=f"Pareto front ({len(front)})")
        ax.scatter([r[metric] / scale for r in result.top], [r["step_time_s"] for r in result.top], marker="x",
                   color="C3", zorder=3, label=f"top {len(result.top)}")
        for bname, b in (baselines or {}).items():
            if b.get("step_time_s") is not None and b.get(metric) is not None:
                ax.scatter([b[metric] / scale], [b["step_time_s"]], marker="s", color="C2", zorder=3)
                ax.annotate(bname, (b[metric] / scale, b["step_time_s"]), fontsize=8, xytext=(4, 4),
                            textcoords="offset points")
        ax.set_xlabel(label)
        ax.set_ylabel("step time (s)")
        ax.set_title(f"{result.scenario}: {name.replace('_', ' ')}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

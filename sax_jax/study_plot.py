"""Figures of a study (matplotlib, file output only): a speedup heatmap (latency x bandwidth) per model and the
time breakdown of production vs sax's best at one point."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless: studies run on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .cost import BREAKDOWN_KEYS  # noqa: E402


def _slice(points: list, axes: list) -> list:
    """The points of a model at the largest value of every axis beyond the first two (the full system)."""
    rest = axes[2:]
    top = {a: max(p["values"][a] for p in points) for a in rest}
    return [p for p in points if all(p["values"][a] == top[a] for a in rest)]


def plot_heatmaps(result: dict, out_dir: str) -> list:
    """heatmap_<model>.png: speedup over production per (first axis, second axis); empty cells are infeasible."""
    written = []
    for label, info in result["models"].items():
        axes = info["axes"]
        pts = [p for p in result["points"] if p["model"] == label]
        if len(axes) < 2 or not pts:
            continue
        pts = _slice(pts, axes)
        rows = sorted({p["values"][axes[0]] for p in pts})
        cols = sorted({p["values"][axes[1]] for p in pts})
        grid = np.full((len(rows), len(cols)), np.nan)
        for p in pts:
            if p["speedup_vs_production"] is not None:
                grid[rows.index(p["values"][axes[0]]), cols.index(p["values"][axes[1]])] = p["speedup_vs_production"]
        fig, ax = plt.subplots(figsize=(1.6 * len(cols) + 2.5, 0.6 * len(rows) + 2))
        im = ax.imshow(grid, cmap="viridis", aspect="auto", origin="lower")
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}x", ha="center", va="center", color="w" if v < np.nanmean(grid) else "k")
        ax.set_xticks(range(len(cols)), [f"{c:g}" for c in cols])
        ax.set_yticks(range(len(rows)), [f"{r:g}" for r in rows])
        ax.set_xlabel(axes[1])
        ax.set_ylabel(axes[0])
        fixed = ", ".join(f"{a}={pts[0]['values'][a]:g}" for a in axes[2:])
        ax.set_title(f"{label}: speedup over production" + (f" ({fixed})" if fixed else ""))
        fig.colorbar(im, ax=ax, label="speedup")
        fig.tight_layout()
        name = f"heatmap_{label}.png"
        fig.savefig(f"{out_dir}/{name}", dpi=120)
        plt.close(fig)
        written.append(name)
    return written


def breakdown_point(points: list):
    """The point with the largest speedup over production that has both breakdowns: where the gap is explained."""
    ok = [p for p in points if p["speedup_vs_production"] is not None and p["production_breakdown"]]
    return max(ok, key=lambda p: p["speedup_vs_production"]) if ok else None


def plot_breakdown(result: dict, out_dir: str) -> list:
    """breakdown.png: stacked time terms of production and of sax's best at ``breakdown_point``."""
    p = breakdown_point(result["points"])
    if p is None:
        return []
    bars = {"production": p["production_breakdown"], "sax best": p["best_breakdown"]}
    terms = [k for k in BREAKDOWN_KEYS if any(b[k] > 0 for b in bars.values())]
    fig, ax = plt.subplots(figsize=(5, 4.5))
    bottom = np.zeros(len(bars))
    for k in terms:
        vals = np.array([b[k] for b in bars.values()])
        ax.bar(list(bars), vals, bottom=bottom, label=k)
        bottom += vals
    where = ", ".join(f"{k}={v:g}" for k, v in p["values"].items())
    ax.set_title(f"{p['model']} at {where}\n{p['speedup_vs_production']:.2f}x", fontsize=9)
    ax.set_ylabel("time per step, s (terms may overlap)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{out_dir}/breakdown.png", dpi=120)
    plt.close(fig)
    return ["breakdown.png"]

"""Plot of a sensitivity study (matplotlib, file output only): step time of the best design and of each baseline
against the varied value, crossovers marked."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")  # headless: studies run on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402

WIDE_SPAN = 10.0  # values spanning this factor or more get a logarithmic axis


def _axis_scale(ax, values, set_scale) -> None:
    """Log when the positive values span >= 10x; symlog when a 0 sits below such values (loss rates)."""
    pos = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if len(pos) < 2 or max(pos) / min(pos) < WIDE_SPAN:
        return
    if len(pos) == len([v for v in values if v is not None and math.isfinite(v)]):
        set_scale("log")
    else:
        set_scale("symlog", linthresh=min(pos))


def _nan(x):
    return float("nan") if x is None else x


def _pairs(crossovers: list) -> dict:
    """{(a, b): (at, step time there, ["axis from->to", ...])}: one mark per pair of values, every axis listed."""
    out = {}
    for c in crossovers:
        out.setdefault(tuple(c["between"]), (c["at"], c["step_time_s"], []))[2].append(
            f"{c['axis']} {c['from']}->{c['to']}")
    return out


def plot_sensitivity(study: dict, path: str) -> str:
    """Writes ``path``: one line for the best design, one per baseline; each crossover numbered, as a star at the
    bisected value and step time (or a shaded interval between the two values when not refined), with what
    changes there listed under the axes. Returns the path."""
    vary, points = study["vary"], study["points"]
    values = [p["value"] for p in points]
    pairs = _pairs(study["crossovers"])
    fig, ax = plt.subplots(figsize=(8, 5 + 0.15 * len(pairs)))
    best = [_nan(p["best"]["step_time_s"] if p["best"] else None) for p in points]
    ax.plot(values, best, marker="o", lw=2, color="C0", label="best design (exhaustive sweep)")
    names = list(points[0]["baselines"]) if points else []
    for i, name in enumerate(names):
        ax.plot(values, [_nan(p["baselines"][name]["step_time_s"]) for p in points], marker="s", ls="--",
                color=f"C{i + 1}", label=f"baseline {name}")
    notes, star_label = [], "crossover (bisected)"
    for i, ((a, b), (at, t_at, changes)) in enumerate(pairs.items(), start=1):
        if at is None:  # not refined (a whole-number field): the crossover lies somewhere in [a, b]
            ax.axvspan(a, b, color="grey", alpha=0.1)
            ax.annotate(str(i), (math.sqrt(a * b) if a > 0 else 0.5 * (a + b), 0.97),
                        xycoords=("data", "axes fraction"), ha="center", va="top", fontsize=9)
            notes.append(f"{i}: between {a:g} and {b:g}: " + ", ".join(changes))
        else:
            ax.axvline(at, color="grey", ls=":", lw=1)
            ax.plot([at], [_nan(t_at)], marker="*", ms=12, color="C3", ls="none", zorder=4, label=star_label)
            star_label = None  # one legend entry for all stars
            ax.annotate(str(i), (at, _nan(t_at)), xytext=(5, 5), textcoords="offset points", fontsize=9,
                        color="C3")
            notes.append(f"{i}: at {at:.4g}: " + ", ".join(changes))
    _axis_scale(ax, values, ax.set_xscale)
    _axis_scale(ax, [y for p in points for y in [p["best"] and p["best"]["step_time_s"]]
                     + [b["step_time_s"] for b in p["baselines"].values()]], ax.set_yscale)
    name = f"{vary['level']}.{vary['field']}"
    ax.set_xlabel(name)
    ax.set_ylabel("step time (s)")
    ax.set_title(f"{study['scenario']}: step time vs {name}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="best")
    if notes:
        fig.text(0.01, 0.01, "\n".join(notes), fontsize=7, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.03 * len(notes), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

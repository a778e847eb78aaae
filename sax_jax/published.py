"""What was measured for a design: the validation set's published runs of the same model on the same GPU.

``sax eval`` prints, next to its prediction, the published figure of a run with exactly this layout (same model,
GPU, GPU count, sequence length, global batch, precision, tp, pp, cp, vpp, mbs) where one exists, and the range of
MFU that published runs of the same model and GPU reached (each against the peak of its own precision), so a
prediction can be read against what was actually achieved.
"""
from __future__ import annotations

import math

from . import validation as V

LAYOUT_AXES = ("tp", "pp", "cp", "mbs")


def measured_step_s(case) -> float:
    """The measured step time of a case, whatever metric its source published."""
    sc = case.scenario
    gbs = sc.training.global_batch_sequences
    if case.metric == "iteration_s":
        return float(case.measured)
    if case.metric == "tokens_per_s":
        return gbs * sc.training.seq_len / case.measured
    probe = V.metrics_of(case, 1.0, True)  # metrics of a 1 s step: each scales as 1 / step time
    return probe[case.metric] / case.measured


def _matches(case, scenario, design: dict, dp: int | None) -> bool:
    sc, d = case.scenario, case.design
    if (sc.system.n_gpus, sc.training.seq_len, sc.training.global_batch_sequences, sc.training.precision) != (
            scenario.system.n_gpus, scenario.training.seq_len, scenario.training.global_batch_sequences,
            scenario.training.precision):
        return False
    if any(float(d.get(ax, 1)) != float(design.get(ax, 1)) for ax in LAYOUT_AXES):
        return False
    interleaved = design.get("schedule") == "interleaved"
    return float(d.get("vpp", 1)) == float(design.get("vpp", 1) if interleaved else 1)


def published_for(scenario, design: dict, dp: int | None = None) -> dict:
    """{"exact": [runs with this layout], "class": {runs, MFU range, GPU counts, precisions} of the same model
    and GPU} from the bundled validation set."""
    cases, _ = V.load_cases()
    same = [c for c in cases if c.scenario.model.name == scenario.model.name
            and c.scenario.system.gpu.name == scenario.system.gpu.name]
    rows = []
    for c in same:
        t = measured_step_s(c)
        if not (t > 0 and math.isfinite(t)):
            continue
        mfu = V.metrics_of(c, t, True)["mfu"]
        rows.append((c, t, mfu))
    exact = [{"id": c.id, "dataset": c.dataset, "source": c.source, "metric": c.metric, "measured": c.measured,
              "measured_step_s": t, "measured_mfu": mfu}
             for c, t, mfu in rows if _matches(c, scenario, design, dp)]
    klass = {"model": scenario.model.name, "gpu": scenario.system.gpu.name, "runs": len(rows)}
    if rows:
        klass.update(mfu_range=[min(r[2] for r in rows), max(r[2] for r in rows)],
                     gpus_range=[min(r[0].scenario.system.n_gpus for r in rows),
                                 max(r[0].scenario.system.n_gpus for r in rows)],
                     precisions=sorted({r[0].scenario.training.precision for r in rows}))
    return {"exact": exact, "class": klass}


def versus_ceiling(scenario, mfu, breakdown: dict, bands=None) -> dict | None:
    """A design predicted above the highest published MFU of its class (trust.py above_published_mfu) beside that
    run: both predictions' compute-only MFU and shares of the step (uncertainty.published_mfu), so the terms where the
    design gains on the best measured run can be read off. None at or below the ceiling, without one or without the
    run's breakdown in the committed file."""
    from . import trust, uncertainty
    top = trust.ceiling_exceeded(scenario, mfu, bands)
    if top is None or "max_shares" not in top:
        return None
    return {"id": top["max_id"], "n_gpus": top["max_n_gpus"], "measured_mfu": top["max"],
            "predicted_mfu": top["max_predicted_mfu"], "compute_mfu": top["max_compute_mfu"],
            "shares": top["max_shares"],
            "design": {"mfu": mfu, "compute_mfu": uncertainty.compute_mfu(mfu, breakdown),
                       "shares": uncertainty.breakdown_shares(breakdown)}}

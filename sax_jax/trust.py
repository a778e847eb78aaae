"""Trust signals attached to every result: what a number rests on and where it extrapolates.

* ``provisional_hardware``: the GPU's efficiency constants are starting values, not fitted to published runs
  (``efficiency.status: provisional`` in configs/hardware/*.yaml).
* ``changes_training_semantics``: a shown design uses a bounded-loss transport, which drops up to
  ``tolerated_loss`` of the gradient traffic at a deadline: faster, but not the same training run.
* ``beyond_validated_gpus``: the scenario has more GPUs than the largest published run of the bundled
  validation set (``sax validate``). The message says how much slower than predicted that extrapolation likely
  is: the validation set's published step times grow faster with the GPU count than the model's
  (``uncertainty.scale_gap``, per doubling), times the doublings beyond the largest run.
* ``beyond_validated_levels``: the system has levels above the building (campus, region); no validated run
  crosses a building, so cross-building numbers are model predictions without a measured reference.
* ``unmodelled_kernels``: the model has DeepSeek-V4's compressed attention or hyper-connections, whose kernels the
  step-time model charges only in part (its approximation, ``validation.APPROXIMATED_FEATURES``), and whose only
  published runs took longer than predicted (UNMODELLED_KERNELS_ERROR).
* ``above_published_mfu``: the best shown design's predicted MFU is above every published run of its class in
  the validation set (same GPU type, precision, dense or MoE; ``uncertainty.published_mfu``; a class of at least
  ``uncertainty.MIN_RUNS`` runs). Nothing that
  efficient was measured on that hardware, so the prediction rests on the model where it is least tested: a
  search's best design is where the model's errors concentrate, and one that beats every published run needs a
  reason of its own (its breakdown, ``sax eval``).
* ``moe_speedups_from_dense_runs``: the model has routed experts and no ranking group of the validation set (one
  table, one model, several layouts) is of an MoE model, so the speedup bands and the tie rule rest on dense
  runs only (``uncertainty.py``; the step-time band itself is the MoE runs').

Each signal is ``{"kind": ..., "message": ...}``; ``--json`` outputs carry them under ``"warnings"`` and the
tables print them underneath.
"""
from __future__ import annotations

import functools
import glob
import os

from .resources import bundled

VALIDATED_LEVELS = ("node", "building")  # every bundled validation run lives inside one building
# sax validate at 1721b59: the published runs of a model with DeepSeek-V4's attention and hyper-connections
# (Megatron-Bridge 26.08, DeepSeek-V4-Flash on 128 GB200s and 128 GB300s) are predicted this far below their step
# time (-25.7%, -28.5%); rewrite it when the model's terms for those kernels change
UNMODELLED_KERNELS_ERROR = (-0.285, -0.257)


@functools.lru_cache(maxsize=1)
def validated_range() -> dict:
    """Largest GPU count and the GPU types of the bundled validation runs (read from configs/validation)."""
    from .config import read_yaml
    n_max, gpus = 0, set()
    for path in sorted(glob.glob(os.path.join(bundled("validation"), "*.yaml"))):
        try:
            cases = read_yaml(path).get("cases") or []
        except ValueError:
            continue
        for c in cases:
            if isinstance(c, dict):
                try:
                    n_max = max(n_max, int(c.get("n_gpus") or 0))
                except (TypeError, ValueError):
                    pass
                if c.get("gpu"):
                    gpus.add(str(c["gpu"]))
    return {"max_gpus": n_max, "gpus": sorted(gpus), "levels": list(VALIDATED_LEVELS)}


def scenario_warnings(scenario) -> list:
    """Signals that hold for every result of a scenario (hardware, scale, cross-building levels)."""
    out = []
    gpu = scenario.system.gpu
    if gpu.efficiency.status != "calibrated":
        out.append({"kind": "provisional_hardware",
                    "message": f"GPU {gpu.name} is uncalibrated (efficiency status '{gpu.efficiency.status}'): its "
                               "efficiency constants are starting values, not fitted to published runs; "
                               "absolute step times may be off by more than the validated error"})
    rng = validated_range()
    n = scenario.system.n_gpus
    if rng["max_gpus"] and n > rng["max_gpus"]:
        out.append({"kind": "beyond_validated_gpus",
                    "message": f"{n:,} GPUs is beyond the largest validated run ({rng['max_gpus']:,} GPUs): "
                               "an extrapolation" + scale_gap_note(n, rng["max_gpus"])})
    out += moe_speedup_warnings(scenario)
    m = scenario.model
    if m.compressed_attention is not None or m.hyper_connections > 1:
        lo, hi = UNMODELLED_KERNELS_ERROR
        out.append({"kind": "unmodelled_kernels",
                    "message": "the model has DeepSeek-V4's compressed sparse attention or hyper-connections: their "
                               "sparse gathers, indexer loss and Sinkhorn kernels are not modelled, and the published "
                               f"runs of such a model are predicted {-100 * hi:.0f}-{-100 * lo:.0f}% faster than "
                               "measured: expect step times to be optimistic"})
    extra = [lv.name for lv in scenario.system.levels if lv.name not in VALIDATED_LEVELS]
    if extra:
        out.append({"kind": "beyond_validated_levels",
                    "message": f"{len(extra)} level(s) above the building ({', '.join(extra)}): no validated run "
                               "crosses a building, so cross-building costs are unvalidated model predictions"})
    return out


def scale_gap_note(n_gpus, max_gpus, bands=None) -> str:
    """What beyond_validated_gpus adds: the validated scale gap (uncertainty.scale_gap) carried over the doublings
    from the largest validated run to n_gpus; empty without a committed gap."""
    import math
    from . import uncertainty
    b = uncertainty.bands() if bands is None else bands
    gap = (b or {}).get("scale_gap")
    if not gap or not n_gpus > max_gpus > 0:
        return ""
    doublings = math.log2(n_gpus / max_gpus)
    more = math.expm1(gap["median_per_doubling"] * doublings)
    return (f"; the published step times grow {100 * gap['median_per_doubling']:.1f}% per doubling of the GPUs more "
            f"than the model's (median of {gap['n_pairs']} weak-scaling pairs; 80%: {100 * gap['q10']:+.1f}% to "
            f"{100 * gap['q90']:+.1f}%), so {doublings:.1f} doublings beyond it expect about {100 * more:.1f}% "
            "more than predicted")


def moe_speedup_warnings(scenario, bands=None) -> list:
    """The MoE caveat of the speedup bands (module docstring); ``bands`` defaults to the committed file."""
    from . import uncertainty
    if not uncertainty.scenario_is_moe(scenario):
        return []
    b = uncertainty.bands() if bands is None else bands
    rel = (b or {}).get("relative") or {}
    if not rel or rel.get("n_groups_moe", 0) > 0:
        return []
    return [{"kind": "moe_speedups_from_dense_runs",
             "message": f"the speedup bands and ties come from {rel['n_pairs']} run pairs of {rel['n_groups']} "
                        "ranking groups, all of dense models: the validation set has no published comparison of "
                        "layouts of one MoE model in one table, so for this MoE model they are likely too narrow "
                        "(expert dispatch, grouped GEMMs and host waits are where the model errs most)"}]


def ceiling_exceeded(scenario, mfu, bands=None) -> dict | None:
    """The committed ceiling of the scenario's class (uncertainty.published_mfu) when a predicted MFU (a fraction;
    None: nothing shown) is above it, else None. ``bands`` defaults to the committed file. A system whose buildings
    hold different GPU types has no one class; a class of fewer than MIN_RUNS runs (often of one model) says too
    little about what its hardware can reach."""
    from . import uncertainty
    b = uncertainty.bands() if bands is None else bands
    sys_ = scenario.system
    if mfu is None or not mfu > 0 or len({bd.gpu.name for bd in getattr(sys_, "buildings", ())}) > 1:
        return None
    key = uncertainty.mfu_class(sys_.gpu.name, scenario.training.precision, uncertainty.scenario_is_moe(scenario))
    top = ((b or {}).get("published_mfu") or {}).get(key)
    return top if top and top["n"] >= uncertainty.MIN_RUNS and mfu > top["max"] else None


def mfu_warnings(scenario, mfu, bands=None) -> list:
    """``above_published_mfu`` (module docstring) for a predicted MFU (ceiling_exceeded)."""
    from . import uncertainty
    top = ceiling_exceeded(scenario, mfu, bands)
    if top is None:
        return []
    sys_ = scenario.system
    what = (f"{scenario.training.precision} {uncertainty.model_class(uncertainty.scenario_is_moe(scenario))} runs "
            f"on {sys_.gpu.name}")
    return [{"kind": "above_published_mfu",
             "message": f"predicted MFU {100 * mfu:.1f}% is above all {top['n']} published {what} in the "
                        f"validation set (highest {100 * top['max']:.1f}%: {top['max_id']}, {top['max_n_gpus']:,} "
                        "GPUs): nothing this efficient was measured there, so read the step time as optimistic "
                        "unless the breakdown (sax eval) shows where the gain comes from"}]


def design_warnings(scenario, designs) -> list:
    """Signals of the shown designs (dicts {axis: value}): choices that change what training computes."""
    by_name = {t.name: t for t in scenario.transports}
    lossy = []
    for d in designs:
        t = by_name.get((d or {}).get("transport"))
        if t is not None and t.loss_recovery == "bounded_loss" and t.name not in lossy:
            lossy.append(t.name)
    out = []
    for name in lossy:
        t = by_name[name]
        out.append({"kind": "changes_training_semantics",
                    "message": f"transport '{name}' is bounded-loss: it drops up to {100 * t.tolerated_loss:g} % of "
                               "the gradient traffic at a deadline; faster, but it changes training semantics "
                               "(convergence not modeled)"})
    return out


def feasible_mfu(record) -> float | None:
    """The predicted MFU of a shown result record ({"mfu", "step_time_s", ...}), None when it has no step time
    (infeasible) or there is no record: what mfu_warnings reads."""
    if not record or record.get("step_time_s") is None:
        return None
    return record.get("mfu")


def warnings_for(scenario, designs=(), best_mfu=None) -> list:
    """Every signal for the shown designs; best_mfu: the predicted MFU of the best of them (above_published_mfu)."""
    return scenario_warnings(scenario) + design_warnings(scenario, list(designs)) + mfu_warnings(scenario, best_mfu)


def print_warnings(warnings, console) -> None:
    for w in warnings:
        console.print(f"[yellow]warning[/yellow] ({w['kind']}): {w['message']}", soft_wrap=True)

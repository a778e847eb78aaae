"""What the model returns: named terms of the step, the breakdown they form, and the ``Cost`` of a design.

Every term of the step is a ``Term``: seconds per microbatch on the slowest pipeline stage (``stage_s``: the
schedule multiplies it by the microbatches), seconds once per step outside the pipeline (``step_s``), the
cross-building bytes its own collectives move (whole job, per step) and the memory it holds per GPU. A term's
entry in the breakdown is ``microbatches x stage_s + step_s``; the cross-building traffic of a design is the sum
of its terms' bytes, so timing and traffic come from the same collective counts.
"""
from __future__ import annotations

from typing import NamedTuple

import jax

Array = jax.Array


class Term(NamedTuple):
    stage_s: Array | float = 0.0  # per microbatch on the slowest stage (inside the pipeline)
    step_s: Array | float = 0.0  # once per step (outside the pipeline)
    cross_bytes: Array | float = 0.0  # over campus/region links, whole job, per step
    memory_bytes: Array | float = 0.0  # per GPU of the first (fullest) stage

    def seconds(self, microbatches) -> Array:
        return microbatches * self.stage_s + self.step_s


class Breakdown(NamedTuple):
    """Seconds per step by term; sums to the step time of a feasible point. Field order is report order."""
    compute: Array
    offload: Array  # waits for activation copies to / from host memory (cost/offload.py)
    tp: Array
    cp: Array
    ep: Array
    pp_p2p: Array
    bubble: Array
    dp_exposed: Array
    outer_sync: Array  # DiLoCo's outer synchronization across workers, per step (cost/outer_sync.py)
    optimizer: Array
    straggler: Array
    stall: Array


BREAKDOWN_KEYS = Breakdown._fields


class Cost(NamedTuple):
    step_time_s: Array  # +inf when infeasible
    tokens_per_s: Array
    mfu: Array
    memory_bytes: Array  # peak per GPU (first pipeline stage); several GPU types: cost/hetero.combine
    breakdown: Breakdown  # seconds; sums to the step time of a feasible point
    cross_building_bytes: Array  # whole job, per step, over campus and region links
    feasible: Array
    violation: Array  # bit mask over feasibility.VIOLATIONS
    group_levels: Array  # [4 (tp, cp, pp, dp), levels]: participants k_L of each group per level
    raw_step_time_s: Array  # the time even when infeasible (for penalties and explanations)
    # failures beyond the step's stalls (cost/goodput.py)
    interruptions_per_hour: Array  # job-ending failures per hour
    degraded_fraction: Array  # fraction of wall time on fewer planes
    checkpoint_interval_s: Array  # Daly's optimum unless the scenario fixes one
    ettr: Array  # effective training time ratio
    goodput_tokens_per_s: Array  # tokens/s x ettr; 0 when infeasible
    # microbursts and bounded loss (cost/bursts.py, transport.gradient_factors)
    burst_round_loss: Array  # per-round loss probability of one flow at the worst level the design crosses
    gradient_drop_fraction: Array  # expected fraction of the gradient a bounded-loss transport drops (training mean)
    gradient_variance_increase: Array  # the relative gradient variance that adds, d / (1 - d) (training mean)
    # low-communication training (cost/outer_sync.py): time to the same loss, not only time per step
    tokens_multiplier: Array  # tokens to the synchronous run's loss / its tokens (1 for every-step sync)
    effective_tokens_per_s: Array  # goodput_tokens_per_s / tokens_multiplier; 0 when infeasible
    time_to_target_s: Array  # Training.target_tokens / effective_tokens_per_s; +inf when infeasible
    # infrastructure co-design (cost/provision.py); 0 without a prices file
    network_usd_per_hour: Array  # the cross-building network as provisioned
    cost_usd_per_hour: Array  # GPUs + that network
    train_cost_usd: Array  # cost_usd_per_hour x time_to_target_s; +inf when infeasible
    paced_by: Array  # GPU type (buildings.building_types order) whose stages or replicas pace the step; 0 if one type


# What a report of one design carries (the rest of Cost is internal: per-level spans, the unmasked time).
REPORT_FIELDS = ("step_time_s", "tokens_per_s", "mfu", "memory_bytes", "cross_building_bytes", "feasible",
                 "violation", "breakdown", "goodput_tokens_per_s", "ettr", "interruptions_per_hour",
                 "degraded_fraction", "checkpoint_interval_s", "burst_round_loss", "gradient_drop_fraction",
                 "gradient_variance_increase", "tokens_multiplier", "effective_tokens_per_s", "time_to_target_s",
                 "network_usd_per_hour", "cost_usd_per_hour", "train_cost_usd", "paced_by")

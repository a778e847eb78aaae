"""The step-time model: one module per physical concern, pure functions of one design point, no jit inside.
``step.step_time`` composes their named terms; ``evaluate.py`` lifts it to batches with a single jit(vmap(...)).
"""
from .feasibility import VIOLATIONS, violation_reasons
from .step import step_time
from .terms import BREAKDOWN_KEYS, Cost

__all__ = ["Cost", "step_time", "BREAKDOWN_KEYS", "VIOLATIONS", "violation_reasons"]

"""The step-time model: one module per physical concern, pure functions of one design point, no jit inside.

``step.step_time`` composes them; ``evaluate.py`` lifts it to batches with a single jit(vmap(...)).
"""
from .step import Cost, step_time, BREAKDOWN_KEYS, VIOLATIONS, violation_reasons

__all__ = ["Cost", "step_time", "BREAKDOWN_KEYS", "VIOLATIONS", "violation_reasons"]

"""sax_jax: a GPU-accelerated design-space explorer for scale-across LLM training.

Design points are integer/float tensors; one jit-compiled, vmapped step-time model evaluates them.

    >>> import sax_jax as sx
    >>> sc = sx.load_scenario("configs/scenarios/default.yaml")
    >>> cost = sx.evaluate(sc, sc.space.decode(jnp.arange(1024)))
    >>> result = sx.sweep(sc, top_k=10)                       # exhaustive, streamed, on device
    >>> record = sx.search(sc, "evolution", budget=5000)     # evosax; also "relaxed" (optax), "random"
    >>> report = sx.validate()                               # published runs -> errors
"""
from .config import Scenario, load_scenario
from .cost import BREAKDOWN_KEYS, VIOLATIONS, Cost, violation_reasons
from .engine import Engine
from .evaluate import cost_to_dict, evaluate, evaluate_one
from .params import build_params
from .space import AXES, Design, DesignSpace, stack
from .specs import ConfigError
from .search.exhaustive import sweep
from .search.runner import run_search as search
from .validation import validate

__all__ = ["Scenario", "load_scenario", "Cost", "BREAKDOWN_KEYS", "VIOLATIONS", "violation_reasons", "evaluate",
           "evaluate_one", "cost_to_dict", "build_params", "AXES", "Design", "DesignSpace", "stack",
           "ConfigError", "design_from_dict", "sweep", "search", "validate", "Engine"]
__version__ = "0.1.0"


def design_from_dict(scenario: Scenario, values: dict, baseline: str | None = None) -> Design:
    """A single Design from {axis: value}; unspecified axes come from the baseline (default: the scenario's)."""
    return scenario.baseline_design(baseline, values)

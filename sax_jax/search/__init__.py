"""Searches over a scenario's design space: exhaustive (streaming), evolution (evosax), relaxed (optax)."""

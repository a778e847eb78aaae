"""Stragglers: a synchronous step waits for its slowest rank.

Every step ends in a data-parallel reduction (and the pipeline couples its stages), so the step lasts as long
as the slowest of the job's N GPUs. When each GPU's kernel time varies independently around its mean with a
coefficient of variation cv (clock and thermal differences, HBM and power throttling, OS and driver noise), the
expected slowest of N is mean x (1 + cv x E[max of N standard normals]). E[max] grows like sqrt(2 ln N)
(extreme-value asymptotics); Blom's (1958) plotting position Phi^-1((N - 0.375)/(N + 0.25)) is within ~1% of the
exact expectation from N = 4 on (0 for N = 1; 0.59 for 2, exact 0.56; 1.43 for 8, exact 1.42; 3.23 for 1,000,
exact 3.24). cv is a
fitted cluster constant (GPU YAML ``efficiency.straggler_cv``, benchmarks/calibrate.py --straggler); it applies
to the kernel time only, communication has its own terms.
"""
import jax.numpy as jnp
from jax.scipy.special import ndtri

from .terms import Term

BLOM_ALPHA = 0.375  # Blom (1958): E[X_(N:N)] ~= Phi^-1((N - alpha)/(N - 2 alpha + 1)) for normal order statistics


def expected_max_std_normal(n):
    """E[max of n iid standard normals] (Blom's approximation); 0 for n <= 1."""
    n = jnp.maximum(n, 1.0)
    return ndtri((n - BLOM_ALPHA) / (n - 2.0 * BLOM_ALPHA + 1.0))


def straggler_term(n_gpus, compute_s, cv) -> Term:
    """Waiting for the slowest of ``n_gpus`` ranks whose kernel time per step ``compute_s`` varies with ``cv``."""
    return Term(step_s=cv * expected_max_std_normal(n_gpus) * compute_s)

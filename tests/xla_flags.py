"""The XLA flags the test suite and its recorders (record_golden.py) compile under.

XLA:CPU compiles the tests' programs with LLVM at -O0 (backend optimization level 0): the suite is compile-bound (the
step model is ~1 MB of HLO; on the default scenario with 512 designs compile takes 8.4 s at the default level and 5.7
s at 0, evaluation 3.9 ms and 9.6 ms), and the tests check numbers, not code generation. XLA:CPU does not enable fast
math, so the level moves only the last bits of float results (a sum over 512 step times agreed to 3e-10 relative);
the goldens and the 27-run record are recorded under the same flags, so they stay bit-identical on the recording
machine. apply() must run before jax initializes its backend; a level already set in XLA_FLAGS wins.
"""
import os

LEVEL_FLAG = "--xla_backend_optimization_level=0"


def apply() -> str:
    """Add LEVEL_FLAG to XLA_FLAGS unless a level is set there; returns the flags in effect."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        flags = (flags + " " + LEVEL_FLAG).strip()
        os.environ["XLA_FLAGS"] = flags
    return flags

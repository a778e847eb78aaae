"""The XLA flags the test suite and its recorders (record_golden.py) compile under.

The suite is compile-bound: on 2 cores, XLA:CPU's backend compile was 62% of all test time (3,878 of 6,292 s, summed
over both workers, jax.monitoring's backend_compile_duration), tracing 12% and lowering 5%. The step model is ~1 MB of
HLO, and the tests check numbers, not code generation, so the tests compile it the cheap way:

* ``--xla_backend_optimization_level=0``: LLVM at -O0. Default scenario, 512 designs, measured on one machine:
  compile 8.4 s -> 5.7 s, evaluation 3.9 ms -> 9.6 ms.
* ``--xla_cpu_use_fusion_emitters=false``: XLA:CPU's older loop emitters instead of its MLIR fusion emitters, whose
  lowering pipeline is most of the remaining compile. Same scenario on another, ~1.8x slower machine, one run after
  the other: compile 12.9 s -> 6.4 s at -O0 (17.3 s -> 9.5 s at the default level). It does not speed up the sweep's grid program as much
  (32.4 s -> 26.5 s), and there throughput dropped ~11%, so users' `sax` runs keep XLA's defaults.

Neither flag enables fast math: only the last bits of float results move (1.8e-7 relative at most over 512 step
times). The goldens and the 27-run record are recorded under the same flags, so they stay bit-identical on the
recording machine. apply() must run before jax initializes its backend; a flag already set in XLA_FLAGS wins.
"""
import os

FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


def apply() -> str:
    """Add each of FLAGS to XLA_FLAGS unless that flag is set there; returns the flags in effect."""
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in FLAGS:
        if flag.split("=")[0] not in flags:
            flags = (flags + " " + flag).strip()
    os.environ["XLA_FLAGS"] = flags
    return flags


def with_flags(extra: str) -> str:
    """XLA_FLAGS for a subprocess: the suite's flags in effect plus ``extra`` (e.g. a host device count)."""
    return (os.environ.get("XLA_FLAGS", "") + " " + extra).strip()

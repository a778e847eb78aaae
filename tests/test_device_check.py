"""benchmarks/device_check.sh, the GPU check run in one call of a lent device machine: what its first real run
(H200, 2026-12-04) broke must not come back, and on a machine without a GPU it must say so and pass."""
import os
import re
import subprocess

import jax
import pytest

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "benchmarks", "device_check.sh")
DEVICE_CALL_LIMIT_S = 600  # the device tool's longest single command; the whole check must fit in one
STEP = re.compile(r"^run (\S+) (\d+) (.*)$", re.M)


def _steps():
    return [(name, int(limit), cmd) for name, limit, cmd in STEP.findall(open(SCRIPT).read())]


def test_steps_fit_one_device_call_and_the_header_says_their_sum():
    steps = _steps()
    assert len(steps) == 6, [s[0] for s in steps]
    total = sum(limit for _, limit, _ in steps)
    assert total <= DEVICE_CALL_LIMIT_S
    assert f"sum\n# to {total} s" in open(SCRIPT).read()


def test_pytest_steps_run_in_one_process():
    """xdist workers (the project's addopts) each preallocate 75% of the GPU's memory: the second one failed with
    CUDA out of memory on the H200."""
    pytest_steps = [cmd for _, _, cmd in _steps() if "pytest" in cmd]
    assert len(pytest_steps) == 2
    for cmd in pytest_steps:
        assert " -n 0 " in cmd, cmd


def _run(tmp_path, *args, **env):
    out = tmp_path / "out"
    res = subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OUT": str(out), **env})
    return res, out


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="checks the script's behaviour without a GPU")
def test_without_a_gpu_it_says_so_and_passes(tmp_path):
    res, out = _run(tmp_path)
    assert res.returncode == 0, res.stderr
    assert "no GPU" in (out / "summary.txt").read_text()


def test_only_runs_the_named_steps(tmp_path):
    """ONLY with no matching step runs nothing (no step output, an empty summary) and passes."""
    res, out = _run(tmp_path, "--tiny", ONLY="no_such_step")
    assert res.returncode == 0, res.stderr
    assert (out / "summary.txt").read_text() == ""
    assert sorted(p.name for p in out.iterdir()) == ["devices.err", "devices.txt", "summary.txt"]

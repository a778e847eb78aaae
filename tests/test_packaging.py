"""Packaging: the bundled configs and validation data ship inside the package and are found by name.

``setup.py build_py`` lays the package out exactly as a wheel installs it (sax_jax/ with sax_jax/configs/);
the CLI then runs from that layout and an empty working directory, so it cannot lean on the checkout.
``.ci/run`` additionally pip-installs the package non-editable and runs the CLI from an empty directory.
"""
import json
import os
import subprocess
import sys

import pytest

import sax_jax as sx
from sax_jax import resources

from conftest import CONFIGS, ROOT


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    lib = tmp_path_factory.mktemp("build_lib")
    out = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return str(lib)


def _run(lib, cwd, *argv):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", resources.ENV)}
    env["PYTHONPATH"] = lib
    return subprocess.run([sys.executable, "-m", "sax_jax.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_build_carries_configs_and_validation_data(built):
    pkg = os.path.join(built, "sax_jax", "configs")
    for rel in ("scenarios/default.yaml", "scenarios/huge-four-buildings.yaml", "systems/two-buildings-h100.yaml",
                "hardware/H100-SXM-80GB.yaml", "network/transports.yaml", "validation/calibration.yaml",
                "validation/korthikanti2022.yaml", "validation/uncertainty.json", "data/published_runs.csv"):
        assert os.path.isfile(os.path.join(pkg, rel)), rel
    shipped = {os.path.relpath(os.path.join(d, f), pkg) for d, _, fs in os.walk(pkg) for f in fs}
    in_repo = {os.path.relpath(os.path.join(d, f), CONFIGS) for d, _, fs in os.walk(CONFIGS) for f in fs
               if f.endswith((".yaml", ".csv", ".json", ".npz"))}  # .npz: MoE activation traces
    assert shipped == in_repo


def test_installed_layout_runs_from_an_empty_directory(built, tmp_path):
    out = _run(built, str(tmp_path), "space", "default", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["size"] == 8_748_000
    probe = subprocess.run([sys.executable, "-c", "import sax_jax.resources as r; print(r.configs_dir())"],
                           cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": built}, capture_output=True,
                           text=True, timeout=120)
    assert probe.stdout.strip() == os.path.join(built, "sax_jax", "configs")
    bad = _run(built, str(tmp_path), "space", "nosuch")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "huge-four-buildings" in bad.stderr


def test_checkout_finds_its_configs():
    assert os.path.samefile(resources.configs_dir(), CONFIGS)
    assert os.path.isfile(resources.bundled("data", "published_runs.csv"))
    assert "default" in resources.bundled_names() and "huge-four-buildings" in resources.bundled_names()


@pytest.mark.parametrize("name", ["default", "default.yaml", "configs/scenarios/default.yaml",
                                  os.path.join(CONFIGS, "scenarios", "default.yaml")])
def test_scenario_by_name_or_path(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the checkout: configs/scenarios/... falls back to the bundled copy
    assert sx.load_scenario(name).space.size == 8_748_000


def test_sax_configs_env(tmp_path, monkeypatch):
    monkeypatch.setenv(resources.ENV, str(tmp_path / "nothere"))
    with pytest.raises(sx.ConfigError, match=resources.ENV):
        resources.configs_dir()
    monkeypatch.setenv(resources.ENV, CONFIGS)
    assert resources.configs_dir() == CONFIGS


def test_bundled_csv_matches_the_published_runs_in_tests():
    with open(resources.bundled("data", "published_runs.csv")) as a, \
            open(os.path.join(ROOT, "tests", "data", "published_runs.csv")) as b:
        assert a.read() == b.read()

"""Every bundled scenario renders a report (its own file: the slowest check of the suite, ~5 min on 2 cores, so
pytest-xdist's whole-file distribution runs it beside test_report.py instead of after it)."""
import glob
import math
import os

import pytest

import sax_jax as sx
from sax_jax import report_data as R
from sax_jax.report_html import render

from conftest import CONFIGS

SCENARIOS = sorted(glob.glob(os.path.join(CONFIGS, "scenarios", "*.yaml")))


@pytest.mark.parametrize("path", SCENARIOS, ids=os.path.basename)
def test_every_bundled_scenario_reports(path):
    sc = sx.load_scenario(path)
    d = R.collect(sc, top_k=3, varies=[], search_budget=2000)
    assert d["top"], f"{sc.name}: no feasible design"
    page = render(d, "test")
    assert f"sax report: {sc.name}" in page
    assert math.isfinite(d["top"][0]["step_time_s"])

import os

import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "configs")
DEFAULT = os.path.join(CONFIGS, "scenarios", "default.yaml")


@pytest.fixture(scope="session")
def default_scenario():
    return sx.load_scenario(DEFAULT)


@pytest.fixture(scope="session")
def default_params(default_scenario):
    return sx.build_params(default_scenario)


@pytest.fixture(scope="session")
def sample_batch(default_scenario):
    """A fixed batch of 512 designs spread over the default space (same shape everywhere: one compile)."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, default_scenario.space.size, 512)
    return default_scenario.space.decode(jnp.asarray(idx, jnp.int32)), idx


def scaled(params, **level_scales):
    """Params with per-level network fields multiplied (e.g. bw_Bps=2.0)."""
    net = params.net._replace(**{k: getattr(params.net, k) * v for k, v in level_scales.items()})
    return params._replace(net=net)

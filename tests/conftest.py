import atexit
import os
import shutil
import tempfile

import xla_flags

xla_flags.apply()  # before jax starts its backend (xla_flags.py: why)

import jax  # noqa: E402
import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "configs")
DEFAULT = os.path.join(CONFIGS, "scenarios", "default.yaml")

# One persistent compilation cache for the whole test session, in a directory of its own (the suite neither fills the
# user's ~/.cache nor shares cache files with another process). Modules drop their compiled programs (below), and many
# compile the same step model again at the same shapes: from the cache those recompiles are a file read. CLI runs in
# subprocesses inherit the directory through SAX_COMPILE_CACHE_DIR; in-process ones find it already configured.
if not (os.environ.get("SAX_COMPILE_CACHE_DIR") or os.environ.get("JAX_COMPILATION_CACHE_DIR")):
    os.environ["SAX_COMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="sax-test-xla-")
    atexit.register(shutil.rmtree, os.environ["SAX_COMPILE_CACHE_DIR"], ignore_errors=True)
jax.config.update("jax_compilation_cache_dir",
                  os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.environ["SAX_COMPILE_CACHE_DIR"])


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module. Every XLA:CPU executable maps ~25 memory regions; the
    suite compiles thousands of programs in one process, and past the kernel's vm.max_map_count (65,530 by default)
    LLVM's next allocation fails: the full suite aborted or segfaulted inside XLA compilation at varying tests
    (each passes alone). Modules share no compiled program worth keeping, so this only costs recompiles of the
    session fixtures' few programs."""
    yield
    jax.clear_caches()


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


def f32(x):
    return jnp.asarray(x, jnp.float32)


def hand_train(sp=1.0, flash=0.0):
    """A hand-made TrainP: 4 x 2048-token sequences on 8 GPUs, 16-bit weights, fp32 grads, Adam."""
    from sax_jax.params import TrainP
    return TrainP(gbs=f32(4), seq=f32(2048), param_bytes=f32(2), grad_bytes=f32(4), grad_reduce_bytes=f32(4),
                  opt_bytes=f32(12), seq_parallel=f32(sp), flash=f32(flash), allow_bounded=f32(0), n_gpus=f32(8),
                  lora=f32(0), lora_rank=f32(0))


def bundled_model(name):
    """A bundled model file (configs/models/NAME.yaml) as a ModelSpec."""
    from sax_jax.config import load_model
    return load_model(os.path.join(CONFIGS, "models", f"{name}.yaml"))


@pytest.fixture
def x64():
    """64-bit JAX for the test (hand-derived golden values compared at 1e-12)."""
    import jax
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def m22():
    from sax_jax.config import load_model
    from sax_jax.params import model_params
    return model_params(load_model(f"{CONFIGS}/models/megatron-22B.yaml"))

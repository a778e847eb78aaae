"""space.decode is right for every index of the space (or refuses): 2**31 - 1, 2**31, 2**53, the last index.

Reference: the pure-Python digits of ``digits_of`` and the device digit addition of ``decode_from``.
"""
import glob
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sax_jax as sx
from sax_jax.space import AXES, DesignSpace

from conftest import CONFIGS

HUGE = os.path.join(CONFIGS, "scenarios", "huge-four-buildings.yaml")


@pytest.fixture(scope="module")
def huge():
    return sx.load_scenario(HUGE)


def _reference(space, index):
    """Option values of one index from the host digits (Python ints, exact at any size)."""
    digits = space.digits_of(int(index))
    return {ax: space.option_names(ax)[d] for ax, d in zip(AXES, digits)}


def _dicts(space, design, n):
    return [space.to_dict(design, i) for i in range(n)]


def test_huge_is_the_largest_bundled_space(huge):
    sizes = {os.path.basename(p): sx.load_scenario(p).space.size
             for p in glob.glob(os.path.join(CONFIGS, "scenarios", "*.yaml"))}
    assert max(sizes.values()) == huge.space.size == 1_335_906_627_747_840


def test_issue_example(huge):
    """The index of the issue: int32 wrapping used to give tp 16, cp 8, pp 128."""
    d = huge.space.to_dict(huge.space.decode(np.array([616992846588830], np.int64)), 0)
    assert (d["tp"], d["cp"], d["pp"]) == (8, 4, 16)


@pytest.mark.parametrize("index", [0, 2**31 - 1, 2**31, 2**31 + 12345, 616992846588830, "last"])
def test_decode_matches_digits_and_decode_from(huge, index):
    space = huge.space
    index = space.size - 1 if index == "last" else index
    ref = _reference(space, index)
    for host in (index, np.int64(index), np.array([index], np.int64), [index], np.array([[index]], np.uint64)):
        d = space.decode(host)
        got = space.to_dict(d) if np.ndim(d.tp) == 0 else space.to_dict(jax.tree.map(lambda x: x.reshape(-1), d), 0)
        assert got == ref, (host, got, ref)
    start, _ = space.decode_from(jnp.asarray(space.digits_of(index), jnp.int32), jnp.zeros(1, jnp.int32))
    assert space.to_dict(start, 0) == ref


def test_decode_batch_across_2_31(huge):
    space = huge.space
    idx = np.arange(2**31 - 5, 2**31 + 5, dtype=np.int64)
    got = _dicts(space, space.decode(idx), len(idx))
    assert got == [_reference(space, i) for i in idx]


def test_last_index_and_beyond_refused(huge):
    space = huge.space
    assert _dicts(space, space.decode(np.array([space.size - 1])), 1)[0] == _reference(space, space.size - 1)
    for bad in (space.size, 2**53, -1, np.array([0, space.size], np.int64)):
        with pytest.raises(IndexError, match="outside the space"):
            space.decode(bad)


def test_2_53_in_a_space_that_large():
    """A synthetic space of ~2**70 points: 2**53 (not representable exactly in float64 + 1) and the last index."""
    spec = {"tp": list(range(1, 1025)), "cp": list(range(1, 1025)), "pp": list(range(1, 1025)),
            "vpp": list(range(1, 1025)), "mbs": list(range(1, 1025)), "channels": list(range(1, 1025)),
            "qps": list(range(1, 1025))}
    space = DesignSpace.from_dict(spec, ("a", "b"))
    assert space.size == 1024**7 > 2**63
    for index in (2**53, 2**53 + 1, 2**63 + 7, space.size - 1):
        d = space.to_dict(space.decode(index))
        assert d == _reference(space, index), index
    d = space.to_dict(space.decode(2**53 + 1))  # 2**53 = 8 * 1024**5: cp digit 8 (cp 9), channels digit 1 (channels 2)
    assert (d["tp"], d["cp"], d["pp"], d["vpp"], d["qps"], d["channels"]) == (1, 9, 1, 1, 1, 2)


def test_device_indices():
    """Device int32 indices (below 2**31) are exact; traced ones decode under jit; floats are refused."""
    sc = sx.load_scenario(os.path.join(CONFIGS, "scenarios", "default.yaml"))
    idx = jnp.arange(sc.space.size - 3, sc.space.size, dtype=jnp.int32)
    assert _dicts(sc.space, sc.space.decode(idx), 3) == [_reference(sc.space, i) for i in np.asarray(idx)]
    tp = jax.jit(lambda i: sc.space.decode(i).tp)(idx)
    assert np.asarray(tp).tolist() == [_reference(sc.space, i)["tp"] for i in np.asarray(idx)]
    with pytest.raises(IndexError):
        sc.space.decode(jnp.asarray([sc.space.size], jnp.int32))
    with pytest.raises(TypeError):
        sc.space.decode(jnp.asarray([1.5]))
    with pytest.raises(TypeError):
        sc.space.decode(2.0)


"""Mixed-radix encoding: index <-> digits <-> Design, on device and beyond int32."""
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import sax_jax as sx
from sax_jax.space import AXES, PLACEMENTS, placement_inner_table


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=8_748_000 - 1))
def test_decode_matches_host_digits(default_scenario, i):
    space = default_scenario.space
    d = space.decode(jnp.int32(i))
    digits = space.digits_of(i)
    assert space.encode(digits) == i
    for ax, dig in zip(AXES, digits):
        assert float(getattr(d, ax)) == pytest.approx(float(space.options[AXES.index(ax)][dig]))


def test_decode_from_beyond_int32(default_scenario):
    """A start past 2**31 (the 10**10-point sweeps) decodes exactly like the host digits."""
    wide = tuple(float(v) for v in range(1, 101))
    options = tuple(wide if ax in ("tp", "cp", "pp", "mbs", "vpp") else o
                    for ax, o in zip(AXES, default_scenario.space.options))
    space = sx.DesignSpace(options=options, transport_names=default_scenario.space.transport_names)
    assert space.size > 10**10
    start = space.size - 1000
    d, ok = space.decode_from(jnp.asarray(space.digits_of(start)), jnp.arange(2000, dtype=jnp.int32))
    ok = np.asarray(ok)
    assert ok[:1000].all() and not ok[1000:].any()
    for off in (0, 1, 517, 999):
        digits = space.digits_of(start + off)
        for k, ax in enumerate(AXES):
            assert float(np.asarray(getattr(d, ax))[off]) == pytest.approx(float(space.options[k][digits[k]]))


def test_design_from_dict_and_back(default_scenario):
    space = default_scenario.space
    d = space.design({"tp": 4, "schedule": "zb-h2", "placement": "tp,cp,pp,dp", "transport": "spray_sr"})
    back = space.to_dict(d)
    assert back["tp"] == 4 and back["schedule"] == "zb-h2" and back["placement"] == "tp-cp-pp-dp"
    assert back["transport"] == "spray_sr" and back["dp"] == "auto"


def test_unknown_names_are_config_errors(default_scenario):
    with pytest.raises(sx.ConfigError, match="unknown schedule"):
        default_scenario.space.design({"schedule": "pipedream"})
    with pytest.raises(sx.ConfigError, match="unknown design axis"):
        default_scenario.space.design({"tpp": 2})
    with pytest.raises(sx.ConfigError, match=">= 1"):
        default_scenario.space.design({"tp": 0})


def test_placement_table_orders_axes():
    tab = placement_inner_table()
    p = PLACEMENTS.index("tp-cp-dp-pp")
    # rows: tp, cp, pp, dp; tp has nothing inside, pp has everything inside
    assert tab[p, 0].sum() == 0 and tab[p, 2].sum() == 3 and tab[p, 3].tolist() == [1, 1, 0, 0]

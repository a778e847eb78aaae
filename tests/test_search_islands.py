"""Island model (search/islands.py) over 4 host CPU devices, in a subprocess (the device count is fixed when JAX
starts): migration moves the right members around the ring, a fixed seed and device count give the same result,
and the islands reach the sweep's exact optimum."""
import json
import os
import subprocess
import sys

import pytest

import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1] + "/benchmarks")
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, PartitionSpec as P
from sax_jax.search import islands
from sax_jax.search.genome import scenario_problem
from search_suite import exact_optimum, load_suite

out = {"devices": len(jax.local_devices())}

# migration: island i's 2 best (lowest fitness) replace island i+1's 2 worst
class S(dict):
    __getattr__ = dict.__getitem__
    def replace(self, **kw):
        return S({**self, **kw})
jax.tree_util.register_pytree_node(S, lambda s: (tuple(s.values()), tuple(s.keys())),
                                   lambda k, v: S(zip(k, v)))
fit = jnp.asarray([[5., 1., 3., 9., 2.]]) + 10 * jnp.arange(4)[:, None]  # island i: 10i + (5, 1, 3, 9, 2)
pop = jnp.broadcast_to(fit[..., None], (4, 5, 2))
mesh = Mesh(np.array(jax.local_devices()), (islands.AXIS,))
def body(pop, fit):
    s = islands.migrate(S(population=pop[0], fitness=fit[0]), 2, 4)
    return s.population[None], s.fitness[None]
try:
    f = islands._shard_map(body, mesh=mesh, in_specs=P(islands.AXIS), out_specs=P(islands.AXIS), check_vma=False)
except TypeError:
    f = islands._shard_map(body, mesh=mesh, in_specs=P(islands.AXIS), out_specs=P(islands.AXIS), check_rep=False)
p, f_ = jax.jit(f)(pop, fit)
out["migrated"] = np.asarray(f_).tolist()
out["pop_matches"] = bool(np.all(np.asarray(p)[..., 0] == np.asarray(f_)))

sc = load_suite(["h100-llama70b"])[0]
truth = exact_optimum(sc, cache_dir=sys.argv[2])
pb = scenario_problem(sc, inner_max=48)
runs = [islands.island_evolve(pb, budget=62_200, seed=s) for s in (4, 4)]
two = islands.island_evolve(pb, budget=62_200, seed=4, n_islands=2)
out["truth"] = truth["value"]
out["runs"] = [{"value": r.value, "digits": r.digits.tolist(), "evaluations": r.evaluations, "extras": r.extras}
               for r in runs + [two]]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    env = dict(os.environ, XLA_FLAGS=xla_flags.with_flags("--xla_force_host_platform_device_count=4"),
               JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, ROOT, str(tmp_path_factory.mktemp("islands_cache"))],
                          capture_output=True, text=True, env=env, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_migration_replaces_the_next_islands_worst_with_the_best(result):
    assert result["devices"] == 4
    # island i (fitness 10i + [5, 1, 3, 9, 2]) receives island i-1's best two (10(i-1) + 1, + 2) in place of its
    # worst two (the slots of 5 and 9, in fitness order: the best migrant into the slot of 5)
    expect = [[10 * i + x for x in (5, 1, 3, 9, 2)] for i in range(4)]
    for i in range(4):
        src = (i - 1) % 4
        expect[i][0], expect[i][3] = 10 * src + 1, 10 * src + 2
    assert result["migrated"] == expect and result["pop_matches"]


def test_same_seed_and_device_count_same_result(result):
    a, b, two = result["runs"]
    assert a == b
    assert a["extras"]["islands"] == 4 and two["extras"]["islands"] == 2
    assert a["evaluations"] <= 62_200 and two["evaluations"] <= 62_200


def test_islands_reach_the_sweeps_exact_optimum(result):
    """At 5% of the 1.24M space (as the single-population searches in test_search_subgrid.py)."""
    import numpy as np
    for run in result["runs"]:
        np.testing.assert_array_max_ulp(np.float32(run["value"]), np.float32(result["truth"]), maxulp=4)

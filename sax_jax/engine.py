"""The engine: a bounded cache of compiled programs and of built parameters, owned by whoever runs sweeps.

A compiled program depends on shapes and options (the space's option tables are constants of the block
program; the number of levels and transports are shapes; the topology is static), never on parameter values:
params are arguments. So the key of a program is built from those, and two scenarios that differ only in
values (a bandwidth, a latency, an efficiency) share one compiled program — a study over 20 bandwidths
compiles once. Both caches are LRU-bounded so a long-lived process (a notebook, a service) does not grow
without limit.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

import jax

from .params import build_params


def shape_key(tree) -> tuple:
    """Structure, shapes and dtypes of a pytree (static parts such as the topology are in the treedef)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return (treedef, tuple((tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x)))) for x in leaves))


class _LRU:
    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"cache capacity must be >= 1, got {capacity}")
        self.capacity, self._items = capacity, collections.OrderedDict()

    def get(self, key, make: Callable[[], Any]):
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key], False
        value = make()
        self._items[key] = value
        if len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return value, True

    def __len__(self):
        return len(self._items)

    def latest(self):
        return next(reversed(self._items.values())) if self._items else None

    def clear(self):
        self._items.clear()


class Engine:
    """Compiled programs keyed by shapes and options, parameters keyed by the scenario's fingerprint.

    ``compiles`` counts the programs this engine compiled (a cache miss), so a caller (or a test) can check
    that a study over parameter values compiled once.
    """

    def __init__(self, max_programs: int = 8, max_params: int = 32):
        self._programs = _LRU(max_programs)
        self._params = _LRU(max_params)
        self.compiles = 0

    def program(self, key, build: Callable[[], Any]):
        """The compiled program for ``key``, built (and compiled) by ``build()`` on a miss."""
        value, new = self._programs.get(key, build)
        self.compiles += int(new)
        return value

    def params(self, scenario):
        """``build_params(scenario)``, once per scenario content."""
        return self._params.get(scenario.fingerprint, lambda: build_params(scenario))[0]

    @property
    def latest_program(self):
        """The most recently used compiled program (e.g. for XLA's cost analysis)."""
        return self._programs.latest()

    @property
    def n_programs(self) -> int:
        return len(self._programs)

    def clear(self):
        self._programs.clear()
        self._params.clear()


DEFAULT_ENGINE = Engine()

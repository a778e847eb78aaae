"""Bundled data: scenarios, systems, models, hardware, transports and the published validation runs.

The repository keeps them in the top-level ``configs/`` directory; a built wheel carries the same tree as
package data under ``sax_jax/configs`` (``setup.py`` copies it at build time), so an installed ``sax`` finds
them from any directory. Lookup order: ``$SAX_CONFIGS`` (a directory laid out like ``configs/``), the
installed copy inside the package, then the checkout's ``configs/`` (running from a clone or an editable
install).

A scenario is named by path or by bundled name: ``default``, ``default.yaml``, ``configs/scenarios/default.yaml``
(the last also when no such file exists in the current directory: then the bundled copy is used).
"""
from __future__ import annotations

import os

from .specs import ConfigError

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
ENV = "SAX_CONFIGS"


def configs_dir() -> str:
    """The directory of the bundled configs (``scenarios/``, ``systems/``, ``validation/``, ...)."""
    env = os.environ.get(ENV)
    if env:
        if not os.path.isdir(env):
            raise ConfigError(None, ENV, env, "is not a directory", "unset it to use the bundled configs")
        return os.path.abspath(env)
    for cand in (os.path.join(PACKAGE_DIR, "configs"), os.path.join(os.path.dirname(PACKAGE_DIR), "configs")):
        if os.path.isdir(os.path.join(cand, "scenarios")):
            return cand
    # neither an installed copy nor a checkout: a broken install; name the place it should be
    return os.path.join(PACKAGE_DIR, "configs")


def bundled(*parts: str) -> str:
    """Path of a bundled file, e.g. ``bundled("validation")`` or ``bundled("data", "published_runs.csv")``."""
    return os.path.join(configs_dir(), *parts)


def bundled_names(kind: str = "scenarios") -> list:
    """Names (file stems) of the bundled YAML files of one kind: scenarios, systems, models, hardware."""
    d = bundled(kind)
    if not os.path.isdir(d):
        return []
    return sorted(os.path.splitext(f)[0] for f in os.listdir(d) if f.endswith((".yaml", ".yml")))


def _bundled_fallback(path: str, kind: str) -> str | None:
    """A bundled file for a name (``default``) or a checkout-relative path (``configs/scenarios/x.yaml``)."""
    norm = path.replace("\\", "/")
    if norm.startswith("./"):
        norm = norm[2:]
    if norm.startswith("configs/"):
        cand = bundled(*norm[len("configs/"):].split("/"))
        return cand if os.path.exists(cand) else None
    if "/" in norm:
        return None
    stem = norm[:-5] if norm.endswith(".yaml") else norm[:-4] if norm.endswith(".yml") else norm
    for ext in (".yaml", ".yml"):
        cand = bundled(kind, stem + ext)
        if os.path.isfile(cand):
            return cand
    return None


def find_scenario(name_or_path) -> str:
    """Path of a scenario file given a path or a bundled name; a ``ConfigError`` listing the names otherwise."""
    if name_or_path is None or str(name_or_path).strip() == "":
        raise ConfigError(None, "scenario", name_or_path, "no scenario given",
                          f"bundled scenarios: {', '.join(bundled_names())}")
    path = os.fspath(name_or_path)
    if os.path.isdir(path):
        raise ConfigError(path, None, path, "is a directory, not a scenario file",
                          f"give a scenario YAML file or a bundled name: {', '.join(bundled_names())}")
    if os.path.isfile(path):
        return path
    found = _bundled_fallback(path, "scenarios")
    if found is not None:
        return found
    raise ConfigError(path, None, path, "file not found, and no bundled scenario has that name",
                      f"bundled scenarios: {', '.join(bundled_names()) or '(none found: broken install?)'}")

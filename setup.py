"""Packaging glue: the top-level ``configs/`` tree ships inside the wheel as ``sax_jax/configs``.

Everything else is in pyproject.toml. ``configs/`` stays where it is in the repository; ``build_py`` copies
it into the build (wheel and regular installs). Editable installs and a checkout find ``configs/`` next to
the package instead (``sax_jax/resources.py``).
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_SUFFIXES = (".yaml", ".yml", ".csv", ".json", ".npz")  # .json: validation/uncertainty.json; .npz: traces


def _config_files():
    root = os.path.join(HERE, "configs")
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(DATA_SUFFIXES):
                src = os.path.join(dirpath, f)
                yield src, os.path.relpath(src, root)


class build_py_with_configs(build_py):
    """build_py that also copies configs/**.{yaml,csv,json} to <build>/sax_jax/configs/."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's configs/ directly
        for src, rel in _config_files():
            dst = os.path.join(self.build_lib, "sax_jax", "configs", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)

    def get_outputs(self, include_bytecode=1):
        outs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            outs += [os.path.join(self.build_lib, "sax_jax", "configs", rel) for _, rel in _config_files()]
        return outs


setup(cmdclass={"build_py": build_py_with_configs})

"""`sax` command line. Each subcommand lives in ``sax_jax.commands.<name>`` and registers itself."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from .specs import ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sax", description="sax_jax: scale-across LLM training design-space "
                                                            "explorer")
    sub = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

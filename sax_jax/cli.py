"""`sax` command line. Each subcommand lives in ``sax_jax.commands.<name>`` and registers itself.

Exit status: 0 success, 1 a run with reported problems (e.g. bad validation rows) or an internal error,
2 a user error (bad flag, file, key or value: one line on stderr naming it, never a traceback), 130 interrupted.
``SAX_DEBUG=1`` shows the Python traceback of an internal error.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from . import commands
from .specs import ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sax", description="sax_jax: scale-across LLM training design-space explorer. Scenarios are bundled "
                                "names (sax sweep default) or YAML paths.")
    sub = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse: usage error (2, message printed) or --help (0)
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `sax ... | head`: the reader went away; not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as err:  # noqa: BLE001 - a bug: one line, the traceback on request
        if os.environ.get("SAX_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err}. This is a bug in sax_jax, not in your input; "
              "rerun with SAX_DEBUG=1 for the traceback and report it.", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""One module per `sax` subcommand; each defines register(subparsers) and sets `func`."""
import json
import math
import os
import sys

from rich.console import Console

from ..report import json_safe


def whole_number(text: str) -> int:
    """A whole number (argparse type): '5000' and '5e3' yes, '2.5' and 'x' no; ranges are checked by the command."""
    try:
        v = float(text)
    except ValueError:
        raise ValueError(text) from None
    if not (math.isfinite(v) and v == int(v)):
        raise ValueError(text)
    return int(v)


def check_output_file(flag: str, path: str, suffixes: tuple, example: str) -> None:
    """An output file named by ``flag`` can be written: a known suffix, not a directory, in a writable directory
    that exists; checked before anything runs, so a typo costs nothing."""
    from ..specs import ConfigError
    parent = os.path.dirname(os.path.abspath(path))
    if not path.lower().endswith(suffixes):
        raise ConfigError(None, flag, path, "unknown file type", f"end the name in one of {', '.join(suffixes)}")
    if os.path.isdir(path):
        raise ConfigError(None, flag, path, "is a directory", f"give a file name, e.g. {example}")
    if not os.path.isdir(parent):
        raise ConfigError(None, flag, path, f"directory {parent} does not exist",
                          "create it first or write the file elsewhere")
    if not os.access(parent, os.W_OK):
        raise ConfigError(None, flag, path, f"directory {parent} is not writable")


def add_search_args(p, what: str, limit: float, default_budget: int) -> None:
    """--budget and --seed of the evolution search a command runs instead of a sweep on spaces above ``limit``
    designs (checked by search.runner.check_search_args, as for `sax search`)."""
    p.add_argument("--budget", type=whole_number, default=default_budget, metavar="N",
                   help=f"evaluations of the evolution search {what}, used instead of the sweep on spaces above "
                        f"{limit:.0e} designs (default {default_budget:,})")
    p.add_argument("--seed", type=whole_number, default=0, metavar="S", help="seed of that search (default 0)")


def output_console(json_mode: bool, piped_width: int = 120) -> Console:
    """The console for tables and progress: stderr when stdout carries JSON. Piped (logs, CI), rich would assume
    80 columns and truncate the design columns, so it gets ``piped_width`` unless COLUMNS says otherwise."""
    stream = sys.stderr if json_mode else sys.stdout
    return Console(file=stream, width=None if stream.isatty() or os.environ.get("COLUMNS") else piped_width)


def print_json(obj) -> None:
    """One JSON object on stdout: NaN and infinities become null (report.json_safe), never invalid JSON."""
    print(json.dumps(json_safe(obj), indent=2, allow_nan=False, default=str))

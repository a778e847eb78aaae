"""One module per `sax` subcommand; each defines register(subparsers) and sets `func`."""
import math


def whole_number(text: str) -> int:
    """A whole number (argparse type): '5000' and '5e3' yes, '2.5' and 'x' no; ranges are checked by the command."""
    try:
        v = float(text)
    except ValueError:
        raise ValueError(text) from None
    if not (math.isfinite(v) and v == int(v)):
        raise ValueError(text)
    return int(v)

"""One module per `sax` subcommand; each defines register(subparsers) and sets `func`."""

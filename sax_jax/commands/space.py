"""`sax space SCENARIO [--json]`: axes, options and the size of the design space."""
import json

from rich.console import Console
from rich.table import Table

from ..config import load_scenario
from ..space import AXES


def run(args) -> int:
    s = load_scenario(args.scenario)
    axes = {ax: s.space.option_names(ax) for ax in AXES}
    if args.json:
        print(json.dumps({"scenario": s.name, "n_gpus": s.system.n_gpus, "size": s.space.size, "axes": axes}))
        return 0
    t = Table(title=f"design space of {s.name}: {s.space.size:,} points on {s.system.n_gpus:,} GPUs")
    t.add_column("axis")
    t.add_column("n", justify="right")
    t.add_column("options")
    for ax, opts in axes.items():
        t.add_row(ax, str(len(opts)), ", ".join(map(str, opts)))
    Console().print(t)
    return 0


def register(sub):
    p = sub.add_parser("space", help="list the axes, options and size of a scenario's design space")
    p.add_argument("scenario")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)

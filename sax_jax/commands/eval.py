"""`sax eval SCENARIO [--baseline NAME] [--set axis=value ...] [--json]`: one design, explained."""
import json

from ..config import load_scenario
from ..evaluate import evaluate_one
from ..report import eval_record, print_eval
from ..specs import ConfigError


def parse_sets(items, file=None) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(file, "--set", item, "expected axis=value", "e.g. --set placement=tp-cp-pp-dp")
        k, v = item.split("=", 1)
        k, v = k.strip(), v.strip()
        try:
            v = int(v)
        except ValueError:
            try:
                v = float(v)
            except ValueError:
                pass
        out[k] = v
    return out


def run(args) -> int:
    scenario = load_scenario(args.scenario)
    design = scenario.baseline_design(args.baseline, parse_sets(args.set, "--set"))
    rec = eval_record(scenario, scenario.space.to_dict(design), evaluate_one(scenario, design))
    if args.json:
        print(json.dumps(rec, indent=2, allow_nan=False, default=str))
    else:
        print_eval(rec)
    return 0


def register(sub):
    p = sub.add_parser("eval", help="evaluate one design (a baseline, overridden by --set)")
    p.add_argument("scenario", help="scenario YAML, e.g. configs/scenarios/default.yaml")
    p.add_argument("--baseline", default=None, help="named baseline in the scenario (default: its default)")
    p.add_argument("--set", action="append", metavar="AXIS=VALUE", help="override one axis (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)

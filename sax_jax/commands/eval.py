"""`sax eval SCENARIO [--baseline NAME] [--set axis=value ...] [--json]`: one design, explained."""
import json

from ..config import check_axis_value, load_scenario
from ..evaluate import evaluate_one
from ..published import published_for
from ..report import eval_record, json_safe, print_eval
from ..space import AXES, CATEGORICAL_AXES
from ..specs import ConfigError


def parse_sets(items, file=None) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(file, "--set", item, "expected axis=value", "e.g. --set placement=tp-cp-pp-dp")
        k, v = item.split("=", 1)
        k, v = k.strip(), v.strip()
        if k not in AXES:
            raise ConfigError(file, "--set", item, "unknown design axis", f"axes are: {', '.join(AXES)}")
        if k in out:
            raise ConfigError(file, f"--set {k}", item, "axis set twice", "give each axis once")
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
    sets = parse_sets(args.set)  # syntax first: no scenario read for a malformed flag
    scenario = load_scenario(args.scenario)
    for k, v in sets.items():
        if k in CATEGORICAL_AXES and not isinstance(v, str):
            raise ConfigError(None, f"--set {k}", v, f"must be the name of a {k} option",
                              "see `sax space SCENARIO` for the names")
        check_axis_value(k, v, scenario.model, scenario.system, scenario.training, None, f"--set {k}")
    try:
        design = scenario.baseline_design(args.baseline, sets)
    except ConfigError as err:
        key = f"--set {err.key.split('.')[-1]}" if err.key and err.key.startswith("space.") else \
            ("--baseline" if err.key and err.key.startswith("baselines.") else err.key)
        raise ConfigError(None if key and key.startswith("--") else err.file, key, err.value,
                          err.problem, err.hint) from None
    rec = eval_record(scenario, scenario.space.to_dict(design), evaluate_one(scenario, design))
    rec["published"] = published_for(scenario, rec["design"])
    if args.json:
        print(json.dumps(json_safe(rec), indent=2, allow_nan=False, default=str))
    else:
        print_eval(rec)
    return 0


def register(sub):
    p = sub.add_parser("eval", help="evaluate one design (a baseline, overridden by --set)")
    p.add_argument("scenario", help="scenario: a bundled name (default, huge-four-buildings, ...) or a YAML path")
    p.add_argument("--baseline", default=None, help="named baseline in the scenario (default: its default)")
    p.add_argument("--set", action="append", metavar="AXIS=VALUE", help="override one axis (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)

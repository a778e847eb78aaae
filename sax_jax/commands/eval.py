"""`sax eval SCENARIO [--baseline NAME] [--set axis=value ...] [--json]`: one design, explained."""

from . import print_json
from .. import uncertainty
from ..config import load_scenario
from ..design_args import parse_sets, resolve_design
from ..evaluate import evaluate_one
from ..published import published_for, versus_ceiling
from ..moe.report import placement_record, print_placement
from ..report import eval_record, print_eval


def run(args) -> int:
    sets = parse_sets(args.set)  # syntax first: no scenario read for a malformed flag
    scenario = load_scenario(args.scenario)
    design = resolve_design(scenario, args.baseline, sets)
    cost = evaluate_one(scenario, design)
    rec = eval_record(scenario, scenario.space.to_dict(design), cost)
    rec["published"] = published_for(scenario, rec["design"])
    b = uncertainty.bands()
    if b is not None and cost["feasible"]:  # the measured step time's 80% band, as a sweep reports its best
        rec["band"] = uncertainty.design_band(b, scenario, rec["step_time_s"])
        versus = versus_ceiling(scenario, rec["mfu"], rec["breakdown"], b)
        if versus is not None:  # above every published run of its class: beside the best of them
            rec["versus_published"] = versus
    placed = placement_record(scenario, rec["design"], cost)  # MoE scenarios with an activation trace
    if placed is not None:
        rec["expert_placement"] = placed
    if args.json:
        print_json(rec)
    else:
        print_eval(rec)
        print_placement(placed)
    return 0


def register(sub):
    p = sub.add_parser("eval", help="evaluate one design (a baseline, overridden by --set)")
    p.add_argument("scenario", help="scenario: a bundled name (default, huge-four-buildings, ...) or a YAML path")
    p.add_argument("--baseline", default=None, help="named baseline in the scenario (default: its default)")
    p.add_argument("--set", action="append", metavar="AXIS=VALUE", help="override one axis (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)

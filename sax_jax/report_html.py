"""`sax report` as one self-contained HTML page: plotly charts with plotly.js embedded, so the page works
offline and can be mailed as one file; the report's data rides along as JSON (``<script id="sax-data">``).

The page checks itself: a last script counts the charts plotly drew and the script errors it caught and writes
both on ``<body>`` (``data-sax-charts="drawn/expected"``, ``data-sax-errors``), so a headless browser can tell a
page that rendered from one that did not (tests/test_report.py).
"""
from __future__ import annotations

import datetime
import html
import json
import math

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from .cost import BREAKDOWN_KEYS
from .report import fmt_time, json_safe

GiB = 2**30
# one colour per breakdown term, the same in every chart (colour-blind-safe Okabe-Ito first, then greys)
TERM_COLOURS = dict(zip(BREAKDOWN_KEYS, ("#0072B2", "#44AA99", "#E69F00", "#56B4E9", "#009E73", "#F0E442",
                                         "#D55E00", "#CC79A7", "#882255", "#999999", "#666666", "#000000")))
BASELINE_SYMBOLS = ("diamond", "square", "triangle-up", "cross", "x", "pentagon")
BASELINE_COLOURS = ("#D55E00", "#CC79A7", "#E69F00", "#56B4E9", "#999999", "#000000")
BEST_COLOUR = "#009E73"
CONFIG = {"displaylogo": False, "responsive": True}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 0 24px 48px; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
.sub { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 1em 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 10px 14px; min-width: 200px; }
.card .v { font-size: 1.5em; font-weight: 600; } .card .k { color: #555; font-size: 0.85em; }
.tie { color: #8a5a00; } .warn { background: #fff6e0; border-left: 4px solid #e6a700; padding: 6px 10px; }
code { background: #f4f4f4; padding: 0 3px; }
"""

# capture script errors before anything else runs (the browser test reads them back)
ERROR_HOOK = """
window.__saxErrors = [];
window.addEventListener("error", function (e) { window.__saxErrors.push(String(e.message || e)); });
(function () { var ce = console.error; console.error = function () {
  window.__saxErrors.push(Array.prototype.join.call(arguments, " ")); return ce.apply(console, arguments); }; })();
"""

SELF_CHECK = """
window.addEventListener("load", function () { setTimeout(function () {
  var divs = document.querySelectorAll(".js-plotly-plot"), drawn = 0;
  for (var i = 0; i < divs.length; i++) { if (divs[i].querySelector(".main-svg")) { drawn++; } }
  document.body.setAttribute("data-sax-charts", drawn + "/" + EXPECTED);
  document.body.setAttribute("data-sax-errors", JSON.stringify(window.__saxErrors));
}, 200); });
"""


def esc(x) -> str:
    return html.escape(str(x))


def ftime(s) -> str:
    return "infeasible" if s is None else fmt_time(s)


def design_text(d: dict, axes=None) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items() if axes is None or k in axes)


def table(head: list, rows: list, align: str = "") -> str:
    """An HTML table; ``align`` has one letter per column, l (text) or r (numbers); columns past it are r."""
    def cls(i):
        return "l" if i < len(align) and align[i] == "l" else ""
    th = "".join(f'<th class="{cls(i)}">{esc(h)}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="{cls(i)}">{esc(c)}</td>' for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def chart(fig, div_id: str) -> str:
    fig.update_layout(template="plotly_white", margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG)


# ---------------------------------------------------------------------------------------------------- charts
def breakdown_chart(cmp: dict):
    """Stacked horizontal bars: the best design and each baseline, one segment per breakdown term (ms)."""
    recs = cmp["designs"]
    labels = [r["label"] for r in recs][::-1]
    fig = go.Figure()
    for k in BREAKDOWN_KEYS:
        ms = [1e3 * r["breakdown"][k] for r in recs][::-1]
        if not any(v > 0 for v in ms):
            continue
        fig.add_bar(y=labels, x=ms, name=k, orientation="h", marker_color=TERM_COLOURS[k],
                    hovertemplate=f"{k}: %{{x:.1f}} ms<extra>%{{y}}</extra>")
    fig.update_layout(barmode="stack", title="Where the step time goes", xaxis_title="ms per step",
                      height=160 + 48 * len(recs), legend={"orientation": "h", "y": -0.25})
    return fig


def near_optimal_chart(top: list, near: dict | None, varied: list):
    """Step time of the top-k, the tie band of the best shaded: designs inside it are near-optimal."""
    ranks = list(range(1, len(top) + 1))
    times = [r["step_time_s"] for r in top]
    hover = [design_text(r["design"], varied) for r in top]
    fig = go.Figure(go.Scatter(x=ranks, y=times, mode="markers+lines", name="top designs", text=hover,
                               hovertemplate="#%{x}: %{y:.4f} s<br>%{text}<extra></extra>"))
    if near and times:
        hi = times[0] * (1 + near["within"])
        fig.add_hrect(y0=times[0], y1=hi, fillcolor="#009E73", opacity=0.15, line_width=0,
                      annotation_text=f"ties with the best (within {100 * near['within']:.1f}%)",
                      annotation_position="top left")
    fig.update_layout(title="Top designs and the tie band", xaxis_title="rank", yaxis_title="step time (s)",
                      height=360)
    return fig


def pareto_chart(pareto: dict, baselines: dict, top: list, varied: list):
    """Exhaustive Pareto fronts: step time vs memory per GPU and vs cross-building bytes, baselines marked."""
    fronts = [("time_vs_memory", "memory_bytes", GiB, "memory per GPU (GiB)"),
              ("time_vs_cross_building", "cross_building_bytes", 1e12, "cross-building traffic (TB per step)")]
    fronts = [f for f in fronts if pareto.get(f[0])]
    fig = make_subplots(rows=1, cols=len(fronts), subplot_titles=[f[3] for f in fronts])
    for col, (name, key, unit, title) in enumerate(fronts, start=1):
        pts = sorted(pareto[name], key=lambda r: r[key])
        fig.add_trace(go.Scatter(x=[r[key] / unit for r in pts], y=[r["step_time_s"] for r in pts],
                                 mode="lines+markers", line_shape="hv", name=f"front: {title}",
                                 text=[design_text(r["design"], varied) for r in pts],
                                 hovertemplate="%{x:.3g}, %{y:.4f} s<br>%{text}<extra></extra>"), row=1, col=col)
        if top:
            fig.add_trace(go.Scatter(x=[top[0][key] / unit], y=[top[0]["step_time_s"]], mode="markers",
                                     marker={"size": 13, "color": BEST_COLOUR, "symbol": "star"}, name="best",
                                     showlegend=col == 1), row=1, col=col)
        for i, (bn, b) in enumerate(baselines.items()):
            if b["step_time_s"] is None:
                continue
            fig.add_trace(go.Scatter(x=[b[key] / unit], y=[b["step_time_s"]], mode="markers", name=bn,
                                     marker={"size": 11, "symbol": BASELINE_SYMBOLS[i % len(BASELINE_SYMBOLS)],
                                             "color": BASELINE_COLOURS[i % len(BASELINE_COLOURS)]},
                                     legendgroup=bn, showlegend=col == 1), row=1, col=col)
        fig.update_xaxes(title_text=title, row=1, col=col)
        fig.update_yaxes(title_text="step time (s)", row=1, col=col)
    fig.update_layout(title="Pareto fronts (exhaustive sweep)", height=430)
    return fig


def sensitivity_chart(study: dict):
    """Step time against one system number: re-optimized best (where swept), the nominal designs held fixed,
    crossovers where the best design changes."""
    x = study["values"]
    fig = go.Figure()
    if study.get("best_s"):
        hover = [design_text(d) if d else "no feasible design" for d in study["best_designs"]]
        fig.add_trace(go.Scatter(x=x, y=study["best_s"], mode="lines+markers", name="best at each value",
                                 line={"width": 3, "color": "#009E73"}, text=hover,
                                 hovertemplate="%{x:g}: %{y:.4f} s<br>%{text}<extra></extra>"))
    for name, ys in study["fixed_s"].items():
        others = [n for n in study["fixed_s"] if n != "best"]  # baselines, in the Pareto chart's colours
        colour = BEST_COLOUR if name == "best" else BASELINE_COLOURS[others.index(name) % len(BASELINE_COLOURS)]
        fig.add_trace(go.Scatter(x=x, y=ys, mode="lines+markers", name=f"{name} (held fixed)",
                                 line={"dash": "dot" if name == "best" else "solid", "color": colour}))
    log = min(x) > 0 and max(x) / min(x) >= 10

    def vline(v, text, dash, colour, angle):
        # plotly.js places shapes on a log axis by the value but annotations by its log10
        fig.add_shape(type="line", x0=v, x1=v, y0=0, y1=1, yref="paper", line={"dash": dash, "color": colour})
        fig.add_annotation(x=math.log10(v) if log else v, y=1, yref="paper", text=text, showarrow=False,
                           textangle=angle, xanchor="left", yanchor="top", font={"size": 11, "color": "#555"})
    for c in study.get("crossovers", []):
        at = c["at"] if c["at"] is not None else math.sqrt(c["between"][0] * c["between"][1])
        vline(at, f"{c['axis']}: {c['from']} → {c['to']}", "dash", "#888", -90)
    if study.get("nominal") is not None and min(x) <= study["nominal"] <= max(x):
        vline(study["nominal"], "nominal", "solid", "#bbb", 0)
    fig.update_layout(title=f"{study['level']}.{study['field']}", xaxis_title=f"{study['level']}.{study['field']}",
                      yaxis_title="step time (s)", xaxis_type="log" if log else "linear", height=400)
    return fig


# --------------------------------------------------------------------------------------------------- sections
def _summary(data: dict) -> str:
    top = data["top"]
    if not top:
        return '<p class="warn">No feasible design: every design in the space breaks a constraint.</p>'
    best = top[0]
    cards = [("best step time", ftime(best["step_time_s"])),
             ("MFU", f"{100 * best['mfu']:.1f}%"), ("tokens/s", f"{best['tokens_per_s']:,.0f}"),
             ("memory per GPU", f"{best['memory_bytes'] / GiB:.1f} GiB")]
    if best.get("goodput_tokens_per_s") is not None:  # tokens/s after interruptions and checkpoints (cost.goodput)
        cards.append((f"goodput, tokens/s (ETTR {100 * best['ettr']:.1f}%, {best['interruptions_per_hour']:.2f} "
                      f"interruptions/h, checkpoint every {best['checkpoint_interval_s'] / 60:.1f} min)",
                      f"{best['goodput_tokens_per_s']:,.0f}"))
    band = data.get("band")
    if band:
        lo, hi = band["measured_s"]
        cards.append((f"{100 * band['level']:.0f}% band of the measured time", f"{ftime(lo)} – {ftime(hi)}"))
    for name, s in data["speedup_vs"].items():
        sp = (data.get("speedups") or {}).get(name)
        v = "baseline infeasible" if s is None else f"{s:.2f}x"
        k = f"step time vs {name}" + (f" [{sp['band'][0]:.2f}x, {sp['band'][1]:.2f}x]" + (" tie" if sp["tie"] else "")
                            if sp else "")
        cards.append((k, v))
    body = "".join(f'<div class="card"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
                   for k, v in cards)
    out = f'<div class="cards">{body}</div><p>Best design: <code>{esc(design_text(best["design"]))}</code></p>'
    if band:
        out += (f"<p>The band comes from the validation residuals of {band['n_runs']} published runs "
                f"({esc(band['group'])}); a speedup whose band contains 1 is a tie.</p>")
    return out


def _scenario(sc: dict) -> str:
    levels = sc["system"]["levels"]
    fields = [f for f in ("size", "bandwidth_GBps", "latency_us", "oversubscription", "loss_rate", "paths",
                          "planes", "failure_rate_per_hour") if any(f in lv for lv in levels)]
    lv_rows = [[lv["name"]] + [f"{lv.get(f, ''):g}" if isinstance(lv.get(f), (int, float)) else lv.get(f, "")
                               for f in fields] for lv in levels]
    model = [[k, v] for k, v in sc["model"].items() if not isinstance(v, dict)]
    training = [[k, v] for k, v in sc["training"].items()]
    space = [[ax, ", ".join(v)] for ax, v in sc["space"].items() if len(v) > 1]
    fixed = [f"{ax}={v[0]}" for ax, v in sc["space"].items() if len(v) == 1]
    base = [[n, design_text(d)] for n, d in sc["baselines"].items()]
    return (f"<p>{esc(sc['description'])}</p>"
            f"<h3>System: {esc(sc['system']['name'])}, {sc['system']['n_gpus']:,} x {esc(sc['system']['gpu'])}</h3>"
            + table(["level (inner to outer)"] + fields, lv_rows, "l")
            + f"<h3>Model: {esc(sc['model'].get('name', ''))}</h3>"
            + (f"<p class='sub'>{esc(sc['model_source'])}</p>" if sc.get("model_source") else "")
            + '<div class="cards"><div>' + table(["model", "value"], model, "l") + "</div><div>"
            + table(["training", "value"], training, "l") + "</div></div>"
            + f"<h3>Design space: {sc['space_size']:,} designs</h3>"
            + table(["axis", "options"], space, "ll")
            + (f"<p>Fixed: <code>{esc(', '.join(fixed))}</code></p>" if fixed else "")
            + "<h3>Baselines</h3>" + table(["name", "design"], base, "ll"))


def _near_optimal(data: dict, varied: list) -> str:
    near, top = data.get("near_optimal"), data["top"]
    out = ""
    if near:
        more = " Every listed design ties: a larger --top may find more." if near["top_k_limited"] else ""
        out += (f"<p>{near['n']} of the top {near['n_listed']} designs tie with the best (within "
                f"{100 * near['within']:.1f}%, the model's relative error band).{esc(more)}</p>")
        if near["shared"]:
            out += ("<p><b>Decisions every near-optimal design shares:</b> <code>"
                    + esc(", ".join(f"{k}={v}" for k, v in near["shared"].items())) + "</code></p>")
        if near["free"]:
            out += ("<p><b>Decisions that do not matter there:</b> <code>" + esc(", ".join(near["free"]))
                    + "</code></p>")
    differ = [ax for ax in varied if len({str(r["design"][ax]) for r in top}) > 1]
    rows = [[i + 1, f"{r['step_time_s']:.4f} s", f"{100 * r['mfu']:.1f}%", f"{r['memory_bytes'] / GiB:.1f}",
             f"{r['cross_building_bytes'] / 1e12:.3f}"] + [r["design"][ax] for ax in differ]
            for i, r in enumerate(top)]
    return out + table(["#", "step time", "MFU", "mem/GPU GiB", "x-bldg TB"] + differ, rows,
                       "rrrrr" + "l" * len(differ))


def _differences(cmp: dict) -> str:
    rows = []
    for d in cmp["differences"]:
        terms = [t for t in d["terms"] if abs(t["delta_s"]) > 0][:3]
        explain = "; ".join(f"{t['term']} {1e3 * t['delta_s']:+.1f} ms" for t in terms)
        rows.append([d["design"], f"{1e3 * d['delta_s']:+.1f} ms", f"{1 / d['speedup']:.2f}x" if d["speedup"] else "",
                     explain, design_text({k: f"{a} → {b}" for k, (a, b) in d["changed"].items()})])
    return (f"<p>Each baseline against the {esc(cmp['reference'])} design: its extra step time and the terms "
            "that explain it (the terms sum to the step time).</p>"
            + table(["baseline", "extra time", "slower by", "largest terms", "changed decisions"], rows, "lrrll"))


def _sensitivity(studies: list, charts: list) -> str:
    out = ""
    for i, st in enumerate(studies):
        charts.append(chart(sensitivity_chart(st), f"chart-sensitivity-{i}"))
        out += charts[-1]
        xs = st.get("crossovers") or []
        if st.get("method") == "search":
            out += ("<p>The space is too large to sweep: at each value the best design is the fastest of the "
                    "designs the evolution search found at any value; a better one may exist.</p>")
        if xs:
            out += "<ul>" + "".join(
                f"<li>{esc(c['axis'])}: {esc(c['from'])} → {esc(c['to'])} "
                + (f"at {st['level']}.{st['field']} ≈ {c['at']:.4g}" if c["at"] is not None
                   else f"between {c['between'][0]:g} and {c['between'][1]:g}") + "</li>" for c in xs) + "</ul>"
        else:
            out += "<p>The best design does not change over these values.</p>"
    return out


def _published(pub: dict | None) -> str:
    if not pub:
        return ""
    k = pub["class"]
    rows = [[r["id"], r["source"], ftime(r["measured_step_s"]), f"{100 * r['measured_mfu']:.1f}%"]
            for r in pub["exact"]]
    out = ""
    if k["runs"]:
        out += (f"<p>{k['runs']} published run(s) of {esc(k['model'])} on {esc(k['gpu'])} "
                f"({k['gpus_range'][0]:,}-{k['gpus_range'][1]:,} GPUs) reached "
                f"{100 * k['mfu_range'][0]:.1f}-{100 * k['mfu_range'][1]:.1f}% MFU.</p>")
    else:
        out += f"<p>No published run of {esc(k['model'])} on {esc(k['gpu'])} in the validation set.</p>"
    if rows:
        out += "<p>Published runs with the best design's layout:</p>" + table(
            ["run", "source", "measured step", "MFU"], rows, "ll")
    return out


def render(data: dict, version: str = "") -> str:
    """The whole page as a string."""
    sc, method = data["scenario"], data["method"]
    varied = [ax for ax, v in sc["space"].items() if len(v) > 1]
    charts: list = []
    sections = [("Summary", _summary(data))]
    how = (f"Exhaustive sweep of {method['n_designs']:,} designs ({method['n_feasible']:,} feasible) in "
           f"{method['seconds']:.1f} s on {method['device_kind']}." if method["method"] == "sweep" else
           f"{method['why']}: {method['evaluations']:,} evaluations ({method['strategy']}, seed {method['seed']}).")
    sections.append(("Scenario", f"<p>{esc(how)}</p>" + _scenario(sc)))
    if len(data["top"]) > 1:
        charts.append(chart(near_optimal_chart(data["top"], data.get("near_optimal"), varied), "chart-near"))
        sections.append(("Near-optimal designs", _near_optimal(data, varied) + charts[-1]))
    if data.get("compare"):
        charts.append(chart(breakdown_chart(data["compare"]), "chart-breakdown"))
        sections.append(("Breakdowns", charts[-1] + (_differences(data["compare"])
                                                     if data["compare"]["differences"] else "")))
    if data.get("pareto"):
        charts.append(chart(pareto_chart(data["pareto"], data["baselines"], data["top"], varied), "chart-pareto"))
        sections.append(("Pareto fronts", charts[-1]))
    if data.get("sensitivity"):
        sections.append(("Sensitivity", _sensitivity(data["sensitivity"], charts)))
    if data.get("published"):
        sections.append(("Published runs of this class", _published(data["published"])))
    warnings = data.get("warnings") or []
    if warnings:
        sections.append(("Warnings", "".join(f'<p class="warn">{esc(w.get("message", w) if isinstance(w, dict) else w)}'
                                             "</p>" for w in warnings)))
    payload = json.dumps(json_safe(data), default=str, allow_nan=False).replace("</", "<\\/")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(f'<section id="{esc(t.lower().replace(" ", "-"))}"><h2>{esc(t)}</h2>{s}</section>'
                   for t, s in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>sax report: {esc(sc['name'])}</title><style>{STYLE}</style>"
            f"<script>{ERROR_HOOK}</script><script>{get_plotlyjs()}</script></head><body>"
            f"<h1>sax report: {esc(sc['name'])}</h1><p class=\"sub\">sax_jax {esc(version)}, {stamp}, "
            f"objective {esc(sc['objective'])}</p>{body}"
            f"<script type=\"application/json\" id=\"sax-data\">{payload}</script>"
            f"<script>var EXPECTED = {len(charts)};{SELF_CHECK}</script></body></html>\n")

"""The network-layer seed papers' shapes, reproduced with the model (issue #13): prints one JSON object.

    python benchmarks/network_studies.py --json

Studies (each on a bundled system/scenario set up like the seed's; every number comes from the model's functions):
  * load_balancing: ECMP hash collisions vs more QPs vs packet spraying (MRC paper, Araujo et al. 2026): the
    bandwidth efficiency of each at the level's paths, and the step time of the same layout on each transport.
  * microburst_round: the latency of one round of a ring during a microburst under go-back-N (RoCE), selective
    repeat (MRC/IRN) and bounded loss with a deadline (DBLP, OptiReduce, MLT), for one flow that meets a burst and
    for the expected slowest of 256 flows; the seed (DBLP) reports up to 5.88x lower single-round latency.
  * dblp_training_time: the best design per transport on dblp-microbursts (exhaustive over the scenario's space) and
    a fixed data-parallel layout; the seed reports -24.4% average / -33.9% maximum training time.
  * goodput_month: 30 days of failures on 16,384 B300s, single-plane ECMP RoCE vs 8-plane MRC (mrc-fabric).
  * checkpoint_interval: ETTR vs the checkpoint interval against Young's and Daly's optimum.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import sax_jax as sx  # noqa: E402
from sax_jax.config import load_system  # noqa: E402
from sax_jax.cost import bursts, goodput as gp, transport as tr  # noqa: E402
from sax_jax.evaluate import evaluate, evaluate_one  # noqa: E402
from sax_jax.params import build_params  # noqa: E402

SYSTEMS = os.path.join(ROOT, "configs", "systems")
HOURS_30_DAYS = 30 * 24.0


def f(x):
    return float(np.asarray(x, np.float64))


# ------------------------------------------------------------------------------------------------ load balancing
def load_balancing() -> dict:
    sc = sx.load_scenario("mrc-fabric")
    one_plane = dataclasses.replace(sc, system=load_system(os.path.join(SYSTEMS, "b300-16k-1plane.yaml")))
    out = {"system": "b300-16k-1plane (32 equal-cost paths, one 800G port per GPU)"}
    paths = jnp.float32(32.0)
    out["ecmp_efficiency_by_qps"] = {q: f(tr.ecmp_efficiency(q * paths, paths)) for q in (1, 2, 4, 8, 16, 64)}
    window = 16 * 4 * 2**20  # 16 channels x 4 MiB in flight per GPU
    out["spray_efficiency"] = f(tr.spray_efficiency(paths, paths * window / 4096))
    steps = {}
    for name, over in (("roce_ecmp_1qp", {"transport": "ecmp_gbn"}), ("roce_ecmp_4qp", {"transport": "ecmp_qp4"}),
                       ("roce_ecmp_16qp", {"transport": "ecmp_qp4", "qps": 16}),
                       ("spray_selective_repeat", {"transport": "spray_sr"})):
        c = evaluate_one(one_plane, one_plane.baseline_design("roce", over))
        steps[name] = {"step_time_s": c["step_time_s"], "dp_exposed_s": c["breakdown"]["dp_exposed"],
                       "pp_p2p_s": c["breakdown"]["pp_p2p"]}
    out["step_time_llama405b_tp8_cp2_pp8"] = steps
    out["spray_speedup_over_ecmp_1qp"] = steps["roce_ecmp_1qp"]["step_time_s"] / steps["spray_selective_repeat"]["step_time_s"]
    return out


# ------------------------------------------------------------------------------------------------ microburst round
def _round(size_bytes, port_Bps, rtt_s, mtu, rate, duration_s, overload, buffer_bytes, rto_gbn, rto_sr, deadline_s,
           tolerated, flows):
    send = size_bytes / port_Bps
    base = send + rtt_s / 2
    b = bursts.burst_round(rate, duration_s, overload, buffer_bytes, port_Bps, send + rtt_s)
    n = size_bytes / mtu
    w = min(n, port_Bps * rtt_s / mtu)
    tau = mtu / port_Bps
    d_sr = f(bursts.selective_repeat_delay_s(b, rtt_s, n, tau, rto_sr))
    d_gbn = f(bursts.go_back_n_delay_s(b, rtt_s, w, tau, rto_gbn))
    d_bl, dropped = (f(x) for x in bursts.bounded_loss_delay_s(b, jnp.float32(d_sr), deadline_s, tolerated))
    hit = {"go_back_n": base + d_gbn, "selective_repeat": base + d_sr, "bounded_loss": base + d_bl}
    slowest = {k: base + f(bursts.expected_max_delay_s(b.pi, d, flows))
               for k, d in (("go_back_n", d_gbn), ("selective_repeat", d_sr), ("bounded_loss", d_bl))}
    return {"round_bytes": size_bytes, "loss_free_s": base, "per_round_loss_probability": f(b.pi),
            "lost_fraction_in_hit_round": f(b.lost_fraction), "bounded_loss_dropped": dropped,
            "hit_round_latency_s": hit, f"expected_slowest_of_{flows}_latency_s": slowest,
            "gbn_over_bounded_hit": hit["go_back_n"] / hit["bounded_loss"],
            "sr_over_bounded_hit": hit["selective_repeat"] / hit["bounded_loss"],
            "gbn_over_bounded_slowest": slowest["go_back_n"] / slowest["bounded_loss"]}


def microburst_round() -> dict:
    """One ring round per GPU on h100-cloud-100g-bursty's numbers (100 Gb/s, 10 us one way, 512 KiB buffer, 50 us
    bursts at 3x, 200/s) with the transports' timeouts (RoCE 1 ms, selective repeat 100 us) and DBLP's deadline
    (20 us) and middle-phase tolerance (2%)."""
    sysd = load_system(os.path.join(SYSTEMS, "h100-cloud-100g-bursty.yaml"))
    lv = sysd.levels[1]
    port = lv.bandwidth_GBps * 1e9 * sysd.gpu.efficiency.network_bus
    common = dict(port_Bps=port, rtt_s=2 * lv.latency_us * 1e-6, mtu=lv.mtu_bytes, rate=lv.burst_rate_per_s,
                  rto_gbn=1e-3, rto_sr=1e-4, deadline_s=20e-6, tolerated=0.02, flows=256)
    nominal = [_round(size, duration_s=lv.burst_duration_us * 1e-6, overload=lv.burst_overload,
                      buffer_bytes=lv.buffer_bytes, **common) for size in (2**20, 4 * 2**20, 16 * 2**20, 64 * 2**20)]
    # the range: burst durations 20-200 us, overloads 2-8x, buffers 128 KiB-2 MiB, rounds 0.5-64 MiB
    grid = []
    for dur in (20e-6, 50e-6, 100e-6, 200e-6):
        for rho in (2.0, 3.0, 4.0, 8.0):
            for buf in (2**17, 2**19, 2**21):
                for size in (2**19, 2**20, 4 * 2**20, 16 * 2**20, 64 * 2**20):
                    r = _round(size, duration_s=dur, overload=rho, buffer_bytes=buf, **common)
                    grid.append((r["gbn_over_bounded_hit"], r["sr_over_bounded_hit"], dur, rho, buf, size))
    best = max(grid)
    return {"setting": "h100-cloud-100g-bursty building level; RoCE RTO 1 ms, SR RTO 100 us, deadline 20 us, "
                       "tolerated 2%", "nominal": nominal,
            "grid_points": len(grid),
            "max_gbn_over_bounded": {"ratio": best[0], "sr_over_bounded": best[1], "burst_us": best[2] * 1e6,
                                     "overload": best[3], "buffer_bytes": best[4], "round_bytes": best[5]},
            "max_sr_over_bounded": max(g[1] for g in grid),
            "median_gbn_over_bounded": float(np.median([g[0] for g in grid])),
            "seed_reports_up_to": 5.88}


# ------------------------------------------------------------------------------------------------ DBLP training time
def dblp_training_time() -> dict:
    sc = sx.load_scenario("dblp-microbursts")
    names = [t.name for t in sc.transports]
    axis = sc.space.axes.index("transport") if hasattr(sc.space, "axes") else None
    idx = np.arange(sc.space.size)
    best = {}
    chunk = 1 << 16
    t_opts = list(sc.space.option_names("transport"))
    for start in range(0, len(idx), chunk):
        part = idx[start:start + chunk]
        designs = sc.space.decode(jnp.asarray(part, jnp.int32))
        c = jax.device_get(evaluate(sc, designs))
        tcode = np.asarray(designs.transport)
        for code in np.unique(tcode):
            name = names[int(code)]
            m = (tcode == code) & c.feasible
            if m.any():
                j = int(np.argmin(np.where(m, c.step_time_s, np.inf)))
                if name not in best or c.step_time_s[j] < best[name][0]:
                    best[name] = (float(c.step_time_s[j]), int(part[j]), float(c.gradient_variance_increase[j]),
                                  float(c.gradient_drop_fraction[j]))
    del axis
    out = {"best_design_step_time_s": {k: v[0] for k, v in best.items() if k in t_opts}}
    b = out["best_design_step_time_s"]
    out["best_dblp_vs"] = {k: b["dblp"] / b[k] - 1.0 for k in b if k != "dblp"}
    out["best_dblp_gradient_drop_fraction"] = best["dblp"][3]
    out["best_dblp_gradient_variance_increase"] = best["dblp"][2]
    # a fixed data-parallel layout (the baselines' TP 1, ZeRO-1, full recompute) over channels and overlap
    fixed = {}
    for ch in (4, 16):
        for ov in ("dp+tp", "none"):
            row = {}
            for t in ("ecmp_gbn", "spray_sr", "mrc_srv6", "bounded_loss", "dblp"):
                c = evaluate_one(sc, sc.baseline_design("roce", {"transport": t, "channels": ch, "overlap": ov}))
                row[t] = c["step_time_s"]
            fixed[f"channels={ch},overlap={ov}"] = row
    red_roce = [r["dblp"] / r["ecmp_gbn"] - 1 for r in fixed.values()]
    red_sr = [r["dblp"] / r["spray_sr"] - 1 for r in fixed.values()]
    out["fixed_layout_step_time_s"] = fixed
    out["fixed_layout_dblp_vs_roce"] = {"mean": float(np.mean(red_roce)), "max_reduction": float(np.min(red_roce))}
    out["fixed_layout_dblp_vs_selective_repeat"] = {"mean": float(np.mean(red_sr)), "max_reduction": float(np.min(red_sr))}
    out["seed_reports"] = {"mean": -0.244, "max_reduction": -0.339}
    return out


# ------------------------------------------------------------------------------------------------ goodput month
def goodput_month() -> dict:
    sc = sx.load_scenario("mrc-fabric")
    one = dataclasses.replace(sc, system=load_system(os.path.join(SYSTEMS, "b300-16k-1plane.yaml")))
    rows = {}
    for label, s, design in (("roce_ecmp_1plane", one, one.baseline_design("roce")),
                             ("roce_ecmp_8plane", sc, sc.baseline_design("roce")),
                             ("mrc_8plane", sc, sc.baseline_design("mrc"))):
        c = evaluate_one(s, design)
        rows[label] = {"step_time_s": c["step_time_s"], "tokens_per_s": c["tokens_per_s"],
                       "interruptions_30_days": c["interruptions_per_hour"] * HOURS_30_DAYS,
                       "ettr": c["ettr"], "goodput_tokens_per_s": c["goodput_tokens_per_s"],
                       "degraded_fraction": c["degraded_fraction"],
                       "training_hours_lost_30_days": (1 - c["ettr"]) * HOURS_30_DAYS,
                       "checkpoint_interval_s": c["checkpoint_interval_s"]}
    g = {k: v["goodput_tokens_per_s"] for k, v in rows.items()}
    return {"rows": rows, "mrc_goodput_over_roce_1plane": g["mrc_8plane"] / g["roce_ecmp_1plane"],
            "mrc_goodput_over_roce_same_fabric": g["mrc_8plane"] / g["roce_ecmp_8plane"],
            "network_interruptions_avoided_30_days": (rows["roce_ecmp_8plane"]["interruptions_30_days"]
                                                      - rows["mrc_8plane"]["interruptions_30_days"])}


# ------------------------------------------------------------------------------------------------ checkpoint interval
def checkpoint_interval() -> dict:
    sc = sx.load_scenario("mrc-fabric")
    p0 = build_params(sc)
    d = sc.baseline_design("roce")
    taus = np.geomspace(60.0, 4 * 3600.0, 121)
    ettr = []
    for tau in taus:
        p = p0._replace(train=p0.train._replace(checkpoint_interval_s=jnp.float32(tau)))
        ettr.append(float(np.asarray(evaluate(sc, d, p).ettr)[0]))
    ettr = np.asarray(ettr)
    c = evaluate_one(sc, d)
    lam = c["interruptions_per_hour"] / 3600.0
    write, restart = sc.training.checkpoint_write_s, sc.training.restart_s
    young, daly = f(gp.young_interval_s(write, 1 / lam)), f(gp.daly_interval_s(write, 1 / lam))
    # a fine numeric optimum of Daly's wall-time model (what the grid above samples)
    fine = np.linspace(0.5 * daly, 2.0 * daly, 2001)
    fr = np.asarray(gp.useful_fraction(jnp.asarray(fine, jnp.float64 if jax.config.jax_enable_x64 else jnp.float32),
                                       write, restart, lam))
    return {"interruptions_per_hour": c["interruptions_per_hour"], "checkpoint_write_s": write, "restart_s": restart,
            "young_interval_s": young, "daly_interval_s": daly, "numeric_optimum_s": float(fine[np.argmax(fr)]),
            "grid_best_interval_s": float(taus[np.argmax(ettr)]), "ettr_at_daly": c["ettr"],
            "ettr_grid_max": float(ettr.max()),
            "ettr_by_interval": {f"{t:.0f}": float(e) for t, e in zip(taus[::12], ettr[::12])}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="(output is always JSON; kept for the documented command)")
    ap.add_argument("--only", default=None, help="comma-separated study names")
    args = ap.parse_args(argv)
    studies = {"load_balancing": load_balancing, "microburst_round": microburst_round,
               "dblp_training_time": dblp_training_time, "goodput_month": goodput_month,
               "checkpoint_interval": checkpoint_interval}
    chosen = args.only.split(",") if args.only else list(studies)
    out = {"benchmark": "network_studies", "jax": jax.__version__}
    for name in chosen:
        t0 = time.perf_counter()
        out[name] = studies[name]()
        out[name]["seconds"] = time.perf_counter() - t0
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

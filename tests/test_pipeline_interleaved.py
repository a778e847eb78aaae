"""Interleaved 1F1B's hop delays against a discrete-event run of Megatron-Core's own order of chunks.

The reference below replays forward_backward_pipelining_with_interleaving (megatron/core/pipeline_parallel/
schedules.py): stage r warms up with 2 (p - r - 1) + (v - 1) p chunk forwards, then alternates one forward and one
backward, then drains its backwards; virtual microbatch k is microbatch (k // pv) p + k % p of chunk (k // p) % v
(reversed for backwards). Sends are asynchronous (overlap_p2p_comm, which Megatron-Bridge sets when vpp > 1), so a
chunk waits only for its input: the previous stage's output one hop later. With v = 1 the order is plain 1F1B
(p - r - 1 warm-up forwards)."""
import pytest

import jax.numpy as jnp

from sax_jax.cost.pipeline import interleaved_stretch_s, pipeline_time_s
from sax_jax.space import Schedule

F = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731


def megatron_order(r, p, v, m):
    n = m * v
    warm = min(p - r - 1, n) if v == 1 else min(2 * (p - r - 1) + (v - 1) * p, n)
    ops = [("F", k) for k in range(warm)]
    for i in range(n - warm):
        ops += [("F", warm + i), ("B", i)]
    return ops + [("B", i) for i in range(n - warm, n)]


def microbatch_chunk(k, p, v, forward):
    chunk = (k // p) % v
    return (k // (p * v)) * p + k % p, chunk if forward else v - 1 - chunk


def simulate(p, v, m, t_f, t_b, hops, wrap):
    """Makespan of the schedule; hops[r] delays a message between stages r and r + 1, wrap one from the last
    stage back to the first (the next chunk of an interleaved microbatch)."""
    done, clock, nxt = {}, [0.0] * p, [0] * p
    orders = [megatron_order(r, p, v, m) for r in range(p)]
    left = sum(map(len, orders))
    while left:
        moved = False
        for r in range(p):
            while nxt[r] < len(orders[r]):
                kind, k = orders[r][nxt[r]]
                mb, ch = microbatch_chunk(k, p, v, kind == "F")
                if kind == "F":
                    dep, hop = (("F", mb, ch, r - 1), hops[r - 1]) if r > 0 else \
                        ((("F", mb, ch - 1, p - 1), wrap) if ch > 0 else (None, 0.0))
                else:
                    dep, hop = (("B", mb, ch, r + 1), hops[r]) if r < p - 1 else \
                        ((("B", mb, ch + 1, 0), wrap) if ch < v - 1 else (("F", mb, ch, r), 0.0))
                if dep is not None and dep not in done:
                    break
                start = max(clock[r], 0.0 if dep is None else done[dep] + hop)
                clock[r] = start + (t_f if kind == "F" else t_b) / v
                done[(kind, mb, ch, r)] = clock[r]
                nxt[r] += 1
                left -= 1
                moved = True
        assert moved, "the order deadlocked"
    return max(clock)


def model(schedule, p, v, m, t_f, t_b, hop_s, hops, m_pp, k_pp):
    total, base, _ = pipeline_time_s(F(schedule), F(p), F(m), F(v), F(t_f), F(t_b), F(0.0), F(hop_s), F(hops),
                                     F(m_pp), F(k_pp))
    return float(total), float(base)


@pytest.mark.parametrize("p,v,m", [(4, 2, 8), (4, 4, 16), (8, 5, 16)])
def test_reference_reproduces_the_interleaved_bubble(p, v, m):
    # without hops the replay's makespan is Narayanan et al. 2021's m (tF + tB) + (p - 1)(tF + tB)/v
    t_f, t_b = 1.0, 2.0
    assert simulate(p, v, m, t_f, t_b, [0.0] * (p - 1), 0.0) == pytest.approx(m * 3.0 + (p - 1) * 3.0 / v)
    total, base = model(Schedule.INTERLEAVED, p, v, m, t_f, t_b, [0.0], [p - 1.0], [p], [p])
    assert total == pytest.approx(base) and base == pytest.approx(m * 3.0 + (p - 1) * 3.0 / v, rel=1e-6)


@pytest.mark.parametrize("p,v,m", [(4, 2, 8), (4, 4, 16), (8, 5, 16)])
@pytest.mark.parametrize("c_over_cycle", [0.05, 0.2, 0.33])
def test_hops_below_a_third_of_a_cycle_cost_only_fill_and_drain(p, v, m, c_over_cycle):
    # uniform hops c <= T/3 (T = (tF + tB)/v, tB = 2 tF): the warm-up's p - 2 extra chunks hide every hop in the
    # steady state; a microbatch's first chunk and last gradient still cross the p v - 1 hops of the whole chain
    t_f, t_b = 1.0, 2.0
    c = c_over_cycle * (t_f + t_b) / v
    zero = simulate(p, v, m, t_f, t_b, [0.0] * (p - 1), 0.0)
    paid = simulate(p, v, m, t_f, t_b, [c] * (p - 1), c) - zero
    assert paid == pytest.approx(2.0 * c * (p * v - 1), rel=1e-6)
    total, base = model(Schedule.INTERLEAVED, p, v, m, t_f, t_b, [c], [p - 1.0], [p], [p])
    assert total - base == pytest.approx(paid, rel=1e-5)


@pytest.mark.parametrize("p,v,m", [(4, 2, 16), (8, 5, 32), (8, 2, 32), (16, 4, 64)])
@pytest.mark.parametrize("c_over_cycle", [0.4, 0.5, 1.0, 4.0])
def test_past_the_bound_the_steady_cycle_tracks_the_replay(p, v, m, c_over_cycle):
    # each steady cycle lasts the slowest loop's T': within -11% / +19% of the replay from c = 0.4 T to 4 T
    t_f, t_b = 1.0, 2.0
    c = c_over_cycle * (t_f + t_b) / v
    zero = simulate(p, v, m, t_f, t_b, [0.0] * (p - 1), 0.0)
    paid = simulate(p, v, m, t_f, t_b, [c] * (p - 1), c) - zero
    assert paid > 1.05 * 2.0 * c * (p * v - 1)  # the steady state does stretch here
    total, base = model(Schedule.INTERLEAVED, p, v, m, t_f, t_b, [c], [p - 1.0], [p], [p])
    assert 0.88 * paid <= total - base <= 1.2 * paid


@pytest.mark.parametrize("c_over_cycle,hidden", [(0.3, True), (0.45, True), (0.6, False), (1.0, False), (4.0, False)])
def test_one_slow_hop_between_two_buildings(c_over_cycle, hidden):
    # p = 8 in two buildings of 4 stages: one slow hop in the chain and the wrap back (both cross); the adjacent
    # pair's loop 3T' >= 2 (T + C) hides it up to C = T/2
    p, v, m, t_f, t_b = 8, 4, 32, 1.0, 2.0
    cycle = (t_f + t_b) / v
    big = c_over_cycle * cycle
    hops = [0.0] * (p - 1)
    hops[p // 2 - 1] = big
    zero = simulate(p, v, m, t_f, t_b, [0.0] * (p - 1), 0.0)
    paid = simulate(p, v, m, t_f, t_b, hops, big) - zero
    fill = 2.0 * big * (2 * v - 1)  # v crossings of the chain's slow hop and v - 1 wraps, there and back
    total, base = model(Schedule.INTERLEAVED, p, v, m, t_f, t_b, [0.0, big], [p - 2.0, 1.0], [p // 2, p],
                        [p // 2, 2])
    if hidden:
        assert paid == pytest.approx(fill, rel=1e-6) and total - base == pytest.approx(fill, rel=1e-5)
    else:
        # the adjacent pair's cycle 2 (T + C) / 3 past C = T/2
        assert paid > 1.5 * fill and 0.85 * paid <= total - base <= 1.15 * paid


def test_interleaving_hides_what_1f1b_pays():
    # the same uniform hops of a tenth of a cycle: asynchronous 1F1B stretches each cycle by 2 (p - 1) c / p, and
    # Megatron-Core's blocking 1F1B, which the model charges, by two hops (tests/test_pipeline_slow_hop.py): fill and
    # drain 2 (p - 1) c plus (m - 1) 2c, 11% above the asynchronous replay; interleaving pays fill and drain only
    p, m, t_f, t_b = 8, 32, 1.0, 2.0
    c = 0.1 * (t_f + t_b)
    zero = simulate(p, 1, m, t_f, t_b, [0.0] * (p - 1), 0.0)
    paid_1f1b = simulate(p, 1, m, t_f, t_b, [c] * (p - 1), 0.0) - zero
    total, base = model(Schedule.ONE_F_ONE_B, p, 1, m, t_f, t_b, [c], [p - 1.0], [p], [p])
    assert total - base == pytest.approx(2.0 * (p - 1) * c + (m - 1) * 2.0 * c, rel=1e-5)
    assert paid_1f1b <= total - base <= 1.12 * paid_1f1b
    v = 2  # the same hop is a fifth of a chunk's cycle
    total_v, base_v = model(Schedule.INTERLEAVED, p, v, m, t_f, t_b, [c], [p - 1.0], [p], [p])
    assert total_v - base_v == pytest.approx(2.0 * c * (p * v - 1), rel=1e-5)
    assert total_v - base_v < 0.5 * paid_1f1b


def test_stretch_is_zero_without_hops():
    assert float(interleaved_stretch_s(F(8), F(64), F(5), F(0.05), F(0.1), F([0.0, 0.0]), F([7.0, 0.0]), F(0.0),
                                       F(0.0))) == 0.0

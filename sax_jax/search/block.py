"""Block moves over coupled axes, the last polish of a search (relaxed and evolution).

Some axes only pay when they move together: vpp > 1 only under the interleaved schedule, and each schedule has its
own best pp, so the optimum of e.g. Llama-70B over two buildings (PP 4, VPP 4, interleaved) is a 3-axis move from
the trap both DE and the relaxed search end in (PP 8, ZB-H2), out of reach of one- and two-axis moves
(``genome.polish``). ``block_polish`` evaluates every other combination of the block's axes at the polished design
in one batched call, then runs a short one-axis descent from each of the ``BLOCK_TOP`` best (tp, mbs or the
placement follow the move). Its evaluations count against the search's budget (``block_budget``).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from .genome import Problem, evaluate_digits, polish

BLOCK_AXES = ("schedule", "vpp", "pp")  # coupled pipeline knobs that ``block_polish`` moves together
BLOCK_TOP = 2  # block combinations descended from after the scan of all of them
BLOCK_ROUNDS = 3  # rounds of one-axis moves each such descent gets at most
BLOCK_MAX = 4096  # combinations a block may hold at most


class Block(NamedTuple):
    """Axes that ``block_polish`` moves together."""
    axes: tuple  # problem axis indices, in ``BLOCK_AXES`` order
    radices: tuple  # their options

    @property
    def size(self) -> int:
        return int(np.prod(self.radices))


def coupled_block(problem: Problem, names=BLOCK_AXES) -> Block | None:
    """The block of ``names`` in ``problem``, or None when one of them is not an axis the search chooses (absent,
    or an inner axis of a sub-grid problem), fewer than two of them have a choice, or they have more than
    ``BLOCK_MAX`` combinations."""
    names = tuple(names or ())
    if not names or not problem.names or any(nm not in problem.names for nm in names):
        return None
    axes = tuple(int(problem.names.index(nm)) for nm in names)
    radices = tuple(int(problem.radices[a]) for a in axes)
    if len(set(axes)) != len(axes) or sum(r > 1 for r in radices) < 2 or int(np.prod(radices)) > BLOCK_MAX:
        return None
    return Block(axes, radices)


def block_moves(digits, block: Block) -> np.ndarray:
    """Every point that differs from ``digits`` only in the block's axes [block.size - 1, n], row-major over the
    block's options (``digits``' own combination left out)."""
    digits = np.asarray(digits, np.int32)
    rows = np.repeat(digits[None], block.size, axis=0)
    rows[:, list(block.axes)] = np.stack(np.unravel_index(np.arange(block.size), block.radices), axis=-1)
    own = int(np.ravel_multi_index(tuple(int(digits[a]) for a in block.axes), block.radices))
    return np.delete(rows, own, axis=0)


def block_cap(problem: Problem) -> int:
    """Evaluations of one descent after a block move: ``BLOCK_ROUNDS`` rounds of one-axis moves."""
    return BLOCK_ROUNDS * max(problem.neighbours, 1)


def block_budget(problem: Problem, block: Block | None, budget: int) -> int:
    """Evaluations ``block_polish`` needs (the scan and ``BLOCK_TOP`` capped descents); 0 without a block or
    when that is more than a quarter of ``budget`` (points)."""
    if block is None:
        return 0
    need = block.size - 1 + BLOCK_TOP * block_cap(problem)
    return need if need <= budget // 4 else 0


def block_polish(problem: Problem, block: Block, digits, fitness: float, value: float, budget: int,
                 deadline: float | None = None):
    """Move the block's axes together: every other combination of them at ``digits`` (one batched call), then a
    one-axis descent (``genome.polish`` without pair moves, at most ``block_cap`` evaluations each) from each of the
    ``BLOCK_TOP`` best of those (the move rarely pays alone: tp, mbs or the placement follow it). Never exceeds
    ``budget``. Returns (digits, fitness, value, evaluations, improved, local): ``local`` is True when the returned
    point is known to be a one-axis local optimum."""
    cand = block_moves(digits, block)
    if len(cand) > budget or (deadline is not None and time.perf_counter() >= deadline):
        return digits, fitness, value, 0, False, False
    f, v = evaluate_digits(problem, cand)
    used, improved, local = len(cand), False, False
    top = np.argsort(f, kind="stable")[:BLOCK_TOP]
    for i in top:  # a one-axis descent of at most block_cap evaluations from each
        d, fd, vd, spent, loc = polish(problem, cand[i], float(f[i]), min(block_cap(problem), budget - used),
                                       deadline=deadline, pairs=False, value=float(v[i]))
        used += spent
        if fd < fitness:
            digits, fitness, value, improved, local = d, fd, vd, True, loc
    return digits, fitness, value, used, improved, local

"""Rich progress bar of a sweep: designs/s, feasible fraction, best so far, ETA."""
from __future__ import annotations

import math
import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn


def _fmt_rate(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


# the top-k key is the objective for the minimized ones, its negation for the others (exhaustive._objective_key)
_UNITS = {"step_time_s": " s", "time_to_target_s": " s", "train_cost_usd": " USD"}


def _fmt_best(objective: str, key: float) -> str:
    if objective in _UNITS:
        return f"{key:.4g}{_UNITS[objective]}"
    return f"{-key:.4g}"


class SweepProgress:
    def __init__(self, total: int, objective: str, enabled: bool = True, done: int = 0):
        self.enabled = enabled
        self.objective = objective
        if not enabled:
            return
        console = Console(file=sys.stderr)
        self._p = Progress(TextColumn("[bold]sweep"), BarColumn(), TaskProgressColumn(), TextColumn("{task.fields[rate]}/s"),
                           TextColumn("feasible {task.fields[feas]}"), TextColumn("best {task.fields[best]}"),
                           TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False)
        # rich keeps floats: totals beyond 2**53 lose nothing a progress bar shows
        self._task = self._p.add_task("sweep", total=float(total), completed=float(done), rate="-", feas="-",
                                      best="-")
        self._p.start()

    def update(self, done: int, rate: float, n_feasible: int, n_seen: int, best: float):
        if not self.enabled:
            return
        feas = f"{100.0 * n_feasible / n_seen:.2f}%" if n_seen else "-"
        if math.isfinite(best):
            best_s = _fmt_best(self.objective, best)
        else:
            best_s = "-"
        self._p.update(self._task, completed=float(done), rate=_fmt_rate(rate) if rate > 0 else "-", feas=feas,
                       best=best_s)

    def close(self):
        if self.enabled:
            self._p.stop()

"""Progress of long commands on stderr, with tqdm: pruning stages, trials, jobs of the service.

Progress is shown only when stderr is a terminal and neither ``--quiet`` nor ``--no-progress`` was given
(:func:`progress_enabled`); it never writes to stdout, so ``--json`` output stays parseable. Tests pass
``file=`` (a StringIO) and ``enabled=True`` to see what a terminal would.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from tqdm import tqdm

from convtune.vocabulary import FINAL_JOB_STATUSES

#: Pruning's stages as the user reads them: the survivors after plan(), after the I/O bounds, after the model.
STAGE_LABELS = {"feasible": "feasible", "traffic": "after bounds", "predicted_time": "after model"}


def progress_enabled(args: argparse.Namespace | None = None, stream: IO[str] | None = None) -> bool:
    """Whether to draw progress: ``stream`` (default stderr) is a terminal and no ``--quiet``/``--no-progress``."""
    if args is not None and (getattr(args, "no_progress", False) or getattr(args, "quiet", False)):
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a file
        return False


def pruning_line(counts: dict[str, int], seconds: float | None = None) -> str:
    """``"pruning: 12,345 configs → 1,234 feasible → 56 after bounds → 7 after model (3.2 s)"``."""
    parts = [f"pruning: {counts.get('grid', 0):,} configs"]
    parts += [f"{counts[stage]:,} {label}" for stage, label in STAGE_LABELS.items() if stage in counts]
    tail = f" ({seconds:.1f} s)" if seconds is not None else ""
    return " → ".join(parts) + tail


class TuneProgress:
    """Two bars of one ``tune()``: pruning (configurations built, then the stage counts), then the trials with
    the best time and efficiency so far. Pass :meth:`prune` as ``prune_progress`` and :meth:`trial` as
    ``progress``; :meth:`close` at the end. Disabled, every method does nothing."""

    def __init__(self, enabled: bool, file: IO[str] | None = None) -> None:
        self.enabled = enabled
        self.file = file if file is not None else sys.stderr
        self.counts: dict[str, int] = {}
        self._prune_bar: Any = None
        self._trial_bar: Any = None

    def _bar(self, **kwargs: Any) -> Any:
        return tqdm(file=self.file, dynamic_ncols=True, leave=False, **kwargs)

    def prune(self, stage: str, count: int) -> None:
        """``prune()``'s report: ``("grid", n)``, ``("enumerated", n)``, then one count per stage."""
        if not self.enabled:
            return
        self.counts[stage] = count
        if stage == "grid":
            self._prune_bar = self._bar(total=count, desc="pruning", unit=" configs", unit_scale=True)
        elif stage == "enumerated" and self._prune_bar is not None:
            self._prune_bar.n = count  # valid configurations built so far (of the grid: an upper bound)
            self._prune_bar.refresh()
        elif stage in STAGE_LABELS and self._prune_bar is not None:
            self._prune_bar.set_postfix_str(pruning_line(self.counts).removeprefix("pruning: "))
        if stage == "predicted_time":
            self._close_prune()

    def _close_prune(self) -> None:
        if self._prune_bar is not None:
            self._prune_bar.close()
            self._prune_bar = None
        tqdm.write(pruning_line(self.counts), file=self.file)  # the counts stay on screen

    def trial(self, p: Any) -> None:
        """``tune()``'s progress callback (:class:`convtune.tuner.tune.Progress`)."""
        if not self.enabled:
            return
        if self._trial_bar is None:
            self._trial_bar = self._bar(total=p.budget_trials, desc="trials", unit=" trial")
        self._trial_bar.n = p.trials
        best = f"{p.best_ms:.4f} ms" if p.best_ms is not None else "—"
        eff = f"{p.efficiency:.2f}" if p.efficiency is not None else "—"
        self._trial_bar.set_postfix_str(f"best {best}, efficiency {eff}, last {p.last_status}"
                                        f"{' (from db)' if p.reused else ''}")

    def close(self) -> None:
        if self._prune_bar is not None:
            self._close_prune()
        if self._trial_bar is not None:
            self._trial_bar.close()
            self._trial_bar = None


class JobsProgress:
    """Jobs of the service being waited for: a bar of jobs ended / total, the running ones' trials as postfix
    (``job 12 34/200``). :meth:`update` with the jobs' JSON (``GET /v1/jobs``) after each poll."""

    FINAL = FINAL_JOB_STATUSES

    def __init__(self, enabled: bool, total: int, file: IO[str] | None = None, desc: str = "jobs") -> None:
        self.enabled = enabled
        self.file = file if file is not None else sys.stderr
        self._bar: Any = tqdm(file=self.file, total=total, desc=desc, unit=" job", dynamic_ncols=True,
                              leave=False) if enabled else None

    def update(self, jobs: list[dict[str, Any]]) -> None:
        if self._bar is None:
            return
        self._bar.total = len(jobs) or self._bar.total
        self._bar.n = sum(j["status"] in self.FINAL for j in jobs)
        running = [f"job {j['id']} {j.get('trials_done', 0)}/{j.get('budget_trials', '?')}"
                   for j in jobs if j["status"] == "running"]
        queued = sum(j["status"] == "queued" for j in jobs)
        self._bar.set_postfix_str(", ".join(running + ([f"{queued} queued"] if queued else [])))

    def close(self, summary: str | None = None) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            if summary:
                tqdm.write(summary, file=self.file)

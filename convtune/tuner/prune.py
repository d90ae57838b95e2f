"""Lower-bound pruning: from every valid configuration to a ranked list worth measuring.

Stages, each dropped configuration keeping its reason and numbers:

1. ``infeasible`` — the family's ``plan()`` rejects it (threads, shared memory, registers, grid) or no
   block fits on an SM. These are counted by reason here; ``convtune why`` re-derives the exact
   message for any one configuration (``plan()`` is deterministic), so they are not stored row by row.
2. ``traffic`` — the configuration's modelled global-memory traffic exceeds the I/O lower bound for
   its *own* on-chip memory (S = its shared memory + accumulators) by more than
   ``traffic_ratio_max``: it uses its fast memory so badly that no dataflow of that size would move as
   much. The yardstick is at least |In_used| + |W| + |Out| (:func:`traffic_yardstick_words`): the
   families' kernels load every filter tap, also the taps that only meet padding, which the lower
   bound does not charge. (On the H200 the measured winners of the public suite sit at 1.5–10.6× that bound; see
   ``docs`` in the README. The implicit GEMMs of 5×5, 7×7 and 1×7 layers re-read x once per tap from L2: the
   3%-best bf16 and TF32 configs of such wide-suite shapes sit at up to 20.6×, so the limit is 24×; the depthwise
   1-D naive and coalesced variants at the S4ConvD shape, 25×, stay pruned.)
3. ``predicted_time`` — the analytic model's time exceeds ``predicted_factor`` × the best prediction
   *of the same family*. Each family's model has its own bias (an issue-count model of a fused Winograd
   kernel and one of a direct kernel are not equally right), so one family's optimism must not prune
   another family away before a single measurement; the measurements decide between families. Within a family
   the limit is 3×: the wgmma model mis-ranks folded stems (C ≤ 8, a filter row's taps in one chunk) by up to
   2.46× (the 3%-best bf16 configs of 7×7 stride-2 stems), and with 1.5× the tuner could not reach them.

Survivors are ranked by predicted time (ties by config key, so the order is reproducible);
:func:`warm_start_order` takes each family's best two, then the best by calibrated prediction, for the first
measured batch.

Progress: :func:`prune`'s ``report(stage, count)`` is called with ``("grid", n)`` first, then
``("enumerated", n)`` every :data:`CHECK_EVERY` valid configurations built, then the survivors after each
stage: ``("feasible", n)``, ``("traffic", n)`` (after the bounds) and ``("predicted_time", n)`` (after
the model) — what a progress bar shows (:mod:`convtune.cli.progress`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from convtune.kernels.config import KernelConfig
from convtune.kernels.registry import KernelSpec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


@dataclass(frozen=True, slots=True)
class PruneSettings:
    """The pruning limits (stages 2 and 3 of the module docstring). Set from the H200 replay tables: with the
    earlier 16× and 1.5× the measured 3%-best configs of 12 of 55 bf16 shapes and 3 of 55 TF32 shapes were pruned,
    so no search could reach them (benchmarks/results/tuner_efficiency/pruning_limits.md)."""

    traffic_ratio_max: float = 24.0
    predicted_factor: float = 3.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """One valid configuration with the numbers pruning and ranking use."""

    spec: KernelSpec
    plan: Any
    predicted_s: float
    traffic_words: int
    bound_words: float
    #: the config's key, made once: ranking, the warm start, replay filters and the stored decisions each read it
    #: (3–4 ``KernelConfig.key()`` calls a candidate were 3 s of a 128k-config layer's tuning overhead)
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.plan.config.key())

    @property
    def config(self) -> KernelConfig:
        return self.plan.config

    @property
    def traffic_ratio(self) -> float:
        return self.traffic_words / self.bound_words if self.bound_words > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class Decision:
    candidate: Candidate
    stage: str            # "traffic" | "predicted_time" | "kept"
    reason: str
    numbers: dict[str, float]


@dataclass
class PruneResult:
    survivors: list[Candidate]                       # ranked, fastest predicted first
    decisions: list[Decision]
    grid_size: int                                   # every parameter combination of the families
    stage_counts: dict[str, int] = field(default_factory=dict)   # survivors after each stage
    infeasible_reasons: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def summary(self) -> str:
        stages = " -> ".join(f"{k} {v}" for k, v in self.stage_counts.items())
        return f"grid {self.grid_size} -> {stages} ({self.elapsed_s:.1f} s)"


#: Configurations between two calls of the ``check`` callback (a few milliseconds of modelling).
CHECK_EVERY = 64


#: ``report(stage, count)``: pruning's progress (see the module docstring).
Report = Callable[[str, int], None]


def traffic_yardstick_words(problem: ConvProblem, bound_words: float) -> float:
    """max(I/O lower bound, |In_used| + |W| + |Out|) words: what the traffic stage divides by.

    The lower bound charges only the weights some real input meets; every family's kernels load all
    K·(C/groups)·R·S of them. On padding-dominated shapes (7×7 pad 3 on a 1×1 map: 1 of 49 taps meets
    data) every configuration would then sit above ``traffic_ratio_max`` × the bound and the shape would
    be pruned empty. Where every tap is used (all but such shapes) this is the bound itself.
    """
    return max(bound_words, float(problem.input_elements_used + problem.weight_elements + problem.output_elements))


def build_candidates(problem: ConvProblem, machine: MachineModel, specs: list[KernelSpec],
                     check: Callable[[], None] | None = None, report: Report | None = None) -> list[Candidate]:
    """Every valid configuration of ``specs`` with its prediction, traffic and own-memory bound.

    ``check`` is called every :data:`CHECK_EVERY` configurations and may raise to stop (a cancelled job);
    ``report("enumerated", n)`` as often, with the count built so far.
    """
    out: list[Candidate] = []
    for spec in specs:
        for i, pl in enumerate(spec.enumerate_plans(problem, machine)):
            if i % CHECK_EVERY == 0:
                if check is not None:
                    check()
                if report is not None:
                    report("enumerated", len(out))
            bound = traffic_yardstick_words(problem, spec.bound_words(pl, spec.onchip_words(pl)))  # memoised bound
            out.append(Candidate(spec, pl, spec.predict_s(pl, machine), spec.traffic_words(pl), bound))
    return out


def prune(problem: ConvProblem, machine: MachineModel, specs: list[KernelSpec],
          settings: PruneSettings | None = None, check: Callable[[], None] | None = None,
          report: Report | None = None, clock: Callable[[], float] = time.perf_counter) -> PruneResult:
    """Run the pruning stages of the module docstring over ``specs``' configurations (``check``: see
    :func:`build_candidates`; ``report``: the module docstring; ``clock``: seconds, for ``elapsed_s``)."""
    settings = settings or PruneSettings()
    start = clock()
    grid = sum(spec.grid_size(problem) for spec in specs)
    if report is not None:
        report("grid", grid)
    candidates = build_candidates(problem, machine, specs, check, report)
    feasible = [c for c in candidates if c.predicted_s != float("inf")]
    if report is not None:
        report("enumerated", len(candidates))
        report("feasible", len(feasible))
    infeasible = Counter({"rejected by plan()": grid - len(candidates)})
    if len(feasible) < len(candidates):
        infeasible["no block fits on an SM"] = len(candidates) - len(feasible)
    decisions: list[Decision] = []
    after_traffic = []
    for c in feasible:
        if c.traffic_ratio > settings.traffic_ratio_max:
            decisions.append(Decision(c, "traffic", f"modelled traffic is {c.traffic_ratio:.1f}x the I/O lower bound "
                                      f"for its own on-chip memory (limit {settings.traffic_ratio_max:g}x)",
                                      _numbers(c)))
        else:
            after_traffic.append(c)
    if report is not None:
        report("traffic", len(after_traffic))
    family_best_s: dict[str, float] = {}
    for c in after_traffic:
        family_best_s[c.spec.family] = min(c.predicted_s, family_best_s.get(c.spec.family, float("inf")))
    survivors = []
    for c in after_traffic:
        best_s = family_best_s[c.spec.family]
        numbers = _numbers(c) | {"best_predicted_s": best_s}
        if c.predicted_s > settings.predicted_factor * best_s:
            decisions.append(Decision(c, "predicted_time", f"predicted {c.predicted_s * 1e3:.4f} ms is "
                                      f"{c.predicted_s / best_s:.2f}x the best prediction of {c.spec.family} "
                                      f"(limit {settings.predicted_factor:g}x)", numbers))
        else:
            survivors.append(c)
    survivors.sort(key=lambda c: (c.predicted_s, c.key))
    if report is not None:
        report("predicted_time", len(survivors))
    for rank, c in enumerate(survivors):
        decisions.append(Decision(c, "kept", f"kept, rank {rank + 1} of {len(survivors)} by predicted time",
                                  _numbers(c) | {"best_predicted_s": family_best_s[c.spec.family],
                                                 "rank": rank + 1}))
    return PruneResult(
        survivors=survivors, decisions=decisions, grid_size=grid,
        stage_counts={"feasible": len(feasible), "traffic": len(after_traffic), "predicted_time": len(survivors)},
        infeasible_reasons=dict(infeasible), elapsed_s=clock() - start)


#: each family's best predictions measured in the warm start whatever the other families' models say
WARM_PER_FAMILY = 2


def warm_start_order(survivors: list[Candidate], n: int, per_family: int = WARM_PER_FAMILY) -> list[Candidate]:
    """The first ``n`` configurations to measure: every family's ``per_family`` best predictions (so no family's
    model is trusted alone before a measurement), then the rest by calibrated prediction across families
    (:meth:`~convtune.kernels.spec.KernelSpec.choice_of`, as the untuned choice compares them). A family its
    model predicts far slower gets no more than its heads: taking the families in turn instead spent half the
    warm start of the Winograd sweep on the fused family, which none of its ten shapes' 3%-best configs is in."""
    ranked = sorted(survivors, key=lambda c: (c.spec.choice_of(c.plan.problem, c.predicted_s), c.key))
    taken: dict[str, int] = {}
    heads: list[Candidate] = []
    rest: list[Candidate] = []
    for c in ranked:
        family = c.spec.family
        if taken.get(family, 0) < per_family:
            taken[family] = taken.get(family, 0) + 1
            heads.append(c)
        else:
            rest.append(c)
    return (heads + rest)[:n]


def _numbers(c: Candidate) -> dict[str, float]:
    return {"traffic_words": c.traffic_words, "bound_words": c.bound_words, "traffic_ratio": c.traffic_ratio,
            "predicted_s": c.predicted_s}

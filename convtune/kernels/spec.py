"""KernelSpec: one registry row, (family, direction) -> what the tuner needs to treat every family alike.

A module of its own that imports no family, so that each family package (``convtune.kernels.direct`` …, or one
outside convtune) can build its rows without importing :mod:`convtune.kernels.registry`, which imports them.
The fields are described in the registry's docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convtune.kernels.compile import kernel_text, source_hash
from convtune.kernels.config import KernelConfig
from convtune.kernels.protocols import Launcher, PlanPreparer
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


@dataclass(frozen=True, slots=True)
class KernelSpec:
    family: str
    direction: str
    source: str                   # file name of the .cu source, found by convtune.kernels.compile.kernel_path
    entry: str                    # extern "C" entry of the generated wrapper
    config_class: type[KernelConfig]
    supports: Callable[[ConvProblem], bool]
    enumerate_plans: Callable[[ConvProblem, MachineModel], Iterable[Any]]
    plan: Callable[..., Any]  # (problem, the family's own config class, machine) -> plan
    predict_s: Callable[[Any, MachineModel], float]
    traffic_words: Callable[[Any], int]
    onchip_words: Callable[[Any], int]                  # fast memory one block holds (smem + accumulators)
    bound_words: Callable[[Any, int], float]            # the plan's algorithm's I/O lower bound for S words
    grid_size: Callable[[ConvProblem], int]             # size of the raw parameter grid before validity checks
    floor_work: Callable[[ConvProblem, int], list[tuple[str, float, float]]]  # [(variant, flops, bound words)]
    launcher: Launcher                                  # compile_plan, prepare_filters, filters_key, launch, ...
    algorithm: str = "direct"                           # what convtune.conv2d(algorithm=...) calls it
    description: str = ""
    source_dirs: tuple[Path, ...] = ()                  # folders searched before convtune/kernels (outside families)
    # the calibration of predict_s for choosing across families (choice_s); 1 and 0 leave the model as it is
    choice_scale: float = 1.0
    choice_offset_s: float = 0.0
    choice_classes: tuple[str, ...] = ("float32",)     # the precision classes the calibration was fitted in
    # a lower bound on predict_s of every plan of the family for a problem (None: none known), which lets the
    # untuned choice skip a family's whole space when another family's choice is already faster
    floor_s: Callable[[ConvProblem, MachineModel], float] | None = None
    # the precision classes in which the untuned choice and the provisional answer consider the family (None: every
    # class it supports; ``()``: none, a model not yet calibrated against the others'); a family calibrated in some
    # classes only is left out elsewhere. The tuner measures every family in every class it supports.
    untuned_classes: tuple[str, ...] | None = None

    def chosen_for(self, problem: ConvProblem) -> bool:
        """Whether the untuned choice (and the provisional answer) considers this family for ``problem``."""
        return self.untuned_classes is None or problem.precision in self.untuned_classes

    @property
    def kind(self) -> str:
        return f"{self.family}.{self.direction}"

    def choice_s(self, plan: Any, machine: MachineModel) -> float:
        """The time the untuned choice compares across families: ``choice_scale · predict_s + choice_offset_s``.

        Each family's model ranks its own configurations; comparing families needs their absolute errors to agree,
        and they do not (the direct model is up to 2–4× optimistic on strided stems, igemm_simt's on tiny maps).
        The constants are fitted on the H200 (``benchmarks/family_choice_calibration.py``: every family's model-top
        config measured with one protocol on the wide suite; held out by shape, the geometric-mean regret of the
        untuned choice fell from 1.23 to 1.13, the worst from 3.06 to 1.51; direct, pointwise and unfused Winograd
        kept the shipped models, igemm_simt got ×0.5 + 12 µs). Scaling and shifting keep each family's
        own ranking unchanged. A calibration holds in the precision classes it was fitted in (``choice_classes``:
        strict float32 unless the row says otherwise; the wgmma families' scales were fitted among the TF32 and the
        16-bit families); in the others ``predict_s`` is returned unchanged."""
        return self.choice_of(plan.problem, self.predict_s(plan, machine))

    def choice_of(self, problem: ConvProblem, predicted_s: float) -> float:
        """:meth:`choice_s` of a plan of ``problem`` whose ``predict_s`` is ``predicted_s``."""
        if problem.precision not in self.choice_classes:
            return predicted_s
        return self.choice_scale * predicted_s + self.choice_offset_s

    def choice_floor_s(self, problem: ConvProblem, machine: MachineModel) -> float:
        """A lower bound on :meth:`choice_s` of every plan of the family for ``problem`` (``floor_s`` through the
        same monotone calibration; −inf without ``floor_s``)."""
        if self.floor_s is None:
            return -float("inf")
        return self.choice_of(problem, self.floor_s(problem, machine))

    def source_sha256(self) -> str:
        """Kernel version: SHA-256 of the family's source with its includes expanded."""
        return source_hash(kernel_text(self.source, self.source_dirs))



#: (plan function, module with ``prepare_plan``) of a config kind: what :func:`convtune.kernels.prepared.prepare`
#: needs. Registry rows give theirs (``spec.plan``, ``spec.launcher``); a family package lists the kinds it
#: prepares without a row (gradients, say) in an optional ``PREPARERS: dict[str, Preparer]``. The module, not the
#: function, so that ``prepare_plan`` is looked up at each call (as a module attribute: tests replace it).
Preparer = tuple[Callable[..., Any], PlanPreparer]

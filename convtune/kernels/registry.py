"""One table of kernel families: (family, direction) -> KernelSpec, built from the family packages.

A spec (:class:`~convtune.kernels.spec.KernelSpec`) names the CUDA source (a file name, found by
:func:`convtune.kernels.compile.kernel_path` under ``convtune/kernels`` and the spec's ``source_dirs``), the
``extern "C"`` entry, the config class, and the functions the tuner needs to treat every family alike:

* ``enumerate_plans(problem, machine)`` — every valid plan (config + derived launch geometry);
* ``plan(problem, config, machine)`` — validate one config (raises ``InvalidConfig``);
* ``predict_s(plan, machine)`` — the analytic model's time, for ranking only;
* ``traffic_words(plan)`` — modelled global-memory words (loads + stores) of one launch;
* ``onchip_words(plan)`` — fast memory one block holds (shared memory + register data);
* ``bound_words(plan, s_words)`` — the I/O lower bound of the plan's algorithm for fast memory S;
* ``floor_work(problem, s_words)`` — (FLOPs, bound words) of the family's algorithm at its best setting
  (direct: non-padding MACs; Winograd: α² multiplications per tile, the m with the lower floor is
  chosen by the caller through :func:`convtune.tuner.efficiency.floor_time_s`; depthwise: the causal or
  non-padding MACs and the depthwise bound), for floor times;
* ``grid_size(problem)`` — the raw parameter grid's size; ``supports(problem)`` — whether the family can run it;
* ``launcher`` — the module that runs a plan on the GPU (:class:`~convtune.kernels.protocols.Launcher`):
  ``compile_plan(plan)``, ``prepare_filters(plan, w)`` (packed or transformed weights, shared by plans with equal
  ``filters_key(plan)``), ``launch(plan, kernel, x, filters, y, stream)``, ``tolerance(plan)`` and
  ``prepare_plan(plan, device, kernels)`` returning the plan's :class:`~convtune.kernels.prepared.PreparedLaunch`
  (what ``launch`` itself runs, and what the ops call by data pointers; :func:`convtune.kernels.prepared.prepare`
  finds it through :func:`preparer`). Each row's launcher is the module of its own plan type: nothing dispatches
  on plan types.

Adding a family
---------------
A family is a package that registers itself: a folder (its ``__init__.py`` exporting
``SPECS: tuple[KernelSpec, ...]`` — every direction it has — and optionally ``PREPARERS``, the config kinds it
prepares without a row; its config class, plan, space, model and launcher modules; its ``.cu`` sources) and one
line naming the package:

* built in: a line in :data:`FAMILY_PACKAGES` (its order is the registry's order, which tests and stored data
  depend on);
* outside convtune: an entry point in the group ``convtune.families`` (``toy = convtune_toy`` in the
  distribution's ``entry_points.txt`` / ``[project.entry-points."convtune.families"]``); its specs set
  ``source_dirs`` to the folder(s) holding their sources. Its rows follow the built-in ones.

A plugin that cannot be imported, has no ``SPECS``, or registers a key already taken is an error naming it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from convtune.errors import ConvtuneError, InvalidConfig
from convtune.kernels.config import KernelConfig
from convtune.kernels.spec import KernelSpec, Preparer
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = ["ENTRY_POINT_GROUP", "FAMILY_PACKAGES", "REGISTRY", "FamilyPluginError", "KernelSpec", "get_spec",
           "model_fastest", "preparer", "specs_for"]

#: The built-in family packages, one line each, in registry order.
FAMILY_PACKAGES: tuple[str, ...] = (
    "convtune.kernels.direct",
    "convtune.kernels.pointwise",
    "convtune.kernels.winograd",
    "convtune.kernels.depthwise",
    "convtune.kernels.igemm",
    "convtune.kernels.igemm_simt",
    "convtune.kernels.igemm_wgmma",
    "convtune.kernels.winograd_tf32",
    "convtune.kernels.winograd_large",
    "convtune.kernels.winograd_3xtf32",
    "convtune.kernels.winograd_1d",
    "convtune.kernels.direct_half",
    "convtune.kernels.pointwise_sliced",
)
#: Entry-point group naming family packages outside convtune (``name = module``).
ENTRY_POINT_GROUP = "convtune.families"


class FamilyPluginError(ConvtuneError):
    """A family package could not be registered (import failed, no SPECS, a duplicate key)."""


def _plugin_packages() -> list[tuple[str, str]]:
    """(entry-point name, module) of every ``convtune.families`` entry point not already built in."""
    return [(ep.name, ep.module) for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.module not in FAMILY_PACKAGES]


def _load(module_name: str, origin: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:
        raise FamilyPluginError(f"family package {module_name!r} ({origin}) cannot be imported: "
                                f"{type(exc).__name__}: {exc}") from exc


def _build() -> tuple[dict[tuple[str, str], KernelSpec], dict[str, Preparer]]:
    """The registry rows and the preparers of every family package, built-in ones first."""
    registry: dict[tuple[str, str], KernelSpec] = {}
    preparers: dict[str, Preparer] = {}
    sources = [(name, "built in") for name in FAMILY_PACKAGES]
    sources += [(module, f"entry point {name!r} of {ENTRY_POINT_GROUP}") for name, module in _plugin_packages()]
    for module_name, origin in sources:
        module = _load(module_name, origin)
        specs = getattr(module, "SPECS", None)
        if not isinstance(specs, tuple) or not all(isinstance(s, KernelSpec) for s in specs):
            raise FamilyPluginError(f"family package {module_name!r} ({origin}) must export "
                                    "SPECS: tuple[KernelSpec, ...]")
        for spec in specs:
            key = (spec.family, spec.direction)
            if key in registry:
                raise FamilyPluginError(f"family package {module_name!r} ({origin}) registers {spec.kind}, "
                                        "which is already registered")
            registry[key] = spec
            preparers[spec.kind] = (spec.plan, spec.launcher)
        for kind, pair in dict(getattr(module, "PREPARERS", {})).items():
            preparers.setdefault(kind, pair)
    return registry, preparers


REGISTRY: dict[tuple[str, str], KernelSpec]
_PREPARERS: dict[str, Preparer]
REGISTRY, _PREPARERS = _build()


def get_spec(family: str, direction: str = "fwd") -> KernelSpec:
    """The registered spec; raises InvalidConfig naming the allowed families."""
    try:
        return REGISTRY[(family, direction)]
    except KeyError:
        allowed = ", ".join(f"{f}.{d}" for f, d in REGISTRY)
        raise InvalidConfig("family", f"{family}.{direction} is not registered: allowed {allowed}") from None


def preparer(kind: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(plan function, prepare_plan function) of a config kind ``"family.direction"``: a registry row's, or one
    a family package lists in ``PREPARERS``; raises InvalidConfig for a kind no family prepares."""
    try:
        plan_fn, module = _PREPARERS[kind]
    except KeyError:
        raise InvalidConfig("config", f"{kind!r}: no prepared launch for this kind of configuration") from None
    return plan_fn, module.prepare_plan


def specs_for(problem: ConvProblem, families: Iterable[str] | None = None) -> list[KernelSpec]:
    """Forward specs that can run ``problem`` (optionally restricted to ``families``)."""
    wanted = set(families) if families is not None else None
    return [spec for (family, direction), spec in REGISTRY.items()
            if direction == "fwd" and (wanted is None or family in wanted) and spec.supports(problem)]


def model_fastest(problem: ConvProblem, machine: MachineModel,
                  specs: Iterable[KernelSpec]) -> tuple[float, KernelConfig] | None:
    """(predicted seconds, config) of the configuration the specs' models predict fastest for ``problem``: families
    compared by :meth:`KernelSpec.choice_s` (their predictions calibrated against each other), the seconds the chosen
    family's own model time (ties: the smaller config key, as the tuner's ranking); None when no spec has a valid
    configuration.

    Families are visited by their floor (:meth:`KernelSpec.choice_floor_s`, those without one first); a family
    whose floor is above the best choice so far is skipped whole — none of its plans could win, so the answer is
    the exhaustive one (the direct family's 10⁴–10⁵ plans are skipped wherever a tensor-core or Winograd plan beats
    its compute and DRAM floor). Families the choice leaves out in the problem's class are searched only where no
    other family has a plan (:func:`choice_groups`)."""
    best = None
    for group in choice_groups(problem, specs):
        best = _fastest(problem, machine, group)
        if best is not None:
            break
    return (best[3], best[2]) if best is not None else None


def choice_groups(problem: ConvProblem,
                  specs: Iterable[KernelSpec]) -> tuple[list[KernelSpec], list[KernelSpec]]:
    """The families the untuned choice (and the provisional answer) considers for ``problem``'s class
    (:meth:`KernelSpec.chosen_for`), then those it leaves out: searched only where none of the first has a plan
    (e.g. a TF32 problem no TF32 family runs on the machine)."""
    specs = list(specs)
    return [s for s in specs if s.chosen_for(problem)], [s for s in specs if not s.chosen_for(problem)]


def _fastest(problem: ConvProblem, machine: MachineModel,
             specs: list[KernelSpec]) -> tuple[float, str, KernelConfig, float] | None:
    """(choice seconds, config key, config, predicted seconds) of :func:`model_fastest`'s search over ``specs``."""
    best: tuple[float, str, KernelConfig, float] | None = None
    floors = sorted(((spec.choice_floor_s(problem, machine), i, spec) for i, spec in enumerate(specs)),
                    key=lambda f: f[:2])
    for floor, _, spec in floors:
        if best is not None and floor > best[0]:
            continue
        for pl in spec.enumerate_plans(problem, machine):
            predicted = spec.predict_s(pl, machine)
            choice = spec.choice_of(problem, predicted)
            # the key only where it decides (a tie): building it for every plan cost a tenth of the search
            if best is None or choice < best[0] or (choice == best[0] and pl.config.key() < best[1]):
                best = (choice, pl.config.key(), pl.config, predicted)
    return best

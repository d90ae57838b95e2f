"""Optuna glue: one study per (device, problem, families, backend), its search space and samplers.

The study lives in the same database as our tables (Optuna's RDBStorage, its own tables and version
table), so any worker can continue any study. The search space is the pruning survivors: each config
field is an ordered integer parameter over the range the survivors take (``IntDistribution(log=True)``:
tile sizes, thread counts, stages and widths are magnitudes, mostly powers of two, so samplers and
optuna-dashboard's contour plots see them in order), a categorical one only where values are labels
(:data:`UNORDERED`, and ``family`` when several families compete). A suggestion that is not itself a
survivor is mapped to the nearest survivor not yet evaluated (L1 distance of log2 parameter values, the
same scale the log distributions sample on; ties to the better predicted rank), so every trial evaluates
a new, valid configuration.

What optuna-dashboard shows (:func:`describe_study`): the objective is named ``time_ms`` (the median kernel
time, milliseconds), and the study's user attributes carry the problem (key and fields), the device, the
families, the backend, the floor time (ms) and the kernel versions.

Studies written before the ordered distributions (categorical parameters) stay as they are and loadable;
Optuna refuses to mix distribution kinds in one study, so :func:`open_study` continues such a study in a
successor named ``<name>|ordered``, which the tuner warm-starts from the stored measurements as it does
any study (``tune._adopt_stored``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from convtune.tuner.prune import Candidate

SAMPLERS = ("tpe", "random")
#: The objective's name in Optuna (and optuna-dashboard): the median kernel time in milliseconds.
METRIC_NAME = "time_ms"
#: Integer config fields whose values are labels, not magnitudes: categorical.
UNORDERED = frozenset({"design", "mode"})
#: Suffix of the study that continues one written with categorical distributions.
SUCCESSOR_SUFFIX = "|ordered"
#: User attribute marking a study whose config parameters are ordered distributions.
SPACE_ATTR = "space"


def make_sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        # constant_liar: trials asked in one batch (compiled together) avoid proposing the same region
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10, multivariate=True, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"sampler={name!r}: allowed {', '.join(SAMPLERS)}")


def study_name(device_name: str, problem_key: str, families: list[str], backend: str,
               kernel_versions: list[str] | None = None) -> str:
    """One study per (device, problem, families, backend, kernel versions)."""
    versions = f"|{','.join(kernel_versions)}" if kernel_versions else ""
    return f"convtune|{device_name}|{problem_key}|{','.join(sorted(families))}|{backend}{versions}"


def open_study(storage_url: str | None, name: str, sampler: optuna.samplers.BaseSampler,
               attrs: Mapping[str, Any] | None = None) -> optuna.Study:
    """Create or load (``load_if_exists``) the study, named and described (:func:`describe_study`; ``attrs``:
    user attributes to set, default :func:`study_attrs` of the name); ``storage_url=None`` keeps it in memory.
    A stored study of categorical config parameters is continued in its successor (module docstring)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage: Any = None
    if storage_url is not None:
        storage = optuna.storages.RDBStorage(storage_url, engine_kwargs=_engine_kwargs(storage_url))
    study = optuna.create_study(study_name=name, storage=storage, sampler=sampler, direction="minimize",
                                load_if_exists=True)
    if has_categorical_space(study):
        study = optuna.create_study(study_name=name + SUCCESSOR_SUFFIX, storage=storage, sampler=sampler,
                                    direction="minimize", load_if_exists=True)
    if attrs is None:
        attrs = study_attrs(name, _device_ceilings(storage, name))
    describe_study(study, attrs)
    return study


def _device_ceilings(storage: Any, name: str) -> tuple[float, float] | None:
    """(copy bytes/s, fp32 FLOP/s) of the study's device as our ``devices`` table holds them (the tuner's floors
    use these; a replay table's differ from the preset's), read through Optuna's engine: the same database."""
    device = name.split("|")[1] if name.count("|") >= 4 else None
    engine = getattr(storage, "engine", None)
    if device is None or engine is None:
        return None
    from sqlalchemy.orm import Session

    from convtune.storage import queries as repo

    try:
        with Session(engine) as session:
            row = repo.find_device(session, device)
            return None if row is None else (row.copy_bandwidth_bytes_per_s, row.fp32_peak_flops_per_s)
    except Exception:  # no convtune tables in this database (a study of its own): the preset's ceilings
        return None


def has_categorical_space(study: optuna.Study) -> bool:
    """Whether the study's trials hold an ordered config field as a categorical parameter (written before the
    ordered distributions: new suggestions of another kind would be refused)."""
    if study.user_attrs.get(SPACE_ATTR) == "ordered":
        return False
    for trial in study.get_trials(deepcopy=False):
        for param, dist in trial.distributions.items():
            if param != "family" and param.rpartition(".")[2] not in UNORDERED:
                return isinstance(dist, CategoricalDistribution)
    return False


def describe_study(study: optuna.Study, attrs: Mapping[str, Any]) -> None:
    """Name the objective ``time_ms`` and set the user attributes (only those that differ: no write on a
    resumed study)."""
    if study.metric_names != [METRIC_NAME]:
        with warnings.catch_warnings():  # set_metric_names is marked experimental since Optuna 3.2
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([METRIC_NAME])
    current = study.user_attrs
    for key, value in {SPACE_ATTR: "ordered", **attrs}.items():
        if current.get(key) != value:
            study.set_user_attr(key, value)


def study_attrs(name: str, ceilings: tuple[float, float] | None = None) -> dict[str, Any]:
    """The user attributes of a study named by :func:`study_name`: ``problem`` (key), ``problem_fields``,
    ``device``, ``families``, ``family`` (comma-separated), ``backend``, ``floor_ms`` (the bound's floor on the
    device's preset with ``ceilings`` (copy bytes/s, fp32 FLOP/s) when given, the fastest family's; None for a
    device without a preset), ``floor_ms_by_family`` and
    ``kernel_version`` (family → SHA-256 of its source, or the 12-character prefix the name holds). Empty for
    a name of another form."""
    parts = name.split("|")
    if len(parts) < 5 or parts[0] != "convtune":
        return {}
    device, problem_key, family_text, backend = parts[1:5]
    families = [f for f in family_text.split(",") if f]
    attrs: dict[str, Any] = {"problem": problem_key, "device": device, "families": families,
                             "family": ",".join(families), "backend": backend}
    from convtune.errors import ConvtuneError
    from convtune.kernels.registry import REGISTRY
    from convtune.ops.resolver import kernel_shas
    from convtune.problem import ConvProblem

    # the name lists versions in registry order of the families (tune.specs_for), not sorted
    ordered = [f for f, d in REGISTRY if d == "fwd" and f in families]
    versions = parts[5].split(",") if len(parts) > 5 and parts[5] else []
    current = kernel_shas()
    if len(versions) == len(ordered):
        attrs["kernel_version"] = {f: current[f] if current.get(f, "").startswith(v) else v
                                   for f, v in zip(ordered, versions, strict=True)}
    try:
        problem = ConvProblem.parse(problem_key)
    except ConvtuneError:
        return attrs
    attrs["problem_fields"] = problem.to_dict()
    attrs.update(_floors(problem, device, ordered, ceilings))
    return attrs


def _floors(problem: Any, device: str, families: list[str], ceilings: tuple[float, float] | None) -> dict[str, Any]:
    from convtune.kernels.registry import get_spec
    from convtune.machine import PRESETS
    from convtune.tuner.efficiency import floor_time_s

    lowered = device.lower()
    machine = next((m for m in PRESETS.values() if m.name.lower() == lowered), None) or next(
        (m for key, m in PRESETS.items() if key in lowered), None)
    if machine is None or not families:
        return {"floor_ms": None}
    if ceilings is not None:
        machine = machine.with_ceilings(*ceilings)
    by_family = {f: floor_time_s(problem, machine, get_spec(f)) * 1e3 for f in families}
    return {"floor_ms": min(by_family.values()), "floor_ms_by_family": by_family}


def distribution(name: str, values: list[Any]) -> BaseDistribution:
    """The distribution of a config field over the survivors' ``values`` (sorted): ordered integers on a log
    scale (every tunable field is a positive magnitude), categorical for labels (:data:`UNORDERED`) or any
    value that is not a positive integer."""
    if name in UNORDERED or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
        return CategoricalDistribution(values)
    return IntDistribution(min(values), max(values), log=True)


def _engine_kwargs(url: str) -> dict[str, Any]:
    return {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {"pool_pre_ping": True}


def log2_coords(values: Any) -> np.ndarray:
    """Config field values as nearest-neighbour coordinates: log2 of each magnitude, so a factor of two is one
    unit; a 0/1 switch (``tma``) maps 0 to -1, one unit from 1, instead of log2(0) = -inf."""
    return np.log2(np.maximum(np.asarray(values, float), 0.5))


class ConfigSpace:
    """The survivors as an Optuna search space, with nearest-survivor mapping."""

    def __init__(self, survivors: list[Candidate]) -> None:
        if not survivors:
            raise ValueError("empty search space: pruning left no configuration")
        self.rank = {c.key: i for i, c in enumerate(survivors)}
        self.by_family: dict[str, list[Candidate]] = {}
        for c in survivors:
            self.by_family.setdefault(c.config.family, []).append(c)
        self.fields = {fam: [f.name for f in fields(cands[0].config)] for fam, cands in self.by_family.items()}
        self.values = {fam: {name: sorted({getattr(c.config, name) for c in cands}) for name in self.fields[fam]}
                       for fam, cands in self.by_family.items()}
        self.log2 = {fam: log2_coords([[getattr(c.config, n) for n in self.fields[fam]] for c in cands])
                     for fam, cands in self.by_family.items()}
        self.dists = {fam: {n: distribution(n, self.values[fam][n]) for n in self.fields[fam]}
                      for fam in self.by_family}

    @property
    def families(self) -> list[str]:
        return sorted(self.by_family)

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        family = self.families[0]
        if len(self.families) > 1:
            family = trial.suggest_categorical("family", self.families)
        params: dict[str, Any] = {"family": family}
        for name in self.fields[family]:
            dist = self.dists[family][name]
            if isinstance(dist, IntDistribution):
                params[name] = trial.suggest_int(f"{family}.{name}", dist.low, dist.high, log=dist.log)
            else:
                params[name] = trial.suggest_categorical(f"{family}.{name}", self.values[family][name])
        return params

    def params_of(self, candidate: Candidate) -> dict[str, Any]:
        """Optuna parameters that name ``candidate`` exactly (for warm-start enqueueing)."""
        family = candidate.config.family
        params: dict[str, Any] = {f"{family}.{n}": getattr(candidate.config, n) for n in self.fields[family]}
        if len(self.families) > 1:
            params["family"] = family
        return params

    def distributions_of(self, candidate: Candidate) -> dict[str, BaseDistribution]:
        """The distributions :meth:`suggest` samples ``candidate``'s parameters from (for stored trials)."""
        family = candidate.config.family
        out: dict[str, BaseDistribution] = {f"{family}.{n}": self.dists[family][n] for n in self.fields[family]}
        if len(self.families) > 1:
            out["family"] = CategoricalDistribution(self.families)
        return out

    def nearest(self, params: dict[str, Any], exclude: set[str]) -> Candidate | None:
        """The survivor of ``params['family']`` closest to ``params`` whose key is not in ``exclude``;
        when that family is exhausted, the best-ranked unevaluated survivor of any family."""
        family = params["family"]
        cands = self.by_family[family]
        target = log2_coords([params[n] for n in self.fields[family]])
        dist = np.abs(self.log2[family] - target).sum(axis=1)
        for i in np.lexsort((np.array([self.rank[c.key] for c in cands]), dist)):
            if cands[i].key not in exclude:
                return cands[i]
        rest = [c for fam in self.families for c in self.by_family[fam] if c.key not in exclude]
        return min(rest, key=lambda c: self.rank[c.key]) if rest else None

    def size(self) -> int:
        return len(self.rank)


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)

"""Optuna glue: one study per (device, problem, families, backend), its search space and samplers.

The study lives in the same database as our tables (Optuna's RDBStorage, its own tables and version
table), so any worker can continue any study. The search space is the pruning survivors: each config
field is a categorical parameter over the values the survivors take (plus ``family`` when several
families compete). A suggestion that is not itself a survivor is mapped to the nearest survivor not
yet evaluated (L1 distance of log2 parameter values, ties to the better predicted rank), so every
trial evaluates a new, valid configuration.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import numpy as np
import optuna

from convtune.tuner.prune import Candidate

SAMPLERS = ("tpe", "random")


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


def open_study(storage_url: str | None, name: str, sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    """Create or load (``load_if_exists``) the study; ``storage_url=None`` keeps it in memory."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage: Any = None
    if storage_url is not None:
        storage = optuna.storages.RDBStorage(storage_url, engine_kwargs=_engine_kwargs(storage_url))
    return optuna.create_study(study_name=name, storage=storage, sampler=sampler, direction="minimize",
                               load_if_exists=True)


def _engine_kwargs(url: str) -> dict[str, Any]:
    return {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {"pool_pre_ping": True}


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
        self.log2 = {fam: np.log2(np.array([[getattr(c.config, n) for n in self.fields[fam]] for c in cands], float))
                     for fam, cands in self.by_family.items()}

    @property
    def families(self) -> list[str]:
        return sorted(self.by_family)

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        family = self.families[0]
        if len(self.families) > 1:
            family = trial.suggest_categorical("family", self.families)
        params: dict[str, Any] = {"family": family}
        for name in self.fields[family]:
            params[name] = trial.suggest_categorical(f"{family}.{name}", self.values[family][name])
        return params

    def params_of(self, candidate: Candidate) -> dict[str, Any]:
        """Optuna parameters that name ``candidate`` exactly (for warm-start enqueueing)."""
        family = candidate.config.family
        params: dict[str, Any] = {f"{family}.{n}": getattr(candidate.config, n) for n in self.fields[family]}
        if len(self.families) > 1:
            params["family"] = family
        return params

    def distributions_of(self, candidate: Candidate) -> dict[str, optuna.distributions.BaseDistribution]:
        """The distributions :meth:`suggest` samples ``candidate``'s parameters from (for stored trials)."""
        family = candidate.config.family
        out: dict[str, optuna.distributions.BaseDistribution] = {
            f"{family}.{n}": optuna.distributions.CategoricalDistribution(self.values[family][n])
            for n in self.fields[family]}
        if len(self.families) > 1:
            out["family"] = optuna.distributions.CategoricalDistribution(self.families)
        return out

    def nearest(self, params: dict[str, Any], exclude: set[str]) -> Candidate | None:
        """The survivor of ``params['family']`` closest to ``params`` whose key is not in ``exclude``;
        when that family is exhausted, the best-ranked unevaluated survivor of any family."""
        family = params["family"]
        cands = self.by_family[family]
        target = np.log2(np.array([params[n] for n in self.fields[family]], float))
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

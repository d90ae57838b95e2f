"""Kernel Tuner's search strategies replaying a measured table (its simulation mode), for tuner_efficiency.py.

Kernel Tuner (``kernel_tuner``, ``pip install kernel_tuner``) tunes a space of named parameters; in simulation mode
every evaluation is answered from a cache file of measured configurations. Here the parameters are the fields of
convtune's config keys (plus ``family`` where a table holds several families; a field a family lacks takes the
placeholder 0), the cache holds every measured row of one problem of a replay table (failed rows as
``RuntimeFailedConfig``), and a restriction admits exactly the measured configurations, so each strategy searches the
same universe as Optuna TPE and convtune's tuner: the table's rows. A strategy's trials are the distinct configurations
it evaluated, in order (Kernel Tuner's own ``max_fevals`` counts them the same way).

Strategies that revisit configurations forever (a revisit costs nothing in simulation, so a local search stuck in a
sparse sample never spends its budget) are stopped after ``revisit_cap`` × ``max_trials`` evaluations in all; their
run ends with the trials it had.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

FAILED = "RuntimeFailedConfig"


def parse_key(key: str) -> dict[str, Any]:
    """``"direct.fwd tile_h=2 ... splits=1"`` → ``{"family": "direct.fwd", "tile_h": 2, ..., "splits": 1}``."""
    family, *fields = key.split()
    out: dict[str, Any] = {"family": family}
    for field in fields:
        name, value = field.split("=", 1)
        out[name] = int(value)
    return out


class SimulationCache:
    """One problem's measured rows as a Kernel Tuner simulation cache (``write``) and the map back to config keys."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        parsed = {key: parse_key(key) for key in rows}
        families = sorted({p["family"] for p in parsed.values()})
        names = [n for p in parsed.values() for n in p if n != "family"]
        self.names = (["family"] if len(families) > 1 else []) + list(dict.fromkeys(names))
        self.values = {key: [p.get(n, 0) if n != "family" else families.index(p["family"])
                             for n in self.names] for key, p in parsed.items()}
        self.tune_params = {n: sorted({v[i] for v in self.values.values()}) for i, n in enumerate(self.names)}
        self.by_element = {self.element_key(v): key for key, v in self.values.items()}
        self.rows = rows

    @staticmethod
    def element_key(values: list[Any]) -> str:
        """Kernel Tuner's cache key of a configuration: its parameter values joined by commas."""
        return ",".join(str(v) for v in values)

    def admits(self, params: dict[str, Any]) -> bool:
        """The restriction: only measured configurations exist."""
        return self.element_key([params[n] for n in self.names]) in self.by_element

    def write(self, path: Path) -> None:
        cache = {}
        for key, values in self.values.items():
            row = self.rows[key]
            entry: dict[str, Any] = dict(zip(self.names, values, strict=True))
            ok = row.get("status") == "ok"
            entry["time"] = row["median_ms"] if ok else FAILED
            # simulated costs (ms) Kernel Tuner adds up: nvcc, and the timed repetitions
            entry["compile_time"] = 1e3 * (row.get("compile_s") or row.get("nvcc_s") or 0.0)
            entry["verification_time"] = 0.0
            entry["benchmark_time"] = row["median_ms"] * row.get("reps", 1) if ok else 0.0
            cache[self.element_key(values)] = entry
        doc = {"device_name": "replay", "kernel_name": "convtune", "problem_size": [1],
               "tune_params_keys": self.names, "tune_params": self.tune_params, "objective": "time", "cache": cache}
        path.write_text(json.dumps(doc))


class _Recorder:
    """Patches Kernel Tuner's simulation runner for one run: records each configuration it is asked to evaluate (so a
    run that ends in an exception still yields its trials) and stops the run after ``cap`` evaluations, revisits
    included (see the module docstring)."""

    def __init__(self, cache: SimulationCache, cap: int) -> None:
        self.cache, self.cap = cache, cap
        self.order: list[str] = []
        self.calls = 0

    def __enter__(self) -> _Recorder:
        from kernel_tuner.runners.simulation import SimulationRunner

        self.original = original = SimulationRunner.run
        recorder = self

        def run(runner: Any, parameter_space: Any, tuning_options: Any) -> Any:
            elements = list(parameter_space)
            for element in elements:
                recorder.calls += 1
                key = recorder.cache.by_element.get(recorder.cache.element_key(list(element)))
                if key is not None and key not in recorder.order and not tuning_options.budget.is_done():
                    recorder.order.append(key)
            budget = tuning_options.budget
            if recorder.calls > recorder.cap and budget.max_fevals is not None:
                budget.num_fevals = budget.max_fevals
            return original(runner, elements, tuning_options)

        SimulationRunner.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        from kernel_tuner.runners.simulation import SimulationRunner

        SimulationRunner.run = self.original


def strategy_order(cache: SimulationCache, path: Path, strategy: str, seed: int, max_trials: int,
                   revisit_cap: int = 20) -> tuple[list[str], str | None]:
    """(the config keys ``strategy`` evaluated, distinct and in order, in one seeded run of at most ``max_trials``;
    the error that ended the run early, if one did). Raises ImportError when the strategy needs a package that is not
    installed."""
    import random

    import numpy as np
    from kernel_tuner import tune_kernel

    # Kernel Tuner passes its seed to the pymoo strategies only; the others draw from the global generators
    random.seed(seed)
    np.random.seed(seed)
    error = None
    with _Recorder(cache, revisit_cap * max_trials) as recorder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tune_kernel("convtune", "__global__ void convtune() {}", 1, [], dict(cache.tune_params), lang="CUDA",
                        restrictions=cache.admits, cache=str(path), simulation_mode=True, strategy=strategy,
                        strategy_options={"max_fevals": max_trials}, quiet=True, seed=seed)
        except ImportError:
            raise
        except Exception as exc:   # a strategy's own failure on this space ends its run; its trials stand
            error = f"{type(exc).__name__}: {exc}"
    return recorder.order[:max_trials], error

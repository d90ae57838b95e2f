"""Benchmarkers: one protocol, three ways to answer "how fast is this configuration on this problem?".

* :class:`~convtune.tuner.gpu.CupyBenchmarker` — compiles, verifies against the float64 reference and
  times on the GPU (run inside :class:`~convtune.tuner.trial_process.SubprocessBenchmarker` by the tuner);
* :class:`ReplayBenchmarker` — answers from a timing table really measured on a GPU (``tests/data``);
* :class:`ModelBenchmarker` — the analytic model's prediction, flagged ``predicted`` and stored under
  backend "model", so it is never mixed with measurements.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from convtune.errors import InvalidConfig
from convtune.kernels.registry import KernelSpec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

OK = "ok"
STATUSES = ("ok", "compile_error", "launch_error", "wrong", "timeout", "crashed", "spill", "missing")


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Identity and ceilings of the device results belong to."""

    name: str
    compute_capability: str
    sm_count: int
    driver_version: str | None
    cuda_version: str | None
    machine: MachineModel

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["machine"] = asdict(self.machine)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceInfo:
        return cls(d["name"], d["compute_capability"], d["sm_count"], d.get("driver_version"),
                   d.get("cuda_version"), MachineModel.from_dict(d["machine"]))

    @classmethod
    def from_machine(cls, machine: MachineModel) -> DeviceInfo:
        cc = "{}.{}".format(*machine.compute_capability)
        return cls(machine.name, cc, machine.sm_count, None, None, machine)


@dataclass(frozen=True, slots=True)
class TrialResult:
    """Outcome of one configuration on one problem; times in milliseconds."""

    status: str
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    min_ms: float | None = None
    reps: int | None = None
    rotation_sets: int | None = None
    rel_error: float | None = None
    num_regs: int | None = None
    local_bytes: int | None = None
    smem_bytes: int | None = None
    compile_s: float | None = None
    error: str | None = None
    predicted: bool = False

    @property
    def ok(self) -> bool:
        return self.status == OK and self.median_ms is not None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialResult:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


class Benchmarker(Protocol):
    backend: str

    def device(self) -> DeviceInfo: ...

    def kernel_version(self, spec: KernelSpec) -> str: ...

    def available(self, problem: ConvProblem) -> set[str] | None:
        """Config keys this benchmarker can answer for ``problem`` (None: any)."""
        ...

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult: ...

    def retime(self, problem: ConvProblem, plans: list[Any], rounds: int = 5, hot: bool = False) -> list[TrialResult]:
        """Time ``plans`` again, interleaved, for the final choice: with the operands out of L2 (the measurement
        protocol), or ``hot`` — one buffer set, launched back to back, so the operands stay in L2 as a network's
        layer finds the input its predecessor just wrote (benchmarkers without that measurement answer as cold)."""
        ...

    # optional: ``prefetch(problem, plans) -> dict[str, float]`` compiles ahead (GPU benchmarkers)

    def close(self) -> None: ...


# ---- replay ------------------------------------------------------------------------------------------
REPLAY_FORMAT = "convtune-replay/1"


@dataclass
class ReplayTable:
    """Timings measured on one device: problem key -> config key -> TrialResult fields.

    File format (JSON, optionally gzip-compressed ``.json.gz``)::

        {"format": "convtune-replay/1", "device": DeviceInfo, "kernel_sha256": {"direct.fwd": sha},
         "source": "how it was measured", "problems": {problem_key: {config_key: {...}}}}
    """

    device: DeviceInfo
    kernel_sha256: dict[str, str]
    problems: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def load(cls, path: str | Path) -> ReplayTable:
        path = Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            data = json.load(f)
        if data.get("format") != REPLAY_FORMAT:
            raise ValueError(f"{path}: not a {REPLAY_FORMAT} file")
        return cls(DeviceInfo.from_dict(data["device"]), data["kernel_sha256"], data["problems"],
                   data.get("source", ""))

    @classmethod
    def for_option(cls, path: str | Path | None, field: str = "--replay") -> ReplayTable:
        """:meth:`load` for a user's option: missing or unreadable is one :class:`~convtune.errors.InvalidConfig`
        naming ``field`` (what ``convtune tune``, ``tune-model`` and the worker say)."""
        if path is None or path == "":
            raise InvalidConfig(field, "required with --backend replay (a timing table .json[.gz])")
        try:
            return cls.load(path)
        except (OSError, ValueError) as exc:
            raise InvalidConfig(field, f"cannot read {path}: {exc}") from None

    def save(self, path: str | Path) -> None:
        path = Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "wt") as f:
            json.dump({"format": REPLAY_FORMAT, "device": self.device.to_dict(), "kernel_sha256": self.kernel_sha256,
                       "source": self.source, "problems": self.problems}, f, separators=(",", ":"))

    def current_kinds(self) -> set[str]:
        """The kinds whose recorded kernel version is this checkout's source (the others' rows are stale)."""
        from convtune.kernels.registry import get_spec

        return {kind for kind, sha in self.kernel_sha256.items() if get_spec(*kind.split(".")).source_sha256() == sha}

    def fastest_configs(self) -> dict[str, str]:
        """Per problem (its canonical key): the config key of the fastest ``ok`` row of a current kind
        (:meth:`current_kinds`); problems without one are left out."""
        current = self.current_kinds()
        best: dict[str, str] = {}
        for key, rows in self.problems.items():
            ok = [(r["median_ms"], c) for c, r in rows.items() if r.get("status") == "ok" and c.split()[0] in current]
            if ok:
                best[ConvProblem.parse(key).key()] = min(ok)[1]
        return best

    def merge(self, other: ReplayTable) -> None:
        """Add ``other``'s rows (its rows win on a clash) and the kernel versions of families it adds."""
        for problem, rows in other.problems.items():
            self.problems.setdefault(problem, {}).update(rows)
        for kind, sha in other.kernel_sha256.items():
            self.kernel_sha256.setdefault(kind, sha)


class ReplayBenchmarker:
    """Answers from a :class:`ReplayTable`; a configuration it has no row for is ``missing``.

    A tf32 problem is answered from its own rows, else from its strict float32 twin's
    (:meth:`~convtune.problem.ConvProblem.serving_keys`): a row recorded for the strict problem is a strict
    family's kernel (only strict families run strict problems), the same kernel a tf32 request of that config
    launches, so its recorded time is that launch's. Its measurement is stored under the tf32 problem's key.
    """

    backend = "replay"

    def __init__(self, table: ReplayTable | str | Path) -> None:
        self.table = table if isinstance(table, ReplayTable) else ReplayTable.load(table)
        self.measured: list[tuple[str, str]] = []   # (problem key, config key) answered, in order

    def device(self) -> DeviceInfo:
        return self.table.device

    def kernel_version(self, spec: KernelSpec) -> str:
        return self.table.kernel_sha256.get(spec.kind, "unknown")

    def available(self, problem: ConvProblem) -> set[str] | None:
        return {config for key in problem.serving_keys() for config in self.table.problems.get(key, {})}

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        key = plan.config.key()
        self.measured.append((problem.key(), key))
        row = next((rows[key] for rows in (self.table.problems.get(k, {}) for k in problem.serving_keys())
                    if key in rows), None)
        if row is None:
            return TrialResult("missing", error="no row in the replay table")
        return TrialResult.from_dict(row)

    def retime(self, problem: ConvProblem, plans: list[Any], rounds: int = 5, hot: bool = False) -> list[TrialResult]:
        return [self.measure(problem, pl) for pl in plans]   # one time per config: no hot-L2 measurement to answer

    def close(self) -> None:
        pass


class ModelBenchmarker:
    """The analytic model as a benchmarker: for dry runs without a GPU; every result is ``predicted``."""

    backend = "model"

    def __init__(self, machine: MachineModel) -> None:
        self.machine = machine

    def device(self) -> DeviceInfo:
        return DeviceInfo.from_machine(self.machine)

    def kernel_version(self, spec: KernelSpec) -> str:
        return spec.source_sha256()

    def available(self, problem: ConvProblem) -> set[str] | None:
        return None

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        from convtune.kernels.registry import get_spec

        spec = get_spec(plan.config.family, plan.config.direction)
        # no kernel finishes faster than a launch (docs/bounds.md §11.1): a prediction neither
        predicted_s = max(spec.predict_s(plan, self.machine), self.machine.launch_floor_s)
        return TrialResult(OK, median_ms=predicted_s * 1e3, predicted=True,
                           smem_bytes=getattr(plan, "smem_bytes", None))

    def retime(self, problem: ConvProblem, plans: list[Any], rounds: int = 5, hot: bool = False) -> list[TrialResult]:
        return [self.measure(problem, pl) for pl in plans]   # one time per config: no hot-L2 measurement to answer

    def close(self) -> None:
        pass

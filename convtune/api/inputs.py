"""Request input to domain objects: problems (validated by ConvProblem), devices, families, windows.

Every failure is a typed error naming the field (:class:`~convtune.errors.InvalidProblem`,
:class:`~convtune.errors.InvalidConfig`), which the error handlers answer with 422.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from convtune.errors import InvalidConfig, InvalidProblem
from convtune.kernels.registry import REGISTRY, specs_for
from convtune.machine import PRESETS, MachineModel
from convtune.problem import ConvProblem
from convtune.storage import queries as repo

#: Most filter taps per axis the API accepts: the bound and model work grows with the taps, and no
#: kernel family of convtune runs longer filters (long convolutions belong to FFT methods).
MAX_TAPS = 65_536


def to_problem(spec: Mapping[str, Any], dtype: str | None = None, *, math: str | None = None,
               prefix: str = "") -> ConvProblem:
    """A ConvProblem from a request's problem object (``{"key": ...}`` or the suite fields).

    Args:
        spec: the JSON object of the request.
        dtype, math: the request's ``dtype`` and ``math``; each overrides the problem's default, conflicts with an
            explicit one (``dtype``/``math`` among the fields, ``dtype=``/``math=`` in the key).
        prefix: put before the field name in errors (``"problems[3]."`` in a batch).

    Raises:
        InvalidProblem: ``field`` names the offending field (ConvProblem's name, after ``prefix``).
    """
    try:
        problem, explicit = _parse(spec)
        changes: dict[str, str] = {}
        for name, wanted in (("dtype", dtype), ("math", math)):
            if wanted is not None and wanted != getattr(problem, name):
                if name in explicit:
                    raise InvalidProblem(name, f"the problem says {getattr(problem, name)!r}, the request "
                                               f"{wanted!r}")
                changes[name] = wanted
        if changes:
            problem = problem.replace(**changes)
        for name, taps in (("R", problem.R), ("S", problem.S)):
            if taps > MAX_TAPS:
                raise InvalidProblem(name, f"{name}={taps} taps are more than the API accepts: must be <= {MAX_TAPS}")
    except InvalidProblem as exc:
        if prefix:
            raise InvalidProblem(prefix + exc.field, exc.detail) from None
        raise
    return problem


def _parse(spec: Mapping[str, Any]) -> tuple[ConvProblem, set[str]]:
    """The problem and which of ``dtype``, ``math`` the request states explicitly."""
    # ConvProblem compares them with dict keys and tuples: unhashable JSON breaks it
    for name in ("name", "dtype", "layout", "math"):
        if name in spec and not isinstance(spec[name], str):
            raise InvalidProblem(name, f"{spec[name]!r} must be a string")
    try:
        return _parse_checked(spec)
    except InvalidProblem:
        raise
    except (TypeError, ValueError, OverflowError) as exc:  # a JSON type ConvProblem does not expect
        raise InvalidProblem("problem", f"cannot be read: {exc}") from None


def _parse_checked(spec: Mapping[str, Any]) -> tuple[ConvProblem, set[str]]:
    if "key" in spec:
        extra = sorted(k for k in spec if k != "key")
        if extra:
            raise InvalidProblem(extra[0], "give either 'key' or the problem's fields, not both")
        key = spec["key"]
        if not isinstance(key, str) or not key.strip():
            raise InvalidProblem("key", "must be a non-empty string, e.g. 'N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1'")
        return ConvProblem.parse(key), {name for name in ("dtype", "math") if f"{name}=" in key}
    return ConvProblem.from_mapping(spec), {name for name in ("dtype", "math") if name in spec}


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    """The device a request is about: ``name`` filters stored results and jobs (``None``: any device);
    ``machine`` is the model that predicts for it."""

    name: str | None
    machine: MachineModel


def resolve_device(session: Session, device: str | None, default_preset: str) -> DeviceChoice:
    """A machine preset (``h200``...), a stored device's name, or ``None`` (any device; the default preset
    predicts).

    Raises:
        InvalidConfig: ``device`` is neither (field ``device``).
    """
    if device is None:
        return DeviceChoice(None, MachineModel.preset(default_preset))
    preset = PRESETS.get(device.strip().lower())
    if preset is not None:
        return DeviceChoice(preset.name, preset)
    stored = repo.find_device(session, device)
    if stored is not None:
        return DeviceChoice(stored.name, machine_for_name(stored.name) or MachineModel.preset(default_preset))
    names = sorted(PRESETS) + [d.name for d in repo.list_devices(session)]
    raise InvalidConfig("device", f"{device!r} is neither a machine preset nor a stored device: allowed "
                                  f"{', '.join(dict.fromkeys(names))}")


def machine_for_name(device_name: str | None) -> MachineModel | None:
    """The preset a device name belongs to (``"NVIDIA H200"`` -> h200), or ``None``."""
    if not device_name:
        return None
    lowered = device_name.lower()
    for machine in PRESETS.values():
        if machine.name.lower() == lowered:
            return machine
    return next((m for key, m in PRESETS.items() if key in lowered), None)


def check_families(problem: ConvProblem, families: list[str] | None, *, field: str = "families") -> list[str] | None:
    """``families`` (or all) checked against the registry and the problem.

    Raises:
        InvalidConfig: an unknown family (field ``families``), or none of them can run the problem
            (field ``problem``).
    """
    known = sorted({family for family, _ in REGISTRY})
    if families is not None:
        families = list(dict.fromkeys(f.strip() for f in families))
        for family in families:
            if family not in known:
                raise InvalidConfig(field, f"{family!r} is not a kernel family: allowed {', '.join(known)}")
    if not specs_for(problem, families):
        raise InvalidConfig("problem", f"no kernel family ({', '.join(families or known)}) can run "
                                       f"{problem.key()} yet")
    return families


def unsupported_reason(problem: ConvProblem) -> str | None:
    """Why no kernel family can run ``problem``, or ``None`` when one can."""
    try:
        check_families(problem, None)
    except InvalidConfig as exc:
        return exc.detail
    return None

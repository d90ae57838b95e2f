"""How close a result is to the physical limit: the bound's floor time and efficiency per family.

floor time (family) = min over the family's variants of max(FLOPs / fp32 peak, lower-bound bytes / copy
bandwidth) on the device's measured ceilings, with the variant's I/O lower bound taken at S = the L2
capacity (DRAM traffic). Direct FLOPs count only MACs that read real input (padding taps are free);
Winograd FLOPs are its α² multiplications per tile and channel pair, per F(m). Efficiency = floor / measured.
"""

from __future__ import annotations

from typing import Any

from convtune.bounds.roofline import floor_time
from convtune.kernels.registry import KernelSpec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


def floors(problem: ConvProblem, machine: MachineModel, spec: KernelSpec) -> list[dict[str, float | str]]:
    """Per variant of ``spec``'s algorithm: FLOPs, bound bytes and the floor time with what binds it."""
    s_words = machine.fast_memory_words("l2", word_bytes=problem.itemsize_bytes)
    out: list[dict[str, float | str]] = []
    for variant, flops, words in spec.floor_work(problem, s_words):
        f = floor_time(flops, words * problem.itemsize_bytes, machine)
        out.append({"variant": variant, "flops": flops, "bound_bytes": words * problem.itemsize_bytes,
                    "floor_s": f.time_s, "binding": f.binding})
    return out


def floor_time_s(problem: ConvProblem, machine: MachineModel, spec: KernelSpec) -> float:
    """The roofline floor of ``spec``'s algorithm for ``problem`` on ``machine`` (its best variant), in seconds."""
    return min(float(f["floor_s"]) for f in floors(problem, machine, spec))


def floor_and_bound_bytes(problem: ConvProblem, machine: MachineModel, spec: KernelSpec) -> tuple[float, float]:
    """(floor seconds, bound bytes) of ``spec``'s best variant."""
    best = min(floors(problem, machine, spec), key=lambda f: f["floor_s"])
    return float(best["floor_s"]), float(best["bound_bytes"])


def efficiency(floor_s: float, measured_s: float) -> float:
    return floor_s / measured_s if measured_s > 0 else 0.0


def family_choice(problem: ConvProblem, machine: MachineModel) -> dict[str, Any]:
    """Which algorithm the bound favours for ``problem`` and why: every variant's floor side by side.

    Returns ``{"favoured": algorithm, "variant": its best variant, "reason": text, "floors": [{"algorithm",
    "variant", "flops", "bound_bytes", "floor_ms", "binding"}, ...]}`` with the floors fastest first; each
    algorithm (direct, winograd) appears once per variant even when several kernel families implement it.
    """
    from convtune.kernels.registry import specs_for

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for spec in specs_for(problem):
        for f in floors(problem, machine, spec):
            rows.setdefault((spec.algorithm, str(f["variant"])), {
                "algorithm": spec.algorithm, "variant": f["variant"], "flops": f["flops"],
                "bound_bytes": f["bound_bytes"], "floor_ms": float(f["floor_s"]) * 1e3, "binding": f["binding"]})
    ranked = sorted(rows.values(), key=lambda r: (r["floor_ms"], r["algorithm"], r["variant"]))
    if not ranked:
        return {"favoured": None, "variant": None, "reason": "no registered family can run this problem", "floors": []}
    best = ranked[0]
    others = [r for r in ranked if r["algorithm"] != best["algorithm"]]
    reason = f"{best['variant']} floor {_describe(best)}"
    if others:
        reason += f" < {others[0]['variant']} floor {_describe(others[0])}"
    return {"favoured": best["algorithm"], "variant": best["variant"], "reason": reason, "floors": ranked}


def _describe(row: dict[str, Any]) -> str:
    what = f"{row['flops'] / 1e9:.3g} GFLOP" if row["binding"] == "compute" else f"{row['bound_bytes'] / 1e6:.3g} MB"
    return f"{row['floor_ms'] * 1e3:.1f} µs ({row['binding']}-bound: {what})"

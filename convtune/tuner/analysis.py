"""How close a result is to the physical limit: the bound's floor time and efficiency per family.

floor time (family) = max(FLOPs / fp32 peak, lower-bound bytes / copy bandwidth) on the device's
measured ceilings, with the family's I/O lower bound taken at S = the L2 capacity (DRAM traffic) and
FLOPs counting only MACs that read real input (padding taps are free). Efficiency = floor / measured.
"""

from __future__ import annotations

from convtune.bounds.roofline import floor_time
from convtune.kernels.registry import KernelSpec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


def floor_time_s(problem: ConvProblem, machine: MachineModel, spec: KernelSpec) -> float:
    """The roofline floor of ``spec``'s algorithm for ``problem`` on ``machine``, in seconds."""
    s_words = machine.fast_memory_words("l2", word_bytes=problem.itemsize_bytes)
    bound_bytes = spec.bound_words(problem, s_words) * problem.itemsize_bytes
    return floor_time(2 * problem.macs_nonpad, bound_bytes, machine).time_s


def efficiency(floor_s: float, measured_s: float) -> float:
    return floor_s / measured_s if measured_s > 0 else 0.0

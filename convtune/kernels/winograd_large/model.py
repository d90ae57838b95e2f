"""Analytic model of the large-filter Winograd family (for ranking, never as a result): ``passes`` × one pass of the
unfused path's model (:func:`convtune.kernels.winograd.model.predict_unfused`), with V and M priced at L2 bandwidth
when the batch runs in passes whose V and M take at most :data:`L2_RESIDENT_FRACTION` of the L2 (written by one
kernel and read by the next while still resident)."""

from __future__ import annotations

from convtune.kernels.winograd.model import WinogradPrediction, predict_unfused
from convtune.kernels.winograd_large.launcher import WinogradLargePlan
from convtune.machine import MachineModel

#: share of the L2 one pass's V and M may take and still be priced as resident (the H200's L2 is two partitions)
L2_RESIDENT_FRACTION = 0.5


def workspace_in_l2(pl: WinogradLargePlan, machine: MachineModel) -> bool:
    """A multi-pass plan whose pass's V (α²·Cp·Tp) and M (α²·Kp·Tp) fit the resident share of ``machine``'s L2.
    Single-pass plans keep the unfused path's DRAM pricing: the untuned choices measured on the H200 were made with
    it, and the L2 discount is not yet fitted to a measurement."""
    return pl.passes > 1 and pl.workspace_bytes <= L2_RESIDENT_FRACTION * machine.l2_bytes


def predict(pl: WinogradLargePlan, machine: MachineModel) -> WinogradPrediction:
    """Model time of every pass's three launches."""
    one = predict_unfused(pl.pass_plan(), machine, workspace_in_l2=workspace_in_l2(pl, machine))
    k = pl.passes
    return WinogradPrediction(k * one.time_s, k * one.issue_s, k * one.l2_s, k * one.dram_s, one.blocks_per_sm,
                              k * one.waves)

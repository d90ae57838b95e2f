"""The call paths of ``convtune.conv2d`` and ``convtune.ops.torch`` on CPU tensors "on CUDA device 0", for tests of what
a cache hit does (no GPU here): launches go to the recording driver of launch_recorder.py, kernels are fakes
with their entries' argument counts, outputs are allocated on the CPU, the model machine is the H200 preset."""

from __future__ import annotations

import functools
from typing import Any

from launch_recorder import Recorder, install

from convtune.machine import MachineModel

H200 = MachineModel.preset("h200")


def fake_kernels(rec: Recorder, pl: Any) -> Any:
    """Fake compiled kernels of a plan, shaped like the family's compile_plan result."""
    from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
    from convtune.kernels.depthwise.conv1d import launcher as dw1d
    from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan
    from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
    from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
    from convtune.kernels.depthwise.conv2d import packed as plan2d_packed
    from convtune.kernels.depthwise.conv2d import tiled as plan2d
    from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
    from convtune.kernels.direct.launcher import DirectFwdPlan
    from convtune.kernels.igemm.launcher import IgemmFwdPlan
    from convtune.kernels.pointwise.launcher import PointwiseFwdPlan
    from convtune.kernels.pointwise_sliced.launcher import PointwiseSlicedFwdPlan
    from convtune.kernels.winograd.launcher import WinogradFwdPlan
    from convtune.kernels.winograd.unfused import UnfusedKernels, WinogradUnfusedPlan

    reduce = rec.kernel("dw_reduce", 2, 5) if getattr(pl, "needs_reduce", False) else None
    if isinstance(pl, DirectFwdPlan):
        return rec.kernel("direct_fwd", 3, 12)
    if isinstance(pl, IgemmFwdPlan) and pl.channels_last:
        from convtune.kernels.igemm.nhwc import NhwcKernels

        return NhwcKernels(rec.kernel("igemm_to_nhwc", 2, 2), rec.kernel("igemm_nhwc_fwd", 3, 15))
    if isinstance(pl, IgemmFwdPlan):
        return rec.kernel("igemm_fwd", 3, 15)
    if isinstance(pl, PointwiseFwdPlan):
        return rec.kernel("pointwise_fwd", 3, 9)
    if isinstance(pl, PointwiseSlicedFwdPlan):
        return rec.kernel("pointwise_sliced_fwd", 3, 8)
    if isinstance(pl, WinogradFwdPlan):
        return rec.kernel("winograd_fwd", 3, 13)
    if isinstance(pl, WinogradUnfusedPlan):
        return UnfusedKernels(rec.kernel("winograd_input", 2, 10), rec.kernel("winograd_gemm", 3, 3),
                              rec.kernel("winograd_output", 2, 8))
    if isinstance(pl, Depthwise1dPlan):
        return dw1d.DepthwiseKernels(rec.kernel(pl.entry, 3, len(pl.int_args)), reduce)
    if isinstance(pl, plan1d_fused.FusedPlan):
        return plan1d_fused.FusedKernels(rec.kernel("dw1d_fused_bwd", 5, 5), reduce)
    if isinstance(pl, plan2d_packed.Dw2dPackedPlan):
        return rec.kernel("dw2d_packed_fwd", 3, 2)
    if isinstance(pl, plan2d_fast.Dw2dFastPlan):
        return rec.kernel("dw2d_fast_fwd", 3, 3)
    if isinstance(pl, plan2d.Dw2dPlan):
        return rec.kernel("dw2d_fwd", 3, 10)
    if isinstance(pl, plan2d_dgrad.Dw2dDgradPlan):
        return rec.kernel("dw2d_dgrad", 3, 3)
    if isinstance(pl, plan2d_wgrad.Dw2dWgradPlan):
        return plan2d_wgrad.Dw2dWgradKernels(rec.kernel("dw2d_wgrad", 3, 4), reduce)
    raise TypeError(f"no fake kernels for {type(pl).__name__}")


def install_fake_gpu(monkeypatch: Any) -> Recorder:
    """Patch the slow path's device-facing steps (validation of CUDA-ness, the machine query, compiling, the
    stream lookup, allocation on the GPU) and the driver; returns the launch recorder."""
    import torch

    from convtune.kernels import devices, prepared
    from convtune.kernels.direct import launcher as direct
    from convtune.kernels.epilogue import launcher as epilogue_launcher
    from convtune.kernels.igemm import launcher as igemm
    from convtune.kernels.winograd import filters as wino_filters
    from convtune.ops import conv2d, resolver
    from convtune.ops.torch import dense, epilogue
    from convtune.ops.torch import depthwise as dw

    rec = install(monkeypatch)
    cpu = torch.device("cpu")

    def check_torch(name: str, t: Any) -> int:  # the CUDA check dropped, the others kept
        if str(t.dtype) != "torch.float32":
            from convtune.errors import InvalidInput

            raise InvalidInput(name, f"dtype must be float32, got {t.dtype}")
        return 0

    monkeypatch.setattr(conv2d, "_check_torch", check_torch)
    monkeypatch.setattr(conv2d, "device_machine", lambda device: H200)
    monkeypatch.setattr(devices, "device_machine", lambda device: H200)
    monkeypatch.setattr(conv2d, "prepare_plan", lambda pl, device, kernels=None: prepared.prepare_plan(
        pl, device, fake_kernels(rec, pl)))
    pack = rec.kernel("direct_pack_weights", 2, 3)
    transform = rec.kernel("winograd_filter", 2, 4)
    monkeypatch.setattr(direct, "load_kernel", lambda *a, **k: pack)
    igemm_pack = rec.kernel("igemm_pack", 2, 12)
    sliced_pack = rec.kernel("pointwise_sliced_pack", 2, 3)   # pointwise_sliced packs through igemm's pack_layout
    monkeypatch.setattr(igemm, "load_kernel", lambda source, entry, **k: (
        sliced_pack if entry.startswith("pointwise_sliced_pack") else igemm_pack))
    monkeypatch.setattr(wino_filters, "load_kernel", lambda *a, **k: transform)
    monkeypatch.setattr(conv2d, "torch_stream_getter", lambda torch_module: (lambda index: 0x5EED))
    monkeypatch.setattr(conv2d, "torch_runner", functools.partial(conv2d.torch_runner, device=cpu))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(dense, "_kernels_run", lambda x: x.dtype == torch.float32)
    monkeypatch.setattr(dw, "_use_kernels", lambda t, half=True: t.dtype != torch.float64)
    monkeypatch.setattr(dw, "_device_index", lambda t: 0)
    monkeypatch.setattr(dw, "_compiled", lambda pl, device: fake_kernels(rec, pl))
    monkeypatch.setattr(dw, "_kernel_runner", functools.partial(dw._kernel_runner, device=cpu))
    monkeypatch.setattr(dw, "_backward_runner", functools.partial(dw._backward_runner, device=cpu))
    bias_act = rec.kernel("bias_act", 4, 5)
    monkeypatch.setattr(epilogue_launcher, "load_kernel", lambda *a, **k: bias_act)
    monkeypatch.setattr(epilogue, "_kernels_take", lambda y, residual: y.dtype != torch.float64 and (
        residual is None or residual.dtype == y.dtype))
    monkeypatch.setattr(epilogue, "torch_stream_getter", lambda torch_module: (lambda index: 0x5EED))
    resolver.set_lookup(False)
    conv2d.clear_caches()
    dw.clear_cache()
    return rec

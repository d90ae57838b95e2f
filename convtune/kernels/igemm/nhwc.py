"""The channels-last implicit-GEMM TF32 forward (family ``igemm_nhwc``): the launcher protocol of its registry row.

The same GEMM as :mod:`convtune.kernels.igemm.launcher` (M = N·P·Q pixels × K channels over KR = C·R·S) with the
reduction in (r, s, c) order over an NHWC copy of x, so the A operand moves in 16-byte copies of 4 channels
(C must be a multiple of 4); ``igemm_fwd.cu`` states the layouts. The prepared launch is two kernels and a
workspace of N·H·W·C floats: ``igemm_to_nhwc`` (x → workspace), then ``igemm_nhwc_fwd`` (workspace, filters → y);
its time includes the layout change, as a caller with NCHW tensors pays it.

Traffic, in words, what the kernels request (the launcher's formula with A in 16-byte pieces, plus the layout
change's read and write of x)::

    layout = 2 · N·C·H·W
    input  = ⌈K/BN⌉ · Σ_{n,p,q,r,s,c} [x tap in range] = ⌈K/BN⌉ · macs_nonpad / K
    table  = ⌈M/BM⌉ · ⌈K/BN⌉ · KRc   (one 4-word entry per 16-byte piece: a quarter of the NCHW kernel's)
    weight, output: as the NCHW kernel
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtune.kernels.compile import LoadedKernel, cupy_module, load_kernel
from convtune.kernels.igemm import launcher as _nchw
from convtune.kernels.igemm.launcher import (
    CHANNELS_LAST_FAMILY,
    NHWC_ENTRY,
    IgemmFwdConfig,
    IgemmFwdPlan,
    filter_layout,
    kernel_arguments,
    layout_key,
)
from convtune.kernels.prepared import (
    Launch,
    Memset,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    grid3,
    pointers,
    stream_pointer,
)
from convtune.problem import ConvProblem

TRANSPOSE_ENTRY = "igemm_to_nhwc"
TRANSPOSE_TILE = 32
TRANSPOSE_ROWS = 8
TOLERANCE = _nchw.TOLERANCE


@dataclass(frozen=True, slots=True)
class IgemmNhwcFwdConfig(IgemmFwdConfig):
    """The NHWC variant's tunable parameters: the NCHW kernel's fields (see :class:`IgemmFwdConfig`)."""

    family = CHANNELS_LAST_FAMILY
    direction = "fwd"


def supports(problem: ConvProblem) -> bool:
    """What the NCHW kernel runs, with C a multiple of 4 (16-byte copies of 4 channels of one tap)."""
    return _nchw.supports(problem) and problem.C % 4 == 0


def workspace_bytes(pl: IgemmFwdPlan) -> int:
    """The NHWC copy of x: 4·N·H·W·C bytes."""
    p = pl.problem
    return 4 * p.N * p.C * p.H * p.W


def traffic_words(pl: IgemmFwdPlan) -> dict[str, int]:
    """Words the two kernels request (module docstring)."""
    p = pl.problem
    words = _nchw.traffic_words(pl)
    words["table"] = pl.m_tiles * pl.n_tiles * pl.chunks * pl.config.tile_k
    words["layout"] = 2 * p.N * p.C * p.H * p.W
    return words


def total_traffic_words(pl: IgemmFwdPlan) -> int:
    return sum(traffic_words(pl).values())


@dataclass(frozen=True, slots=True)
class NhwcKernels:
    """The layout change and the GEMM; ``resources`` are the GEMM's (what the tuner records), ``compile_s`` both."""

    transpose: LoadedKernel
    gemm: LoadedKernel

    @property
    def resources(self) -> Any:
        return self.gemm.resources

    @property
    def compile_s(self) -> float:
        return self.transpose.compile_s + self.gemm.compile_s


def compile_plan(pl: IgemmFwdPlan) -> NhwcKernels:
    text = pl.source()
    return NhwcKernels(load_kernel(text, TRANSPOSE_ENTRY),
                       load_kernel(text, NHWC_ENTRY, dynamic_smem_bytes=pl.smem_bytes))


def transpose_grid(problem: ConvProblem) -> tuple[int, int, int]:
    hw = problem.H * problem.W
    return (-(-hw // TRANSPOSE_TILE), -(-problem.C // TRANSPOSE_TILE), problem.N)


def prepare_plan(pl: IgemmFwdPlan, device: int = 0, kernels: NhwcKernels | None = None) -> PreparedLaunch:
    """The layout change and the GEMM as one prepared launch: operands (x, filters, y, workspace = x in NHWC);
    split reductions zero y before the GEMM (atomic adds)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    steps: list[Any] = [Launch(kernels.transpose, transpose_grid(p), (TRANSPOSE_TILE, TRANSPOSE_ROWS, 1), 0,
                               pointers(0, 3), (p.C, p.H * p.W))]
    if c.splits > 1:
        steps.append(Memset(2, 4 * p.output_elements))
    steps.append(Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(3, 1, 2),
                        kernel_arguments(pl)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y", "workspace"), steps=steps,
                          kernels=kernels, workspace_bytes=workspace_bytes(pl), filters=filter_layout(pl, device),
                          output_shape=(p.N, p.K, p.P, p.Q))


@dataclass(frozen=True, slots=True)
class NhwcFilters:
    """The filter operand of :func:`launch`: the packed filters and the NHWC workspace, kept together so repeated
    launches allocate nothing."""

    filt: Any
    work: Any


def prepare_filters(pl: IgemmFwdPlan, w: Any) -> NhwcFilters:
    """w (K, C, R, S) float32 CuPy → the packed filters ((r, s, c) order) and a workspace for x in NHWC."""
    cp = cupy_module()
    return NhwcFilters(_nchw.prepare_filters(pl, w), cp.empty(workspace_bytes(pl) // 4, dtype=cp.float32))


def filters_key(pl: IgemmFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the workspace is x's size)."""
    p = pl.problem
    return (*layout_key(pl), p.N * p.C * p.H * p.W)


def launch(pl: IgemmFwdPlan, kernels: NhwcKernels, x: Any, filters: NhwcFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the two kernels on contiguous float32 CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y), data_pointer(filters.work)),
             stream_pointer(stream))


def tolerance(pl: IgemmFwdPlan) -> float:
    return TOLERANCE


"""The 16-bit implicit-GEMM forward (family ``igemm_half``): bfloat16 and float16 problems on the tensor cores
(``mma.sync.m16n8k16``, fp32 accumulation, y rounded once to the storage type).

It is the NHWC kernel (:mod:`convtune.kernels.igemm.nhwc`) run over a reduction of 32-bit **words**: a word holds
two consecutive channels of one tap, so in words the m16n8k16 fragments are the TF32 m16n8k8 ones exactly
(``igemm_fwd.cu``) and every index map, stage layout and copy of the NHWC kernel serves unchanged. The kernel's
geometry is the NHWC plan of the *word view* of the problem (:func:`word_view`: C/2 word-channels, float32
storage), kept as ``IgemmHalfPlan.view``; the plan's ``problem`` is the caller's. C must be a multiple of 8 (a
16-byte copy is 8 channels of one tap), and ``tile_k`` counts words (2·tile_k channels per stage).

Shapes: x (N, C, H, W), w (K, C, R, S) and y (N, K, P, Q) in the problem's dtype, as CuPy ``float16`` arrays or,
bfloat16 (which CuPy lacks), ``uint16`` arrays of the bits. The prepared launch: ``igemm_to_nhwc_16`` (x → an
NHWC workspace), the GEMM (y, or with a split reduction an fp32 workspace zeroed first and added into by atomics),
then for a split ``igemm_f32_to_bf16`` / ``_f16`` (workspace → y). The filter operand (``igemm_pack_16``): B tiles of
words in the NHWC kernel's fragment order and its gather table, in words.

Traffic, in elements of the storage type (2 bytes), from the word view's (the NHWC kernel's formula) doubled; y is
written once in 16 bits, or, split, added in fp32 (2 elements per value), zeroed, read and converted::

    layout, input, weight, table: 2 × the NHWC kernel's words on the word view
    output = N·K·P·Q                                         (splits = 1)
           = 2·splits·N·K·P·Q + 2·N·K·P·Q + 2·N·K·P·Q + N·K·P·Q   (zero, atomics, read, write; splits > 1)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, load_kernel
from convtune.kernels.igemm import launcher as _nchw
from convtune.kernels.igemm import nhwc as _nhwc
from convtune.kernels.igemm.launcher import IgemmFwdConfig, IgemmFwdPlan
from convtune.kernels.prepared import (
    FilterLayout,
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
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

HALF_FAMILY = "igemm_half"
ENTRY = "igemm_half_fwd"
TRANSPOSE_ENTRY = "igemm_to_nhwc_16"
PACK_ENTRY = "igemm_pack_16"
CONVERT_ENTRIES = {"bfloat16": "igemm_f32_to_bf16", "float16": "igemm_f32_to_f16"}
CUDA_TYPES = {"bfloat16": "convtune::bfloat16", "float16": "convtune::half16"}
DTYPES = tuple(CUDA_TYPES)
CONVERT_THREADS = 256
#: Relative error (‖y − y64‖₂ / ‖y64‖₂) a config must meet. Both operands are stored in 16 bits (bfloat16 has 8
#: significant bits, u = 2⁻⁸ ≈ 3.9e-3; float16 11, u ≈ 4.9e-4) and exact in the products; y is rounded once more.
#: The inputs' own rounding is not the kernel's error: the reference is the float64 convolution of the rounded
#: inputs, so what remains is fp32 accumulation (≪ u) and y's rounding (≈ u/√3 norm-wise on random data). The gate
#: leaves 4× over y's rounding for bfloat16 (≈ 2.3e-3) and the same margin for float16.
TOLERANCES = {"bfloat16": 1e-2, "float16": 1.5e-3}


@dataclass(frozen=True, slots=True)
class IgemmHalfFwdConfig(IgemmFwdConfig):
    """The 16-bit variant's tunable parameters: the NCHW kernel's fields (see :class:`IgemmFwdConfig`), with
    ``tile_k`` in 32-bit words of the reduction (2 channels each)."""

    family = HALF_FAMILY
    direction = "fwd"


@dataclass(frozen=True, slots=True)
class IgemmHalfPlan:
    """A 16-bit problem's plan: ``view`` is the NHWC kernel's plan of :func:`word_view` (the launch geometry)."""

    problem: ConvProblem
    config: IgemmHalfFwdConfig
    view: IgemmFwdPlan

    @property
    def threads(self) -> int:
        return self.view.threads

    @property
    def smem_bytes(self) -> int:
        return self.view.smem_bytes

    @property
    def regs_estimate(self) -> int:
        return self.view.regs_estimate

    @property
    def blocks(self) -> int:
        return self.view.blocks

    @property
    def grid(self) -> tuple[int, int, int]:
        return self.view.grid

    @property
    def min_blocks(self) -> int:
        return self.view.min_blocks

    @property
    def pipelined(self) -> bool:
        return self.view.pipelined

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus this plan's ``extern "C"`` entry."""
        c = self.config
        targs = ", ".join(str(a) for a in self.view.template_args())
        return _nchw._family_source() + _nchw._WRAPPER.format(
            threads=c.threads, min_blocks=self.view.min_blocks, targs=f"{targs}, {CUDA_TYPES[self.problem.dtype]}",
            entry=ENTRY, body="igemm_nhwc_body")


def supports(problem: ConvProblem) -> bool:
    """bfloat16 / float16 storage, groups = 1, not causal, C a multiple of 8 (16-byte copies of 8 channels)."""
    p = problem
    return p.dtype in DTYPES and p.math == "ieee" and p.groups == 1 and not p.causal and p.C % 8 == 0


def word_view(problem: ConvProblem) -> ConvProblem:
    """The problem the kernel's geometry is derived from: C/2 channels of 32-bit words (float32 storage, the TF32
    kernel's class), every other extent as given."""
    return problem.replace(C=problem.C // 2, dtype="float32", math="tf32")


def _as_nhwc(config: IgemmFwdConfig) -> IgemmFwdConfig:
    return _nhwc.IgemmNhwcFwdConfig(**{f.name: getattr(config, f.name) for f in fields(config)})


def _as_half(config: IgemmFwdConfig) -> IgemmHalfFwdConfig:
    return IgemmHalfFwdConfig(**{f.name: getattr(config, f.name) for f in fields(config)})


def plan(problem: ConvProblem, config: IgemmFwdConfig, machine: MachineModel | None = None) -> IgemmHalfPlan:
    """Validate ``config`` for ``problem`` (the NHWC kernel's rules on the word view) and derive the plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule (``problem`` for one the family does not run).
    """
    from convtune.kernels.igemm.space import plan as nhwc_plan

    if not supports(problem):
        raise InvalidConfig("problem", f"the 16-bit tensor-core kernel runs bfloat16 / float16 problems with "
                                       f"groups=1 and C a multiple of 8; got {problem.key()}")
    return IgemmHalfPlan(problem, _as_half(config), nhwc_plan(word_view(problem), _as_nhwc(config), machine))


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Any:
    """Every valid plan: the NHWC kernel's plans of the word view."""
    from convtune.kernels.igemm.space import enumerate_plans as nhwc_plans

    if not supports(problem):
        return
    for view in nhwc_plans(word_view(problem), machine, _nhwc.IgemmNhwcFwdConfig):
        yield IgemmHalfPlan(problem, _as_half(view.config), view)


def grid_size(problem: ConvProblem) -> int:
    from convtune.kernels.igemm.space import grid_size as nhwc_grid

    return nhwc_grid(word_view(problem))


# ---- traffic ------------------------------------------------------------------------------------------------
def traffic_elements(pl: IgemmHalfPlan) -> dict[str, int]:
    """Elements (2 bytes) the kernels request (module docstring)."""
    words = _nhwc.traffic_words(pl.view)
    out = pl.problem.output_elements
    split = pl.config.splits > 1
    elements = {k: 2 * v for k, v in words.items() if k != "output"}
    elements["output"] = (2 * pl.config.splits * out + 5 * out) if split else out
    return elements


def total_traffic_elements(pl: IgemmHalfPlan) -> int:
    return sum(traffic_elements(pl).values())


def onchip_elements(pl: IgemmHalfPlan) -> int:
    return 2 * _nchw.onchip_words(pl.view)


# ---- launching ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class HalfKernels:
    """The layout change, the GEMM and (for a split) the conversion; ``resources`` are the GEMM's."""

    transpose: LoadedKernel
    gemm: LoadedKernel
    convert: LoadedKernel

    @property
    def resources(self) -> Any:
        return self.gemm.resources

    @property
    def compile_s(self) -> float:
        return self.transpose.compile_s + self.gemm.compile_s + self.convert.compile_s


def compile_plan(pl: IgemmHalfPlan) -> HalfKernels:
    text = pl.source()
    return HalfKernels(load_kernel(text, TRANSPOSE_ENTRY),
                       load_kernel(text, ENTRY, dynamic_smem_bytes=pl.smem_bytes),
                       load_kernel(text, CONVERT_ENTRIES[pl.problem.dtype]))


def workspace_bytes(pl: IgemmHalfPlan) -> int:
    """x in NHWC (2 bytes an element), then for a split the fp32 output workspace (16-byte aligned)."""
    p = pl.problem
    x_bytes = -(-2 * p.input_elements // 16) * 16
    return x_bytes + (4 * p.output_elements if pl.config.splits > 1 else 0)


def filter_words(pl: IgemmHalfPlan) -> int:
    return _nchw.filter_words(pl.view.problem)


def pack_arguments(pl: IgemmHalfPlan) -> tuple[int, ...]:
    """Scalars of ``igemm_pack_16`` after (w, filt): K, KRw, KRp, NB8, R·S, S, W, DH, DW, C."""
    p, v = pl.problem, pl.view
    return (p.K, _nchw.reduction_length(v.problem), v.krp, v.kp8 // _nchw.K_ALIGN, p.R * p.S, p.S, p.W, p.dil_h,
            p.dil_w, p.C)


def filter_layout(pl: IgemmHalfPlan, device: int) -> FilterLayout:
    v = pl.view
    return _nchw.pack_layout(pl, device, f"igemm 16-bit word tiles (KRp={v.krp}, Kp8={v.kp8}, reduction (r, s, c)) "
                                         "+ gather table", layout_key(pl), filter_words(pl), PACK_ENTRY,
                             pack_arguments(pl))


def layout_key(pl: IgemmHalfPlan) -> tuple[Any, ...]:
    p = pl.problem
    return (HALF_FAMILY, p.H * p.W, p.W, p.dil_h, p.dil_w)


def prepare_plan(pl: IgemmHalfPlan, device: int = 0, kernels: HalfKernels | None = None) -> PreparedLaunch:
    """Operands (x, filters, y, workspace); a split zeroes the fp32 workspace, adds into it, converts it into y."""
    p, c, v = pl.problem, pl.config, pl.view
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    x_bytes = workspace_bytes(pl) - (4 * p.output_elements if c.splits > 1 else 0)
    hw = p.H * p.W
    steps: list[Any] = [Launch(kernels.transpose, (-(-hw // _nhwc.TRANSPOSE_TILE), -(-p.C // _nhwc.TRANSPOSE_TILE),
                                                   p.N), (_nhwc.TRANSPOSE_TILE, _nhwc.TRANSPOSE_ROWS, 1), 0,
                               pointers(0, 3), (p.C, hw))]
    gemm_args = _nchw.kernel_arguments(v)
    if c.splits > 1:   # the fp32 output workspace sits after x's NHWC copy in the workspace operand
        n = p.output_elements
        steps.append(Memset(3, 4 * n, x_bytes))
        steps.append(Launch(kernels.gemm, grid3(v.grid), (c.threads, 1, 1), v.smem_bytes,
                            pointers(3, 1, (3, x_bytes)), gemm_args))
        steps.append(Launch(kernels.convert, grid3(min(-(-n // CONVERT_THREADS), 4096)), (CONVERT_THREADS, 1, 1), 0,
                            pointers((3, x_bytes), 2), (n,)))
    else:
        steps.append(Launch(kernels.gemm, grid3(v.grid), (c.threads, 1, 1), v.smem_bytes, pointers(3, 1, 2),
                            gemm_args))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y", "workspace"), steps=steps,
                          kernels=kernels, workspace_bytes=workspace_bytes(pl), filters=filter_layout(pl, device),
                          output_shape=(p.N, p.K, p.P, p.Q))


@dataclass(frozen=True, slots=True)
class HalfFilters:
    """The filter operand of :func:`launch`: the packed word tiles and the workspace (x in NHWC, fp32 y)."""

    filt: Any
    work: Any


def shared_workspace_bytes(pl: IgemmHalfPlan) -> int:
    """The workspace of :func:`prepare_filters`: enough for every plan of the problem sharing its
    :func:`filters_key` (x in NHWC and the fp32 output of a split, whatever this plan's split)."""
    p = pl.problem
    return -(-2 * p.input_elements // 16) * 16 + 4 * p.output_elements


def prepare_filters(pl: IgemmHalfPlan, w: Any) -> HalfFilters:
    """w (K, C, R, S) 16-bit CuPy (bfloat16 as uint16 bits) → the packed filters and a workspace
    (:func:`shared_workspace_bytes`: plans with equal :func:`filters_key` share both)."""
    cp = cupy_module()
    out = _nchw.run_pack(filter_layout(pl, cp.cuda.Device().id), w)
    return HalfFilters(out, cp.empty(shared_workspace_bytes(pl) // 4, dtype=cp.float32))


def filters_key(pl: IgemmHalfPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the workspace covers x and fp32 y)."""
    p = pl.problem
    return (*layout_key(pl), p.input_elements, p.output_elements)


def launch(pl: IgemmHalfPlan, kernels: HalfKernels, x: Any, filters: HalfFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernels on contiguous 16-bit CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y), data_pointer(filters.work)),
             stream_pointer(stream))


def tolerance(pl: IgemmHalfPlan) -> float:
    return TOLERANCES[pl.problem.dtype]

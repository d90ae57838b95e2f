"""The 16-bit implicit-GEMM forward (families ``igemm_half`` and its 1×1 variant ``igemm_half_1x1``): bfloat16 and
float16 problems on the tensor cores (``mma.sync.m16n8k16``, fp32 accumulation, y rounded once to the storage type).

It is the NHWC kernel (:mod:`convtune.kernels.igemm.nhwc`) run over a reduction of 32-bit **words**: a word holds
two consecutive channels of one tap, so in words the m16n8k16 fragments are the TF32 m16n8k8 ones exactly
(``igemm_fwd.cu``) and every index map, stage layout and copy of the NHWC kernel serves unchanged. The kernel's
geometry is the NHWC plan of the *word view* of the problem (:func:`word_view`: Cp/2 word-channels, float32
storage), kept as ``IgemmHalfPlan.view``; the plan's ``problem`` is the caller's. A 16-byte copy is 8 channels of
one tap, so the NHWC workspace and the packed filters hold Cp = ⌈C/8⌉·8 channels (:func:`stored_channels`), the ones
past C zero: any C runs (stems with C = 1 or 3 included). ``tile_k`` counts words (2·tile_k channels per stage).

Shapes: x (N, C, H, W), w (K, C, R, S) and y (N, K, P, Q) in the problem's dtype, as CuPy ``float16`` arrays or,
bfloat16 (which CuPy lacks), ``uint16`` arrays of the bits. The prepared launch: the layout change (x → an NHWC
workspace of Cp channels: ``igemm_to_nhwc_16`` where C is a multiple of 8, else ``igemm_to_nhwc_pad8_16``), the GEMM
(y, or with a split reduction an fp32 workspace zeroed first and added into by atomics), then for a split
``igemm_f32_to_bf16`` / ``_f16`` (workspace → y). The filter operand (``igemm_pack_16_pad``, ``igemm_half.cu``): B
tiles of words in the NHWC kernel's fragment order and its gather table, in words, over Cp channels.

Traffic, in elements of the storage type (2 bytes), from the word view's (the NHWC kernel's formula) doubled; y is
written once in 16 bits, or, split, added in fp32 (2 elements per value), zeroed, read and converted::

    layout = N·H·W·(C + Cp)                                  (x read, the workspace written)
    input, weight, table: 2 × the NHWC kernel's words on the word view
    output = N·K·P·Q                                         (splits = 1)
           = 2·splits·N·K·P·Q + 2·N·K·P·Q + 2·N·K·P·Q + N·K·P·Q   (zero, atomics, read, write; splits > 1)

The 1×1 variant (``igemm_half_1x1``: C a multiple of 8, R = S = 1, stride 1, no padding, H·W a multiple of 8) reads A
straight from NCHW x in 16-byte copies of 8 pixels (``igemm_half_1x1_body`` in ``igemm_half_1x1.cu``, which includes
``igemm_fwd.cu`` unchanged), so there is no layout change and no NHWC workspace: the prepared launch is the GEMM
alone (operands x, filters, y), or for a split a workspace of the fp32 output (memset, GEMM, conversion). Its
geometry is the TF32 1×1 plan (:mod:`convtune.kernels.igemm.pointwise`) of the word view, its filter operand the same
``igemm_pack_16`` words (the table is not read), its traffic 2 × that kernel's words (input, weight) plus the output
above.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, kernel_text, load_kernel
from convtune.kernels.igemm import launcher as _nchw
from convtune.kernels.igemm import nhwc as _nhwc
from convtune.kernels.igemm import pointwise as _pointwise
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
POINTWISE_HALF_FAMILY = "igemm_half_1x1"
ENTRY = "igemm_half_fwd"
#: family -> (entry, kernel body template): the NHWC body over an NHWC copy of x, the 1×1 body straight from NCHW x
ENTRIES = {HALF_FAMILY: (ENTRY, "igemm_nhwc_body"),
           POINTWISE_HALF_FAMILY: ("igemm_half_1x1_fwd", "igemm_half_1x1_body")}
#: family -> CUDA source (registry row and compiled text). Each has a file of its own that includes igemm_fwd.cu
#: unchanged, so the TF32 igemm families' versions (source hashes) stay what was measured.
SOURCES = {HALF_FAMILY: "igemm_half.cu", POINTWISE_HALF_FAMILY: "igemm_half_1x1.cu"}
PIXELS_PER_COPY = 8   # the 1×1 kernel's 16-byte copies of 8 pixels: H·W a multiple of 8
CHANNEL_ALIGN = 8     # a main-loop copy is 8 channels of one tap: the NHWC workspace holds C rounded up to 8
TRANSPOSE_ENTRY = "igemm_to_nhwc_16"           # C a multiple of 8: the 32 × 32 tile transpose (igemm_fwd.cu)
PAD_TRANSPOSE_ENTRY = "igemm_to_nhwc_pad8_16"  # any other C: 16-byte stores of 8 channels, zeros past C
PAD_TRANSPOSE_THREADS = 256
PACK_ENTRY = "igemm_pack_16"                   # the 1×1 variant's filters (C a multiple of 8)
PAD_PACK_ENTRY = "igemm_pack_16_pad"           # igemm_half's filters over the stored channels (igemm_half.cu)
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
class IgemmHalfPointwiseFwdConfig(IgemmFwdConfig):
    """The 16-bit 1×1 variant's tunable parameters (``tile_k`` in words of 2 channels, as in
    :class:`IgemmHalfFwdConfig`)."""

    family = POINTWISE_HALF_FAMILY
    direction = "fwd"


@dataclass(frozen=True, slots=True)
class IgemmHalfPlan:
    """A 16-bit problem's plan: ``view`` is the NHWC (or, for ``igemm_half_1x1``, the TF32 1×1) kernel's plan of
    :func:`word_view` (the launch geometry)."""

    problem: ConvProblem
    config: IgemmFwdConfig      # IgemmHalfFwdConfig or IgemmHalfPointwiseFwdConfig
    view: IgemmFwdPlan

    @property
    def pointwise(self) -> bool:
        """The 1×1 variant: A straight from NCHW x (no layout change, no NHWC workspace)."""
        return self.config.family == POINTWISE_HALF_FAMILY

    @property
    def entry(self) -> str:
        return ENTRIES[self.config.family][0]

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
        entry, body = ENTRIES[c.family]
        targs = ", ".join(str(a) for a in self.view.template_args())
        return _family_source(c.family) + _nchw._WRAPPER.format(
            threads=c.threads, min_blocks=self.view.min_blocks, targs=f"{targs}, {CUDA_TYPES[self.problem.dtype]}",
            entry=entry, body=body)


@cache
def _family_source(family: str) -> str:
    """The expanded text of the family's source (:data:`SOURCES`), the part of every plan's text before its entry."""
    return kernel_text(SOURCES[family])


def supports(problem: ConvProblem) -> bool:
    """bfloat16 / float16 storage, groups = 1, not causal; any C (the NHWC workspace holds :func:`stored_channels`)."""
    p = problem
    return p.dtype in DTYPES and p.math == "ieee" and p.groups == 1 and not p.causal


def supports_1x1(problem: ConvProblem) -> bool:
    """What :func:`supports` takes, with C a multiple of 8 (x is read in place, 8 channels a copy), 1×1 filters,
    stride 1, no padding and H·W a multiple of 8."""
    p = problem
    return (supports(p) and p.C % CHANNEL_ALIGN == 0 and p.R == p.S == p.stride_h == p.stride_w == 1
            and p.pad_h == p.pad_w == 0 and (p.H * p.W) % PIXELS_PER_COPY == 0)


def stored_channels(problem: ConvProblem) -> int:
    """Cp = ⌈C/8⌉·8: the channels of the NHWC workspace and of the packed filters (those past C are zero)."""
    return -(-problem.C // CHANNEL_ALIGN) * CHANNEL_ALIGN


def word_view(problem: ConvProblem) -> ConvProblem:
    """The problem the kernel's geometry is derived from: Cp/2 channels of 32-bit words (:func:`stored_channels`;
    float32 storage, the TF32 kernel's class), every other extent as given."""
    return problem.replace(C=stored_channels(problem) // 2, dtype="float32", math="tf32")


def _convert(config: IgemmFwdConfig, cls: type[IgemmFwdConfig]) -> IgemmFwdConfig:
    return cls(**{f.name: getattr(config, f.name) for f in fields(config)})


def _view_class(family: str) -> type[IgemmFwdConfig]:
    """The TF32 config class whose plan of the word view is ``family``'s geometry."""
    return _pointwise.IgemmPointwiseFwdConfig if family == POINTWISE_HALF_FAMILY else _nhwc.IgemmNhwcFwdConfig


def _own_class(family: str) -> type[IgemmFwdConfig]:
    return IgemmHalfPointwiseFwdConfig if family == POINTWISE_HALF_FAMILY else IgemmHalfFwdConfig


def _takes(problem: ConvProblem, family: str) -> bool:
    return supports_1x1(problem) if family == POINTWISE_HALF_FAMILY else supports(problem)


def plan(problem: ConvProblem, config: IgemmFwdConfig, machine: MachineModel | None = None) -> IgemmHalfPlan:
    """Validate ``config`` for ``problem`` (the NHWC or 1×1 TF32 kernel's rules on the word view) and derive the
    plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule (``problem`` for one the family does not run).
    """
    from convtune.kernels.igemm.space import plan as view_plan

    family = config.family
    if not _takes(problem, family):
        extra = (", C a multiple of 8, 1×1 filters, stride 1, no padding, H·W a multiple of 8"
                 if family == POINTWISE_HALF_FAMILY else "")
        raise InvalidConfig("problem", f"the 16-bit tensor-core kernel runs bfloat16 / float16 problems with "
                                       f"groups=1{extra}; got {problem.key()}")
    view = view_plan(word_view(problem), _convert(config, _view_class(family)), machine)
    return IgemmHalfPlan(problem, _convert(config, _own_class(family)), view)


def enumerate_plans(problem: ConvProblem, machine: MachineModel, family: str = HALF_FAMILY) -> Any:
    """Every valid plan of ``family``: the NHWC (or 1×1) kernel's plans of the word view."""
    from convtune.kernels.igemm.space import enumerate_plans as view_plans

    if not _takes(problem, family):
        return
    for view in view_plans(word_view(problem), machine, _view_class(family)):
        yield IgemmHalfPlan(problem, _convert(view.config, _own_class(family)), view)


def grid_size(problem: ConvProblem, family: str = HALF_FAMILY) -> int:
    """Size of the raw parameter grid of ``family`` (the NHWC or 1×1 kernel's, on the word view)."""
    from convtune.kernels.igemm.space import space

    return space(word_view(problem), None, _view_class(family).family).grid_size()


# ---- traffic ------------------------------------------------------------------------------------------------
def traffic_elements(pl: IgemmHalfPlan) -> dict[str, int]:
    """Elements (2 bytes) the kernels request (module docstring)."""
    words = _pointwise.traffic_words(pl.view) if pl.pointwise else _nhwc.traffic_words(pl.view)
    out = pl.problem.output_elements
    split = pl.config.splits > 1
    elements = {k: 2 * v for k, v in words.items() if k != "output"}
    if "layout" in elements:   # x read once (C channels), the workspace written once (Cp channels)
        p = pl.problem
        elements["layout"] = p.N * p.H * p.W * (p.C + stored_channels(p))
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

    transpose: LoadedKernel | None   # None for the 1×1 variant (no layout change)
    gemm: LoadedKernel
    convert: LoadedKernel | None     # None where no split is possible (the resident 1×1 kernel)

    @property
    def resources(self) -> Any:
        return self.gemm.resources

    @property
    def compile_s(self) -> float:
        return ((self.transpose.compile_s if self.transpose else 0.0) + self.gemm.compile_s
                + (self.convert.compile_s if self.convert else 0.0))


def compile_plan(pl: IgemmHalfPlan) -> HalfKernels:
    text = pl.source()
    return HalfKernels(None if pl.pointwise else load_kernel(text, transpose_entry(pl.problem)),
                       load_kernel(text, pl.entry, dynamic_smem_bytes=pl.smem_bytes),
                       load_kernel(text, CONVERT_ENTRIES[pl.problem.dtype]))


def transpose_entry(problem: ConvProblem) -> str:
    """The layout change: the tile transpose where C is a multiple of 8, else the padding one."""
    return TRANSPOSE_ENTRY if problem.C % CHANNEL_ALIGN == 0 else PAD_TRANSPOSE_ENTRY


def stored_input_bytes(problem: ConvProblem) -> int:
    """x in NHWC over :func:`stored_channels` (2 bytes an element), rounded up to 16 bytes."""
    p = problem
    return -(-2 * p.N * p.H * p.W * stored_channels(p) // 16) * 16


def nhwc_bytes(pl: IgemmHalfPlan) -> int:
    """The workspace's first part: x in NHWC (:func:`stored_input_bytes`); none for the 1×1 variant."""
    return 0 if pl.pointwise else stored_input_bytes(pl.problem)


def workspace_bytes(pl: IgemmHalfPlan) -> int:
    """x in NHWC (:func:`nhwc_bytes`), then for a split the fp32 output workspace."""
    return nhwc_bytes(pl) + (4 * pl.problem.output_elements if pl.config.splits > 1 else 0)


def filter_words(pl: IgemmHalfPlan) -> int:
    return _nchw.filter_words(pl.view.problem)


def pack_arguments(pl: IgemmHalfPlan) -> tuple[int, ...]:
    """Scalars of the pack after (w, filt): K, KRw, KRp, NB8, R·S, S, W, DH, DW, then C (``igemm_pack_16``, the
    1×1 variant) or Cp, C (``igemm_pack_16_pad``: :func:`stored_channels`, the weights' own)."""
    p, v = pl.problem, pl.view
    channels = (p.C,) if pl.pointwise else (stored_channels(p), p.C)
    return (p.K, _nchw.reduction_length(v.problem), v.krp, v.kp8 // _nchw.K_ALIGN, p.R * p.S, p.S, p.W, p.dil_h,
            p.dil_w, *channels)


def filter_layout(pl: IgemmHalfPlan, device: int) -> FilterLayout:
    v = pl.view
    entry, source = (PACK_ENTRY, None) if pl.pointwise else (PAD_PACK_ENTRY, _family_source(HALF_FAMILY))
    return _nchw.pack_layout(pl, device, f"igemm 16-bit word tiles (KRp={v.krp}, Kp8={v.kp8}, reduction (r, s, c) "
                                         f"over {stored_channels(pl.problem)} channels) + gather table",
                             layout_key(pl), filter_words(pl), entry, pack_arguments(pl), source)


def layout_key(pl: IgemmHalfPlan) -> tuple[Any, ...]:
    """Equal keys, one operand: the pack kernel (each family's own source), the map and dilation (the table)."""
    p = pl.problem
    return (HALF_FAMILY, PACK_ENTRY if pl.pointwise else PAD_PACK_ENTRY, p.H * p.W, p.W, p.dil_h, p.dil_w)


def prepare_plan(pl: IgemmHalfPlan, device: int = 0, kernels: HalfKernels | None = None) -> PreparedLaunch:
    """Operands (x, filters, y[, workspace]): the layout change (not for 1×1), the GEMM; a split zeroes the fp32
    workspace, adds into it, converts it into y."""
    p, c, v = pl.problem, pl.config, pl.view
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    x_bytes = nhwc_bytes(pl)
    steps: list[Any] = []
    a_operand = 0                  # the GEMM's A: x itself (1×1) or its NHWC copy at the workspace's start
    if kernels.transpose is not None:
        steps.append(transpose_launch(kernels.transpose, p))
        a_operand = 3
    gemm_args = _nchw.kernel_arguments(v)
    if c.splits > 1:   # the fp32 output workspace sits after x's NHWC copy in the workspace operand
        n = p.output_elements
        steps.append(Memset(3, 4 * n, x_bytes))
        steps.append(Launch(kernels.gemm, grid3(v.grid), (c.threads, 1, 1), v.smem_bytes,
                            pointers(a_operand, 1, (3, x_bytes)), gemm_args))
        steps.append(Launch(kernels.convert, grid3(min(-(-n // CONVERT_THREADS), 4096)), (CONVERT_THREADS, 1, 1), 0,
                            pointers((3, x_bytes), 2), (n,)))
    else:
        steps.append(Launch(kernels.gemm, grid3(v.grid), (c.threads, 1, 1), v.smem_bytes, pointers(a_operand, 1, 2),
                            gemm_args))
    ws = workspace_bytes(pl)
    operands = ("x", "filters", "y", "workspace") if ws else ("x", "filters", "y")
    return PreparedLaunch(plan=pl, device=device, operands=operands, steps=steps, kernels=kernels,
                          workspace_bytes=ws, filters=filter_layout(pl, device), output_shape=(p.N, p.K, p.P, p.Q))


def transpose_launch(kernel: LoadedKernel, problem: ConvProblem) -> Launch:
    """x (operand 0) → its NHWC copy at the workspace's start (operand 3), by :func:`transpose_entry`."""
    p, hw = problem, problem.H * problem.W
    if p.C % CHANNEL_ALIGN == 0:
        return Launch(kernel, (-(-hw // _nhwc.TRANSPOSE_TILE), -(-p.C // _nhwc.TRANSPOSE_TILE), p.N),
                      (_nhwc.TRANSPOSE_TILE, _nhwc.TRANSPOSE_ROWS, 1), 0, pointers(0, 3), (p.C, hw))
    cp = stored_channels(p)
    threads = p.N * (cp // CHANNEL_ALIGN) * hw
    return Launch(kernel, grid3(min(-(-threads // PAD_TRANSPOSE_THREADS), 65536)), (PAD_TRANSPOSE_THREADS, 1, 1), 0,
                  pointers(0, 3), (p.C, hw, cp, p.N))


@dataclass(frozen=True, slots=True)
class HalfFilters:
    """The filter operand of :func:`launch`: the packed word tiles and the workspace (x in NHWC, fp32 y)."""

    filt: Any
    work: Any


def shared_workspace_bytes(pl: IgemmHalfPlan) -> int:
    """The workspace of :func:`prepare_filters`: enough for every plan of the problem sharing its
    :func:`filters_key` (x in NHWC and the fp32 output of a split, whatever this plan's split)."""
    p = pl.problem
    return stored_input_bytes(p) + 4 * p.output_elements


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
    ptrs = (data_pointer(x), data_pointer(filters.filt), data_pointer(y))
    prepared((*ptrs, data_pointer(filters.work)) if workspace_bytes(pl) else ptrs, stream_pointer(stream))


def tolerance(pl: IgemmHalfPlan) -> float:
    return TOLERANCES[pl.problem.dtype]

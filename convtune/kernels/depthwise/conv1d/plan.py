"""1-D causal depthwise plans: validate a (problem, config) pair and derive what the launch needs.

Operator (contiguous; rows r = b·C + c of L elements; see ``dw1d_common.cuh``)::

    fwd   y[b,c,t]  = Σ_{j<K, t−j≥0}  w[c,j] · x[b,c,t−j]          x, y: (B, C, L), w: (C, K)
    dgrad dx[b,c,s] = Σ_{j<K, s+j<L}  w[c,j] · dy[b,c,s+j]
    wgrad dw[c,j]   = Σ_b Σ_{t=j}^{L−1} dy[b,c,t] · x[b,c,t−j]      dw: (C, K)

``w[c, 0]`` multiplies the current sample (lag order, the S4ConvD paper's convention). A
:class:`~convtune.problem.ConvProblem` stores taps the other way round (PyTorch's ``F.conv1d`` of the
left-padded input: its ``w[c, K−1]`` is the current sample), so a PyTorch/ConvProblem weight is passed
here as ``w.flip(-1)``. Taps j ≥ L never meet data: kernels work with KE = min(K, L) taps, and the
weight gradient is zero for j ≥ KE.

Dtypes (:mod:`~convtune.kernels.depthwise.dtypes`): every variant takes float32; the ``fast`` variant also
float16 and bfloat16 storage (x, w, y, dy, dx, dw in the problem's dtype, fp32 accumulation, shared memory
in the storage type: ``itemsize`` bytes per staged element).

A plan carries the launch geometry (1-D grid, threads, dynamic shared memory), the template arguments
and the integer launch arguments, and for deterministic weight gradients the partials workspace
(``slices`` × C × KE floats; slot p·C + c, the first ``slots`` of them written); an atomic weight gradient
of 16-bit storage adds into an fp32 workspace of C × K floats instead of dw (converted by the reduction
kernel).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.compile import kernel_text
from convtune.kernels.config import KernelConfig
from convtune.kernels.depthwise.configs import (
    MODE_ATOMIC,
    PATHS,
    VARIANTS_1D,
    variant_of,
)
from convtune.kernels.depthwise.dtypes import FP32_ONLY, STORAGE_DTYPES, check_dtype, cuda_type
from convtune.kernels.depthwise.values import (
    FAST_BLOCKS_PER_SM,
    FAST_LANES,
    FAST_ROWS,
    FAST_STAGES,
    FAST_TILE,
    FAST_VEC,
    LANES_POW2,
    OUTPUTS_PER_LANE,
    SHARED_ROWS,
    SHARED_THREADS,
    SHARED_TILE,
    THREADS,
    WARP_LANES,
    WARP_V,
    WARP_WGRAD_ROWS,
    WARPS,
    WGRAD_MODES,
    allowed,
    at_most,
    block_threads,
    mode_rule,
    segment_extent,
    vec_aligned,
    with_extent,
)
from convtune.kernels.launch_geometry import round_regs
from convtune.kernels.search_space import Rule, SearchSpace
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

WARP = 32
PATH_CODE = {"fwd": 0, "dgrad": 1, "wgrad": 2}
SOURCES = {
    "naive": "dw1d_simple.cu",
    "coalesced": "dw1d_simple.cu",
    "shared": "dw1d_shared.cu",
    "warp": "dw1d_warp.cu",
    "fast": "dw1d_fast.cu",
}
REDUCE_SOURCE = "dw_reduce.cu"
REDUCE_ENTRY = "dw_reduce"
REDUCE_WARPS = 16
#: Launch limits of the grid's x dimension and of the default 48 KiB of dynamic shared memory.
MAX_GRID_X = 2**31 - 1
#: Fallback machine for plans made without one (the project's H200).
DEFAULT_SMS = 132
MAX_WARP_TAP_GROUPS = 8   # warp wgrad: lanes own taps j = lane + 32·i, i < 8 → KE ≤ 256
MAX_FAST_TAPS = 64        # fast: KE taps (fwd/dgrad) or sums (wgrad) live in registers
MAX_FAST_TILE = 64
#: Storage dtypes per variant (every other variant: float32 only).
VARIANT_DTYPES = {"fast": STORAGE_DTYPES}


@dataclass(frozen=True)
class Depthwise1dPlan:
    """Everything derived from (problem, config): see the module docstring."""

    problem: ConvProblem
    config: KernelConfig
    variant: str
    path: str
    ke: int                    # taps that meet data: min(K, L)
    grid: int                  # blocks (1-D grid)
    threads: int
    smem_bytes: int            # dynamic shared memory per block
    min_blocks: int            # __launch_bounds__ minimum blocks per SM
    regs_estimate: int
    template_args: tuple[int | str, ...]
    int_args: tuple[int, ...]  # launch arguments after the three pointers
    slices: int = 0            # deterministic wgrad: partial slices P (0: no workspace)
    slots: int = 0             # deterministic wgrad: written slots G ≤ P·C
    geometry: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def B(self) -> int:
        return self.problem.N

    @property
    def C(self) -> int:
        return self.problem.C

    @property
    def L(self) -> int:
        return self.problem.W

    @property
    def K(self) -> int:
        return self.problem.S

    @property
    def rows(self) -> int:
        """NR = B·C rows of L floats."""
        return self.problem.N * self.problem.C

    @property
    def atomic(self) -> bool:
        return self.path == "wgrad" and getattr(self.config, "mode", 0) == MODE_ATOMIC

    @property
    def deterministic(self) -> bool:
        return self.path == "wgrad" and not self.atomic

    @property
    def entry(self) -> str:
        return f"dw1d_{self.variant}_{self.path}"

    @property
    def atomic_workspace(self) -> bool:
        """An atomic weight gradient of 16-bit storage: it adds into an fp32 workspace, not into dw."""
        return self.atomic and self.problem.dtype != "float32"

    @property
    def workspace_words(self) -> int:
        """Floats of the workspace: partials (deterministic wgrad), C·K atomic sums (16-bit atomic wgrad), else 0."""
        if self.deterministic:
            return self.slices * self.C * self.ke
        return self.C * self.K if self.atomic_workspace else 0

    @property
    def needs_reduce(self) -> bool:
        """Whether the reduction kernel runs after the main one (deterministic or 16-bit atomic wgrad)."""
        return self.deterministic or self.atomic_workspace

    @property
    def reduce_grid(self) -> int:
        return -(-self.C * self.K // WARP)

    def source(self) -> str:
        """Self-contained CUDA text: the variant's source plus an ``extern "C"`` entry for this plan."""
        return _family_source(SOURCES[self.variant]) + self.wrapper()

    def wrapper(self, entry: str | None = None) -> str:
        """Only the ``extern "C"`` entry (named ``entry``, default :attr:`entry`) that instantiates the plan."""
        return _wrapper(self, entry or self.entry)

    def reduce_source(self) -> str:
        return reduce_source(self.problem.dtype)


@cache
def _family_source(path: str) -> str:
    return kernel_text(path)


_REDUCE_WRAPPER = """
extern "C" __global__ void __launch_bounds__({warps} * 32)
{entry}(const float* __restrict__ part, {ctype}* __restrict__ dw, int P, int G, int C, int K, int KE) {{
  convtune::dw::reduce_body<{warps}, {ctype}>(part, dw, P, G, C, K, KE);
}}
"""


def reduce_source(dtype: str = "float32") -> str:
    """CUDA text of the reduction kernel (``dw_reduce.cu``) writing dw in the storage ``dtype``."""
    from convtune.kernels.depthwise.dtypes import CUDA_TYPES

    return _family_source(REDUCE_SOURCE) + _REDUCE_WRAPPER.format(entry=REDUCE_ENTRY, warps=REDUCE_WARPS,
                                                                  ctype=CUDA_TYPES[dtype])


def _wrapper(pl: Depthwise1dPlan, entry: str) -> str:
    targs = ", ".join(str(a) for a in pl.template_args)
    bounds = f"__launch_bounds__({pl.threads}, {pl.min_blocks})"
    v, path = pl.variant, pl.path
    ctype = cuda_type(pl.problem)
    out_type = "float" if path == "wgrad" else ctype  # weight gradients write fp32 partials or atomics
    ptrs = f"const {ctype}* __restrict__ a, const {ctype}* __restrict__ b, {out_type}* __restrict__ out"
    if v in ("naive", "coalesced"):
        coalesced = "true" if v == "coalesced" else "false"
        ints = "int B, int C, int L, int K, int KE"
        if path == "wgrad":
            call = f"simple_wgrad_body<{coalesced}, {targs}>(a, b, out, B, C, L, K, KE)"
        else:
            call = f"simple_body<{coalesced}, {PATH_CODE[path]}>(a, b, out, B, C, L, K, KE)"
    elif v == "shared":
        ints = "int B, int C, int L, int K, int KE, int RB, int T, int ntl, int nbg"
        call = f"shared_body<{targs}>(a, b, out, B, C, L, K, KE, RB, T, ntl, nbg)"
    elif v == "warp" and path == "wgrad" and pl.geometry.get("register"):
        ints = "int NR, int C, int L, int K, int nseg"
        call = f"warp_reg_wgrad_body<{targs}>(a, b, out, NR, C, L, K, nseg)"
    elif v == "warp" and path == "wgrad":
        ints = "int B, int C, int L, int K, int KE, int RB, int nbg"
        call = f"warp_wgrad_body<{targs}>(a, b, out, B, C, L, K, KE, RB, nbg)"
    elif v == "warp" and pl.geometry.get("register"):
        ints = "int NR, int C, int L, int K, int nseg"
        call = f"warp_reg_body<{targs}>(a, b, out, NR, C, L, K, nseg)"
    elif v == "warp":
        ints = "int NR, int C, int L, int K, int KE"
        call = f"warp_body<{targs}>(a, b, out, NR, C, L, K, KE)"
    else:
        ints = "int NR, int C, int L, int K, int ngroups, int nseg"
        call = f"fast_body<convtune::dw::FastTraits<{targs}, {ctype}>>(a, b, out, NR, C, L, K, ngroups, nseg)"
    return f"""
extern "C" __global__ void {bounds}
{entry}({ptrs}, {ints}) {{
  using namespace convtune::dw;
  {call};
}}
"""


# ---- validation helpers ---------------------------------------------------------------------------------
def check_problem(problem: ConvProblem, dtypes: tuple[str, ...] = FP32_ONLY,
                  kernel: str = "the depthwise 1-D kernels") -> None:
    """The 1-D kernels take causal depthwise problems with dilation 1 whose dtype ``kernel`` supports.

    Raises:
        InvalidConfig: naming the problem field that is out of range.
    """
    p = problem
    if not p.causal:
        raise InvalidConfig("problem", f"{p.key()} is not a causal 1-D depthwise problem (B, C, L, K)")
    check_dtype(p, dtypes, kernel)
    if p.dil_w != 1:
        raise InvalidConfig("dilation", f"dilation={p.dil_w}: the depthwise 1-D kernels support 1 only")


def _check_threads(threads: int, name: str = "threads", lo: int = WARP) -> None:
    if not lo <= threads <= 1024 or threads % WARP:
        raise InvalidConfig(name, f"{threads} threads per block: must be a multiple of 32 in [{lo}, 1024]")


def _check_smem(smem_bytes: int, machine: MachineModel | None, field_name: str) -> None:
    limit = machine.smem_per_block_bytes if machine is not None else 232_448
    if smem_bytes > limit:
        where = machine.name if machine is not None else "an H200"
        raise InvalidConfig(field_name, f"{smem_bytes} B of shared memory exceed the {limit} B per block of {where}")


def persistent_grid(groups: int, rows_per_group: int, channels: int, target_blocks: int) -> int:
    """Blocks for a grid-stride loop over ``groups`` row groups such that every thread keeps its channel:
    either one pass (blocks = groups) or blocks·rows_per_group a multiple of ``channels``."""
    unit = channels // math.gcd(rows_per_group, channels)
    if groups <= max(target_blocks, unit):
        return groups
    return max(unit, target_blocks // unit * unit)


# ---- the spaces ------------------------------------------------------------------------------------------
_BLOCKS_PER_SM = Rule("blocks_per_sm", ("blocks_per_sm",), lambda v: v["blocks_per_sm"] <= 16,
                      "blocks_per_sm={blocks_per_sm}: allowed 1..16")


@cache
def spaces(problem: ConvProblem, variant: str, path: str) -> tuple[SearchSpace, ...]:
    """The space of the 1-D ``variant`` and ``path``, as spaces whose configs are chained in order (one, but for
    the warp weight gradient: its rows design, then its register design, design=2). :func:`plan` enforces the
    rules (of the space of the config's design); ``prune`` are the search's own (segments or chunks ≥ 2·L)."""
    p = problem
    modes: dict[str, tuple[int, ...]] = {"mode": WGRAD_MODES} if path == "wgrad" else {}
    mode: tuple[Rule, ...] = (mode_rule(),) if path == "wgrad" else ()
    if variant in ("naive", "coalesced"):
        return (SearchSpace({"threads": THREADS, **modes}, rules=(*mode, block_threads("threads"))),)
    if variant == "shared":
        return (SearchSpace({"rows": with_extent(SHARED_ROWS, p.N), "tile_l": with_extent(SHARED_TILE, p.W),
                             "threads": SHARED_THREADS, **modes},
                            rules=(*mode, block_threads("threads"), at_most("rows", p.N, f"the batch B={p.N}"),
                                   at_most("tile_l", p.W, f"L={p.W}"))),)
    warps = block_threads("warps", lambda v: v["warps"] * WARP)
    if variant == "warp" and path == "wgrad":
        design = allowed("design", (1, 2), "1 (lanes own taps) or 2 (register design)")
        chunk_extent = Rule("chunk_extent", ("outputs_per_lane",),
                            lambda v: v["outputs_per_lane"] == 1 or 32 * v["outputs_per_lane"] < 2 * p.W,
                            f"a chunk of 32·outputs_per_lane = 32·{{outputs_per_lane}} outputs is ≥ 2·L={2 * p.W}")
        rows_design = SearchSpace(
            {"warps": WARPS, "outputs_per_lane": OUTPUTS_PER_LANE, **modes, "rows": with_extent(WARP_WGRAD_ROWS, p.N),
             "lanes_per_row": (32,), "design": (1,)},
            rules=(*mode, warps, design, allowed("outputs_per_lane", OUTPUTS_PER_LANE),
                   at_most("rows", p.N, f"the batch B={p.N}")),
            prune=(chunk_extent,))
        register_design = SearchSpace(
            {"warps": WARPS, "outputs_per_lane": WARP_V, "lanes_per_row": WARP_LANES, **modes, "rows": (1,),
             "design": (2,)},
            rules=(*mode, warps, design, LANES_POW2, allowed("outputs_per_lane", WARP_V)),
            prune=(segment_extent(p),))
        return rows_design, register_design
    if variant == "warp":
        return (SearchSpace({"warps": WARPS, "outputs_per_lane": WARP_V, "lanes_per_row": WARP_LANES},
                            rules=(warps, LANES_POW2, allowed("outputs_per_lane", WARP_V)),
                            prune=(segment_extent(p),)),)
    if variant == "fast":
        tile = Rule("tile_l", ("tile_l",), lambda v: v["tile_l"] % 4 == 0 and v["tile_l"] <= MAX_FAST_TILE,
                    f"tile_l={{tile_l}}: must be a multiple of 4 in [4, {MAX_FAST_TILE}]")
        return (SearchSpace({"rows": FAST_ROWS, "tile_l": with_extent(FAST_TILE, p.W, 4), "lanes_per_row": FAST_LANES,
                             "stages": FAST_STAGES, "vec": FAST_VEC, "blocks_per_sm": FAST_BLOCKS_PER_SM, **modes},
                            rules=(*mode, tile, LANES_POW2, allowed("stages", (1, 2), "1 or 2"),
                                   allowed("vec", (1, 4), "1 or 4"), vec_aligned(p), _BLOCKS_PER_SM)),)
    raise InvalidConfig("variant", f"{variant!r}: allowed {', '.join(VARIANTS_1D)}")


def space_of(problem: ConvProblem, config: KernelConfig) -> SearchSpace:
    """The space whose rules ``config`` (a 1-D config of a known variant and path) must keep: the warp weight
    gradient's register design for ``design=2``, else its rows design."""
    chained = spaces(problem, variant_of(config), config.direction)
    return chained[1] if len(chained) > 1 and getattr(config, "design", 1) == 2 else chained[0]


# ---- per-variant plans ----------------------------------------------------------------------------------
def _simple(p: ConvProblem, c: KernelConfig, path: str, ke: int) -> dict:
    threads = c.threads  # type: ignore[attr-defined]
    total = p.N * p.C * (ke if path == "wgrad" else p.W)
    targs: tuple[int | str, ...] = ("true" if getattr(c, "mode", 0) == MODE_ATOMIC else "false",) \
        if path == "wgrad" else ()
    return dict(grid=-(-total // threads), threads=threads, smem_bytes=0, min_blocks=1, regs=32, targs=targs,
                ints=(p.N, p.C, p.W, p.S, ke), slices=p.N, slots=p.N * p.C, geometry={})


def _shared(p: ConvProblem, c: KernelConfig, path: str, ke: int, machine: MachineModel | None) -> dict:
    rb, t, threads = c.rows, c.tile_l, c.threads  # type: ignore[attr-defined]
    ntl, nbg = -(-p.W // t), -(-p.N // rb)
    win = t + ke - 1
    floats = rb * win + (rb * t if path == "wgrad" else ke)
    smem_bytes = 4 * floats
    _check_smem(smem_bytes, machine, "tile_l")
    grid = ntl * nbg * p.C
    if grid > MAX_GRID_X:
        raise InvalidConfig("rows", f"{grid} blocks exceed the grid limit {MAX_GRID_X}")
    atomic = "true" if getattr(c, "mode", 0) == MODE_ATOMIC else "false"
    return dict(grid=grid, threads=threads, smem_bytes=smem_bytes, min_blocks=1, regs=32,
                targs=(PATH_CODE[path], threads, atomic), ints=(p.N, p.C, p.W, p.S, ke, rb, t, ntl, nbg),
                slices=nbg * ntl, slots=nbg * ntl * p.C, geometry={"ntl": ntl, "nbg": nbg})


MAX_WARP_REG_TAPS = 64    # warp fwd/dgrad register design: KE taps live in registers


def warp_register_design(problem: ConvProblem, lanes_per_row: int, outputs_per_lane: int) -> bool:
    """Whether the warp fwd/dgrad kernel takes the register design (``warp_reg_body``): KE ≤ 64 taps, and a
    row of one segment (L ≤ G·V) or taps reaching at most one segment back (KE ≤ G·V + 1)."""
    ke = min(problem.S, problem.W)
    seg = lanes_per_row * outputs_per_lane
    return ke <= MAX_WARP_REG_TAPS and (seg >= problem.W or ke <= seg + 1)


def warp_regs_estimate(ke: int, v: int, multi: bool) -> int:
    """Registers per thread of ``warp_reg_body`` ≈ KE taps + V accumulators + V current + V next (+ V
    previous when rows span several segments) + 24 for addresses, loop state and the values in flight."""
    return ke + (4 if multi else 3) * v + 24


def _warp_reg(p: ConvProblem, c: KernelConfig, path: str, ke: int, machine: MachineModel | None) -> dict:
    warps, v, g = c.warps, c.outputs_per_lane, c.lanes_per_row  # type: ignore[attr-defined]
    threads = warps * WARP
    seg = g * v
    multi = seg < p.W
    vec4 = v % 4 == 0 and p.W % 4 == 0
    regs = warp_regs_estimate(ke, v, multi)
    cap = min(255, round_regs(regs + 16))
    min_blocks = max(1, min(16, 65536 // (threads * cap)))
    sms = machine.sm_count if machine is not None else DEFAULT_SMS
    resident = max(1, min(16, 2048 // threads, 65536 // (threads * round_regs(regs))))
    rpb = warps * (WARP // g)
    rows = p.N * p.C
    grid = persistent_grid(-(-rows // rpb), rpb, p.C, sms * resident)
    nseg = -(-p.W // seg)
    return dict(grid=grid, threads=threads, smem_bytes=0, min_blocks=min_blocks, regs=regs,
                targs=(PATH_CODE[path], ke, g, v, warps, "true" if vec4 else "false", "true" if multi else "false"),
                ints=(rows, p.C, p.W, p.S, nseg), slices=0, slots=0,
                geometry={"register": 1, "seg": seg, "nseg": nseg, "rows_per_block": rpb, "vec4": int(vec4),
                          "multi": int(multi)})


def _warp_reg_wgrad(p: ConvProblem, c: KernelConfig, ke: int, machine: MachineModel | None) -> dict:
    g, v = c.lanes_per_row, c.outputs_per_lane  # type: ignore[attr-defined]
    if not warp_register_design(p, g, v):
        raise InvalidConfig("design", f"design=2 needs min(K, L)={ke} ≤ {MAX_WARP_REG_TAPS} taps, and KE ≤ "
                                      "lanes_per_row·outputs_per_lane + 1 on rows of several segments")
    d = _warp_reg(p, c, "wgrad", ke, machine)
    multi = d["geometry"]["multi"]
    regs = ke + (6 if multi else 5) * v + 24
    threads = d["threads"]
    d["regs"] = regs
    d["min_blocks"] = max(1, min(16, 65536 // (threads * min(255, round_regs(regs + 16)))))
    resident = max(1, min(16, 2048 // threads, 65536 // (threads * round_regs(regs))))
    sms = machine.sm_count if machine is not None else DEFAULT_SMS
    rpb = d["geometry"]["rows_per_block"]
    d["grid"] = persistent_grid(-(-p.N * p.C // rpb), rpb, p.C, sms * resident)
    atomic = "true" if c.mode == MODE_ATOMIC else "false"  # type: ignore[attr-defined]
    targs = d["targs"]
    d["targs"] = (*targs[1:], atomic)  # KE, G, V, WARPS, VEC4, MULTI, ATOMIC
    d["slots"] = d["grid"] * rpb
    d["slices"] = -(-d["slots"] // p.C)
    return d


def _warp(p: ConvProblem, c: KernelConfig, path: str, ke: int, machine: MachineModel | None) -> dict:
    warps, v = c.warps, c.outputs_per_lane  # type: ignore[attr-defined]
    if path != "wgrad":
        g = c.lanes_per_row  # type: ignore[attr-defined]
        if warp_register_design(p, g, v):
            return _warp_reg(p, c, path, ke, machine)
        if g != WARP:
            raise InvalidConfig("lanes_per_row", f"lanes_per_row={g}: min(K, L)={ke} taps need the shared-memory "
                                                 f"design (KE > {MAX_WARP_REG_TAPS}, or KE > lanes_per_row·"
                                                 "outputs_per_lane + 1 on rows of several segments), which takes "
                                                 "lanes_per_row=32 only")
    elif c.design == 2:  # type: ignore[attr-defined]
        return _warp_reg_wgrad(p, c, ke, machine)
    ch = WARP * v
    sms = machine.sm_count if machine is not None else DEFAULT_SMS
    if path == "wgrad":
        rb = c.rows  # type: ignore[attr-defined]
        jt = -(-ke // WARP)
        if jt > MAX_WARP_TAP_GROUPS:
            raise InvalidConfig("problem", f"warp wgrad: min(K, L)={ke} taps exceed {WARP * MAX_WARP_TAP_GROUPS} "
                                           "(lanes own taps j = lane + 32·i)")
        nbg = -(-p.N // rb)
        smem_bytes = 4 * warps * (2 * ch + ke - 1)
        _check_smem(smem_bytes, machine, "outputs_per_lane")
        atomic = "true" if c.mode == MODE_ATOMIC else "false"  # type: ignore[attr-defined]
        return dict(grid=nbg * p.C, threads=warps * WARP, smem_bytes=smem_bytes, min_blocks=1, regs=40 + jt,
                    targs=(warps, v, jt, atomic), ints=(p.N, p.C, p.W, p.S, ke, rb, nbg), slices=nbg,
                    slots=nbg * p.C, geometry={"nbg": nbg, "chunk": ch})
    smem_bytes = 4 * warps * (ke + ch + ke - 1)
    _check_smem(smem_bytes, machine, "outputs_per_lane")
    rows = p.N * p.C
    grid = persistent_grid(-(-rows // warps), warps, p.C, 8 * sms)
    return dict(grid=grid, threads=warps * WARP, smem_bytes=smem_bytes, min_blocks=1, regs=32 + v,
                targs=(PATH_CODE[path], warps, v), ints=(rows, p.C, p.W, p.S, ke), slices=0, slots=0,
                geometry={"chunk": ch, "register": 0})


def fast_halo(problem: ConvProblem, config: KernelConfig) -> bool:
    """Whether the fast kernel stages a left halo: not when one thread covers a whole row."""
    c = config
    return not (c.lanes_per_row == 1 and c.tile_l >= problem.W)  # type: ignore[attr-defined]


def fast_regs_estimate(tile_l: int, ke: int) -> int:
    """Registers per thread ≈ TL accumulators (or dy values) + KE taps (or sums) + 30 for addresses and
    the float4 in flight; ptxas gave 128 for TL = KE = 48 fwd under a 128 cap, 118 for wgrad."""
    return tile_l + ke + 30


#: 16-byte shared-memory accesses are served a quarter-warp (8 lanes) at a time.
QUARTER_WARP = 8


@cache
def float4_block_wavefronts(rows: int, lanes_per_row: int, tile_l: int, pitch: int) -> int:
    """Wavefronts of one float4 shared-memory access by every thread of a fast block, thread t reading floats
    (t // lanes_per_row)·pitch + (t % lanes_per_row)·tile_l onward: per quarter-warp, the most of its lanes whose
    16-byte units fall in one bank group (unit mod 8); conflict-free, rows·lanes_per_row / 8."""
    threads = rows * lanes_per_row
    return sum(max(Counter(((t // lanes_per_row) * pitch + (t % lanes_per_row) * tile_l) // 4 % 8
                           for t in range(q0, min(q0 + QUARTER_WARP, threads))).values())
               for q0 in range(0, threads, QUARTER_WARP))


@cache
def fast_pitch(span: int, rows: int, lanes_per_row: int, tile_l: int) -> int:
    """Row pitch (floats, multiple of 4, ≥ span) minimising shared-memory bank conflicts of the float4
    window reads at rb·pitch + tp·TL (:func:`float4_block_wavefronts`; the first such pitch on ties)."""
    need = -(-span // 4) * 4
    return min(range(need, need + 32, 4), key=lambda pitch: float4_block_wavefronts(rows, lanes_per_row, tile_l, pitch))


def _fast(p: ConvProblem, c: KernelConfig, path: str, ke: int, machine: MachineModel | None) -> dict:
    rb, tl, tpr = c.rows, c.tile_l, c.lanes_per_row  # type: ignore[attr-defined]
    stages, vec, bps = c.stages, c.vec, c.blocks_per_sm  # type: ignore[attr-defined]
    # rows·lanes_per_row threads and the segment's extent filter the declared grid, whose 1-D size counts only
    # the declared rules: they stay here
    _check_threads(rb * tpr, "rows")
    if ke > MAX_FAST_TAPS:
        raise InvalidConfig("problem", f"fast variant: min(K, L)={ke} taps exceed {MAX_FAST_TAPS} "
                                       "(taps live in registers)")
    seg = tl * tpr
    if seg >= 2 * p.W and seg > 4:  # the smallest segment (one thread, 4 outputs) is always allowed
        raise InvalidConfig("tile_l", f"a segment of lanes_per_row·tile_l={seg} outputs is ≥ 2·L={2 * p.W}: "
                                      "at least half the threads would idle")
    halo = fast_halo(p, c)
    hp = -(-(ke - 1) // 4) * 4 if halo else 0
    span = hp + seg
    pitch = fast_pitch(span, rb, tpr, tl)
    bufs = 2 if path == "wgrad" else 1
    smem_bytes = p.itemsize_bytes * stages * bufs * rb * pitch
    _check_smem(smem_bytes, machine, "rows")
    threads = rb * tpr
    regs = fast_regs_estimate(tl, ke)
    if regs > 255:
        raise InvalidConfig("tile_l", f"~{regs} registers per thread (tile_l + taps + 30) exceed 255")
    if machine is not None:
        if threads * round_regs(regs) * bps > machine.regs_per_sm:
            raise InvalidConfig("blocks_per_sm", f"{bps} blocks × {threads} threads × ~{round_regs(regs)} registers "
                                                 f"exceed the {machine.regs_per_sm} registers of an SM")
        if bps * (smem_bytes + machine.smem_reserved_per_block_bytes) > machine.smem_per_sm_bytes:
            raise InvalidConfig("blocks_per_sm", f"{bps} blocks × {smem_bytes} B of shared memory exceed the "
                                                 f"{machine.smem_per_sm_bytes} B of an SM")
        if bps * threads > machine.max_threads_per_sm:
            raise InvalidConfig("blocks_per_sm", f"{bps} blocks × {threads} threads exceed "
                                                 f"{machine.max_threads_per_sm} per SM")
    elif 65536 // (threads * bps) < 32:
        raise InvalidConfig("blocks_per_sm", f"{bps} blocks × {threads} threads leave < 32 registers per thread")
    rows = p.N * p.C
    ngroups, nseg = -(-rows // rb), -(-p.W // seg)
    sms = machine.sm_count if machine is not None else DEFAULT_SMS
    grid = persistent_grid(ngroups, rb, p.C, sms * bps)
    slots = grid * rb
    atomic = "true" if getattr(c, "mode", 0) == MODE_ATOMIC else "false"
    return dict(grid=grid, threads=threads, smem_bytes=smem_bytes, min_blocks=bps, regs=regs,
                targs=(PATH_CODE[path], ke, tl, tpr, rb, vec, "true" if halo else "false", stages, pitch, atomic),
                ints=(rows, p.C, p.W, p.S, ngroups, nseg), slices=-(-slots // p.C), slots=slots,
                geometry={"ngroups": ngroups, "nseg": nseg, "seg": seg, "hp": hp, "pitch": pitch, "halo": int(halo)})


def plan(problem: ConvProblem, config: KernelConfig, machine: MachineModel | None = None) -> Depthwise1dPlan:
    """Validate ``config`` (any 1-D depthwise config class) for ``problem`` and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule, with the allowed range.
    """
    check_problem(problem, STORAGE_DTYPES)
    if not config.family.startswith("depthwise1d_") or config.direction not in PATHS:
        raise InvalidConfig("config", f"{config.key()} is not a depthwise 1-D configuration")
    variant, path = variant_of(config), config.direction
    check_dtype(problem, VARIANT_DTYPES.get(variant, FP32_ONLY), f"depthwise1d_{variant}")
    space_of(problem, config).check(config)  # the rules of the variant's space
    p = problem
    ke = min(p.S, p.W)
    if variant in ("naive", "coalesced"):
        d = _simple(p, config, path, ke)
    elif variant == "shared":
        d = _shared(p, config, path, ke, machine)
    elif variant == "warp":
        d = _warp(p, config, path, ke, machine)
    else:
        d = _fast(p, config, path, ke, machine)
    if d["grid"] > MAX_GRID_X:
        raise InvalidConfig("threads", f"{d['grid']} blocks exceed the grid limit {MAX_GRID_X}")
    return Depthwise1dPlan(p, config, variant, path, ke, d["grid"], d["threads"], d["smem_bytes"], d["min_blocks"],
                           d["regs"], d["targs"], d["ints"], d["slices"] if path == "wgrad" else 0,
                           d["slots"] if path == "wgrad" else 0, d["geometry"])

"""Tuning points of the depthwise kernels: one frozen config class per (variant, path).

1-D causal depthwise (layout (B, C, L), taps (C, K)), five variants, each its own kernel and family
``depthwise1d_<variant>`` with directions ``fwd``, ``dgrad`` and ``wgrad``:

=========  ==============================================================================================
naive      one thread per output, batch-fastest thread order (strided loads), every tap from global memory
coalesced  one thread per output, time-fastest order (contiguous loads), every tap from global memory
shared     a block stages ``rows`` batch rows of one channel × a ``tile_l`` tile (+ halo) and w[c] in
           shared memory
warp       fwd/dgrad: a warp holds 32/``lanes_per_row`` rows, each lane ``outputs_per_lane`` consecutive
           outputs in registers, taps in registers, neighbours' inputs by warp shuffles (taps > 64: the
           original design, a private shared-memory slice per warp, chunks of 32·``outputs_per_lane``);
           wgrad ``design`` 1: lanes own taps, warps of a block sum ``rows`` batch rows of one channel;
           ``design`` 2: the fwd register design with dy values in registers and KE sums per lane
fast       persistent blocks of ``rows`` × ``lanes_per_row`` threads, each thread ``tile_l`` outputs in
           registers (register blocking along L), cp.async staging (``vec`` = 4: 16-byte copies),
           ``stages`` = 2: the next item is copied while this one is computed
=========  ==============================================================================================

Weight-gradient configs add ``mode``: :data:`MODE_DETERMINISTIC` (1: per-slice partials, then a
reduction kernel that sums them in a fixed order, bitwise repeatable) or :data:`MODE_ATOMIC` (2: atomic
adds into a zeroed dw).

2-D depthwise forward (NCHW): family ``depthwise2d_tiled`` (:class:`Dw2dTiledFwdConfig`, the baseline) and
``depthwise2d_fast`` (:class:`Dw2dFastFwdConfig`: row bands of whole planes, register blocking in both
directions) and ``depthwise2d_packed`` (:class:`Dw2dPackedFwdConfig`: groups of whole small planes staged and
stored as one contiguous stretch).
"""

from __future__ import annotations

from dataclasses import dataclass

from convtune.kernels.config import KernelConfig

MODE_DETERMINISTIC = 1
MODE_ATOMIC = 2
MODES = {MODE_DETERMINISTIC: "deterministic", MODE_ATOMIC: "atomic"}

VARIANTS_1D = ("naive", "coalesced", "shared", "warp", "fast")
PATHS = ("fwd", "dgrad", "wgrad")


# ---- naive / coalesced ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _ThreadPerOutput(KernelConfig):
    threads: int = 256     # threads per block (multiple of 32, ≤ 1024)


@dataclass(frozen=True, slots=True)
class NaiveFwdConfig(_ThreadPerOutput):
    family = "depthwise1d_naive"
    direction = "fwd"


@dataclass(frozen=True, slots=True)
class NaiveDgradConfig(_ThreadPerOutput):
    family = "depthwise1d_naive"
    direction = "dgrad"


@dataclass(frozen=True, slots=True)
class NaiveWgradConfig(_ThreadPerOutput):
    family = "depthwise1d_naive"
    direction = "wgrad"

    mode: int = MODE_DETERMINISTIC


@dataclass(frozen=True, slots=True)
class CoalescedFwdConfig(_ThreadPerOutput):
    family = "depthwise1d_coalesced"
    direction = "fwd"


@dataclass(frozen=True, slots=True)
class CoalescedDgradConfig(_ThreadPerOutput):
    family = "depthwise1d_coalesced"
    direction = "dgrad"


@dataclass(frozen=True, slots=True)
class CoalescedWgradConfig(_ThreadPerOutput):
    family = "depthwise1d_coalesced"
    direction = "wgrad"

    mode: int = MODE_DETERMINISTIC


# ---- shared-memory cache-blocked ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Shared(KernelConfig):
    rows: int = 8          # RB: batch rows of one channel per block
    tile_l: int = 64       # T: outputs along L per block
    threads: int = 128


@dataclass(frozen=True, slots=True)
class SharedFwdConfig(_Shared):
    family = "depthwise1d_shared"
    direction = "fwd"


@dataclass(frozen=True, slots=True)
class SharedDgradConfig(_Shared):
    family = "depthwise1d_shared"
    direction = "dgrad"


@dataclass(frozen=True, slots=True)
class SharedWgradConfig(_Shared):
    family = "depthwise1d_shared"
    direction = "wgrad"

    mode: int = MODE_DETERMINISTIC


# ---- warp-tiled -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Warp(KernelConfig):
    warps: int = 4             # warps per block
    outputs_per_lane: int = 2  # V: a chunk is 32·V outputs


@dataclass(frozen=True, slots=True)
class WarpFwdConfig(_Warp):
    family = "depthwise1d_warp"
    direction = "fwd"

    lanes_per_row: int = 32    # G: lanes sharing one row (power of two ≤ 32); a segment is G·V outputs


@dataclass(frozen=True, slots=True)
class WarpDgradConfig(_Warp):
    family = "depthwise1d_warp"
    direction = "dgrad"

    lanes_per_row: int = 32


@dataclass(frozen=True, slots=True)
class WarpWgradConfig(_Warp):
    family = "depthwise1d_warp"
    direction = "wgrad"

    rows: int = 64             # RB: batch rows of one channel per block (summed on chip; design 1)
    mode: int = MODE_DETERMINISTIC
    lanes_per_row: int = 32    # G (design 2)
    design: int = 1            # 1: lanes own taps (shared memory); 2: lanes own outputs (register design)


# ---- fast -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Fast(KernelConfig):
    rows: int = 128            # RB: rows (b, c) per work item
    tile_l: int = 48           # TL: outputs per thread, in registers (multiple of 4)
    lanes_per_row: int = 1     # TPR: threads per row (power of two ≤ 32); a segment is TPR·TL outputs
    stages: int = 2            # 1, or 2 (copy item k+1 while computing item k)
    vec: int = 4               # global copy width in floats: 4 (16-byte; needs L % 4 == 0) or 1
    blocks_per_sm: int = 4     # __launch_bounds__ minimum, and the persistent grid = SMs × blocks_per_sm

    @property
    def threads(self) -> int:
        return self.rows * self.lanes_per_row


@dataclass(frozen=True, slots=True)
class FastFwdConfig(_Fast):
    family = "depthwise1d_fast"
    direction = "fwd"


@dataclass(frozen=True, slots=True)
class FastDgradConfig(_Fast):
    family = "depthwise1d_fast"
    direction = "dgrad"


@dataclass(frozen=True, slots=True)
class FastWgradConfig(_Fast):
    family = "depthwise1d_fast"
    direction = "wgrad"

    mode: int = MODE_DETERMINISTIC


@dataclass(frozen=True, slots=True)
class FusedBwdConfig(KernelConfig):
    """Fused 1-D backward (``dw1d_fused.cu``): dx and dw from one pass over x and dy, one thread per whole
    row (L ≤ 64), persistent blocks of ``rows`` threads with the fast variant's cp.async staging."""

    family = "depthwise1d_fused"
    direction = "bwd"

    rows: int = 128            # RB: threads (rows) per block
    stages: int = 2
    vec: int = 4
    blocks_per_sm: int = 2
    mode: int = MODE_DETERMINISTIC


CONFIG_CLASSES_1D: dict[tuple[str, str], type[KernelConfig]] = {
    ("naive", "fwd"): NaiveFwdConfig, ("naive", "dgrad"): NaiveDgradConfig, ("naive", "wgrad"): NaiveWgradConfig,
    ("coalesced", "fwd"): CoalescedFwdConfig, ("coalesced", "dgrad"): CoalescedDgradConfig,
    ("coalesced", "wgrad"): CoalescedWgradConfig,
    ("shared", "fwd"): SharedFwdConfig, ("shared", "dgrad"): SharedDgradConfig, ("shared", "wgrad"): SharedWgradConfig,
    ("warp", "fwd"): WarpFwdConfig, ("warp", "dgrad"): WarpDgradConfig, ("warp", "wgrad"): WarpWgradConfig,
    ("fast", "fwd"): FastFwdConfig, ("fast", "dgrad"): FastDgradConfig, ("fast", "wgrad"): FastWgradConfig,
}


def variant_of(config: KernelConfig) -> str:
    """``"naive"`` … ``"fast"`` from a 1-D config's family ``depthwise1d_<variant>``."""
    return config.family.removeprefix("depthwise1d_")


# ---- 2-D ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Dw2dTiledFwdConfig(KernelConfig):
    """2-D depthwise forward: a block = ``planes`` (n, c) planes × a tile_h × tile_w output tile."""

    family = "depthwise2d_tiled"
    direction = "fwd"

    tile_h: int = 8
    tile_w: int = 32
    outputs_per_thread: int = 4   # VW: consecutive outputs along W per thread (register sliding window)
    planes: int = 1               # PB: planes per block (small images: several per block)

    @property
    def threads(self) -> int:
        return self.planes * self.tile_h * (self.tile_w // self.outputs_per_thread)


@dataclass(frozen=True, slots=True)
class Dw2dFastFwdConfig(KernelConfig):
    """2-D depthwise forward, fast variant (``dw2d_fast.cu``): a block = ``planes`` (n, c) planes × a band of
    ``band_h`` output rows × every column, staged with cp.async; an item = ``rows_per_thread`` output rows ×
    ``outputs_per_thread`` consecutive columns of one plane in registers; ``threads`` walk the items."""

    family = "depthwise2d_fast"
    direction = "fwd"

    band_h: int = 8               # TH: output rows per block (a multiple of rows_per_thread)
    rows_per_thread: int = 2      # VH
    outputs_per_thread: int = 4   # VW: consecutive outputs along W
    planes: int = 1               # PB
    threads: int = 128


@dataclass(frozen=True, slots=True)
class Dw2dFastDgradConfig(KernelConfig):
    """2-D depthwise input gradient (``dw2d_dgrad.cu``): a block = ``planes`` planes × a band of ``band_h`` dx
    rows × every column; an item = ``rows_per_thread`` dx rows (a multiple of stride_h) × ``outputs_per_thread``
    dx columns (a multiple of stride_w) in registers."""

    family = "depthwise2d_fast"
    direction = "dgrad"

    band_h: int = 8
    rows_per_thread: int = 2
    outputs_per_thread: int = 4
    planes: int = 1
    threads: int = 128


@dataclass(frozen=True, slots=True)
class Dw2dFastWgradConfig(KernelConfig):
    """2-D depthwise weight gradient (``dw2d_wgrad.cu``): a block = one channel × ``planes`` batch entries × a
    band of ``band_h`` dy rows; an item = ``rows_per_thread`` × ``outputs_per_thread`` dy values against the
    x window, R·S sums per thread, one block reduction, then a partial (``mode`` 1) or atomic adds (2)."""

    family = "depthwise2d_fast"
    direction = "wgrad"

    band_h: int = 8
    rows_per_thread: int = 2
    outputs_per_thread: int = 4
    planes: int = 1
    threads: int = 128
    mode: int = MODE_DETERMINISTIC


@dataclass(frozen=True, slots=True)
class Dw2dPackedFwdConfig(KernelConfig):
    """2-D depthwise forward for small images (``dw2d_packed.cu``): a block = ``planes`` whole (n, c) planes,
    copied in and written out as contiguous stretches; an item = ``rows_per_thread`` output rows × all Q
    columns of one plane in registers; ``threads`` walk the items."""

    family = "depthwise2d_packed"
    direction = "fwd"

    planes: int = 16              # PB
    rows_per_thread: int = 1      # VH
    threads: int = 128

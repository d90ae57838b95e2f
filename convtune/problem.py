"""ConvProblem: one convolution, as a frozen, hashable, validated value object.

Conventions (PyTorch's):
    x: (N, C, H, W)            input, NCHW
    w: (K, C/groups, R, S)     filters
    y: (N, K, P, Q)            output, P = (H + 2·pad_h − dil_h·(R−1) − 1) // stride_h + 1, Q likewise
    y[n,k,p,q] = Σ_{c,r,s} x[n, g(k)·C/groups + c, p·stride_h − pad_h + r·dil_h, q·stride_w − pad_w + s·dil_w]
                 · w[k, c, r, s]            (out-of-range x reads as zero)

1-D causal depthwise convolution (S4ConvD, Mamba) of x: (B, C, L) with taps w: (C, K) is the special
case N=B, H=1, W=L, K_out=C, R=1, S=K_taps, groups=C, ``causal=True``: the padding pad_w = dil_w·(S−1)
is applied on the left only, so Q = L and y[b,c,t] = Σ_k x[b,c,t − (K_taps−1−k)·dil]·w[c,k]: w[c, K_taps−1]
multiplies the current sample (PyTorch's ``F.conv1d`` of the left-padded input, as in causal-conv1d).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

from convtune.errors import InvalidProblem

#: Bytes per element of each supported storage type.
ITEMSIZE_BYTES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2}
LAYOUTS = ("NCHW",)
#: Arithmetic of a float32 problem: "ieee" (strict fp32 FMAs, PyTorch's ``allow_tf32=False``) or "tf32" (tensor-core
#: products of operands rounded to TF32, 10-bit mantissa, fp32 accumulation: PyTorch's default for convolutions).
#: 16-bit problems carry "ieee": their class is their dtype (fp32 accumulation).
MATH_MODES = ("ieee", "tf32")
#: Precision classes, strictest first: a config verified for one class may be served for it and every later one
#: of the same storage type (float32 -> tf32), never for an earlier one.
PRECISION_CLASSES = ("float32", "tf32", "bfloat16", "float16")
#: Keys of a suite entry that describe it (its name, its class, the network layer it comes from), not the problem.
SUITE_METADATA_KEYS = ("name", "class", "source")
#: Largest element count of one tensor: kernels index with 32-bit signed integers.
MAX_ELEMENTS = 2**31 - 1


def _window_range(extent: int, out: int, offset: int, stride: int) -> tuple[int, int]:
    """Windows o ∈ [lo, hi] whose tap at ``offset`` reads i = offset + o·stride inside [0, extent)."""
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    hi = min(out - 1, (extent - 1 - offset) // stride) if extent - 1 - offset >= 0 else -1
    return lo, hi


def used_positions(extent: int, out_lo: int, out_hi: int, tap_lo: int, tap_hi: int, stride: int, pad: int,
                   dil: int) -> int:
    """|{o·stride − pad + t·dil : out_lo ≤ o < out_hi, tap_lo ≤ t < tap_hi} ∩ [0, extent)|, exactly.

    Taps whose offsets agree mod ``stride`` read one lattice, where each tap covers an interval of
    lattice points (clipped to the real input); the intervals of each lattice are merged.
    O(taps·log taps), independent of the output range.
    """
    by_residue: dict[int, list[tuple[int, int]]] = {}
    for t in range(tap_lo, tap_hi):
        offset = t * dil - pad
        # windows o in [out_lo, out_hi) with 0 <= offset + o·stride < extent
        lo = max(out_lo, -(offset // stride) if offset < 0 else 0)
        hi = min(out_hi - 1, (extent - 1 - offset) // stride) if extent - 1 - offset >= 0 else -1
        if lo > hi:
            continue
        residue = offset % stride
        base = (offset - residue) // stride
        by_residue.setdefault(residue, []).append((base + lo, base + hi))
    used = 0
    for intervals in by_residue.values():
        intervals.sort()
        cur_lo, cur_hi = intervals[0]
        for lo, hi in intervals[1:]:
            if lo > cur_hi + 1:
                used += cur_hi - cur_lo + 1
                cur_lo, cur_hi = lo, hi
            else:
                cur_hi = max(cur_hi, hi)
        used += cur_hi - cur_lo + 1
    return used


@lru_cache(maxsize=1 << 14)   # a problem constant, asked once per candidate config by the models' DRAM terms
def _used_positions(extent: int, out: int, taps: int, stride: int, pad: int, dil: int) -> int:
    """Input positions of [0, extent) some window reads along one axis (padding, stride-skipped excluded)."""
    return used_positions(extent, 0, out, 0, taps, stride, pad, dil)


@lru_cache(maxsize=1 << 14)
def used_taps(extent: int, out: int, taps: int, stride: int, pad: int, dil: int) -> tuple[int, ...]:
    """Taps t ∈ [0, taps) of one axis with which some window o ∈ [0, out) reads a real input position
    (o·stride − pad + t·dil ∈ [0, extent)): the taps whose weights any schedule must load. The others
    only ever meet padding."""
    out_taps = []
    for t in range(taps):
        lo, hi = _window_range(extent, out, t * dil - pad, stride)
        if lo <= hi:
            out_taps.append(t)
    return tuple(out_taps)


def _valid_taps(extent: int, out: int, taps: int, stride: int, pad: int, dil: int) -> int:
    """Σ over windows o of the taps that read a real (non-padding) input position, along one axis."""
    total = 0
    for t in range(taps):
        lo, hi = _window_range(extent, out, t * dil - pad, stride)
        total += max(0, hi - lo + 1)
    return total


@dataclass(frozen=True, slots=True)
class ConvProblem:
    """A 2-D (or 1-D causal) convolution forward problem; see the module docstring for shapes."""

    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    dil_h: int = 1
    dil_w: int = 1
    groups: int = 1
    dtype: str = "float32"
    layout: str = "NCHW"
    causal: bool = False
    math: str = "ieee"
    _derived: tuple[int, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name in ("N", "C", "H", "W", "K", "R", "S", "stride_h", "stride_w", "dil_h", "dil_w", "groups",
                     "pad_h", "pad_w"):
            _check_int(name, getattr(self, name), minimum=0 if name.startswith("pad") else 1)
            object.__setattr__(self, name, int(getattr(self, name)))  # numpy integers -> int
        for name in ("dtype", "layout", "math"):
            if not isinstance(getattr(self, name), str):
                raise InvalidProblem(name, f"{getattr(self, name)!r} must be a string")
        if self.dtype not in ITEMSIZE_BYTES:
            raise InvalidProblem("dtype", f"{self.dtype!r} is not supported: allowed {sorted(ITEMSIZE_BYTES)}")
        if self.layout not in LAYOUTS:
            raise InvalidProblem("layout", f"{self.layout!r} is not supported: allowed {list(LAYOUTS)}")
        if self.math not in MATH_MODES:
            raise InvalidProblem("math", f"{self.math!r} is not supported: allowed {list(MATH_MODES)}")
        if self.math == "tf32" and self.dtype != "float32":
            raise InvalidProblem("math", f"math='tf32' needs dtype='float32', got dtype={self.dtype!r}")
        if not isinstance(self.causal, bool):
            raise InvalidProblem("causal", f"{self.causal!r} must be a bool")
        if self.C % self.groups:
            raise InvalidProblem("groups", f"groups={self.groups} must divide C={self.C}")
        if self.K % self.groups:
            raise InvalidProblem("groups", f"groups={self.groups} must divide K={self.K}")
        if self.causal:
            self._check_causal()
        span_h = self.dil_h * (self.R - 1) + 1
        span_w = self.dil_w * (self.S - 1) + 1
        padded_w = self.W + (self.pad_w if self.causal else 2 * self.pad_w)
        out_h = (self.H + 2 * self.pad_h - span_h) // self.stride_h + 1
        out_w = (padded_w - span_w) // self.stride_w + 1
        if out_h < 1:
            raise InvalidProblem(
                "H", f"output height is empty: need H + 2·pad_h = {self.H + 2 * self.pad_h} >= "
                f"dil_h·(R−1)+1 = {span_h}")
        if out_w < 1:
            raise InvalidProblem(
                "W", f"output width is empty: need W + 2·pad_w = {padded_w} >= dil_w·(S−1)+1 = {span_w}")
        object.__setattr__(self, "_derived", (out_h, out_w))
        for tensor, count in (("input", self.N * self.C * self.H * self.W),
                              ("weight", self.K * (self.C // self.groups) * self.R * self.S),
                              ("output", self.N * self.K * out_h * out_w)):
            if count > MAX_ELEMENTS:
                raise InvalidProblem(
                    tensor, f"{count} elements exceed the 32-bit index range: must be <= {MAX_ELEMENTS}")

    def _check_causal(self) -> None:
        rules = (("H", self.H == 1, "1"), ("R", self.R == 1, "1"),
                 ("groups", self.groups == self.C, f"C={self.C} (depthwise)"),
                 ("K", self.K == self.C, f"C={self.C} (depthwise)"),
                 ("stride_h", self.stride_h == 1, "1"), ("stride_w", self.stride_w == 1, "1"),
                 ("pad_w", self.pad_w == self.dil_w * (self.S - 1), f"dil_w·(S−1) = {self.dil_w * (self.S - 1)}"),
                 ("pad_h", self.pad_h == 0, "0"), ("dil_h", self.dil_h == 1, "1"),
                 ("math", self.math == "ieee", "ieee (no tensor-core family runs depthwise problems)"))
        for name, ok, allowed in rules:
            if not ok:
                raise InvalidProblem(name, f"{name}={getattr(self, name)} is invalid for a causal 1-D "
                                           f"depthwise problem: must be {allowed}")

    # ---- constructors -------------------------------------------------------------------------------
    @classmethod
    def depthwise1d(cls, B: int, C: int, L: int, K: int, dilation: int = 1,
                    dtype: str = "float32") -> ConvProblem:
        """Causal 1-D depthwise convolution of x: (B, C, L) with w: (C, K); y: (B, C, L)."""
        for name, value in (("B", B), ("C", C), ("L", L), ("K", K), ("dilation", dilation)):
            _check_int(name, value, minimum=1)
        return cls(N=B, C=C, H=1, W=L, K=C, R=1, S=K, pad_w=dilation * (K - 1), dil_w=dilation,
                   groups=C, dtype=dtype, causal=True)

    @classmethod
    def from_mapping(cls, spec: Mapping[str, Any]) -> ConvProblem:
        """Build from the suite/CLI field names (``stride``, ``pad``, ``dilation`` set both axes).

        1-D causal depthwise problems use ``B, C, L, K`` (optionally ``dilation``, ``dtype``, and ``math``, which
        may only be ``"ieee"``). The suite metadata keys ``name``, ``class`` and ``source`` are ignored. Unknown keys
        raise :class:`InvalidProblem` naming the key.
        """
        spec = {k: v for k, v in spec.items() if k not in SUITE_METADATA_KEYS}
        if "L" in spec or "B" in spec:
            allowed = {"B", "C", "L", "K", "dilation", "dtype", "causal", "math"}
            _reject_unknown(spec, allowed)
            if spec.get("math", "ieee") != "ieee":
                raise InvalidProblem("math", f"{spec['math']!r} is invalid for a 1-D causal depthwise problem "
                                             "(B, C, L, K): must be 'ieee' (no tensor-core family runs it)")
            for req in ("B", "C", "L", "K"):
                if req not in spec:
                    raise InvalidProblem(req, "is required for a 1-D causal depthwise problem (B, C, L, K)")
            if spec.get("causal", True) is not True:
                raise InvalidProblem("causal", "1-D problems (B, C, L, K) are causal: must be true")
            return cls.depthwise1d(spec["B"], spec["C"], spec["L"], spec["K"],
                                   dilation=spec.get("dilation", 1), dtype=spec.get("dtype", "float32"))
        _reject_unknown(spec, _ALIASES.keys() | {f.name for f in fields(cls) if not f.name.startswith("_")})
        kwargs: dict[str, Any] = {}
        for key, value in spec.items():
            for target in _ALIASES.get(key, (key,)):
                kwargs[target] = value
        # explicit per-axis keys win over the both-axes shorthand
        for key in ("stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w"):
            if key in spec:
                kwargs[key] = spec[key]
        for req in ("N", "C", "H", "W", "K", "R", "S"):
            if req not in kwargs:
                raise InvalidProblem(req, "is required (N, C, H, W, K, R, S)")
        return cls(**kwargs)

    @classmethod
    def parse(cls, text: str) -> ConvProblem:
        """Parse ``"N=1 C=64 H=56 W=56 K=64 R=3 S=3 stride=1 pad=1"`` (also the canonical :meth:`key`).

        Tokens are ``name=value`` separated by spaces or commas; a bare ``causal`` flag is allowed.
        """
        spec: dict[str, Any] = {}
        for token in re.split(r"[\s,]+", text.strip()):
            if not token:
                continue
            if token == "causal":
                spec["causal"] = True
                continue
            if "=" not in token:
                raise InvalidProblem(token, "expected name=value (e.g. N=1 C=64 H=56 W=56 K=64 R=3 S=3)")
            name, _, raw = token.partition("=")
            if name in spec:
                raise InvalidProblem(name, "given twice")
            spec[name] = raw if name in ("dtype", "layout", "math") else _parse_int(name, raw)
        if not spec:
            raise InvalidProblem("problem", "empty: expected e.g. N=1 C=64 H=56 W=56 K=64 R=3 S=3")
        return cls.from_mapping(spec)

    # ---- derived quantities -------------------------------------------------------------------------
    @property
    def P(self) -> int:
        """Output height."""
        return self._derived[0]

    @property
    def Q(self) -> int:
        """Output width."""
        return self._derived[1]

    @property
    def is_depthwise(self) -> bool:
        """One filter per channel: groups == C (and K a multiple of C)."""
        return self.groups == self.C and (self.groups > 1 or self.causal)

    @property
    def precision(self) -> str:
        """The precision class (:data:`PRECISION_CLASSES`): "tf32" for float32 with ``math="tf32"``, else the dtype."""
        return "tf32" if self.math == "tf32" else self.dtype

    def serving_keys(self) -> tuple[str, ...]:
        """Keys of the problems whose verified configs may serve this one, its own key first.

        A config verified for a stricter precision class may serve a looser class of the same storage type, never
        the reverse: a tf32 problem is served by its own rows and by the strict float32 problem's (strict fp32 FMAs
        meet every TF32 tolerance); a float32, bfloat16 or float16 problem only by its own rows, so a tf32 row never
        serves a strict problem. The one rule every lookup that serves a config applies (the ops' resolver, the
        export file, the best-config routes, ``convtune best``).
        """
        if self.math == "tf32":
            return (self._key("tf32"), self._key("ieee"))
        return (self.key(),)

    @property
    def itemsize_bytes(self) -> int:
        return ITEMSIZE_BYTES[self.dtype]

    @property
    def channels_per_group(self) -> int:
        return self.C // self.groups

    @property
    def reduction_length(self) -> int:
        """L = (C/groups)·R·S, the length of each output's dot product."""
        return self.channels_per_group * self.R * self.S

    @property
    def macs(self) -> int:
        """Dense multiply-accumulates G = N·K·P·Q·(C/groups)·R·S (padding taps included)."""
        return self.N * self.K * self.P * self.Q * self.reduction_length

    @property
    def flops(self) -> int:
        return 2 * self.macs

    @property
    def macs_nonpad(self) -> int:
        """MACs whose input is a real element (not padding): the causal-triangle count in 1-D."""
        rows = _valid_taps(self.H, self.P, self.R, self.stride_h, self.pad_h, self.dil_h)
        cols = _valid_taps(self.W, self.Q, self.S, self.stride_w, self.pad_w, self.dil_w)
        return self.N * self.K * self.channels_per_group * rows * cols

    @property
    def input_elements(self) -> int:
        return self.N * self.C * self.H * self.W

    @property
    def weight_elements(self) -> int:
        return self.K * self.channels_per_group * self.R * self.S

    @property
    def operand_bytes(self) -> int:
        """Bytes of x, w and y in the storage dtype: one set of a timed launch's operands (what timing rotates)."""
        return self.itemsize_bytes * (self.input_elements + self.weight_elements + self.output_elements)

    @property
    def used_taps_h(self) -> tuple[int, ...]:
        """Kernel rows r that meet a real input row for some output row (:func:`used_taps`)."""
        return used_taps(self.H, self.P, self.R, self.stride_h, self.pad_h, self.dil_h)

    @property
    def used_taps_w(self) -> tuple[int, ...]:
        """Kernel columns s that meet a real input column for some output column (:func:`used_taps`)."""
        return used_taps(self.W, self.Q, self.S, self.stride_w, self.pad_w, self.dil_w)

    @property
    def weight_elements_used(self) -> int:
        """|W_used| = K·(C/groups)·|used_taps_h|·|used_taps_w|: the weights some real input meets (separable:
        w[k,c,r,s] meets real input iff row tap r and column tap s each do, for some output row and column)."""
        return self.K * self.channels_per_group * len(self.used_taps_h) * len(self.used_taps_w)

    @property
    def output_elements(self) -> int:
        return self.N * self.K * self.P * self.Q

    @property
    def used_rows(self) -> int:
        """Input rows some window reads (padding and stride-skipped rows excluded)."""
        return _used_positions(self.H, self.P, self.R, self.stride_h, self.pad_h, self.dil_h)

    @property
    def used_cols(self) -> int:
        """Input columns some window reads (padding and stride-skipped columns excluded)."""
        return _used_positions(self.W, self.Q, self.S, self.stride_w, self.pad_w, self.dil_w)

    @property
    def input_elements_used(self) -> int:
        """|In_used| = N·C·used_rows·used_cols: the input elements any schedule must read."""
        return self.N * self.C * self.used_rows * self.used_cols

    @property
    def compulsory_elements(self) -> int:
        """|In_used| + |W_used| + |Out|: every used input and weight read once, every output written once.

        Weights that only ever meet padding (e.g. the outer taps of a 3×3 pad-1 layer on a 1×1 map) are
        not counted: no schedule needs to load them."""
        return self.input_elements_used + self.weight_elements_used + self.output_elements

    @property
    def compulsory_bytes(self) -> int:
        return self.compulsory_elements * self.itemsize_bytes

    @property
    def reuse_factor(self) -> float:
        """Sliding-window reuse R_reuse = max(1, R/stride_h)·max(1, S/stride_w) (dilation-free)."""
        return max(1.0, self.R / self.stride_h) * max(1.0, self.S / self.stride_w)

    # ---- identity -----------------------------------------------------------------------------------
    def key(self) -> str:
        """Canonical, parseable string; equal problems give equal keys."""
        return self._key(self.math)

    def _key(self, math: str) -> str:
        """The key of this problem with arithmetic ``math`` (no new problem is built)."""
        if self.causal:
            parts = [f"B={self.N}", f"C={self.C}", f"L={self.W}", f"K={self.S}"]
            if self.dil_w != 1:
                parts.append(f"dilation={self.dil_w}")
            parts.append(f"dtype={self.dtype}")
            return " ".join(parts)
        parts = [f"N={self.N}", f"C={self.C}", f"H={self.H}", f"W={self.W}", f"K={self.K}",
                 f"R={self.R}", f"S={self.S}"]
        for both, h, w in (("stride", self.stride_h, self.stride_w), ("pad", self.pad_h, self.pad_w),
                           ("dilation", self.dil_h, self.dil_w)):
            short = "dil" if both == "dilation" else both
            parts += [f"{both}={h}"] if h == w else [f"{short}_h={h}", f"{short}_w={w}"]
        if self.groups != 1:
            parts.append(f"groups={self.groups}")
        parts.append(f"dtype={self.dtype}")
        if math != "ieee":  # strict problems keep the keys they had before precision classes existed
            parts.append(f"math={math}")
        return " ".join(parts)

    def __str__(self) -> str:
        return self.key()

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-friendly field dict; ``ConvProblem(**d)`` rebuilds the problem."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    def replace(self, **changes: Any) -> ConvProblem:
        return replace(self, **changes)


_ALIASES: dict[str, tuple[str, ...]] = {
    "stride": ("stride_h", "stride_w"),
    "pad": ("pad_h", "pad_w"),
    "padding": ("pad_h", "pad_w"),
    "dilation": ("dil_h", "dil_w"),
}


def _reject_unknown(spec: Mapping[str, Any], allowed: set[str] | Any) -> None:
    for key in spec:
        if key not in allowed:
            raise InvalidProblem(key, f"unknown field; allowed: {', '.join(sorted(allowed))}")


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidProblem(name, f"{value!r} must be an integer >= {minimum}")
    if value < minimum:
        raise InvalidProblem(name, f"{name}={value} is out of range: must be an integer >= {minimum}")


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InvalidProblem(name, f"{raw!r} is not an integer") from None

"""TMA tensor maps without a GPU: :func:`convtune.kernels.tensor_map.encode` against a fake ``libcuda`` that records
the ctypes arguments of ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col`` (read back out of the arrays, as the
driver would) and writes 128 recognisable bytes, so a dimension in the wrong order, a stride in elements instead of
bytes or a wrong enum fails here rather than as a hang or garbage on a GPU; and :func:`im2col_limits`, the driver's
limits on an im2col map of rank 4 that the wgmma space's ``tma`` rule relies on."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from convtune.errors import LaunchError
from convtune.kernels import tensor_map
from convtune.kernels.igemm_wgmma import launcher
from convtune.kernels.igemm_wgmma.half import IgemmWgmmaHalfFwdConfig
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig
from convtune.kernels.igemm_wgmma.space import plan
from convtune.kernels.tensor_map import Im2colMap, TiledMap, encode, im2col_limits
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
PATTERN = bytes(range(7, 7 + 128))            # what the fake driver writes: no two bytes alike, none zero
POINTER = 0x7F3A_0000_1200                    # an operand's device address (16-byte aligned)
#: a shape where every (h, w) pair differs: a swapped axis shows
SHAPE = "N=2 C=35 H=15 W=11 K=70 R=3 S=5 stride_h=2 stride_w=3 pad_h=1 pad_w=2 dilation=2"


class FakeLibcuda:
    """The two entry points ``encode`` calls, recording their arguments as plain values (arrays as lists)."""

    def __init__(self, rc: int = 0) -> None:
        self.rc = rc
        self.calls: list[tuple[str, list[Any]]] = []

    def _record(self, name: str, args: tuple[Any, ...]) -> int:
        self.calls.append((name, [list(a) if isinstance(a, ctypes.Array) else a.value for a in args]))
        ctypes.memmove(args[0].value, PATTERN, len(PATTERN))
        return self.rc

    def cuTensorMapEncodeTiled(self, *args: Any) -> int:
        return self._record("tiled", args)

    def cuTensorMapEncodeIm2col(self, *args: Any) -> int:
        return self._record("im2col", args)


@pytest.fixture
def lib(monkeypatch: pytest.MonkeyPatch) -> FakeLibcuda:
    fake = FakeLibcuda()
    monkeypatch.setattr(tensor_map, "_libcuda", fake)
    return fake


@pytest.mark.parametrize(("dtype", "swizzle_bytes", "type_enum", "swizzle_enum"), [
    ("float32", 128, 7, 3), ("bfloat16", 64, 9, 2), ("float16", 32, 6, 1)])
def test_tiled_map_arguments(lib: FakeLibcuda, dtype: str, swizzle_bytes: int, type_enum: int,
                             swizzle_enum: int) -> None:
    """The filters (rows × inner elements, row-major): dims innermost first, one byte stride (the row's), the box
    (inner, rows), unit element strides; the storage type's and the swizzle span's CUtensorMap enums; no interleave,
    L2 promotion of 256 bytes, zero fill outside the tensor."""
    itemsize = 4 if dtype == "float32" else 2
    spec = TiledMap(dtype, inner=960, rows=70, box_inner=swizzle_bytes // itemsize, box_rows=128,
                    swizzle_bytes=swizzle_bytes)
    assert encode(spec, POINTER) == PATTERN
    ((name, args),) = lib.calls
    out, *rest = args
    assert name == "tiled" and out % 64 == 0                       # the driver requires a 64-byte aligned map
    assert rest == [type_enum, 2, POINTER, [960, 70], [960 * itemsize], [swizzle_bytes // itemsize, 128], [1, 1],
                    0, swizzle_enum, 3, 0]


def _im2col_case(dtype: str) -> tuple[ConvProblem, Im2colMap, int]:
    """The im2col map of a real tma=1 plan (from launcher.tensor_maps), its problem and its channels per chunk."""
    if dtype == "float32":
        problem = ConvProblem.parse(f"{SHAPE} math=tf32")
        config: IgemmWgmmaFwdConfig = IgemmWgmmaFwdConfig(128, 1, 2, 4, 1, 32, tma=1)
    else:
        problem = ConvProblem.parse(f"{SHAPE} dtype={dtype}")
        config = IgemmWgmmaHalfFwdConfig(128, 1, 2, 4, 1, 32, tma=1)
    pl = plan(problem, config, H200)
    ((operand, spec), _) = launcher.tensor_maps(pl)
    assert operand == 3 and isinstance(spec, Im2colMap)
    return problem, spec, pl.cp


@pytest.mark.parametrize(("dtype", "type_enum", "swizzle_enum"), [("float32", 7, 3), ("bfloat16", 9, 2)])
def test_im2col_map_arguments(lib: FakeLibcuda, dtype: str, type_enum: int, swizzle_enum: int) -> None:
    """x channels-last (N, H, W, Cp): dims (Cp, W, H, N), byte strides of W, H, N; the box corners (W first) −pad and
    pad − dilation·(kernel − 1); a chunk's channels per pixel, BM pixels per column; the traversal strides in the
    element strides (W, H). TF32 chunks of 32 channels (128-byte rows), bf16 ones of 32 (64-byte rows)."""
    p, spec, cp = _im2col_case(dtype)
    itemsize = p.itemsize_bytes
    assert cp == 64                                      # C = 35 in chunks of 32
    assert encode(spec, POINTER) == PATTERN
    ((name, args),) = lib.calls
    out, *rest = args
    assert name == "im2col" and out % 64 == 0
    assert rest == [
        type_enum, 4, POINTER,
        [cp, p.W, p.H, p.N],
        [cp * itemsize, p.W * cp * itemsize, p.H * p.W * cp * itemsize],
        [-2, -1],                                       # (−pad_w, −pad_h)
        [2 - 2 * (5 - 1), 1 - 2 * (3 - 1)],             # (pad_w − dil_w·(S − 1), pad_h − dil_h·(R − 1))
        32,                                             # channels per pixel: the chunk
        128,                                            # pixels per column: BM = 64·warpgroups·m_blocks
        [1, 3, 2, 1],                                   # (C, W, H, N): the traversal strides on W (3) and H (2)
        0, swizzle_enum, 3, 0]


def test_each_encoding_gets_its_own_call_and_window(lib: FakeLibcuda) -> None:
    """Two encodings call the driver twice and both return the bytes written (the window is read after the call)."""
    spec = TiledMap("float32", 64, 64, 32, 64, 128)
    assert encode(spec, POINTER) == encode(spec, POINTER + 256) == PATTERN
    assert [args[3] for _, args in lib.calls] == [POINTER, POINTER + 256]


def test_a_refused_map_raises_naming_the_curesult(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_map, "_libcuda", FakeLibcuda(rc=1))          # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(LaunchError, match=r"CUresult 1\b"):
        encode(TiledMap("float32", 64, 64, 32, 64, 128), POINTER)
    monkeypatch.setattr(tensor_map, "_libcuda", FakeLibcuda(rc=700))
    with pytest.raises(LaunchError, match=r"CUresult 700\b"):
        encode(_im2col_case("float32")[1], POINTER)


def test_a_missing_driver_raises_launch_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """No libcuda.so.1 (a CPU-only host): a LaunchError naming the library, not an OSError; nothing is cached, so a
    later call tries again."""
    def missing(name: str, *args: Any, **kwargs: Any) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(tensor_map, "_libcuda", None)
    monkeypatch.setattr(ctypes, "CDLL", missing)
    with pytest.raises(LaunchError, match=r"libcuda\.so\.1"):
        encode(TiledMap("float32", 64, 64, 32, 64, 128), POINTER)
    assert tensor_map._libcuda is None


def test_the_driver_library_is_loaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, opened = FakeLibcuda(), []

    def cdll(name: str, *args: Any, **kwargs: Any) -> FakeLibcuda:
        opened.append(name)
        return fake

    monkeypatch.setattr(tensor_map, "_libcuda", None)
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    spec = TiledMap("bfloat16", 64, 64, 64, 64, 128)
    encode(spec, POINTER)
    encode(spec, POINTER)
    assert opened == ["libcuda.so.1"] and len(fake.calls) == 2


# ---- im2col_limits: (pad, dilation, kernel, stride), each (h, w) -------------------------------------------------
@pytest.mark.parametrize(("pad", "dilation", "kernel", "stride"), [
    ((1, 1), (1, 1), (3, 3), (1, 1)),             # 3×3 pad 1
    ((3, 3), (1, 1), (7, 7), (2, 2)),             # a 7×7 stem, stride 2
    ((18, 18), (18, 18), (3, 3), (1, 1)),         # atrous, dilation 18
    ((0, 0), (1, 1), (1, 1), (8, 8)),             # the largest traversal stride
    ((128, 128), (1, 1), (3, 3), (1, 1)),         # corners −128 and 126: the range's ends
    ((2, 0), (2, 1), (3, 1), (1, 1)),
], ids=["3x3", "7x7s2", "dil18", "stride8", "pad128", "mixed"])
def test_ordinary_convolutions_fit_an_im2col_map(pad: tuple[int, int], dilation: tuple[int, int],
                                                kernel: tuple[int, int], stride: tuple[int, int]) -> None:
    assert im2col_limits(pad, dilation, kernel, stride) == ""


@pytest.mark.parametrize(("pad", "dilation", "kernel", "stride", "field"), [
    ((200, 200), (1, 1), (3, 3), (1, 1), "pad_h"),         # lower corner −200
    ((1, 200), (1, 1), (3, 3), (1, 1), "pad_w"),
    ((129, 1), (1, 1), (3, 3), (1, 1), "pad_h"),           # one past the range
    ((1, 1), (100, 100), (3, 3), (1, 1), "pad_h"),         # upper corner 1 − 200 < −128
    ((1, 1), (1, 100), (3, 3), (1, 1), "pad_w"),
    ((128, 0), (1, 1), (1, 1), (1, 1), "pad_h"),           # upper corner 128 > 127
    ((1, 1), (1, 1), (3, 3), (9, 9), "stride_h"),
    ((1, 1), (1, 1), (3, 3), (1, 9), "stride_w"),
], ids=["pad200", "pad_w200", "pad129", "dil100", "dil_w100", "upper128", "stride9", "stride_w9"])
def test_what_an_im2col_map_cannot_describe_is_named(pad: tuple[int, int], dilation: tuple[int, int],
                                                     kernel: tuple[int, int], stride: tuple[int, int],
                                                     field: str) -> None:
    reason = im2col_limits(pad, dilation, kernel, stride)
    assert reason and field in reason

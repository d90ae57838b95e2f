"""GPU results of the epilogue kernel ``out = act(y + bias[k] (+ residual))`` through ``convtune.ops.torch.bias_act``
and a direct prepared launch (needs a CUDA device).

Per dtype (float32, bfloat16, float16) × activation × residual or not × shapes with H·W % 4 == 0 (the 4-wide
path) and != 0 (N = 1, K not a multiple of 8), out of place and in place: fresh normal inputs rounded to the dtype,
against float64 from the same rounded inputs (float32: relative error ≤ 1e-6; 16-bit: within one unit in the last
place of the reference) and bit for bit against PyTorch's fp32 formula on the same device (the kernel's sums in the
same order, rounded once). Outputs come from a NaN-poisoned allocator block (out of place) or a NaN-filled tensor
(direct launch). Then misaligned operands (the 1-wide fallback), a side stream, and CUDA graph capture and replay.
"""

from __future__ import annotations

import math
import zlib

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
ct = pytest.importorskip("convtune.ops.torch")
epilogue = pytest.importorskip("convtune.ops.torch.epilogue")

from convtune.kernels.epilogue import launcher  # noqa: E402

pytestmark = pytest.mark.gpu

DTYPES = [pytest.param(torch.float32, id="f32"), pytest.param(torch.bfloat16, id="bf16"),
          pytest.param(torch.float16, id="f16")]
#: mantissa bits: one unit in the last place of v is at most |v| · 2^-bits (normal numbers)
MANTISSA = {torch.bfloat16: 7, torch.float16: 10}
ACTIVATIONS = ("none", "relu", "relu6", "silu", "hardswish", "hardsigmoid", "sigmoid")
PIECEWISE = ("none", "relu", "relu6")   # exact sums and clamps: bitwise PyTorch's; the others call expf or divide
SHAPES = [
    pytest.param((2, 13, 7, 7), id="2x13x7x7"),          # H·W = 49: 1-wide
    pytest.param((3, 24, 8, 12), id="3x24x8x12"),        # H·W = 96: 4-wide
    pytest.param((1, 5, 1, 1), id="1x5x1x1"),            # one element per channel
    pytest.param((1, 7, 5, 3), id="1x7x5x3"),            # H·W = 15
    pytest.param((4, 3, 2, 2), id="4x3x2x2"),            # H·W = 4: one vector per channel
    pytest.param((2, 40, 28, 28), id="2x40x28x28"),      # 245 blocks of 4-wide threads
]


def _inputs(shape, dtype, seed):
    """y, bias (float32), residual: normal, scaled so that relu6's clamps at 0 and 6 are both reached."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    y = (torch.randn(shape, generator=g, device="cuda") * 3 + 1.5).to(dtype)
    bias = torch.randn(shape[1], generator=g, device="cuda") * 2
    res = (torch.randn(shape, generator=g, device="cuda") * 3).to(dtype)
    return y, bias, res


def _reference(y, bias, res, activation):
    """float64 from the (dtype-rounded) inputs."""
    z = y.double() + bias.double().view(1, -1, 1, 1)
    if res is not None:
        z = z + res.double()
    return {"none": lambda: z, "relu": lambda: z.clamp_min(0), "relu6": lambda: z.clamp(0, 6),
            "silu": lambda: z / (1 + torch.exp(-z)), "hardswish": lambda: z * (z + 3).clamp(0, 6) / 6,
            "hardsigmoid": lambda: (z + 3).clamp(0, 6) / 6, "sigmoid": lambda: 1 / (1 + torch.exp(-z))}[activation]()


def _torch_fp32(y, bias, res, activation):
    """PyTorch's ops in fp32, (y + bias) + residual, rounded once to y's dtype: what the kernel computes."""
    z = y.float() + bias.float().view(1, -1, 1, 1)
    if res is not None:
        z = z + res.float()
    act = {"none": lambda t: t, "relu": torch.relu, "relu6": lambda t: F.hardtanh(t, 0.0, 6.0), "silu": F.silu,
           "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "sigmoid": torch.sigmoid}[activation]
    return act(z).to(y.dtype)


def _check(out, y, bias, res, activation) -> None:
    ref = _reference(y, bias, res, activation)
    assert out.shape == y.shape and out.dtype == y.dtype and out.is_cuda
    got = out.double()
    assert bool(torch.isfinite(got).all()), "unwritten (NaN) or non-finite elements"
    err = (got - ref).abs()
    scale = float(ref.abs().max())
    magnitude = y.double().abs() + bias.double().abs().view(1, -1, 1, 1) + (0 if res is None else res.double().abs())
    # the sums' two fp32 roundings, amplified by the activation's slope (≤ 1.5: hardswish at 3), and for the smooth
    # ones expf and a division (a few fp32 ulps of the result)
    sums = (2.0**-22 if activation in PIECEWISE else 2.0**-21) * magnitude
    own = 0 if activation in PIECEWISE else 2.0**-21 * ref.abs()
    if y.dtype == torch.float32:
        assert float(err.max()) <= 1e-6 * scale
        assert bool((err <= sums + own).all())
    else:
        bits = MANTISSA[y.dtype]
        assert float(err.max()) <= 2.0**-bits * scale
        # within one ulp of the float64 value, plus the fp32 arithmetic and float16's subnormal spacing
        assert bool((err <= 2.0**-bits * ref.abs() + sums + own + 2.0**-24).all())
    theirs = _torch_fp32(y, bias, res, activation)
    if activation in PIECEWISE:
        assert torch.equal(out, theirs)
    else:   # PyTorch's own fp32 formula, rounded to the dtype: at most one unit of y's dtype apart
        tiny = 2.0**-24 if y.dtype == torch.float16 else 2.0**-126   # subnormal float16's spacing
        ulp = 2.0**-(23 if y.dtype == torch.float32 else MANTISSA[y.dtype]) * theirs.double().abs() + tiny
        assert bool(((out.double() - theirs.double()).abs() <= ulp).all())
    if activation in ("relu", "relu6"):
        assert bool((got >= 0).all()) and (activation == "relu" or bool((got <= 6).all()))


def _poison_allocator(numel: int, dtype) -> None:
    """Leave a NaN-filled block of this size in torch's caching allocator: the next allocation of the same size on
    this stream gets it, so an output the kernel does not fully write shows NaN."""
    block = torch.full((numel,), math.nan, device="cuda", dtype=dtype)
    del block


@pytest.fixture
def kernel_only(monkeypatch):
    """Fail a test whose CUDA call falls back to PyTorch's ops."""
    def refuse(*args):
        raise AssertionError("bias_act fell back to PyTorch's ops on CUDA")

    monkeypatch.setattr(epilogue, "_torch_bias_act", refuse)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_act_matches_float64(dtype, activation, with_residual, shape, kernel_only) -> None:
    seed = zlib.crc32(f"{dtype}-{activation}-{with_residual}-{shape}".encode())
    y, bias, res = _inputs(shape, dtype, seed)
    residual = res if with_residual else None
    y_before, res_before = y.clone(), res.clone()
    _poison_allocator(y.numel(), dtype)
    out = ct.bias_act(y, bias, residual, activation)
    torch.cuda.synchronize()
    assert out.data_ptr() != y.data_ptr() and torch.equal(y, y_before)
    _check(out, y, bias, residual, activation)
    y_inplace = y.clone()
    ret = ct.bias_act(y_inplace, bias, residual, activation, inplace=True)
    torch.cuda.synchronize()
    assert ret.data_ptr() == y_inplace.data_ptr()
    _check(ret, y, bias, residual, activation)
    assert torch.equal(res, res_before)                       # the residual is only read


@pytest.mark.parametrize("shape", [(2, 13, 7, 7), (3, 24, 8, 12), (1, 5, 1, 1)], ids=str)
@pytest.mark.parametrize("with_residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_direct_launch_writes_every_element(dtype, with_residual, shape) -> None:
    N, K, H, W = shape
    y, bias, res = _inputs(shape, dtype, seed=N * 1000 + K)
    out = torch.full_like(y, math.nan)
    dtype_name = epilogue._DTYPES[dtype]
    res_ptr = res.data_ptr() if with_residual else y.data_ptr()
    vector = launcher.vector_width(H * W, y.data_ptr(), out.data_ptr(), res_ptr, dtype=dtype_name)
    assert vector == (4 if (H * W) % 4 == 0 else 1)
    for activation in ACTIVATIONS:
        out.fill_(math.nan)
        plan = launcher.make_plan(dtype_name, N, K, H * W, activation, with_residual, vector)
        prepared = launcher.prepare(plan, torch.cuda.current_device())
        prepared((y.data_ptr(), bias.data_ptr(), res_ptr, out.data_ptr()), torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        _check(out, y, bias, res if with_residual else None, activation)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["residual", "y"])
def test_misaligned_operands_fall_back_to_one_wide(dtype, which, kernel_only) -> None:
    shape = (2, 12, 4, 6)                                      # H·W = 24: 4-wide when aligned
    y, bias, res = _inputs(shape, dtype, seed=77)
    numel = y.numel()
    if which == "residual":
        res = torch.empty(numel + 1, device="cuda", dtype=dtype)[1:].view(shape).copy_(res)
    else:
        y = torch.empty(numel + 1, device="cuda", dtype=dtype)[1:].view(shape).copy_(y)
    assert y.is_contiguous() and res.is_contiguous()
    assert (res if which == "residual" else y).data_ptr() % (4 * y.element_size()) != 0
    epilogue._prepared.clear()
    for activation in ACTIVATIONS:
        out = ct.bias_act(y, bias, res, activation)
        torch.cuda.synchronize()
        _check(out, y, bias, res, activation)
    vectors = {key[-1] for key in epilogue._prepared}
    assert vectors == {1}, epilogue._prepared.keys()
    if which == "y":                                            # in place on a misaligned y
        expected = _torch_fp32(y, bias, res, "relu")
        ret = ct.bias_act(y, bias, res, "relu", inplace=True)
        torch.cuda.synchronize()
        assert ret.data_ptr() == y.data_ptr() and torch.equal(ret, expected)


def test_aligned_operands_take_the_four_wide_path(kernel_only) -> None:
    y, bias, res = _inputs((2, 12, 4, 6), torch.bfloat16, seed=78)
    epilogue._prepared.clear()
    out = ct.bias_act(y, bias, res, "relu6")
    torch.cuda.synchronize()
    _check(out, y, bias, res, "relu6")
    assert {key[-1] for key in epilogue._prepared} == {4}


def test_a_16bit_bias_is_converted(kernel_only) -> None:
    y, bias, res = _inputs((2, 6, 4, 4), torch.bfloat16, seed=79)
    b16 = bias.to(torch.bfloat16)
    out = ct.bias_act(y, b16, res, "relu")
    torch.cuda.synchronize()
    _check(out, y, b16.float(), res, "relu")


def test_channels_last_and_mixed_dtypes_run_pytorchs_ops() -> None:
    y, bias, res = _inputs((2, 6, 4, 4), torch.float32, seed=80)
    y_cl = y.to(memory_format=torch.channels_last)
    out = ct.bias_act(y_cl, bias, res, "relu6")
    assert torch.allclose(out.double(), _reference(y, bias, res, "relu6"), rtol=1e-6, atol=1e-6)
    res16 = res.to(torch.float16)
    out = ct.bias_act(y, bias, res16, "relu")
    assert out.dtype == torch.float32
    assert torch.allclose(out.double(), _reference(y, bias, res16, "relu"), rtol=1e-6, atol=1e-6)


def test_runs_on_the_current_stream(kernel_only) -> None:
    y, bias, res = _inputs((3, 24, 8, 12), torch.float16, seed=81)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = ct.bias_act(y, bias, res, "relu6")
        expected = _torch_fp32(y, bias, res, "relu6")
    side.synchronize()
    assert torch.equal(out, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inplace", [False, True], ids=["out-of-place", "in-place"])
def test_cuda_graph_capture_replays_with_new_inputs(dtype, inplace, kernel_only) -> None:
    shape = (2, 13, 8, 8)
    y0, bias, res0 = _inputs(shape, dtype, seed=90)
    static_y, static_res = y0.clone(), res0.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                               # warm-up: the prepared launch is built here
        for _ in range(2):
            ct.bias_act(static_y.clone(), bias, static_res, "relu6", inplace=inplace)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = ct.bias_act(static_y, bias, static_res, "relu6", inplace=inplace)
    assert (static_out.data_ptr() == static_y.data_ptr()) == inplace
    for seed in (91, 92):
        y, _, res = _inputs(shape, dtype, seed)
        static_y.copy_(y)
        static_res.copy_(res)
        graph.replay()
        torch.cuda.synchronize()
        _check(static_out, y, bias, res, "relu6")

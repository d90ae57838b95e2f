"""``convtune.ops.torch``: the depthwise custom ops against PyTorch in float64 — forward, gradients (each only
when needed), gradcheck through the float64 path, torch.compile — on the CPU reference path and on the
GPU kernels (gpu), in float32 and with float16 / bfloat16 storage (gpu). Skipped where torch is not installed.

16-bit tolerances (relative error against float64 of the same 16-bit inputs): the kernels accumulate in fp32
and round each output once, at most half a unit in the last place — 2⁻¹¹ ≈ 4.9e-4 relative for float16,
2⁻⁸ ≈ 3.9e-3 for bfloat16 —, so twice that: 1e-3 and 8e-3."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
ct = pytest.importorskip("convtune.ops.torch")
dw = pytest.importorskip("convtune.ops.torch.depthwise")   # the module whose internals tests replace

SHAPES_1D = [(2, 3, 7, 3), (1, 4, 48, 48), (3, 5, 13, 20), (2, 8, 64, 1), (4, 16, 48, 7)]
# (x shape, (R, S), stride, padding): odd sizes, strides 1 and 2, padding 0..3, 3×3 / 5×5 / 7×7, C = 3, N = 1
SHAPES_2D = [
    pytest.param((2, 4, 9, 11), (3, 3), 1, 1, id="3x3"),
    pytest.param((1, 6, 14, 14), (5, 3), 2, (2, 1), id="5x3-s2"),
    pytest.param((2, 3, 8, 8), (7, 7), 1, 3, id="7x7"),
    pytest.param((1, 3, 13, 17), (3, 3), 2, 0, id="3x3-s2-p0-odd"),
    pytest.param((3, 3, 10, 7), (3, 3), 1, 0, id="3x3-p0-N3"),
    pytest.param((2, 5, 15, 9), (5, 5), 1, 2, id="5x5-p2-odd"),
    pytest.param((1, 3, 12, 12), (5, 5), 2, 2, id="5x5-s2"),
    pytest.param((1, 4, 11, 13), (7, 7), 2, 3, id="7x7-s2-p3-odd"),
    pytest.param((2, 3, 9, 10), (5, 5), 1, 3, id="5x5-p3"),
    pytest.param((2, 6, 12, 20), (3, 5), (1, 2), (0, 2), id="3x5-s1x2"),
    pytest.param((4, 32, 28, 28), (3, 3), 1, 1, id="3x3-C32"),
    pytest.param((2, 4, 15, 16), (3, 3), 3, 1, id="3x3-s3"),   # no dgrad kernel takes stride 3: reference dx
]


# torch.compile imports torch.utils.mkldnn, whose torch.jit.script_method warns (torch 2.11) under filterwarnings=error
COMPILE_WARNINGS = pytest.mark.filterwarnings("ignore:.torch.jit.script_method. is deprecated:DeprecationWarning")


def _ref1d(x, w):
    return F.conv1d(F.pad(x, (w.shape[1] - 1, 0)), w[:, None, :], groups=x.shape[1])


def _rel(a, b) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def _devices() -> list:
    devices = [pytest.param("cpu", id="cpu")]
    devices.append(pytest.param("cuda", id="cuda", marks=pytest.mark.gpu))
    return devices


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("shape", SHAPES_1D, ids=lambda s: "B{}C{}L{}K{}".format(*s))
def test_conv1d_forward_and_gradients_match_float64(shape, device) -> None:
    B, C, L, K = shape
    g = torch.Generator().manual_seed(sum(shape))
    x64, w64, dy64 = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((B, C, L), (C, K), (B, C, L)))
    x, w = (t.float().to(device).requires_grad_() for t in (x64, w64))
    y = ct.depthwise_conv1d(x, w)
    y.backward(dy64.float().to(device))
    x64.requires_grad_(), w64.requires_grad_()
    y64 = _ref1d(x64, w64)
    y64.backward(dy64)
    assert _rel(y.detach().cpu(), y64) <= 1e-5
    assert _rel(x.grad.cpu(), x64.grad) <= 1e-5
    assert _rel(w.grad.cpu(), w64.grad) <= 1e-4


@pytest.mark.parametrize("device", _devices())
def test_conv1d_computes_only_the_gradients_needed(device, monkeypatch) -> None:
    calls = []
    for name in ("_dw1d_dgrad", "_dw1d_wgrad"):
        real = getattr(dw, name)
        monkeypatch.setattr(dw, name, lambda *a, _n=name, _r=real: calls.append(_n) or _r(*a))
    x = torch.randn(2, 3, 16, device=device)
    w = torch.randn(3, 4, device=device, requires_grad=True)
    ct.depthwise_conv1d(x, w).sum().backward()
    assert calls == ["_dw1d_wgrad"] and w.grad is not None
    calls.clear()
    x.requires_grad_()
    ct.depthwise_conv1d(x, w.detach()).sum().backward()
    assert calls == ["_dw1d_dgrad"] and x.grad is not None


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("shape", [(2, 3, 7, 3), (1, 2, 5, 8), (1, 3, 6, 1)], ids=["K<L", "K>L", "K=1"])
def test_conv1d_gradcheck_float64(shape, device) -> None:
    B, C, L, K = shape
    x = torch.randn(B, C, L, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.randn(C, K, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(ct.depthwise_conv1d, (x, w))


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize(("xshape", "rs", "stride", "padding"), SHAPES_2D)
def test_conv2d_forward_and_gradients_match_float64(xshape, rs, stride, padding, device) -> None:
    g = torch.Generator().manual_seed(7)
    x64 = torch.randn(*xshape, generator=g, dtype=torch.float64)
    w64 = torch.randn(xshape[1], 1, *rs, generator=g, dtype=torch.float64)
    x, w = (t.float().to(device).requires_grad_() for t in (x64, w64))
    y = ct.depthwise_conv2d(x, w, stride=stride, padding=padding)
    y64 = F.conv2d(x64.requires_grad_(), w64.requires_grad_(), stride=stride, padding=padding, groups=xshape[1])
    assert y.shape == y64.shape and _rel(y.detach().cpu(), y64) <= 1e-5
    dy = torch.randn(y64.shape, generator=g, dtype=torch.float64)
    y.backward(dy.float().to(device))
    y64.backward(dy)
    assert x.grad.shape == x64.grad.shape and w.grad.shape == w64.grad.shape
    assert _rel(x.grad.cpu(), x64.grad) <= 1e-5 and _rel(w.grad.cpu(), w64.grad) <= 1e-4


@pytest.mark.parametrize("device", _devices())
def test_conv2d_gradcheck_float64(device) -> None:
    x = torch.randn(1, 2, 6, 5, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.randn(2, 1, 3, 3, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ct.depthwise_conv2d(a, b, stride=2, padding=1), (x, w))


@pytest.mark.parametrize("device", _devices())
def test_conv2d_computes_only_the_gradients_needed(device, monkeypatch) -> None:
    calls = []
    for name in ("_dw2d_dgrad", "_dw2d_wgrad"):
        real = getattr(dw, name)
        monkeypatch.setattr(dw, name, lambda *a, _n=name, _r=real: calls.append(_n) or _r(*a))
    x = torch.randn(2, 3, 9, 9, device=device)
    w = torch.randn(3, 1, 3, 3, device=device, requires_grad=True)
    ct.depthwise_conv2d(x, w, padding=1).sum().backward()
    assert calls == ["_dw2d_wgrad"] and w.grad is not None
    calls.clear()
    x.requires_grad_()
    ct.depthwise_conv2d(x, w.detach(), stride=2).sum().backward()
    assert calls == ["_dw2d_dgrad"] and x.grad is not None and x.grad.shape == x.shape


@pytest.mark.gpu
def test_conv2d_backward_on_cuda_runs_the_kernels(monkeypatch) -> None:
    """CUDA float32 gradients come from plan2d_dgrad / plan2d_wgrad, never from PyTorch's formulas."""
    def refuse(*args, **kwargs):
        raise AssertionError("the reference gradient ran on a CUDA float32 tensor")

    monkeypatch.setattr(torch.nn.grad, "conv2d_input", refuse)
    monkeypatch.setattr(torch.nn.grad, "conv2d_weight", refuse)
    x = torch.randn(2, 8, 15, 15, device="cuda", requires_grad=True)
    w = torch.randn(8, 1, 5, 5, device="cuda", requires_grad=True)
    ct.depthwise_conv2d(x, w, stride=2, padding=2).square().sum().backward()
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    F.conv2d(x64, w64, stride=2, padding=2, groups=8).square().sum().backward()
    assert _rel(x.grad, x64.grad) <= 1e-5 and _rel(w.grad, w64.grad) <= 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize(("xshape", "rs", "stride", "padding"), [
    pytest.param((8, 32, 28, 28), (3, 3), 1, 1, id="3x3"),
    pytest.param((4, 16, 33, 31), (7, 7), 2, 3, id="7x7-s2-odd"),
    pytest.param((32, 64, 7, 7), (5, 5), 1, 2, id="5x5-small-planes"),
])
def test_conv2d_weight_gradient_is_bitwise_repeatable(xshape, rs, stride, padding) -> None:
    """The deterministic mode sums fixed per-block partials in a fixed order: equal bits on every run."""
    x = torch.randn(*xshape, device="cuda")
    w = torch.randn(xshape[1], 1, *rs, device="cuda", requires_grad=True)
    dy = torch.randn_like(ct.depthwise_conv2d(x, w.detach(), stride=stride, padding=padding))
    grads = []
    for _ in range(3):
        w.grad = None
        ct.depthwise_conv2d(x, w, stride=stride, padding=padding).backward(dy)
        grads.append(w.grad.clone())
    assert all(torch.equal(grads[0], g) for g in grads[1:])


@COMPILE_WARNINGS
@pytest.mark.parametrize("device", _devices())
def test_torch_compile_of_conv2d_with_backward(device) -> None:
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 6, 13, 11, generator=g).to(device).requires_grad_()
    w = torch.randn(6, 1, 5, 5, generator=g).to(device).requires_grad_()

    def f(a, b):
        return torch.tanh(ct.depthwise_conv2d(a, b, stride=2, padding=2)).square().sum()

    eager = torch.autograd.grad(f(x, w), (x, w))
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.autograd.grad(torch.compile(f, fullgraph=True, backend=backend)(x, w), (x, w))
    for a, b in zip(compiled, eager, strict=True):
        assert a.shape == b.shape and _rel(a.detach().cpu(), b.detach().cpu()) <= 1e-5


@pytest.mark.parametrize(("call", "field"), [
    (lambda: ct.depthwise_conv1d(torch.zeros(2, 3, 8), torch.zeros(3, 2), causal=False), "causal"),
    (lambda: ct.depthwise_conv1d(torch.zeros(2, 3), torch.zeros(3, 2)), "x"),
    (lambda: ct.depthwise_conv1d(torch.zeros(2, 3, 8), torch.zeros(4, 2)), "w"),
    (lambda: ct.depthwise_conv1d(torch.zeros(2, 3, 8), torch.zeros(3, 2, dtype=torch.float64)), "w"),
    (lambda: ct.depthwise_conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(3, 2, 3, 3)), "w"),
    (lambda: ct.depthwise_conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(3, 1, 3, 3), stride=0), "stride"),
    (lambda: ct.depthwise_conv2d(torch.zeros(1, 3, 2, 2), torch.zeros(3, 1, 3, 3)), "x"),
], ids=["non-causal", "rank", "channels", "dtype", "2d-w", "stride", "empty"])
def test_bad_arguments_name_the_field(call, field) -> None:
    from convtune.errors import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        call()
    assert exc.value.field == field


class _Block(torch.nn.Module):
    def __init__(self, C: int, K: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(C, K) / K)
        self.w2 = torch.nn.Parameter(torch.randn(C, 1, 3, 3) / 3)

    def forward(self, x):
        y = torch.nn.functional.gelu(ct.depthwise_conv1d(x, self.w)) + x
        return ct.depthwise_conv2d(y[:, :, None, :].expand(-1, -1, 4, -1), self.w2, padding=1).mean(2)


@COMPILE_WARNINGS
@pytest.mark.parametrize("device", _devices())
def test_torch_compile_of_a_module_using_the_ops(device) -> None:
    torch._dynamo.reset()
    block = _Block(8, 5).to(device)
    x = torch.randn(4, 8, 32, device=device, requires_grad=True)
    eager = block(x)
    backend = "inductor" if device == "cuda" else "aot_eager"   # the CPU test needs no C++ toolchain
    compiled = torch.compile(block, fullgraph=True, backend=backend)
    out = compiled(x)
    assert _rel(out.detach().cpu(), eager.detach().cpu()) <= 1e-5
    out.sum().backward()
    assert x.grad is not None and block.w.grad is not None and block.w2.grad is not None


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:Synchronization debug mode is a prototype feature:UserWarning")
def test_ops_run_on_the_current_stream_without_host_syncs() -> None:
    x = torch.randn(64, 32, 48, device="cuda", requires_grad=True)
    w = torch.randn(32, 48, device="cuda", requires_grad=True)
    x2 = torch.randn(8, 16, 20, 20, device="cuda", requires_grad=True)
    w2 = torch.randn(16, 1, 3, 3, device="cuda", requires_grad=True)

    def step():
        y = ct.depthwise_conv1d(x, w)
        y2 = ct.depthwise_conv2d(x2, w2, stride=2, padding=1)
        (y.sum() + y2.sum()).backward()
        return y, y2

    step()                                               # compile and choose configs first
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda.set_sync_debug_mode("error")
        try:
            y, y2 = step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    stream.synchronize()
    assert _rel(y.detach(), _ref1d(x.detach().double(), w.detach().double())) <= 1e-5
    ref2 = F.conv2d(x2.detach().double(), w2.detach().double(), stride=2, padding=1, groups=16)
    assert _rel(y2.detach(), ref2) <= 1e-5


def test_s4convd_training_script_runs_and_agrees_on_cpu(tmp_path) -> None:
    """benchmarks/s4convd_train.py end to end at a tiny batch: both paths train, the loss curves agree."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "s4convd_train.py"
    spec = importlib.util.spec_from_file_location("s4convd_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "report.json"
    assert module.main(["--device", "cpu", "--steps", "3", "--batch", "16", "--warmup", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["losses_agree"] and report["max_rel_loss_diff"] <= 1e-4
    assert report["step_ms_fft"] > 0 and report["amdahl_bound"] >= 1


# ---- float16 / bfloat16 storage ------------------------------------------------------------------------------
HALF = [pytest.param(torch.float16, 1e-3, id="fp16"), pytest.param(torch.bfloat16, 8e-3, id="bf16")]


def _refuse(*args, **kwargs):
    raise AssertionError("a reference formula ran where the kernels should")


class _NoTorchFunctional:
    """Stands in for ``torch.nn.functional`` inside ``convtune.ops.torch.depthwise``: any use fails the test."""

    def __getattr__(self, name: str):
        return _refuse


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "tol"), HALF)
@pytest.mark.parametrize("shape", [(2, 3, 7, 3), (4, 16, 48, 7), (2, 8, 64, 1), (3, 5, 13, 20), (2, 4, 40, 64),
                                   (8, 32, 256, 4)], ids=lambda s: "B{}C{}L{}K{}".format(*s))
def test_conv1d_16bit_runs_the_kernels_and_matches_float64(shape, dtype, tol, monkeypatch) -> None:
    for name in ("_ref_fwd", "_ref_dgrad", "_ref_wgrad"):
        monkeypatch.setattr(dw, name, _refuse)
    B, C, L, K = shape
    g = torch.Generator().manual_seed(sum(shape))
    x, w, dy = (torch.randn(*s, generator=g).to(dtype).cuda() for s in ((B, C, L), (C, K), (B, C, L)))
    x.requires_grad_(), w.requires_grad_()
    y = ct.depthwise_conv1d(x, w)
    y.backward(dy)
    assert y.dtype == x.grad.dtype == w.grad.dtype == dtype
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    y64 = _ref1d(x64, w64)
    y64.backward(dy.double())
    assert _rel(y, y64) <= tol and _rel(x.grad, x64.grad) <= tol and _rel(w.grad, w64.grad) <= tol


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "tol"), HALF)
@pytest.mark.parametrize(("xshape", "rs", "stride", "padding"), [
    pytest.param((2, 4, 9, 11), (3, 3), 1, 1, id="3x3"),
    pytest.param((1, 4, 11, 13), (7, 7), 2, 3, id="7x7-s2-odd"),
    pytest.param((2, 5, 15, 9), (5, 5), 1, 2, id="5x5"),
    pytest.param((8, 32, 28, 28), (3, 3), 2, 1, id="3x3-s2-C32"),
])
def test_conv2d_16bit_gradients_run_the_kernels_and_match_float64(xshape, rs, stride, padding, dtype, tol,
                                                                  monkeypatch) -> None:
    """The forward (fast or packed kernel) and both gradients run the 16-bit kernels: PyTorch's own
    convolutions are refused inside the op."""
    monkeypatch.setattr(dw, "F", _NoTorchFunctional())
    monkeypatch.setattr(torch.nn.grad, "conv2d_input", _refuse)
    monkeypatch.setattr(torch.nn.grad, "conv2d_weight", _refuse)
    g = torch.Generator().manual_seed(11)
    x = torch.randn(*xshape, generator=g).to(dtype).cuda().requires_grad_()
    w = torch.randn(xshape[1], 1, *rs, generator=g).to(dtype).cuda().requires_grad_()
    y = ct.depthwise_conv2d(x, w, stride=stride, padding=padding)
    dy = torch.randn(y.shape, generator=g).to(dtype).cuda()
    y.backward(dy)
    assert y.dtype == x.grad.dtype == w.grad.dtype == dtype
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    y64 = F.conv2d(x64, w64, stride=stride, padding=padding, groups=xshape[1])
    y64.backward(dy.double())
    assert _rel(y, y64) <= tol and _rel(x.grad, x64.grad) <= tol and _rel(w.grad, w64.grad) <= tol


@pytest.mark.gpu
@pytest.mark.parametrize("rank", [1, 2])
def test_inputs_at_an_odd_offset_run_on_a_copy(rank: int) -> None:
    """A contiguous view starting 4 bytes into its storage (x[1:] of a flat tensor) cannot feed the kernels'
    16-byte copies: the op copies it once instead of faulting, and the result is right."""
    shape = (4, 8, 64) if rank == 1 else (4, 8, 16, 20)
    flat = torch.randn(math.prod(shape) + 1, device="cuda")
    x = flat[1:].view(shape)
    assert x.data_ptr() % 16 == 4
    if rank == 1:
        w = torch.randn(8, 5, device="cuda")
        y, ref = ct.depthwise_conv1d(x, w), _ref1d(x.double(), w.double())
    else:
        w = torch.randn(8, 1, 3, 3, device="cuda")
        y = ct.depthwise_conv2d(x, w, padding=1)
        ref = F.conv2d(x.double(), w.double(), padding=1, groups=8)
    torch.cuda.synchronize()
    assert _rel(y, ref) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "tol"), HALF)
def test_16bit_shapes_without_a_16bit_kernel_run_the_reference(dtype, tol) -> None:
    """1-D with more than 64 taps meeting data: no 16-bit kernel (the fast variant keeps its taps in registers);
    the op runs PyTorch's formulas in that dtype instead of failing."""
    x = torch.randn(2, 3, 100, device="cuda").to(dtype).requires_grad_()
    w = torch.randn(3, 80, device="cuda").to(dtype).requires_grad_()
    y = ct.depthwise_conv1d(x, w)
    y.sum().backward()
    assert y.dtype == x.grad.dtype == w.grad.dtype == dtype
    assert _rel(y, _ref1d(x.detach().double(), w.detach().double())) <= 4 * tol  # PyTorch's own 16-bit kernel


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_16bit_weight_gradients_are_bitwise_repeatable(dtype) -> None:
    x1, w1 = torch.randn(16, 32, 96, device="cuda").to(dtype), torch.randn(32, 7, device="cuda").to(dtype)
    x2, w2 = torch.randn(8, 16, 30, 30, device="cuda").to(dtype), torch.randn(16, 1, 5, 5, device="cuda").to(dtype)
    dy1, dy2 = torch.randn_like(x1), torch.randn_like(x2)
    grads = []
    for _ in range(2):
        a, b = w1.clone().requires_grad_(), w2.clone().requires_grad_()
        torch.autograd.backward([ct.depthwise_conv1d(x1, a), ct.depthwise_conv2d(x2, b, padding=2)], [dy1, dy2])
        grads.append((a.grad, b.grad))
    assert all(torch.equal(u, v) for u, v in zip(*grads, strict=True))


@COMPILE_WARNINGS
@pytest.mark.gpu
def test_torch_compile_in_bfloat16() -> None:
    torch._dynamo.reset()
    block = _Block(8, 5).cuda().to(torch.bfloat16)
    x = torch.randn(4, 8, 32, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    eager = block(x)
    eager.float().sum().backward()
    eager_grads = [t.grad.clone() for t in (x, block.w, block.w2)]
    for t in (x, block.w, block.w2):
        t.grad = None
    out = torch.compile(block, fullgraph=True, backend="inductor")(x)
    # inductor fuses the elementwise ops in fp32 where eager rounds each to bfloat16: a few bfloat16 ulps apart
    assert out.dtype == torch.bfloat16 and _rel(out, eager) <= 2e-2
    out.float().sum().backward()
    for a, b in zip((x.grad, block.w.grad, block.w2.grad), eager_grads, strict=True):
        assert a.dtype == torch.bfloat16 and _rel(a, b) <= 2e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_16bit_cpu_tensors_run_the_reference(dtype) -> None:
    x = torch.randn(2, 3, 12).to(dtype).requires_grad_()
    w = torch.randn(3, 4).to(dtype).requires_grad_()
    y = ct.depthwise_conv1d(x, w)
    y.sum().backward()
    assert y.dtype == x.grad.dtype == w.grad.dtype == dtype
    assert _rel(y, _ref1d(x.detach().double(), w.detach().double())) <= 2e-2


def test_depthwise_conv2d_eager_hits_launch_the_kept_runner(monkeypatch) -> None:
    """The first eager call of a signature makes the forward's runner; later calls run it without the
    implementation's own lookup (with or without autograd), and clear_cache forgets it with the runners."""
    impl_calls: list[int] = []
    real = dw._fwd2_run
    monkeypatch.setattr(dw, "_fwd2_run", lambda *a: impl_calls.append(1) or real(*a))
    dw.clear_cache()
    x, w = torch.randn(2, 6, 9, 11, dtype=torch.float64), torch.randn(6, 1, 3, 3, dtype=torch.float64)
    want = torch.nn.functional.conv2d(x, w, stride=2, padding=1, groups=6)
    for _ in range(3):
        assert torch.allclose(ct.depthwise_conv2d(x, w, 2, 1), want, rtol=1e-12, atol=1e-12)
    wg = w.clone().requires_grad_()
    assert torch.allclose(ct.depthwise_conv2d(x, wg, 2, 1), want, rtol=1e-12, atol=1e-12)
    assert len(impl_calls) == 1
    dw.clear_cache()
    assert torch.allclose(ct.depthwise_conv2d(x, w, 2, 1), want, rtol=1e-12, atol=1e-12)
    assert len(impl_calls) == 2

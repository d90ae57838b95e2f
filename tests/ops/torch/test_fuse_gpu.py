"""``convtune.ops.torch.fuse`` on the GPU (needs a CUDA device): a small float32 model with conv-BN-ReLU, a ResNet
residual, MobileNetV2's ReLU6 / depthwise / linear-bottleneck residual and a conv with its own bias, fused against
the unfused model in true fp32 (cuDNN's TF32 off), the fused model captured in a CUDA graph and replayed with new
inputs, and bf16 under ``torch.autocast``. The CPU tests: tests/ops/torch/test_fuse.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn
ct = pytest.importorskip("convtune.ops.torch")
epilogue = pytest.importorskip("convtune.ops.torch.epilogue")


pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("strict_fp32")]


def _rel(a, b) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


class Net(nn.Module):
    def __init__(self, depthwise: bool = True) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.c3, self.b3 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.c4, self.b4 = nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32)
        self.c5 = nn.Conv2d(32, 32, 3, padding=1, groups=32 if depthwise else 1, bias=False)
        self.b5 = nn.BatchNorm2d(32)
        self.c6, self.b6 = nn.Conv2d(32, 16, 1, bias=False), nn.BatchNorm2d(16)
        self.c7 = nn.Conv2d(16, 8, 3, padding=1, bias=True)

    def forward(self, x):
        x = self.relu(self.b1(self.c1(x)))
        identity = x
        out = self.relu(self.b2(self.c2(x)))
        out = self.b3(self.c3(out))
        out += identity
        x = self.relu(out)
        h = F.relu6(self.b4(self.c4(x)))
        h = F.hardtanh(self.b5(self.c5(h)), 0.0, 6.0)
        x = x + self.b6(self.c6(h))
        return F.relu(self.c7(x))


EXPECTED = sorted([("c1", "relu", False), ("c2", "relu", False), ("c3", "relu", True), ("c4", "relu6", False),
                   ("c5", "relu6", False), ("c6", "none", True), ("c7", "relu", False)])


def _randomise_bn(model: nn.Module, seed: int, gamma_scale: float = 0.3) -> nn.Module:
    """Every BatchNorm's statistics and affine parameters drawn at random (fresh ones fold to near identity);
    the model on the GPU, in eval mode, frozen."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.3)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.randn(m.num_features, generator=g) * gamma_scale + 1)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.3)
    return model.cuda().eval().requires_grad_(False)


def _models(depthwise: bool = True):
    torch.manual_seed(0)
    model = _randomise_bn(Net(depthwise), 1)
    fused = ct.fuse(model)
    assert sorted(ct.fused(fused)) == EXPECTED
    assert not any(isinstance(m, nn.BatchNorm2d) for m in fused.modules())
    return model, fused


def _x(seed: int, shape=(2, 3, 20, 20)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator(device="cuda").manual_seed(seed), device="cuda")


def test_fused_matches_the_unfused_model_in_fp32(monkeypatch) -> None:
    model, fused = _models()
    kernel_calls = []
    real = epilogue._launch
    monkeypatch.setattr(epilogue, "_launch", lambda *a: kernel_calls.append(a[3]) or real(*a))
    for seed, shape in ((2, (2, 3, 20, 20)), (3, (1, 3, 13, 11))):
        x = _x(seed, shape)
        with torch.no_grad():
            ref, out = model(x), fused(x)
        torch.cuda.synchronize()
        assert out.shape == ref.shape and bool(torch.isfinite(out).all())
        assert _rel(out, ref) <= 1e-5, _rel(out, ref)
        assert float(ref.abs().max()) > 0.1
    assert len(kernel_calls) == 2 * len(EXPECTED)               # every epilogue on the kernel
    x = _x(4)
    assert _rel(fused(x), model(x)) <= 1e-5                      # grad mode on, parameters frozen


def test_fused_model_in_a_cuda_graph_replays() -> None:
    model, fused = _models()
    static_x = _x(5)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():              # warm-up (kernels chosen and compiled)
        for _ in range(3):
            fused(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_out = fused(static_x)
    for seed in (6, 7):
        x = _x(seed)
        static_x.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        with torch.no_grad():
            eager, ref = fused(x), model(x)
        assert bool(torch.isfinite(static_out).all())
        assert _rel(static_out, eager) <= 1e-6 and _rel(static_out, ref) <= 1e-5


@pytest.mark.parametrize("depthwise", [pytest.param(False, id="dense-only"),
                                       pytest.param(True, id="with-depthwise")])
def test_bf16_autocast_is_close_to_the_unfused_model_under_autocast(depthwise) -> None:
    model, fused = _models(depthwise)
    x = _x(8)
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
        ref, out = model(x), fused(x)
    torch.cuda.synchronize()
    with torch.no_grad():
        exact = model(x)
    assert bool(torch.isfinite(out.float()).all())
    assert _rel(out, ref) <= 2e-2, _rel(out, ref)
    assert out.dtype == ref.dtype == torch.bfloat16              # the last conv ran in bf16 in both
    assert _rel(out, exact) <= 2e-2 and _rel(ref, exact) <= 2e-2


@pytest.mark.parametrize("act", [nn.SiLU, nn.Hardswish, nn.Hardsigmoid, nn.Sigmoid], ids=lambda a: a.__name__)
def test_modern_activations_fused_on_the_gpu(act, monkeypatch) -> None:
    """conv → BN → SiLU (YOLO, EfficientNet), Hardswish (MobileNetV3), Hardsigmoid / Sigmoid (squeeze-excitation
    gates), dense and depthwise, against the unfused model in fp32, every epilogue on the kernel."""
    torch.manual_seed(8)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), act(),
                          nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16), act(),
                          nn.Conv2d(16, 8, 1, bias=True), act())
    model = _randomise_bn(model, 9, gamma_scale=1.0)
    fused = ct.fuse(model)
    name = {nn.SiLU: "silu", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.Sigmoid: "sigmoid"}[act]
    assert [a for _, a, _ in ct.fused(fused)] == [name] * 3
    launched = []
    real = epilogue._launch
    monkeypatch.setattr(epilogue, "_launch", lambda *a: launched.append(a[3]) or real(*a))
    x = _x(10, (2, 3, 18, 22)) * 3
    with torch.no_grad():
        ref, out = model(x), fused(x)
    torch.cuda.synchronize()
    assert bool(torch.isfinite(out).all()) and _rel(out, ref) <= 1e-5, _rel(out, ref)
    assert len(launched) == 3


def test_the_eager_hot_path_gives_the_general_paths_bits(monkeypatch) -> None:
    """The first call of a signature runs the general path, the next ones the kept runner and in-place launcher:
    bitwise the same output (same kernels, same configs), the general path not taken again."""
    import importlib

    fuse_module = importlib.import_module("convtune.ops.torch.fuse")
    model, fused = _models()
    x = _x(11)
    with torch.no_grad():
        first = fused(x).clone()
        general = []
        real = fuse_module.apply_bias_act
        monkeypatch.setattr(fuse_module, "apply_bias_act", lambda *a: general.append(1) or real(*a))
        second = fused(x)
        ref = model(x)
    torch.cuda.synchronize()
    assert general == [] and torch.equal(first, second)
    assert _rel(second, ref) <= 1e-5


@pytest.mark.parametrize("depthwise", [pytest.param(False, id="dense-only"),
                                       pytest.param(True, id="with-depthwise")])
def test_the_hot_path_under_bf16_autocast(depthwise, monkeypatch) -> None:
    """Under autocast the layers after the first get bfloat16 inputs: their second call takes the hot path with
    the weight's kept bf16 cast, bitwise the general path's output; the first layer (float32 input) keeps the
    general path, which casts."""
    import importlib

    fuse_module = importlib.import_module("convtune.ops.torch.fuse")
    _, fused = _models(depthwise)
    x = _x(12)
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
        first = fused(x).clone()
        general = []
        real = fuse_module.apply_bias_act
        monkeypatch.setattr(fuse_module, "apply_bias_act", lambda *a: general.append(1) or real(*a))
        second = fused(x)
    torch.cuda.synchronize()
    assert second.dtype == torch.bfloat16 and torch.equal(first, second)
    assert general == [1]   # only c1, whose input is float32

"""``convtune.ops.torch.conv2d`` and the ``nn.Conv2d`` drop-ins on the CPU (the reference path CI runs): forward
against float64, gradcheck, the op's schema/fake/autograd registration (``torch.library.opcheck``),
``torch.compile(fullgraph=True)``, how eager calls are routed, typed errors; ``convert`` / ``revert`` keep the
parameters and the state_dict. GPU tests of the same op on the kernels: tests/ops/torch/test_torch_dense_gpu.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
ct = pytest.importorskip("convtune.ops.torch")
dense = pytest.importorskip("convtune.ops.torch.dense")
nn = torch.nn

COMPILE_WARNINGS = pytest.mark.filterwarnings("ignore:.torch.jit.script_method. is deprecated:DeprecationWarning")
# _Net's asymmetric 'same' layer (it stays nn.Conv2d): PyTorch warns that it pads a copy of the input
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")
CASES = [
    pytest.param((2, 3, 9, 11), (4, 3, 3, 3), 1, 1, 1, True, id="3x3-bias"),
    pytest.param((1, 4, 12, 10), (6, 4, 5, 3), 2, (2, 1), 1, False, id="5x3-s2"),
    pytest.param((2, 2, 13, 13), (3, 2, 3, 3), 1, 2, 2, True, id="dilated"),
    pytest.param((1, 5, 7, 9), (2, 5, 1, 1), (2, 1), 0, 1, False, id="1x1-s2x1"),
    pytest.param((3, 3, 8, 8), (4, 3, 3, 3), 1, "same", 1, True, id="same"),
    pytest.param((1, 3, 8, 8), (4, 3, 3, 3), 1, "valid", 1, False, id="valid"),
]


def _rel(a, b) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


@pytest.mark.parametrize(("xs", "ws", "stride", "padding", "dilation", "with_bias"), CASES)
def test_forward_and_gradients_match_float64(xs, ws, stride, padding, dilation, with_bias) -> None:
    g = torch.Generator().manual_seed(3)
    x64, w64 = torch.randn(*xs, generator=g, dtype=torch.float64), torch.randn(*ws, generator=g, dtype=torch.float64)
    b64 = torch.randn(ws[0], generator=g, dtype=torch.float64) if with_bias else None
    x, w = x64.float().requires_grad_(), w64.float().requires_grad_()
    b = b64.float().requires_grad_() if with_bias else None
    y = ct.conv2d(x, w, b, stride, padding, dilation)
    ref = F.conv2d(x64.requires_grad_(), w64.requires_grad_(), b64.requires_grad_() if with_bias else None, stride,
                   padding, dilation)
    assert y.shape == ref.shape and _rel(y, ref) <= 1e-5
    dy = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    y.backward(dy.float())
    ref.backward(dy)
    assert _rel(x.grad, x64.grad) <= 1e-5 and _rel(w.grad, w64.grad) <= 1e-5
    if with_bias:
        assert _rel(b.grad, b64.grad) <= 1e-5


def test_gradcheck_float64() -> None:
    x = torch.randn(1, 2, 6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, c, d: ct.conv2d(a, c, d, stride=2, padding=1, dilation=1), (x, w, b))
    assert torch.autograd.gradcheck(lambda a, c: ct.conv2d(a, c, None, 1, 2, 2), (x, w))


def test_only_the_needed_gradients(monkeypatch) -> None:
    masks = []
    real = torch.ops.aten.convolution_backward

    class Spy:
        def __call__(self, *args):
            masks.append(tuple(args[-1]))
            return real(*args)

    monkeypatch.setattr(torch.ops.aten, "convolution_backward", Spy())
    x = torch.randn(1, 2, 6, 6)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    ct.conv2d(x, w, torch.randn(3), padding=1).sum().backward()
    assert masks == [(False, True, False)] and w.grad is not None


def test_opcheck_schema_fake_and_autograd() -> None:
    """torch.library.opcheck: the schema, the fake implementation against the real one, autograd registration."""
    x = torch.randn(2, 3, 8, 7, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    torch.library.opcheck(torch.ops.convtune.conv2d.default, (x, w, b, 2, 1, 1, 1, 1, 1))
    torch.library.opcheck(torch.ops.convtune.conv2d.default, (x.detach(), w.detach(), None, 1, 1, 0, 2, 2, 1))


def test_fake_tensors_give_the_output_shape() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, 3, 33, 31)
        w = torch.empty(8, 3, 5, 3)
        y = ct.conv2d(x, w, None, stride=(2, 1), padding=(2, 1), dilation=(1, 2))   # routed to the op
    assert tuple(y.shape) == tuple(F.conv2d(torch.empty(4, 3, 33, 31), torch.empty(8, 3, 5, 3), None, (2, 1), (2, 1),
                                            (1, 2)).shape)


@COMPILE_WARNINGS
def test_torch_compile_fullgraph_with_backward() -> None:
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 12, 11, generator=g).requires_grad_()
    w = torch.randn(5, 3, 3, 3, generator=g).requires_grad_()
    b = torch.randn(5, generator=g).requires_grad_()

    def f(a, c, d):
        return torch.tanh(ct.conv2d(a, c, d, stride=1, padding=1)).square().sum()

    eager = torch.autograd.grad(f(x, w, b), (x, w, b))
    compiled = torch.autograd.grad(torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, b), (x, w, b))
    for a, e in zip(compiled, eager, strict=True):
        assert a.shape == e.shape and _rel(a, e) <= 1e-5


@COMPILE_WARNINGS
def test_torch_compile_of_a_converted_model() -> None:
    torch._dynamo.reset()
    model = ct.convert(_Net())
    x = torch.randn(2, 8, 12, 12, requires_grad=True)
    eager = model(x)
    out = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    assert _rel(out, eager) <= 1e-5
    out.sum().backward()
    assert x.grad is not None and model.dense.weight.grad is not None and model.dw.weight.grad is not None


def test_eager_calls_skip_the_dispatcher(monkeypatch) -> None:
    """No grad needed → the implementation; grad needed → the autograd.Function; a mode active → the op."""
    routes = []
    real_impl, real_fn = dense._conv2d_impl, dense._conv2d_function
    monkeypatch.setattr(dense, "_conv2d_impl", lambda *a: routes.append("impl") or real_impl(*a))
    monkeypatch.setattr(dense, "_conv2d_function", lambda *a: routes.append("function") or real_fn(*a))
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    ct.conv2d(x, w)
    assert routes[0] == "impl"
    routes.clear()
    ct.conv2d(x, w.requires_grad_())
    assert routes[0] == "function"
    routes.clear()
    with torch.no_grad():
        ct.conv2d(x, w)
    assert routes[0] == "impl"
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            routes.append(str(func))
            return func(*args, **(kwargs or {}))

    routes.clear()
    with Passthrough():
        ct.conv2d(x, w.detach())
    assert any("convtune.conv2d" in r for r in routes)       # the mode saw the op


@pytest.mark.parametrize(("call", "field"), [
    (lambda: ct.conv2d(torch.zeros(2, 3, 8), torch.zeros(4, 3, 3, 3)), "x"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 2, 3, 3)), "w"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3, dtype=torch.float64)), "w"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3), torch.zeros(3)), "bias"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3), stride=0), "stride"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3), padding=-1), "padding"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3), padding="full"), "padding"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3), stride=2, padding="same"), "padding"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 2, 2), padding="same"), "padding"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3), dilation=(1, 0)), "dilation"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 2, 2), torch.zeros(4, 3, 3, 3)), "x"),
    (lambda: ct.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3), stride=(1, 2, 3)), "stride"),
], ids=["rank", "channels", "dtype", "bias", "stride", "padding", "padding-str", "same-strided", "same-even",
        "dilation", "empty", "stride-triple"])
def test_bad_arguments_name_the_field(call, field) -> None:
    from convtune.errors import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        call()
    assert exc.value.field == field


def test_plain_conv2d_refuses_cpu_tensors_by_name() -> None:
    import convtune
    from convtune.errors import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        convtune.conv2d(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3))
    assert exc.value.field == "x" and "CUDA" in str(exc.value)
    with pytest.raises(InvalidInput) as exc:
        convtune.conv2d(torch.zeros(1, 3, 8, 8), [[1.0]])
    assert exc.value.field == "w"


# ---- modules -----------------------------------------------------------------------------------------------------
class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Conv2d(8, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)
        self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=2)             # stays nn.Conv2d
        self.reflect = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")  # stays
        self.multiplier = nn.Conv2d(8, 16, 3, padding=1, groups=8)          # channel multiplier 2: stays
        self.same_even = nn.Conv2d(16, 4, 2, padding="same")                 # asymmetric 'same': stays
        self.same = nn.Conv2d(4, 4, 5, padding="same", dilation=2)
        self.dw_bias = nn.Conv2d(4, 4, 3, padding=1, groups=4)

    def forward(self, x):
        x = self.dw(self.dense(x))
        x = self.reflect(self.grouped(x))
        x = self.same_even(self.multiplier(x))
        return self.dw_bias(self.same(x))


def test_drop_in_modules_have_nn_conv2ds_parameters_and_state_dict() -> None:
    torch.manual_seed(0)
    ref = nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=True)
    torch.manual_seed(0)
    mine = ct.Conv2d(4, 6, 3, stride=2, padding=1, bias=True)
    assert list(mine.state_dict()) == list(ref.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(mine.state_dict().values(), ref.state_dict().values(), strict=True))
    x = torch.randn(2, 4, 9, 9)
    assert _rel(mine(x), ref(x)) <= 1e-6
    torch.manual_seed(1)
    dw_ref = nn.Conv2d(5, 5, 3, padding=1, groups=5)
    torch.manual_seed(1)
    dw_mine = ct.DepthwiseConv2d(5, 5, 3, padding=1, groups=5)
    x = torch.randn(2, 5, 8, 8)
    assert _rel(dw_mine(x), dw_ref(x)) <= 1e-6 and isinstance(dw_mine, nn.Conv2d)


def test_convert_round_trips_the_state_dict_and_the_outputs() -> None:
    torch.manual_seed(2)
    model = _Net()
    x = torch.randn(2, 8, 12, 12)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    y0 = model(x)
    assert ct.convert(model) is model
    assert dict(ct.converted(model)) == {"dense": "dense", "dw": "depthwise", "same": "dense",
                                         "dw_bias": "depthwise"}
    for name in ("grouped", "reflect", "multiplier", "same_even"):
        assert type(getattr(model, name)) is nn.Conv2d
    after = model.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[k], before[k]) for k in before)
    assert _rel(model(x), y0) <= 1e-5
    fresh = _Net()
    fresh.load_state_dict(after)                        # loads into an unconverted model, and back
    model.load_state_dict(fresh.state_dict())
    assert _rel(fresh(x), y0) <= 1e-5
    assert ct.revert(model) is model and ct.converted(model) == []
    assert all(type(m) is nn.Conv2d for m in model.modules() if isinstance(m, nn.Conv2d))
    assert _rel(model(x), y0) <= 1e-5


def test_convert_kinds_and_the_model_itself() -> None:
    model = _Net()
    ct.convert(model, depthwise=False)
    assert dict(ct.converted(model)) == {"dense": "dense", "same": "dense"}
    single = nn.Conv2d(3, 4, 3)
    assert type(ct.convert(single)) is ct.Conv2d

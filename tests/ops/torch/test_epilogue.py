"""``convtune.ops.torch.bias_act`` on the CPU (PyTorch's ops: the path gradcheck and CI exercise): the formula for
every activation with and without a residual, typed errors, gradcheck in float64, the ``convtune::bias_act``
operator's registration (``torch.library.opcheck``), ``torch.compile(fullgraph=True)``, and how eager calls are
routed. The CUDA kernel: tests/kernels/epilogue/test_bias_act_gpu.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
ct = pytest.importorskip("convtune.ops.torch")
epilogue = pytest.importorskip("convtune.ops.torch.epilogue")

from convtune.errors import InvalidInput  # noqa: E402

# torch.compile imports torch.utils.mkldnn, whose torch.jit.script_method warns (torch 2.11) under filterwarnings=error
COMPILE_WARNINGS = pytest.mark.filterwarnings("ignore:.torch.jit.script_method. is deprecated:DeprecationWarning")
ACTIVATIONS = ("none", "relu", "relu6", "silu", "hardswish", "hardsigmoid", "sigmoid")
CLAMPS = ("relu", "relu6")   # the activations whose outputs are clamped to [0, ∞) / [0, 6]
SHAPES = [(2, 13, 7, 7), (3, 24, 8, 12), (1, 5, 1, 1)]


def _formula(y, bias, residual, activation):
    """act(y + bias[k] (+ residual)) written out elementwise-free in float64."""
    z = y.double() + bias.double()[None, :, None, None]
    if residual is not None:
        z = z + residual.double()
    def clamp06(t):
        return torch.where(t > 6, torch.full_like(t, 6.0), torch.where(t > 0, t, torch.zeros_like(t)))

    return {"none": lambda: z, "relu": lambda: torch.where(z > 0, z, torch.zeros_like(z)), "relu6": lambda: clamp06(z),
            "silu": lambda: z / (1 + torch.exp(-z)), "hardswish": lambda: z * clamp06(z + 3) / 6,
            "hardsigmoid": lambda: clamp06(z + 3) / 6, "sigmoid": lambda: 1 / (1 + torch.exp(-z))}[activation]()


def _derivative(z, activation):
    """act'(z) in float64, PyTorch's derivative formulas (the tests keep z off the kinks)."""
    s = 1 / (1 + torch.exp(-z))
    return {"none": torch.ones_like(z), "relu": (z > 0).double(), "relu6": ((z > 0) & (z < 6)).double(),
            "silu": s * (1 + z * (1 - s)),
            "hardswish": torch.where(z < -3, 0.0, torch.where(z <= 3, z / 3 + 0.5, 1.0)),
            "hardsigmoid": ((z > -3) & (z < 3)).double() / 6, "sigmoid": s * (1 - s)}[activation]


def _inputs(shape, dtype, seed, scale=4.0):
    g = torch.Generator().manual_seed(seed)
    y = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + 2).to(dtype)
    bias = (torch.randn(shape[1], generator=g, dtype=torch.float64) * scale).to(dtype)
    res = (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)
    return y, bias, res


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("with_residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_cpu_matches_the_formula(shape, activation, with_residual, dtype) -> None:
    y, bias, res = _inputs(shape, dtype, seed=sum(shape))
    residual = res if with_residual else None
    y_before = y.clone()
    out = ct.bias_act(y, bias, residual, activation)
    ref = _formula(y, bias, residual, activation)
    assert out.shape == y.shape and out.dtype == dtype and out.data_ptr() != y.data_ptr()
    tol = 1e-15 if dtype == torch.float64 else 1e-6
    assert float((out.double() - ref).abs().max()) <= tol * float(ref.abs().max())
    assert torch.equal(y, y_before)                              # y untouched out of place
    if activation in CLAMPS:
        assert bool((out >= 0).all()) and (activation == "relu" or bool((out <= 6).all()))
    if activation in CLAMPS and out.numel() > 100:       # the clamps were reached
        assert bool((out == 0).any()) and (activation == "relu" or bool((out == 6).any()))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_inplace_on_cpu_still_returns_the_result(activation) -> None:
    y, bias, res = _inputs((2, 3, 4, 5), torch.float32, seed=1)
    ref = _formula(y, bias, res, activation)
    out = ct.bias_act(y, bias, res, activation, inplace=True)
    assert float((out.double() - ref).abs().max()) <= 1e-6 * float(ref.abs().max())


def test_bias_of_another_dtype_is_rounded_once_to_ys() -> None:
    y, _, _ = _inputs((2, 3, 4, 4), torch.float32, seed=2)
    bias = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)
    out = ct.bias_act(y, bias, None, "none")
    assert out.dtype == torch.float32
    assert torch.equal(out, (y.double() + bias.view(1, -1, 1, 1)).float())


def test_default_activation_is_none() -> None:
    y, bias, _ = _inputs((1, 4, 2, 3), torch.float64, seed=3)
    assert torch.equal(ct.bias_act(y, bias), y + bias.view(1, -1, 1, 1))
    assert epilogue.ACTIVATIONS == ACTIVATIONS


@pytest.mark.parametrize(("call", "field"), [
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(2), None, "gelu"), "activation",
                 id="gelu"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(2), None, "hardtanh"), "activation",
                 id="hardtanh"),
    pytest.param(lambda: ct.bias_act(torch.zeros(2, 3, 3), torch.zeros(2)), "y", id="y-rank-3"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3, 1), torch.zeros(2)), "y", id="y-rank-5"),
    pytest.param(lambda: ct.bias_act([[1.0]], torch.zeros(2)), "y", id="y-list"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(3)), "bias", id="bias-length"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(1, 2)), "bias", id="bias-rank"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), [0.0, 0.0]), "bias", id="bias-list"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(2, device="meta")), "bias",
                 id="bias-device"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(2), torch.zeros(1, 2, 3, 4)),
                 "residual", id="residual-shape"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(2), torch.zeros(1, 2, 1, 1)),
                 "residual", id="residual-broadcast"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(2), 1.0), "residual",
                 id="residual-scalar"),
    pytest.param(lambda: ct.bias_act(torch.zeros(1, 2, 3, 3), torch.zeros(2), torch.zeros(1, 2, 3, 3, device="meta")),
                 "residual", id="residual-device"),
])
def test_bad_arguments_name_the_field(call, field) -> None:
    with pytest.raises(InvalidInput) as exc:
        call()
    assert exc.value.field == field


# ---- autograd -----------------------------------------------------------------------------------------------------
def _away_from_kinks(t: torch.Tensor) -> torch.Tensor:
    """Move values within 0.2 of the activations' kinks (−3, 0, 3 and 6) out of reach of gradcheck's finite
    differences."""
    for kink in (-3.0, 0.0, 3.0, 6.0):
        t = torch.where(((t - kink).abs() < 0.2), t + torch.where(t >= kink, 0.4, -0.4), t)
    return t


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("with_residual", [False, True], ids=["plain", "residual"])
def test_gradcheck_float64(activation, with_residual) -> None:
    g = torch.Generator().manual_seed(11)
    shape = (2, 3, 3, 4)
    bias = torch.randn(3, generator=g, dtype=torch.float64) * 2
    res = torch.randn(shape, generator=g, dtype=torch.float64) * 2 if with_residual else None
    raw = torch.randn(shape, generator=g, dtype=torch.float64) * 4 + 3
    # choose y so that z = y + bias + res sits away from the kinks: gradcheck perturbs by 1e-6
    base = bias.view(1, -1, 1, 1) + (res if res is not None else 0)
    z = _away_from_kinks(raw)
    assert all(float((z - kink).abs().min()) > 0.1 for kink in (-3.0, 0.0, 3.0, 6.0))
    y = (z - base).requires_grad_()
    bias.requires_grad_()
    if res is not None:
        res.requires_grad_()
    if activation != "none":                                  # both sides of each kink are exercised
        assert bool((z < 0).any()) and bool((z > 0).any())
    if activation == "relu6":
        assert bool((z > 6).any())
    args = (y, bias) if res is None else (y, bias, res)

    def f(*a):
        return ct.bias_act(a[0], a[1], a[2] if len(a) > 2 else None, activation)

    assert torch.autograd.gradcheck(f, args)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradients_are_the_upstream_times_the_derivative(activation) -> None:
    y, bias, res = _inputs((2, 4, 3, 5), torch.float64, seed=5)
    y, bias, res = (t.requires_grad_() for t in (y, bias, res))
    out = ct.bias_act(y, bias, res, activation)
    dz = torch.randn_like(out)
    out.backward(dz)
    z = _formula(y.detach(), bias.detach(), res.detach(), "none")
    expected = dz * _derivative(z, activation)
    exact = 0 if activation in (*CLAMPS, "none") else 1e-14   # masks are exact; the smooth ones are computed
    assert torch.allclose(y.grad, expected, rtol=exact, atol=exact)
    assert torch.allclose(res.grad, expected, rtol=exact, atol=exact)
    assert torch.allclose(bias.grad, expected.sum((0, 2, 3)), rtol=1e-13, atol=1e-13)


def test_only_needed_gradients() -> None:
    y, bias, res = _inputs((1, 3, 2, 2), torch.float64, seed=6)
    b = bias.clone().requires_grad_()
    ct.bias_act(y, b, res, "relu").sum().backward()
    assert b.grad is not None and y.grad is None and res.grad is None
    r = res.clone().requires_grad_()
    ct.bias_act(y, bias, r, "none").sum().backward()
    assert torch.equal(r.grad, torch.ones_like(r))


def test_float32_bias_gradient_with_float64_y_keeps_the_bias_dtype() -> None:
    y, _, _ = _inputs((2, 3, 2, 2), torch.float64, seed=7)
    bias = torch.zeros(3, dtype=torch.float32, requires_grad=True)
    out = ct.bias_act(y, bias, None, "none")
    assert out.dtype == torch.float64
    out.sum().backward()
    assert bias.grad.dtype == torch.float32 and torch.equal(bias.grad, torch.full((3,), 8.0))


# ---- the operator ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_residual", [False, True], ids=["plain", "residual"])
def test_opcheck_schema_fake_and_autograd(with_residual) -> None:
    y, bias, res = _inputs((2, 5, 3, 4), torch.float32, seed=8)
    y.requires_grad_()
    bias.requires_grad_()
    residual = res.requires_grad_() if with_residual else None
    for code in range(len(ACTIVATIONS)):
        torch.library.opcheck(torch.ops.convtune.bias_act.default, (y, bias, residual, code))
    torch.library.opcheck(torch.ops.convtune.bias_act.default, (y.detach(), bias.detach(), None, 2))


def test_the_operator_computes_the_formula() -> None:
    y, bias, res = _inputs((2, 5, 3, 4), torch.float64, seed=9)
    for code, name in enumerate(ACTIVATIONS):
        out = torch.ops.convtune.bias_act(y, bias, res, code)
        assert torch.allclose(out, _formula(y, bias, res, name), rtol=1e-15, atol=1e-14), name


def test_fake_tensors_give_the_shape_and_dtype() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        y = torch.empty(3, 7, 5, 9, dtype=torch.float64)
        out = ct.bias_act(y, torch.empty(7, dtype=torch.float64), torch.empty(3, 7, 5, 9, dtype=torch.float64),
                          "relu6")
        assert tuple(out.shape) == (3, 7, 5, 9) and out.dtype == torch.float64


def test_eager_calls_skip_the_dispatcher_unless_needed(monkeypatch) -> None:
    routes = []
    real = epilogue._bias_act_op
    monkeypatch.setattr(epilogue, "_bias_act_op", lambda *a: routes.append("op") or real(*a))
    y, bias, res = _inputs((1, 3, 2, 2), torch.float32, seed=10)
    ct.bias_act(y, bias, res, "relu")
    assert routes == []
    ct.bias_act(y, bias.clone().requires_grad_(), res, "relu")
    assert routes == ["op"]
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Passthrough():
        out = ct.bias_act(y, bias, res, "relu6")
    assert routes == ["op", "op"] and any("convtune.bias_act" in s for s in seen)
    assert torch.allclose(out.double(), _formula(y, bias, res, "relu6"), rtol=1e-6, atol=1e-6)


@COMPILE_WARNINGS
def test_torch_compile_fullgraph_matches_eager() -> None:
    torch._dynamo.reset()
    y, bias, res = _inputs((2, 6, 5, 4), torch.float32, seed=12)
    y.requires_grad_()
    bias.requires_grad_()

    def f(a, b, r):
        return ct.bias_act(a * 0.5, b, r, "relu6").square().sum() + ct.bias_act(a, b, None, "relu").sum()

    eager = f(y, bias, res)
    grads_eager = torch.autograd.grad(eager, (y, bias))
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(y, bias, res)
    grads = torch.autograd.grad(compiled, (y, bias))
    assert torch.allclose(compiled, eager, rtol=1e-6)
    for a, e in zip(grads, grads_eager, strict=True):
        assert a.shape == e.shape and torch.allclose(a, e, rtol=1e-6, atol=1e-6)

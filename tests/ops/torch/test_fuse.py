"""``convtune.ops.torch.fuse`` on the CPU in float64 (tight comparisons): which chains become :class:`FusedConv2d`
(conv → BatchNorm → [+ other] → ReLU / ReLU6 / hardtanh(0, 6) / SiLU / Hardswish / Hardsigmoid / Sigmoid in module,
functional and method forms, conv with
its own bias → ReLU, depthwise and grouped convolutions) and which are left alone (a conv called twice, BatchNorm
without running statistics); outputs against the original model, the original left unchanged, the state_dict's
names, BatchNorm folding against a direct computation, typed errors, convtune's drop-in modules, and what
``ct.tune`` sees. GPU: tests/ops/torch/test_fuse_gpu.py."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
nn = torch.nn
ct = pytest.importorskip("convtune.ops.torch")
fuse_mod = pytest.importorskip("convtune.ops.torch.fuse")

from convtune.errors import InvalidInput  # noqa: E402

C = 8


def stochastic_depth(input, p, mode, training=True):
    """Stands in for torchvision's (not installed here): the identity unless training (then a deterministic
    scaling here, so outputs compare); wrapped for torch.fx as torchvision wraps its own, so traces keep the call."""
    return input if not training or p == 0.0 else input * (1 - p)


stochastic_depth.__module__ = "torchvision.ops.stochastic_depth"
torch.fx.wrap("stochastic_depth")


def _randomise_bn(bn: nn.BatchNorm2d, g: torch.Generator) -> None:
    """Running statistics and affine parameters far from the defaults (0, 1, 1, 0)."""
    with torch.no_grad():
        if bn.running_mean is not None:
            bn.running_mean.copy_(torch.randn(bn.num_features, generator=g, dtype=torch.float64) * 0.5)
            bn.running_var.copy_(torch.rand(bn.num_features, generator=g, dtype=torch.float64) * 1.5 + 0.25)
        if bn.weight is not None:
            bn.weight.copy_(torch.randn(bn.num_features, generator=g, dtype=torch.float64) * 0.5 + 1)
            bn.bias.copy_(torch.randn(bn.num_features, generator=g, dtype=torch.float64) * 0.5)


class Net(nn.Module):
    """Every chain fuse() handles and a few it must leave alone (comments: what fused() should list)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.b1, self.r1 = nn.Conv2d(3, C, 3, padding=1, bias=False), nn.BatchNorm2d(C), nn.ReLU(True)
        # ResNet basic block: conv-BN-ReLU, conv-BN, out += identity, ReLU
        self.c2, self.b2 = nn.Conv2d(C, C, 3, padding=1, bias=False), nn.BatchNorm2d(C)
        self.c3, self.b3 = nn.Conv2d(C, C, 3, padding=1, bias=False), nn.BatchNorm2d(C)
        self.relu = nn.ReLU(inplace=True)                 # shared by two call sites, as torchvision does
        # MobileNetV2: x + BN(conv(x)) (the chain the second operand), no activation
        self.c4, self.b4 = nn.Conv2d(C, C, 1, bias=False), nn.BatchNorm2d(C)
        self.c5, self.b5, self.r5 = nn.Conv2d(C, C, 3, padding=1, bias=False), nn.BatchNorm2d(C), nn.ReLU6(True)
        self.c6, self.b6 = nn.Conv2d(C, C, 3, stride=2, padding=1, groups=C, bias=False), nn.BatchNorm2d(C)  # dw
        self.c7, self.b7 = nn.Conv2d(C, C, 1, bias=True), nn.BatchNorm2d(C)      # conv bias folded too
        self.c8 = nn.Conv2d(C, C, 3, padding=1, bias=True)                       # VGG: conv(bias) → ReLU
        self.c9, self.b9 = nn.Conv2d(C, C, 3, padding=1, groups=2, bias=False), nn.BatchNorm2d(C)  # grouped
        self.c10, self.b10 = nn.Conv2d(C, C, 1, bias=False), nn.BatchNorm2d(C)   # called twice: left alone
        self.c11 = nn.Conv2d(C, C, 3, padding=1, bias=False)
        self.b11 = nn.BatchNorm2d(C, track_running_stats=False)                  # batch statistics: left alone
        self.c12, self.b12 = nn.Conv2d(C, C, 1, bias=False), nn.BatchNorm2d(C)   # + a (1, C, 1, 1) buffer
        self.c13, self.b13 = nn.Conv2d(C, C, 3, padding=1, bias=False), nn.BatchNorm2d(C)  # .relu() method
        self.c14 = nn.Conv2d(C, C, 3, padding=1, bias=False)                     # no BN: F.relu6
        self.register_buffer("shift", torch.randn(1, C, 1, 1))

    def forward(self, x):
        x = self.r1(self.b1(self.c1(x)))                                   # c1 relu
        identity = x
        out = self.relu(self.b2(self.c2(x)))                               # c2 relu
        out = self.b3(self.c3(out))
        out += identity
        x = self.relu(out)                                                 # c3 relu + residual
        x = x + self.b4(self.c4(x))                                        # c4 none + residual
        x = self.r5(self.b5(self.c5(x)))                                   # c5 relu6
        x = F.hardtanh(self.b6(self.c6(x)), 0.0, 6.0)                      # c6 relu6 (depthwise)
        x = torch.relu(self.b7(self.c7(x)))                                # c7 relu
        x = F.relu(self.c8(x))                                             # c8 relu (own bias)
        x = F.relu(self.b9(self.c9(x)), inplace=True)                      # c9 relu (grouped)
        y = self.c10(x)
        x = F.relu(self.b10(y)) + self.c10(x)                              # c10 twice: no
        x = F.relu(self.b11(self.c11(x)))                                  # b11 unfoldable: no
        x = F.relu(self.b12(self.c12(x)) + self.shift)                     # c12 relu + broadcast residual
        x = self.b13(self.c13(x)).relu()                                   # c13 relu
        return F.relu6(self.c14(x))                                        # c14 relu6


EXPECTED = sorted([("c1", "relu", False), ("c2", "relu", False), ("c3", "relu", True), ("c4", "none", True),
                   ("c5", "relu6", False), ("c6", "relu6", False), ("c7", "relu", False), ("c8", "relu", False),
                   ("c9", "relu", False), ("c12", "relu", True), ("c13", "relu", False), ("c14", "relu6", False)])
FOLDED_BN = {"b1", "b2", "b3", "b4", "b5", "b6", "b7", "b9", "b12", "b13"}


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = Net().double()
    g = torch.Generator().manual_seed(seed + 100)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            _randomise_bn(m, g)
    return model.eval()


def _x(seed: int = 1, shape=(2, 3, 12, 10)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-10) -> bool:
    scale = max(1.0, float(b.detach().abs().max()))
    return a.shape == b.shape and float((a.detach() - b.detach()).abs().max()) <= tol * scale


@pytest.fixture(scope="module")
def model_and_fused():
    model = _net()
    return model, ct.fuse(model)


def test_fused_lists_exactly_the_expected_chains(model_and_fused) -> None:
    _, g = model_and_fused
    assert isinstance(g, torch.fx.GraphModule)
    assert sorted(ct.fused(g)) == EXPECTED


def test_no_batch_norm_is_left_but_the_unfoldable_ones(model_and_fused) -> None:
    _, g = model_and_fused
    bns = {name for name, m in g.named_modules() if isinstance(m, nn.BatchNorm2d)}
    assert bns == {"b10", "b11"}                          # after the shared conv; without running statistics
    convs = {name: type(m) for name, m in g.named_modules() if isinstance(m, nn.Conv2d)}
    assert convs.pop("c10") is nn.Conv2d and convs.pop("c11") is nn.Conv2d
    assert set(convs.values()) == {ct.FusedConv2d}
    calls = [n.target for n in g.graph.nodes if n.op == "call_module"]
    assert calls.count("c10") == 2 and not set(calls) & FOLDED_BN


def test_outputs_match_the_original_in_float64(model_and_fused) -> None:
    model, g = model_and_fused
    for seed, shape in ((1, (2, 3, 12, 10)), (2, (1, 3, 7, 9))):
        x = _x(seed, shape)
        with torch.no_grad():
            ref, out = model(x), g(x)
        assert _close(out, ref), float((out - ref).abs().max())
        assert float(ref.abs().max()) > 0.1                 # not vacuous
    x = _x(3)
    assert _close(g(x), model(x))                           # with autograd on (parameters require grad)


def test_the_original_model_is_unchanged() -> None:
    model = _net(seed=4)
    state = copy.deepcopy(model.state_dict())
    x = _x(5)
    with torch.no_grad():
        before = model(x)
    g = ct.fuse(model)
    assert g is not model and not model.training
    with torch.no_grad():
        assert torch.equal(model(x), before)
    after = model.state_dict()
    assert list(after) == list(state) and all(torch.equal(after[k], state[k]) for k in state)
    assert {n for n, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)} >= FOLDED_BN
    assert not any(isinstance(m, ct.FusedConv2d) for m in model.modules()) and ct.fused(model) == []
    assert g.c1.weight.data_ptr() != model.c1.weight.data_ptr()


def test_state_dict_keeps_the_fused_convs_names(model_and_fused) -> None:
    model, g = model_and_fused
    keys = set(g.state_dict())
    for name, _, _ in EXPECTED:
        assert f"{name}.weight" in keys and f"{name}.bias" in keys
    for bn in FOLDED_BN:
        assert not any(k.startswith(f"{bn}.") for k in keys), bn
    assert "b10.running_mean" in keys and "c10.weight" in keys and "c10.bias" not in keys
    assert "b1.running_mean" not in keys and "c1.weight" in keys
    assert g.c1.weight.shape == model.c1.weight.shape and g.c6.weight.shape == (C, 1, 3, 3)
    assert "shift" in keys


def test_fused_conv_is_an_nn_conv2d_with_the_original_attributes(model_and_fused) -> None:
    model, g = model_and_fused
    for name, activation, _ in EXPECTED:
        fused, orig = g.get_submodule(name), model.get_submodule(name)
        assert isinstance(fused, nn.Conv2d) and isinstance(fused, ct.FusedConv2d)
        assert fused.activation == activation and fused.bias is not None and fused.use_convtune
        for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
                     "padding_mode"):
            assert getattr(fused, attr) == getattr(orig, attr), (name, attr)
        assert f"activation={activation}" in repr(fused)
    assert g.c6.groups == C and g.c9.groups == 2


def test_what_tune_sees_of_a_fused_model() -> None:
    from convtune.ops.torch.tune_model import collect_layers

    model = _net(seed=6).float()
    g = ct.fuse(model)
    layers = collect_layers(g, _x(7).float())
    kinds = {layer.name: layer.kind for layer in layers}
    assert {name for name, _, _ in EXPECTED} <= set(kinds)
    assert kinds["c1"] == "dense" and kinds["c6"] == "depthwise" and kinds["c9"] == "pytorch"
    assert [layer.name for layer in layers].count("c10") == 2


def test_grouped_fused_conv_runs_pytorch_and_the_dense_ones_convtune(monkeypatch, model_and_fused) -> None:
    _, g = model_and_fused
    called = []
    real_dense, real_dw = fuse_mod.conv2d, fuse_mod.depthwise_conv2d
    monkeypatch.setattr(fuse_mod, "conv2d", lambda *a, **k: called.append("dense") or real_dense(*a, **k))
    monkeypatch.setattr(fuse_mod, "depthwise_conv2d", lambda *a, **k: called.append("dw") or real_dw(*a, **k))
    x = torch.randn(1, C, 6, 6, dtype=torch.float64)
    with torch.no_grad():
        g.c9(x)
        assert called == []
        g.c1(torch.randn(1, 3, 6, 6, dtype=torch.float64))
        g.c6(x)
    assert called == ["dense", "dw"]


def test_use_convtune_false_gives_the_same_result(model_and_fused) -> None:
    _, g = model_and_fused
    x = _x(8)
    with torch.no_grad():
        ref = g(x)
        g2 = copy.deepcopy(g)
        for m in g2.modules():
            if isinstance(m, ct.FusedConv2d):
                m.use_convtune = False
        assert _close(g2(x), ref, 1e-12)


def test_fusing_a_fused_model_changes_nothing(model_and_fused) -> None:
    _, g = model_and_fused
    again = ct.fuse(g)
    assert sorted(ct.fused(again)) == EXPECTED
    x = _x(9)
    with torch.no_grad():
        assert torch.equal(again(x), g(x))


# ---- chains one at a time --------------------------------------------------------------------------------------
class _Chain(nn.Module):
    def __init__(self, tail, bn=True, conv_bias=False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1, bias=conv_bias)
        self.bn = nn.BatchNorm2d(6) if bn else None
        self.tail = tail

    def forward(self, x):
        y = self.conv(x)
        return self.tail(y if self.bn is None else self.bn(y), x)


def _pad(x):
    return F.pad(x, (0, 0, 0, 0, 0, 2))                   # 4 → 6 channels: an identity of the conv's shape


@pytest.mark.parametrize(("tail", "bn", "expected"), [
    pytest.param(lambda y, x: F.hardtanh(y, min_val=0.0, max_val=6.0), True, [("conv", "relu6", False)],
                 id="hardtanh-kwargs"),
    pytest.param(lambda y, x: F.hardtanh(y), True, [("conv", "none", False)], id="hardtanh-default-is-not-relu6"),
    pytest.param(lambda y, x: F.hardtanh(y, 0.0, 5.0), True, [("conv", "none", False)], id="hardtanh-0-5"),
    pytest.param(lambda y, x: F.relu6(y), True, [("conv", "relu6", False)], id="F.relu6"),
    pytest.param(lambda y, x: torch.relu_(y), True, [("conv", "relu", False)], id="torch.relu_"),
    pytest.param(lambda y, x: F.leaky_relu(y), True, [("conv", "none", False)], id="leaky-relu-not-fused"),
    pytest.param(lambda y, x: torch.sigmoid(y), False, [("conv", "sigmoid", False)], id="no-bn-sigmoid"),
    pytest.param(lambda y, x: stochastic_depth(y, 0.2, "row", False) + _pad(x), True, [("conv", "none", True)],
                 id="efficientnet-stochastic-depth-eval-then-add"),
    pytest.param(lambda y, x: stochastic_depth(y, 0.2, "row", training=True) + _pad(x), True,
                 [("conv", "none", False)], id="stochastic-depth-training-kept"),
    pytest.param(lambda y, x: F.relu(F.dropout(y, 0.5, training=False) + _pad(x)), True, [("conv", "relu", True)],
                 id="dropout-eval-then-add-relu"),
    pytest.param(lambda y, x: F.silu(F.dropout(y, 0.5, False)), True, [("conv", "silu", False)],
                 id="dropout-eval-positional-then-silu"),
    pytest.param(lambda y, x: F.silu(y), True, [("conv", "silu", False)], id="F.silu"),
    pytest.param(lambda y, x: F.silu(y, inplace=True), True, [("conv", "silu", False)], id="F.silu-inplace"),
    pytest.param(lambda y, x: F.hardswish(y + _pad(x)), True, [("conv", "hardswish", True)], id="residual-hardswish"),
    pytest.param(lambda y, x: F.hardsigmoid(y), False, [("conv", "hardsigmoid", False)], id="no-bn-hardsigmoid"),
    pytest.param(lambda y, x: y.sigmoid(), True, [("conv", "sigmoid", False)], id="method-sigmoid"),
    pytest.param(lambda y, x: F.gelu(y), True, [("conv", "none", False)], id="gelu-not-fused"),
    pytest.param(lambda y, x: y * torch.sigmoid(y), True, [("conv", "none", False)], id="hand-written-silu-not-fused"),
    pytest.param(lambda y, x: _pad(x) + y, True, [("conv", "none", True)], id="other-first"),
    pytest.param(lambda y, x: torch.add(y, _pad(x)), True, [("conv", "none", True)], id="torch.add"),
    pytest.param(lambda y, x: torch.add(y, _pad(x), alpha=2.0), True, [("conv", "none", False)],
                 id="torch.add-alpha-not-fused"),
    pytest.param(lambda y, x: y.add_(_pad(x)).relu_(), True, [("conv", "relu", True)], id="add_-relu_"),
    pytest.param(lambda y, x: F.relu(y + y), True, [("conv", "none", False)], id="y+y-not-a-residual"),
    pytest.param(lambda y, x: F.relu(y) + y, True, [("conv", "none", False)], id="bn-with-two-users-ends-the-chain"),
    pytest.param(lambda y, x: F.relu(y * 2.0), True, [("conv", "none", False)], id="scaled"),
    pytest.param(lambda y, x: F.relu(y + _pad(x)) * 0.5, False, [("conv", "relu", True)], id="no-bn-residual-relu"),
])
def test_single_chains(tail, bn, expected) -> None:
    torch.manual_seed(3)
    model = _Chain(tail, bn=bn, conv_bias=not bn).double().eval()
    if bn:
        _randomise_bn(model.bn, torch.Generator().manual_seed(4))
    g = ct.fuse(model)
    assert ct.fused(g) == expected
    x = _x(10, (2, 4, 5, 6))
    with torch.no_grad():
        assert _close(g(x), model(x))


def test_chain_with_an_affine_free_batch_norm() -> None:
    torch.manual_seed(5)
    model = _Chain(lambda y, x: F.relu(y), bn=True).double().eval()
    model.bn = nn.BatchNorm2d(6, affine=False).double().eval()
    _randomise_bn(model.bn, torch.Generator().manual_seed(6))
    g = ct.fuse(model)
    assert ct.fused(g) == [("conv", "relu", False)]
    x = _x(11, (2, 4, 5, 6))
    with torch.no_grad():
        assert _close(g(x), model(x))


def test_a_training_submodule_batch_norm_is_not_folded() -> None:
    model = _Chain(lambda y, x: F.relu(y)).double().eval()
    model.bn.train()
    g = ct.fuse(model)
    assert ct.fused(g) == [] and isinstance(g.bn, nn.BatchNorm2d)


def test_a_conv_subclass_with_its_own_forward_is_left_alone() -> None:
    class Scaled(nn.Conv2d):
        def forward(self, x):
            return super().forward(x) * 2

    model = _Chain(lambda y, x: F.relu(y)).double().eval()
    model.conv = Scaled(4, 6, 3, padding=1, bias=False).double()
    g = ct.fuse(model)
    x = _x(12, (1, 4, 5, 5))
    assert ct.fused(g) == [] and isinstance(g.bn, nn.BatchNorm2d)
    with torch.no_grad():
        assert torch.equal(g(x), model(x))


# ---- errors ---------------------------------------------------------------------------------------------------------
def test_training_mode_is_refused() -> None:
    model = _net().train()
    with pytest.raises(InvalidInput) as exc:
        ct.fuse(model)
    assert exc.value.field == "model" and "eval" in str(exc.value)


def test_an_untraceable_model_is_refused() -> None:
    class Branchy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x):
            if x.sum() > 0:
                return F.relu(self.bn(self.conv(x)))
            return self.conv(x)

    with pytest.raises(InvalidInput) as exc:
        ct.fuse(Branchy().eval())
    assert exc.value.field == "model" and "torch.fx" in str(exc.value)


def test_a_non_module_is_refused() -> None:
    with pytest.raises(InvalidInput) as exc:
        ct.fuse(lambda x: x)
    assert exc.value.field == "model"


# ---- folding ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("conv_bias", [False, True], ids=["no-bias", "bias"])
def test_fold_batch_norm_against_a_direct_computation(conv_bias) -> None:
    torch.manual_seed(7)
    conv = nn.Conv2d(3, 5, 3, padding=1, bias=conv_bias).double()
    bn = nn.BatchNorm2d(5, eps=1e-3).double().eval()
    _randomise_bn(bn, torch.Generator().manual_seed(8))
    w, b = fuse_mod.fold_batch_norm(conv, bn)
    scale = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
    conv_b = conv.bias.detach() if conv_bias else torch.zeros(5, dtype=torch.float64)
    assert torch.allclose(w, conv.weight.detach() * scale.view(-1, 1, 1, 1), rtol=1e-15, atol=0)
    assert torch.allclose(b, (conv_b - bn.running_mean) * scale + bn.bias.detach(), rtol=1e-14, atol=1e-15)
    assert w.dtype == b.dtype == torch.float64 and not w.requires_grad and not b.requires_grad
    x = _x(13, (2, 3, 6, 7))
    with torch.no_grad():
        assert _close(F.conv2d(x, w, b, padding=1), bn(conv(x)), 1e-13)
    w0, b0 = fuse_mod.fold_batch_norm(conv, None)          # no BatchNorm: the conv's own
    assert torch.equal(w0, conv.weight) and torch.equal(b0, conv_b)


def test_fold_batch_norm_keeps_the_weights_dtype() -> None:
    conv = nn.Conv2d(3, 4, 1, bias=False).float()
    bn = nn.BatchNorm2d(4).eval()
    _randomise_bn(bn, torch.Generator().manual_seed(9))
    w, b = fuse_mod.fold_batch_norm(conv, bn)
    assert w.dtype == b.dtype == torch.float32
    ref_w = (conv.weight.detach().double() * (bn.weight.detach().double()
                                              / torch.sqrt(bn.running_var.double() + bn.eps)).view(-1, 1, 1, 1))
    assert torch.equal(w, ref_w.float())                   # computed in float64, rounded once


# ---- convtune's drop-in modules --------------------------------------------------------------------------------------
def test_a_converted_model_fuses_the_same_way() -> None:
    model = _net(seed=10)
    x = _x(14)
    with torch.no_grad():
        ref = model(x)
    converted = ct.convert(copy.deepcopy(model))
    kinds = dict(ct.converted(converted))
    assert kinds["c1"] == "dense" and kinds["c6"] == "depthwise" and "c9" not in kinds
    g = ct.fuse(converted)
    assert sorted(ct.fused(g)) == EXPECTED
    assert {n for n, m in g.named_modules() if isinstance(m, nn.BatchNorm2d)} == {"b10", "b11"}
    with torch.no_grad():
        assert _close(g(x), ref)
    assert type(g.get_submodule("c10")) is ct.Conv2d        # the shared conv stays convtune's drop-in


def test_fused_on_a_plain_module_reports_no_residuals() -> None:
    model = _net(seed=11)
    g = ct.fuse(model)
    holder = nn.Module()
    holder.inner = g
    assert sorted((n.removeprefix("inner."), a, r) for n, a, r in ct.fused(holder)) == sorted(
        (n, a, False) for n, a, _ in EXPECTED)


class _ReadsItsWeight(nn.Module):
    """A forward that also reads a conv's weight (a get_attr node: that conv is not fused) and a BatchNorm's running
    mean (torch.fx bakes a buffer read into a constant at trace time: that chain fuses and the constant is right)."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.b = nn.BatchNorm2d(4)
        self.c2 = nn.Conv2d(4, 4, 1, bias=False)
        self.b2 = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b(self.c(x))) + self.c.weight.sum()
        return F.relu(self.b2(self.c2(y))) + self.b2.running_mean.sum()


def test_parameters_read_elsewhere_are_not_folded() -> None:
    g = torch.Generator().manual_seed(3)
    model = _ReadsItsWeight().double().eval()
    _randomise_bn(model.b, g)
    _randomise_bn(model.b2, g)
    x = torch.randn(2, 4, 6, 6, dtype=torch.float64, generator=g)
    fused = ct.fuse(model)
    assert ct.fused(fused) == [("c2", "relu", False)]
    assert "c.weight" in fused.state_dict() and "b.running_mean" in fused.state_dict()
    assert "b2.running_mean" not in fused.state_dict()
    torch.testing.assert_close(fused(x), model(x), rtol=1e-10, atol=1e-10)


def test_a_16_bit_folded_bias_stays_float32() -> None:
    conv = nn.Conv2d(3, 5, 1, bias=False).to(torch.bfloat16)
    bn = nn.BatchNorm2d(5).eval()
    _randomise_bn(bn.double(), torch.Generator().manual_seed(4))
    bn.float()
    weight, bias = fuse_mod.fold_batch_norm(conv, bn)
    assert weight.dtype == torch.bfloat16 and bias.dtype == torch.float32
    expected = (-bn.running_mean.double()) * bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps) \
        + bn.bias.double()
    torch.testing.assert_close(bias.double(), expected, rtol=1e-6, atol=1e-7)


def test_a_fused_model_compiles_with_fullgraph() -> None:
    """torch.compile traces a fused model end to end (FusedConv2d → the conv2d and bias_act operators, their fake
    implementations under aot_eager) and gives the fused model's outputs."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(5)
    model = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), nn.ReLU6(),
                          nn.Conv2d(6, 6, 1), nn.ReLU()).eval()
    _randomise_bn(model[1].double(), g)
    model[1].float()
    fused = ct.fuse(model)
    x = torch.randn(2, 4, 7, 7, generator=g)
    compiled = torch.compile(fused, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), fused(x), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(fused(x), model(x), rtol=1e-5, atol=1e-5)
    assert [a for _, a, _ in ct.fused(fused)] == ["relu6", "relu"]


@pytest.mark.parametrize(("act", "name"), [(nn.SiLU, "silu"), (nn.Hardswish, "hardswish"),
                                           (nn.Hardsigmoid, "hardsigmoid"), (nn.Sigmoid, "sigmoid")])
def test_activation_modules_of_modern_blocks(act, name) -> None:
    """YOLO's / EfficientNet's conv → BN → SiLU block, MobileNetV3's Hardswish, squeeze-excitation gates."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), act(),
                          nn.Conv2d(6, 6, 3, padding=1, groups=6, bias=False), nn.BatchNorm2d(6), act()).double()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            _randomise_bn(m, torch.Generator().manual_seed(6))
    model.eval()
    g = ct.fuse(model)
    assert ct.fused(g) == [("0", name, False), ("3", name, False)]
    x = _x(12, (2, 4, 7, 9)) * 3   # values across the activations' kinks (±3)
    with torch.no_grad():
        assert _close(g(x), model(x))


def test_identity_and_eval_dropout_modules_are_passed_through() -> None:
    torch.manual_seed(13)
    model = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), nn.Dropout(0.3), nn.Identity(),
                          nn.SiLU()).double()
    _randomise_bn(model[1], torch.Generator().manual_seed(14))
    model.eval()
    g = ct.fuse(model)
    assert ct.fused(g) == [("0", "silu", False)]
    assert not any(isinstance(m, nn.Dropout | nn.Identity) for m in g.modules())
    x = _x(15, (2, 4, 7, 9))
    with torch.no_grad():
        assert _close(g(x), model(x))

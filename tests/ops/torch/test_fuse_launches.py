"""What a fused convolution launches, on the CPU with the GPU faked (tests/fake_gpu.py): the convolution's kernel
writing y, then exactly one ``bias_act`` launch reading and writing y in place (the residual's pointer when there is
one), with the folded bias and the activation's code; the first call also packs the filters, the next ones do not."""

from __future__ import annotations

import importlib

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
ct = pytest.importorskip("convtune.ops.torch")

from fake_gpu import install_fake_gpu  # noqa: E402

from convtune.errors import InvalidInput  # noqa: E402
from convtune.kernels.epilogue.launcher import ACTIVATIONS  # noqa: E402


class _Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)) + x)


def _launches(rec, fused, x):
    start = len(rec.calls)
    with torch.no_grad():
        y = fused(x)
    return y, [c for c in rec.calls[start:] if c.kind == "launch"]


@pytest.mark.parametrize("residual", [False, True], ids=["conv-bn-relu6", "conv-bn-add-relu"])
def test_one_epilogue_launch_in_place_after_the_convolution(monkeypatch: pytest.MonkeyPatch, residual: bool) -> None:
    rec = install_fake_gpu(monkeypatch)
    model = (_Residual() if residual else
             nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()))
    fused = ct.fuse(model.eval())
    conv = next(m for m in fused.modules() if isinstance(m, ct.FusedConv2d))
    x = torch.randn(2, 32, 14, 14)
    _, first = _launches(rec, fused, x)
    y, launches = _launches(rec, fused, x)
    names = [c.name for c in launches]
    packs = ("direct_pack_weights", "winograd_filter", "igemm_pack")     # whichever family the model chose
    assert [c.name for c in first][1:] == names and first[0].name in packs
    assert names[-1] == "bias_act" and len(names) >= 2 and "bias_act" not in names[:-1], names
    epi = launches[-1]
    assert y.data_ptr() in launches[-2].pointers                 # the convolution wrote y ...
    assert epi.pointers[0] == epi.pointers[3] == y.data_ptr()    # ... and the epilogue rewrote it in place
    assert epi.pointers[1] == conv.bias.data_ptr()
    assert epi.pointers[2] == (x.data_ptr() if residual else y.data_ptr())
    assert epi.ints == (196, 32, 2 * 32 * 196 // 4, 1 if residual else 2, int(residual))
    assert epi.grid == (-(-2 * 32 * 196 // 4 // 256), 1, 1) and epi.block == (256, 1, 1)


def test_a_misaligned_residual_takes_the_one_element_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = install_fake_gpu(monkeypatch)
    y = torch.randn(2, 8, 4, 4)
    residual = torch.randn(2 * 8 * 16 + 1)[1:].view(2, 8, 4, 4)   # 4 bytes past a 16-byte boundary
    bias = torch.randn(8)
    ct.bias_act(y, bias, residual, "relu", inplace=True)
    ct.bias_act(y, bias, None, "relu", inplace=True)
    misaligned, aligned = (c for c in rec.calls if c.kind == "launch")
    assert misaligned.ints == (16, 8, 2 * 8 * 16, 1, 1) and misaligned.pointers[2] == residual.data_ptr()
    assert aligned.ints == (16, 8, 2 * 8 * 16 // 4, 1, 0)


def _dense_or_depthwise(depthwise: bool, residual: bool) -> nn.Module:
    if residual:
        return _Residual()
    groups = 32 if depthwise else 1
    return nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=groups, bias=False), nn.BatchNorm2d(32), nn.SiLU())


def _shape(calls):
    """What a launch sequence does, without the pointers of tensors allocated per call."""
    return [(c.name, c.grid, c.block, c.ints) for c in calls]


@pytest.mark.parametrize(("depthwise", "residual"), [(False, False), (True, False), (False, True)],
                         ids=["dense-silu", "depthwise-silu", "dense-residual-relu"])
def test_later_calls_take_the_hot_path_with_the_same_launches(monkeypatch: pytest.MonkeyPatch, depthwise: bool,
                                                              residual: bool) -> None:
    """The first call of a signature runs the general path and keeps the runner and the epilogue launcher; the
    next calls launch the same kernels, the epilogue in place on the returned y, without the general path."""
    fuse_module = importlib.import_module("convtune.ops.torch.fuse")   # the package exports the function

    rec = install_fake_gpu(monkeypatch)
    fused = ct.fuse(_dense_or_depthwise(depthwise, residual).eval())
    x = torch.randn(2, 32, 14, 14)
    _launches(rec, fused, x)                                       # packs filters, prepares, remembers
    _, general = _launches(rec, fused, x)
    monkeypatch.setattr(fuse_module, "apply_bias_act", lambda *a: pytest.fail("the general path ran"))
    y, hot = _launches(rec, fused, x)
    assert _shape(hot) == _shape(general) and hot[-1].name == "bias_act"
    epi = hot[-1]
    assert epi.pointers[0] == epi.pointers[3] == y.data_ptr()
    assert epi.pointers[2] == (x.data_ptr() if residual else y.data_ptr())
    assert epi.ints[3] == (1 if residual else ACTIVATIONS["silu"])


def test_the_hot_path_steps_aside_when_the_call_is_not_plain_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    from convtune.ops import resolver
    fuse_module = importlib.import_module("convtune.ops.torch.fuse")   # the package exports the function

    rec = install_fake_gpu(monkeypatch)
    fused = ct.fuse(_dense_or_depthwise(False, False).eval())
    conv = next(m for m in fused.modules() if isinstance(m, ct.FusedConv2d))
    x = torch.randn(2, 32, 14, 14)
    _launches(rec, fused, x)
    general: list[int] = []
    real = fuse_module.apply_bias_act
    monkeypatch.setattr(fuse_module, "apply_bias_act", lambda *a: general.append(1) or real(*a))
    _launches(rec, fused, x)
    assert general == []                                          # the hot path
    _launches(rec, fused, torch.randn(2, 32, 14, 14).to(memory_format=torch.channels_last))
    assert general == [1]                                         # not contiguous: the general path
    xg = x.clone().requires_grad_()
    fused(xg)                                                     # a gradient to record: the general path
    assert general == [1, 1]
    resolver.clear_cache()                                        # stale runners: rebuilt by a general call
    _launches(rec, fused, x)
    _launches(rec, fused, x)
    assert general == [1, 1, 1]
    conv.activation = "relu"                                      # a new activation: a new entry, its code
    _, launches = _launches(rec, fused, x)
    assert general == [1, 1, 1, 1] and launches[-1].ints[3] == ACTIVATIONS["relu"]
    _, launches = _launches(rec, fused, x)
    assert general == [1, 1, 1, 1] and launches[-1].ints[3] == ACTIVATIONS["relu"]
    conv.use_convtune = False                                     # new attributes: PyTorch's conv, no launch
    _, launches = _launches(rec, fused, x)
    assert general == [1, 1, 1, 1, 1] and [c.name for c in launches] == ["bias_act"]
    conv.use_convtune = True
    conv.to(torch.float64)                                        # cast after use: the kept runner is not reused
    with pytest.raises(InvalidInput, match="dtype"):
        _launches(rec, fused, x)


def test_pickling_a_used_fused_model_leaves_the_hot_path_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    import copy
    import pickle

    rec = install_fake_gpu(monkeypatch)
    fused = ct.fuse(_dense_or_depthwise(False, False).eval())
    conv = next(m for m in fused.modules() if isinstance(m, ct.FusedConv2d))
    x = torch.randn(2, 32, 14, 14)
    _launches(rec, fused, x)
    assert conv.__dict__.get("_fast_entries")
    clone = pickle.loads(pickle.dumps(conv))
    assert "_fast_entries" not in clone.__dict__ and torch.equal(clone.weight, conv.weight)
    assert "_fast_entries" not in copy.deepcopy(conv).__dict__

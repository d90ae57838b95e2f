"""What a fused convolution launches, on the CPU with the GPU faked (tests/fake_gpu.py): the convolution's kernel
writing y, then exactly one ``bias_act`` launch reading and writing y in place (the residual's pointer when there is
one), with the folded bias and the activation's code; the first call also packs the filters, the next ones do not."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
ct = pytest.importorskip("convtune.ops.torch")

from fake_gpu import install_fake_gpu  # noqa: E402


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

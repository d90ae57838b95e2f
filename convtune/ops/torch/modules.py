"""Drop-in modules for ``nn.Conv2d`` on convtune's kernels, and :func:`convert` / :func:`revert` for whole models.

:class:`Conv2d` (dense, groups = 1) and :class:`DepthwiseConv2d` (groups = in_channels = out_channels,
dilation 1) are ``nn.Conv2d`` subclasses that add no parameter and no buffer: same constructor, same
``weight``/``bias``, same ``state_dict`` keys and values. Their forward runs :func:`convtune.ops.torch.conv2d` /
:func:`convtune.ops.torch.depthwise_conv2d` (plus the bias) when the configuration is one convtune runs, else
``nn.Conv2d.forward`` (another ``padding_mode`` than ``'zeros'``, a ``'same'`` padding that would be
asymmetric, other group counts). :class:`Conv2d` runs in the precision class PyTorch's flags give a convolution at
each call (float32 with ``torch.backends.cudnn.allow_tf32``, the default: ``tf32``; else strict float32);
:class:`DepthwiseConv2d` is strict float32 (or its 16-bit dtype).

:func:`convert` changes the class of every plain ``nn.Conv2d`` it supports in place (``module.__class__``:
parameters, hooks, devices and the state_dict stay exactly as they were) and returns the model; unsupported
convolutions stay ``nn.Conv2d``. :func:`revert` changes them back.
"""

import torch
from torch import nn

from convtune.ops.torch.dense import conv2d, string_padding
from convtune.ops.torch.depthwise import depthwise_conv2d

__all__ = ["Conv2d", "DepthwiseConv2d", "convert", "converted", "revert", "support"]


def _padding(m: nn.Conv2d) -> tuple[int, int] | None:
    pad = m.padding
    if isinstance(pad, str):
        try:
            return string_padding(pad, m.kernel_size, m.stride, m.dilation)
        except ValueError:
            return None
    return (int(pad[0]), int(pad[1]))


def support(m: nn.Conv2d) -> str | None:
    """``"dense"`` or ``"depthwise"`` when convtune runs this convolution's configuration, else None."""
    if m.padding_mode != "zeros" or m.transposed or _padding(m) is None:
        return None
    if m.groups == 1:
        return "dense"
    if m.groups == m.in_channels == m.out_channels and m.dilation == (1, 1):
        return "depthwise"
    return None


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` on convtune's dense kernels (see the module docstring); same arguments, same state_dict."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.groups != 1 or self.padding_mode != "zeros":
            return super().forward(input)
        padding = _padding(self)
        if padding is None:
            return super().forward(input)
        return conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation)


class DepthwiseConv2d(nn.Conv2d):
    """``nn.Conv2d`` with groups = in_channels = out_channels on convtune's depthwise kernels (module docstring)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if support(self) != "depthwise":
            return super().forward(input)
        y = depthwise_conv2d(input, self.weight, self.stride, _padding(self))  # type: ignore[arg-type]
        return y if self.bias is None else y + self.bias.view(1, -1, 1, 1)


_CLASSES = {"dense": Conv2d, "depthwise": DepthwiseConv2d}


def convert(model: nn.Module, dense: bool = True, depthwise: bool = True) -> nn.Module:
    """Run every supported plain ``nn.Conv2d`` of ``model`` (the model itself included) on convtune's kernels.

    Args:
        model: any module; changed in place.
        dense, depthwise: which kinds to convert.

    Returns:
        ``model``, whose supported convolutions are now :class:`Conv2d` / :class:`DepthwiseConv2d` (same
        parameters and state_dict); :func:`converted` lists them, :func:`revert` undoes it.

    Example:
        >>> model = convtune.ops.torch.convert(torchvision.models.resnet50().cuda().eval())   # doctest: +SKIP
    """
    wanted = {"dense": dense, "depthwise": depthwise}
    for module in model.modules():
        if type(module) is nn.Conv2d:
            kind = support(module)
            if kind is not None and wanted[kind]:
                module.__class__ = _CLASSES[kind]
    return model


def revert(model: nn.Module) -> nn.Module:
    """Turn every :class:`Conv2d` / :class:`DepthwiseConv2d` of ``model`` back into ``nn.Conv2d``; returns it."""
    for module in model.modules():
        revert_module(module)
    return model


def revert_module(module: nn.Module) -> bool:
    """``module`` back into ``nn.Conv2d`` if it is a :class:`Conv2d` / :class:`DepthwiseConv2d` (parameters, buffers
    and state_dict unchanged); whether it was one."""
    if type(module) not in (Conv2d, DepthwiseConv2d):
        return False
    module.__class__ = nn.Conv2d
    return True


def converted(model: nn.Module) -> list[tuple[str, str]]:
    """(qualified name, ``"dense"`` | ``"depthwise"``) of every convolution of ``model`` on convtune's kernels."""
    kinds: dict[type, str] = {Conv2d: "dense", DepthwiseConv2d: "depthwise"}
    return [(name, kinds[type(m)]) for name, m in model.named_modules() if type(m) in kinds]

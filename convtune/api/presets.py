"""The convolution layers of well-known networks, as ConvProblem lists (``POST /v1/batches {"preset": ...}``).

Each network is at its usual input size (224×224 for the image models); identical layers appear once,
in the order they first occur. ``batch_size`` is N of every layer (default 1); for ``s4convd`` it is B
(default 16384, the paper's shape). Linear layers are left out, except ConvNeXt's pointwise MLPs, which
are 1×1 convolutions over the feature map.

Sources: torchvision's ResNet (v1.5: the stride on the 3×3 convolution of a bottleneck), VGG-16 (config
D), MobileNetV2 (width 1.0) and ConvNeXt-T; S4ConvD (Babak, Schaller 2026): 4 blocks of a causal 1-D
depthwise convolution B=16384, C=128, L=48, K=48.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from convtune.errors import InvalidInput
from convtune.problem import ConvProblem


@dataclass(frozen=True, slots=True)
class Layer:
    """A named layer of a preset network."""

    name: str
    problem: ConvProblem


def _conv(name: str, n: int, c: int, hw: int, k: int, r: int, *, stride: int = 1, pad: int | None = None,
          groups: int = 1) -> Layer:
    pad = r // 2 if pad is None else pad
    return Layer(name, ConvProblem(N=n, C=c, H=hw, W=hw, K=k, R=r, S=r, stride_h=stride, stride_w=stride, pad_h=pad,
                                   pad_w=pad, groups=groups))


def resnet18(n: int) -> list[Layer]:
    layers = [_conv("conv1", n, 3, 224, 64, 7, stride=2, pad=3)]
    c, hw = 64, 56
    for stage, width in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            layers.append(_conv(f"layer{stage}.{block}.conv1", n, c, hw, width, 3, stride=stride))
            if stride == 2 or c != width:
                layers.append(_conv(f"layer{stage}.{block}.downsample", n, c, hw, width, 1, stride=stride))
            hw //= stride
            layers.append(_conv(f"layer{stage}.{block}.conv2", n, width, hw, width, 3))
            c = width
    return layers


def resnet50(n: int) -> list[Layer]:
    layers = [_conv("conv1", n, 3, 224, 64, 7, stride=2, pad=3)]
    c, hw = 64, 56
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
        out = 4 * width
        for block in range(blocks):
            stride = 2 if stage > 1 and block == 0 else 1
            layers.append(_conv(f"layer{stage}.{block}.conv1", n, c, hw, width, 1))
            layers.append(_conv(f"layer{stage}.{block}.conv2", n, width, hw, width, 3, stride=stride))
            if block == 0:
                layers.append(_conv(f"layer{stage}.{block}.downsample", n, c, hw, out, 1, stride=stride))
            hw //= stride
            layers.append(_conv(f"layer{stage}.{block}.conv3", n, width, hw, out, 1))
            c = out
    return layers


def vgg16(n: int) -> list[Layer]:
    layers, c, hw = [], 3, 224
    for stage, (width, convs) in enumerate(((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)), start=1):
        for i in range(convs):
            layers.append(_conv(f"conv{stage}_{i + 1}", n, c, hw, width, 3))
            c = width
        hw //= 2  # max pool
    return layers


def mobilenet_v2(n: int) -> list[Layer]:
    layers = [_conv("features.0", n, 3, 224, 32, 3, stride=2)]
    c, hw, index = 32, 112, 1
    for t, width, repeats, first_stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                            (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(repeats):
            stride = first_stride if i == 0 else 1
            hidden = c * t
            if t != 1:
                layers.append(_conv(f"features.{index}.expand", n, c, hw, hidden, 1))
            layers.append(_conv(f"features.{index}.depthwise", n, hidden, hw, hidden, 3, stride=stride,
                                groups=hidden))
            hw //= stride
            layers.append(_conv(f"features.{index}.project", n, hidden, hw, width, 1))
            c, index = width, index + 1
    layers.append(_conv("features.18", n, c, hw, 1280, 1))
    return layers


def convnext_tiny(n: int) -> list[Layer]:
    layers = [_conv("stem", n, 3, 224, 96, 4, stride=4, pad=0)]
    hw = 56
    dims = (96, 192, 384, 768)
    for stage, (dim, depth) in enumerate(zip(dims, (3, 3, 9, 3), strict=True)):
        if stage:
            layers.append(_conv(f"downsample{stage}", n, dims[stage - 1], hw, dim, 2, stride=2, pad=0))
            hw //= 2
        for block in range(depth):
            layers.append(_conv(f"stage{stage}.{block}.dwconv", n, dim, hw, dim, 7, groups=dim))
            layers.append(_conv(f"stage{stage}.{block}.pwconv1", n, dim, hw, 4 * dim, 1))
            layers.append(_conv(f"stage{stage}.{block}.pwconv2", n, 4 * dim, hw, dim, 1))
    return layers


def s4convd(b: int) -> list[Layer]:
    return [Layer(f"block{i}.conv", ConvProblem.depthwise1d(B=b, C=128, L=48, K=48)) for i in range(4)]


#: name -> (layers of batch size n, default batch size)
PRESETS: dict[str, tuple[Callable[[int], list[Layer]], int]] = {
    "resnet18": (resnet18, 1),
    "resnet50": (resnet50, 1),
    "vgg16": (vgg16, 1),
    "mobilenet_v2": (mobilenet_v2, 1),
    "convnext_tiny": (convnext_tiny, 1),
    "s4convd": (s4convd, 16384),
}


def preset_layers(name: str, batch_size: int | None = None) -> list[Layer]:
    """Every layer of a preset network, duplicates included, in network order.

    Raises:
        InvalidInput: an unknown name (field ``preset``).
    """
    try:
        build, default = PRESETS[name.strip().lower()]
    except KeyError:
        raise InvalidInput("preset", f"{name!r} is unknown: allowed {', '.join(PRESETS)}") from None
    return build(default if batch_size is None else batch_size)


def preset_problems(name: str, batch_size: int | None = None) -> list[ConvProblem]:
    """The distinct problems of a preset network, in the order they first occur.

    Example:
        >>> len(preset_problems("s4convd"))
        1
    """
    return list(dict.fromkeys(layer.problem for layer in preset_layers(name, batch_size)))

"""``convtune.torch``: the public name of the PyTorch integration, :mod:`convtune.ops.torch` (ops, drop-in
modules, whole-model conversion and tuning). Importing it imports torch; the rest of convtune never does."""

from convtune.ops.torch import (
    Conv2d,
    DepthwiseConv2d,
    ModelTuning,
    conv2d,
    convert,
    converted,
    depthwise_conv1d,
    depthwise_conv2d,
    revert,
    tune,
)

__all__ = ["Conv2d", "DepthwiseConv2d", "ModelTuning", "conv2d", "convert", "converted", "depthwise_conv1d",
           "depthwise_conv2d", "revert", "tune"]

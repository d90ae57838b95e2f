"""``convtune.torch``: the public name of the PyTorch integration, :mod:`convtune.ops.torch` (ops, drop-in
modules, whole-model conversion, tuning and inference fusion). Importing it imports torch; the rest of convtune never
does."""

from convtune.ops.torch import (
    Conv2d,
    DepthwiseConv2d,
    FusedConv2d,
    ModelTuning,
    bias_act,
    conv2d,
    convert,
    converted,
    depthwise_conv1d,
    depthwise_conv2d,
    fuse,
    fused,
    revert,
    tune,
)

__all__ = ["Conv2d", "DepthwiseConv2d", "FusedConv2d", "ModelTuning", "bias_act", "conv2d", "convert", "converted",
           "depthwise_conv1d", "depthwise_conv2d", "fuse", "fused", "revert", "tune"]

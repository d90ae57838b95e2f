"""PyTorch on convtune's kernels: ops, drop-in modules, whole-model conversion and tuning.

Import as ``convtune.ops.torch`` (the rest of convtune never imports torch).

* :func:`conv2d` — dense convolution (groups = 1) as the ``convtune::conv2d`` operator (:mod:`.dense`);
* :func:`depthwise_conv1d` (causal) and :func:`depthwise_conv2d` — the depthwise ops (:mod:`.depthwise`);
* :class:`Conv2d`, :class:`DepthwiseConv2d`, :func:`convert`, :func:`revert` — ``nn.Conv2d`` drop-ins
  (:mod:`.modules`);
* :func:`tune` — tune every distinct convolution of a model, locally or on a service (:mod:`.tune_model`);
* :func:`fuse` — an inference copy of a model with BatchNorm folded into its convolutions and bias, residual add
  and ReLU / ReLU6 in one epilogue pass (:mod:`.fuse`, :func:`bias_act` in :mod:`.epilogue`).

Every op has a fake implementation and autograd (``torch.compile(fullgraph=True)`` traces it), runs on the
current stream without host synchronisation (capturable in a CUDA graph), and in eager mode goes straight to
its prepared launch (:mod:`convtune.kernels.prepared`). Configs come from :mod:`convtune.ops.resolver`: the tuning
database's best GPU-measured config for the device, problem and kernel version, else the model's choice.

Example:
    >>> import convtune.ops.torch as ct                                            # doctest: +SKIP
    >>> model = ct.convert(torchvision.models.resnet50().cuda().eval())       # doctest: +SKIP
    >>> ct.tune(model, torch.randn(32, 3, 224, 224, device="cuda"))           # doctest: +SKIP
    >>> y = model(x)                    # now on the tuned kernels             # doctest: +SKIP
"""

from convtune.ops.torch.dense import conv2d
from convtune.ops.torch.depthwise import depthwise_conv1d, depthwise_conv2d
from convtune.ops.torch.epilogue import bias_act
from convtune.ops.torch.fuse import FusedConv2d, fuse, fused
from convtune.ops.torch.modules import Conv2d, DepthwiseConv2d, convert, converted, revert
from convtune.ops.torch.tune_model import ModelTuning, tune

__all__ = ["Conv2d", "DepthwiseConv2d", "FusedConv2d", "ModelTuning", "bias_act", "conv2d", "convert", "converted",
           "depthwise_conv1d", "depthwise_conv2d", "fuse", "fused", "revert", "tune"]

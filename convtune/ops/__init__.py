"""What a user's program calls: :func:`convtune.conv2d` (:mod:`.conv2d`), the depthwise ops (:mod:`.depthwise`),
the PyTorch integration (:mod:`.torch`, public as ``convtune.torch``), the one config resolver every op asks
(:mod:`.resolver`), the exported best-configs file a deployment ships instead of the database (:mod:`.export`) and
PyTorch's own convolution timed as a baseline (:mod:`.baseline`).
"""

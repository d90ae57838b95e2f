"""2-D depthwise kernels, NCHW (groups = C = K): the tiled forward (:mod:`.tiled`), the fast forward
(:mod:`.fast`), the packed forward for narrow images (:mod:`.packed`), the input gradient (:mod:`.dgrad`), the weight
gradient (:mod:`.wgrad`) and the gradients' time model (:mod:`.model_bwd`).
"""

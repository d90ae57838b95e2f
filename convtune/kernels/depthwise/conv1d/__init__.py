"""1-D causal depthwise kernels, (B, C, L): the plan of every variant × path (:mod:`.plan`), the fused backward
(:mod:`.fused`), compile and launch (:mod:`.launcher`), the counter-free traffic model (:mod:`.traffic`).
"""

"""Depthwise convolution kernels.

1-D causal, (B, C, L): five variants × fwd/dgrad/wgrad (naive, coalesced, shared, warp, fast) and the fused
backward (dx and dw in one pass). 2-D, NCHW: the tiled forward (baseline) and the fast family (forward,
input gradient, weight gradient).

Modules: ``configs`` (tuning points), ``plan1d`` / ``plan1d_fused`` / ``plan2d`` / ``plan2d_fast`` /
``plan2d_dgrad`` / ``plan2d_wgrad`` (validation, launch geometry, sources; the 2-D and fused modules also
hold their traffic formulas and launchers), ``launcher`` (1-D compile, launch), ``wgrad_launch`` (the weight
gradients' launch sequence), ``dtypes`` (fp32, and fp16/bf16 storage with fp32 accumulation: which kernels
take which), ``traffic`` (1-D analytic global-memory traffic and FLOPs per variant and path), ``model`` /
``model2d_bwd`` (time models), ``space`` (configuration spaces), ``reference`` (float64 references). CuPy is
imported lazily.
"""

from convtune.kernels.depthwise import configs as configs  # registers the config classes for parse_config_key

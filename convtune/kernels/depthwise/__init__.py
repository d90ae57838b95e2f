"""Depthwise convolution kernels: 1-D causal (five variants × fwd/dgrad/wgrad) and 2-D (tiled forward).

Modules: ``configs`` (tuning points), ``plan1d``/``plan2d`` (validation, launch geometry, sources),
``launcher`` (compile, launch), ``traffic`` (analytic global-memory traffic and FLOPs per variant and
path), ``space`` (configuration spaces), ``reference`` (float64 references). CuPy is imported lazily.
"""

from convtune.kernels.depthwise import configs as configs  # registers the config classes for parse_config_key

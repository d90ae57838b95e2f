"""Counter-free analysis of kernels on this machine's GPU (``convtune analyze``): modelled traffic, effective
bandwidth and a roofline per variant and path, without hardware counters. :mod:`.depthwise1d` covers the 1-D causal
depthwise kernels.
"""

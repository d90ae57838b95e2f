"""Convolution epilogues: one pass that applies a bias, a residual and an activation to a convolution's output
(:mod:`.launcher`). Not a tuned family: a memory-bound elementwise kernel with one launch shape."""

"""GPU convolution kernels: compile helper, registry, families, references.

Nothing here imports CuPy at module load; launchers import it on first use.
"""

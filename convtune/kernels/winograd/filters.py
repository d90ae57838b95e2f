"""The Winograd filter operand on the GPU: U = G g Gᵀ by a kernel (``winograd_filter.cu``), as a prepared launch.

Shapes: w (K, C, 3, 3) fp32 -> U (α², Cp, Kp) fp32, zero-padded to the plan's Cp × Kp (the layout both
Winograd paths read, :func:`convtune.kernels.winograd.launcher.transform_filters` computes the same on the host
side with CuPy). A kernel instead of CuPy's einsum so that the transform runs on the caller's stream through
the same launch path as the convolution: inside a CUDA graph capture it is captured like any launch, with no
CuPy allocation. Products and sums are double, rounded to float once; G is the float64 image of
:func:`~convtune.kernels.winograd.transforms.cook_toom`'s exact fractions.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from convtune.kernels.compile import kernel_text, load_kernel
from convtune.kernels.prepared import FilterLayout, Launch, PreparedLaunch, grid3, pointers
from convtune.kernels.winograd.transforms import matrices

SOURCE = "winograd_filter.cu"
ENTRY = "winograd_filter"
THREADS = 256


@cache
def source(m: int) -> str:
    """Self-contained CUDA text of F(m)'s filter transform: the body plus a wrapper holding G as doubles."""
    g = matrices(m)[1]
    alpha = m + 2
    rows = ", ".join("{" + ", ".join(repr(float(v)) for v in row) + "}" for row in g)
    return kernel_text(SOURCE) + f"""
extern "C" __global__ void __launch_bounds__({THREADS})
{ENTRY}(const float* __restrict__ w, float* __restrict__ U, int C, int K, int Cp, int Kp) {{
  const double G[{alpha}][3] = {{{rows}}};
  convtune::winograd_filter_body<{alpha}>(w, U, C, K, Cp, Kp, G);
}}
"""


def layout(pl: Any, device: int, kernel: Any = None) -> FilterLayout:
    """The U layout of a (fused or unfused) Winograd plan and (built on first use) its transform launch:
    operands (w, filters)."""
    from convtune.kernels.prepared import driver

    p, c = pl.problem, pl.config
    words = c.alpha ** 2 * pl.cp * pl.kp

    def make_prep() -> PreparedLaunch:
        transform = kernel
        if transform is None:
            with driver().use_device(device):
                transform = load_kernel(source(c.m), ENTRY)
        step = Launch(transform, grid3(-(-pl.cp * pl.kp // THREADS)), (THREADS, 1, 1), 0, pointers(0, 1),
                      (p.C, p.K, pl.cp, pl.kp))
        return PreparedLaunch(plan=pl, device=device, operands=("w", "filters"), steps=[step], kernels=transform,
                              output_shape=(c.alpha ** 2, pl.cp, pl.kp), kind=f"winograd_filter.m{c.m}")

    return FilterLayout(f"U = G g Gᵀ (α²={c.alpha ** 2}, Cp={pl.cp}, Kp={pl.kp})", ("winograd", c.m, pl.cp, pl.kp),
                        words, make_prep)

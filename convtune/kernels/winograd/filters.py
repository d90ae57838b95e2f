"""The Winograd filter operand on the GPU: U = G g Gᵀ by a kernel (``winograd_filter.cu``), as a prepared launch.

Shapes: w (K, C, r, r) fp32 -> U (α², Cp, Kp) fp32, α = m + r − 1, zero-padded to the plan's Cp × Kp (the layout both
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
#: filters other than 3×3: the r-generic body (``winograd_filter_body_r``) of the large-filter family's source
SOURCE_R = "winograd_unfused_r.cu"
ENTRY = "winograd_filter"
THREADS = 256


@cache
def source(m: int, r: int = 3) -> str:
    """Self-contained CUDA text of F(m, r)'s filter transform: the body plus a wrapper holding G as doubles."""
    g = matrices(m, r)[1]
    alpha = m + r - 1
    rows = ", ".join("{" + ", ".join(repr(float(v)) for v in row) + "}" for row in g)
    body = "winograd_filter_body" if r == 3 else "winograd_filter_body_r"
    targs = f"{alpha}" if r == 3 else f"{alpha}, {r}"
    return kernel_text(SOURCE if r == 3 else SOURCE_R) + f"""
extern "C" __global__ void __launch_bounds__({THREADS})
{ENTRY}(const float* __restrict__ w, float* __restrict__ U, int C, int K, int Cp, int Kp) {{
  const double G[{alpha}][{r}] = {{{rows}}};
  convtune::{body}<{targs}>(w, U, C, K, Cp, Kp, G);
}}
"""


def layout(pl: Any, device: int, kernel: Any = None) -> FilterLayout:
    """The U layout of a (fused or unfused) Winograd plan and (built on first use) its transform launch:
    operands (w, filters)."""
    from convtune.kernels.prepared import driver

    p, c = pl.problem, pl.config
    r = p.R
    words = c.alpha ** 2 * pl.cp * pl.kp

    def make_prep() -> PreparedLaunch:
        transform = kernel
        if transform is None:
            with driver().use_device(device):
                transform = load_kernel(source(c.m, r), ENTRY)
        step = Launch(transform, grid3(-(-pl.cp * pl.kp // THREADS)), (THREADS, 1, 1), 0, pointers(0, 1),
                      (p.C, p.K, pl.cp, pl.kp))
        return PreparedLaunch(plan=pl, device=device, operands=("w", "filters"), steps=[step], kernels=transform,
                              output_shape=(c.alpha ** 2, pl.cp, pl.kp),
                              kind=f"winograd_filter.m{c.m}" + ("" if r == 3 else f"r{r}"))

    key = ("winograd", c.m, pl.cp, pl.kp) if r == 3 else ("winograd", c.m, r, pl.cp, pl.kp)
    return FilterLayout(f"U = G g Gᵀ (α²={c.alpha ** 2}, Cp={pl.cp}, Kp={pl.kp})", key, words, make_prep)

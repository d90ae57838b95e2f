"""The GPU filter transform (``winograd_filter.cu`` with its generated G table) compiles with
``nvcc -arch=sm_90 -Xptxas -v`` for F(2×2,3×3) and F(4×4,3×3) without spills or a stack frame (no GPU needed)."""

from __future__ import annotations

import pytest

from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.winograd import filters

pytestmark = pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH: the compile checks need the "
                                "CUDA toolkit (no GPU needed)")


@pytest.mark.parametrize("m", [2, 4])
def test_filter_transform_compiles_without_spills(m: int, tmp_path) -> None:
    result = nvcc_compile(filters.source(m), "sm_90", tmp_path)
    res = result.resources[filters.ENTRY]
    assert not res.spills, f"F({m}): {res}"
    assert res.num_regs <= 255 and res.static_smem_bytes == 0

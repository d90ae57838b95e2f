"""The 16-bit wgmma 1×1 family without a GPU: which problems it takes, its transposed geometry (rows = output
channels, columns = pixels), the traffic formula against a simulation of the copy loops, the prepared launch's
arguments through the driver seam (no layout change; a split's zeroing and conversion), and the kernel compiled by
nvcc for sm_90a (no spills, wgmma not serialised)."""

from __future__ import annotations

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, required_arch
from convtune.kernels.igemm_wgmma import half_1x1
from convtune.kernels.igemm_wgmma.half_1x1 import IgemmWgmmaHalf1x1FwdConfig, supports, traffic_elements
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
LAYER = "N=32 C=256 H=56 W=56 K=64 R=1 S=1 dtype=bfloat16"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    (LAYER, True),
    ("N=3 C=13 H=4 W=6 K=70 R=1 S=1 dtype=float16", True),            # any C, H·W = 24
    ("N=3 C=13 H=5 W=5 K=70 R=1 S=1 dtype=float16", False),           # H·W = 25: a copy would straddle pixels
    ("N=3 C=13 H=14 W=14 K=70 R=1 S=1 dtype=float16", True),          # H·W = 196: copies of 4 pixels (8 bytes)
    ("N=3 C=13 H=7 W=7 K=70 R=1 S=1 dtype=float16", False),           # H·W = 49
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 stride=2 dtype=bfloat16", False),
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 pad=1 dtype=bfloat16", False),
    ("N=2 C=64 H=8 W=8 K=64 R=3 S=3 pad=1 dtype=bfloat16", False),
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 math=tf32", False),
])
def test_supports_unpadded_stride1_1x1_16bit(text: str, ok: bool) -> None:
    assert supports(P(text)) is ok
    assert (get_spec("igemm_wgmma_half_1x1") in specs_for(P(text))) is ok


def test_geometry_is_transposed() -> None:
    pl = plan(P(LAYER), IgemmWgmmaHalf1x1FwdConfig(128, 1, 1, 4, 1), H200)
    assert (pl.m_tiles, pl.n_tiles, pl.grid) == (1, 32 * 56 * 56 // 128, (32 * 56 * 56 // 128, 1, 1))
    assert (pl.cp, pl.chunks) == (256, 4) and required_arch(pl.source()) == "sm_90a"
    with pytest.raises(InvalidConfig) as err:
        plan(P(LAYER).replace(H=7, W=7), IgemmWgmmaHalf1x1FwdConfig(), H200)   # H·W = 49
    assert err.value.field == "problem"
    assert "128, 1, 1, 4, 8>(" in pl.source()                                    # 16-byte copies of 8 pixels
    fourteen = plan(P(LAYER).replace(H=14, W=14), IgemmWgmmaHalf1x1FwdConfig(128, 1, 1, 4, 1), H200)
    assert "128, 1, 1, 4, 4>(" in fourteen.source()                              # H·W = 196: 8-byte copies
    # rows are output channels: K = 64 searches 64-row tiles only, the pixels take tile_n up to 256
    plans = list(enumerate_plans(P(LAYER), H200, family="igemm_wgmma_half_1x1"))
    assert {pl.config.tile_m for pl in plans} == {64} and {pl.config.tile_n for pl in plans} == {64, 128, 256}


def _simulated_traffic(pl: half_1x1.IgemmWgmmaHalf1x1Plan) -> dict[str, int]:
    """Elements the copy loops request, block by block: a B copy (PIX = 8 or 4 pixels of one channel) reads when the
    channel is below C and the pixels exist; every A copy of a tile row counts (rows ≥ K too: the formula's upper
    bound)."""
    p, c = pl.problem, pl.config
    pixels = p.N * p.H * p.W
    pix = half_1x1.pixels_per_copy(p)
    elems = {"input": 0, "weight": 0, "output": 0}
    for bz in range(pl.splits_launched):
        first = bz * pl.chunks_per_split
        for chunk in range(first, min(pl.chunks, first + pl.chunks_per_split)):
            for bx in range(pl.n_tiles):
                for _by in range(pl.m_tiles):
                    elems["weight"] += c.tile_m * 64
                    for cl in range(64):
                        if chunk * 64 + cl < p.C:
                            elems["input"] += pix * sum(bx * c.tile_n + pix * j < pixels
                                                        for j in range(c.tile_n // pix))
    out = p.output_elements
    elems["output"] = out if pl.splits_launched == 1 else 2 * out + 2 * out * pl.splits_launched + 2 * out + out
    return elems


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=13 H=4 W=6 K=70 R=1 S=1 dtype=float16", IgemmWgmmaHalf1x1FwdConfig(64, 1, 2, 4, 1)),
    ("N=2 C=130 H=8 W=12 K=20 R=1 S=1 dtype=bfloat16", IgemmWgmmaHalf1x1FwdConfig(128, 1, 1, 4, 3)),
    ("N=3 C=70 H=2 W=6 K=20 R=1 S=1 dtype=bfloat16", IgemmWgmmaHalf1x1FwdConfig(64, 1, 1, 4, 2)),     # H·W = 12
])
def test_traffic_formula_matches_the_copy_loops(text: str, config: IgemmWgmmaHalf1x1FwdConfig) -> None:
    pl = plan(P(text), config, H200)
    assert traffic_elements(pl) == _simulated_traffic(pl)


def test_prepared_launch_passes_the_kernel_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch_recorder import install

    from convtune.kernels.igemm.half import HalfKernels

    rec = install(monkeypatch)
    p = P("N=3 C=13 H=4 W=6 K=70 R=1 S=1 dtype=bfloat16")
    kernels = HalfKernels(None, rec.kernel(half_1x1.ENTRY, 4, 6), rec.kernel("igemm_wgmma_f32_to_16", 2, 1))
    one_plan = plan(p, IgemmWgmmaHalf1x1FwdConfig(64, 1, 1, 4, 1), H200)
    one = half_1x1.prepare_plan(one_plan, 0, kernels)
    assert one.operands == ("x", "filters", "y") and one.workspace_bytes == 0
    one((0x1000, 0x2000, 0x3000), 0x77)
    (gemm,) = rec.calls
    assert gemm.pointers == (0x1000, 0x2000, 0x3000, 0x3000) and list(gemm.ints) == [13, 24, 70, 72, 64, 1]
    assert gemm.grid == (2, 2, 1) == one_plan.grid and gemm.smem_bytes == one_plan.smem_bytes
    rec.calls.clear()
    p2 = p.replace(C=200)
    split = half_1x1.prepare_plan(plan(p2, IgemmWgmmaHalf1x1FwdConfig(64, 1, 1, 4, 2), H200), 0, kernels)
    assert split.operands == ("x", "filters", "y", "workspace") and split.workspace_bytes == 4 * p2.output_elements
    split((0x1000, 0x2000, 0x3000, 0x4000), 0x77)
    assert [(c.kind, c.name) for c in rec.calls] == [("memset", ""), ("launch", half_1x1.ENTRY),
                                                      ("launch", "igemm_wgmma_f32_to_16")]
    zero, gemm, convert = rec.calls
    assert zero.pointers == (0x4000,) and zero.nbytes == 4 * p2.output_elements
    assert gemm.pointers == (0x1000, 0x2000, 0x3000, 0x4000) and list(gemm.ints) == [200, 24, 70, 72, 256, 2]
    assert convert.pointers == (0x4000, 0x3000) and list(convert.ints) == [p2.output_elements]


def test_registry_row() -> None:
    spec = get_spec("igemm_wgmma_half_1x1")
    pl = plan(P(LAYER), IgemmWgmmaHalf1x1FwdConfig(), H200)
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0 and 0 < spec.predict_s(pl, H200) < 1
    assert spec.source_sha256() not in {get_spec(f).source_sha256() for f in ("igemm_wgmma", "igemm_wgmma_half")}


REPRESENTATIVE = [
    ("bf16_64x256", LAYER, IgemmWgmmaHalf1x1FwdConfig(256, 1, 1, 4, 1)),
    ("f16_256x128_wg2", "N=8 C=512 H=28 W=28 K=1024 R=1 S=1 dtype=float16",
     IgemmWgmmaHalf1x1FwdConfig(128, 2, 2, 4, 1)),
    ("bf16_128x64_s6", "N=8 C=512 H=28 W=28 K=256 R=1 S=1 dtype=bfloat16", IgemmWgmmaHalf1x1FwdConfig(64, 1, 2, 6, 2)),
    ("bf16_pix4_128x128", "N=32 C=1024 H=14 W=14 K=256 R=1 S=1 dtype=bfloat16",
     IgemmWgmmaHalf1x1FwdConfig(128, 2, 1, 4, 1)),
    ("f16_pix4_64x256_wg2", "N=32 C=256 H=14 W=14 K=1024 R=1 S=1 dtype=float16",
     IgemmWgmmaHalf1x1FwdConfig(256, 1, 2, 4, 2)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernel_compiles_for_sm90a_without_spills() -> None:
    plans = [(name, plan(P(problem), config, H200)) for name, problem, config in REPRESENTATIVE]
    result, entries = compile_unit(half_1x1._family_source(), plans, half_1x1.ENTRY,
                                   'extern "C" __global__ void igemm_wgmma_pack(', helpers_once=True)
    assert_within_launch_bounds(result, entries)

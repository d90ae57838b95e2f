"""The TMA-fed persistent 16-bit wgmma 1×1 family (filters resident, a producer warpgroup) without a GPU: its problems
(C a multiple of 64, H·W of 8), tuned and chosen untuned where it runs, tiles within one image, shared memory and
threads, the traffic formula against a simulation of the box walk, the tensor maps and arguments of the prepared
launch through the driver seam, and the kernel compiled by nvcc for sm_90a (no spills, wgmma neither serialised nor
waited for at a back edge)."""

from __future__ import annotations

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, required_arch
from convtune.kernels.igemm_wgmma import half_1x1_resident as resident
from convtune.kernels.igemm_wgmma import half_1x1_tma as tma
from convtune.kernels.igemm_wgmma.half_1x1_tma import IgemmWgmmaHalf1x1TmaFwdConfig as Config
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.kernels.tensor_map import TiledMap
from convtune.machine import MachineModel
from convtune.ops.conv2d import model_choice
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
YOLO_HEAD = "N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=bfloat16"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    (YOLO_HEAD, True),
    ("N=3 C=64 H=4 W=6 K=70 R=1 S=1 dtype=float16", True),
    ("N=3 C=13 H=4 W=6 K=70 R=1 S=1 dtype=float16", False),           # C not a multiple of 64: a box crosses images
    ("N=3 C=128 H=14 W=14 K=70 R=1 S=1 dtype=float16", False),        # H·W = 196: rows of 392 bytes
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 stride=2 dtype=bfloat16", False),
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 math=tf32", False),
])
def test_supports_tuned_and_chosen_untuned(text: str, ok: bool) -> None:
    """The tuner measures it where it runs, and the untuned op picks it over the resident family there (its choice
    scale, 2^-0.75, is below the resident family's 2^-0.5 on the same walk model)."""
    assert tma.supports(P(text)) is ok
    assert (get_spec(tma.FAMILY) in specs_for(P(text))) is ok
    assert (model_choice(P(text), H200).family == tma.FAMILY) is ok


def test_tiles_stay_within_one_image_and_resources() -> None:
    pl = plan(P(YOLO_HEAD), Config(64, 2, 2, 6, 1), H200)
    assert pl.config.tile_m == 256 and pl.config.threads == 384 and pl.m_tiles == 1
    assert pl.n_tiles == 8 * 43 and pl.grid == (H200.sm_count, 1, 1) and pl.tiles_per_block == 3   # 2704 = 42·64 + 16
    assert pl.smem_bytes == 256 * 256 * 2 + 6 * 64 * 128 + 256 * 72 * 2 + 128 + 1024 <= H200.smem_per_block_bytes
    assert required_arch(pl.source()) == "sm_90a" and "64, 2, 2, 6, 4>(" in pl.source()   # NCH = 4
    wide = plan(P(YOLO_HEAD), Config(256, 1, 1, 4, 1), H200)                               # 4 boxes a stage
    assert wide.n_tiles == 8 * 11 and wide.grid == (H200.sm_count // 4, 4, 1) and wide.config.threads == 256
    with pytest.raises(InvalidConfig) as err:
        plan(P(YOLO_HEAD), Config(64, 2, 2, 6, 2), H200)
    assert err.value.field == "splits"
    with pytest.raises(InvalidConfig) as err:   # C = 512 × 256 rows: 256 KB of filters
        plan(P(YOLO_HEAD).replace(C=512), Config(64, 2, 2, 4, 1), H200)
    assert err.value.field == "m_blocks" and "resident filter rows" in str(err.value)
    with pytest.raises(InvalidConfig) as err:
        plan(P(YOLO_HEAD).replace(C=200), Config(64, 2, 2, 4, 1), H200)
    assert err.value.field == "problem" and "multiple of 64" in str(err.value)
    plans = list(enumerate_plans(P(YOLO_HEAD), H200, family=tma.FAMILY))
    assert plans and all(p.config.splits == 1 and p.smem_bytes <= H200.smem_per_block_bytes for p in plans)


def _simulated_traffic(pl: tma.IgemmWgmmaHalf1x1TmaPlan) -> dict[str, int]:
    """Elements the box walk reads: each block's filter boxes once (rows ≥ K read nothing), then per tile and chunk
    the x boxes' pixels below H·W (channels are always below C: C % 64 == 0)."""
    p, c = pl.problem, pl.config
    hw, tpi = p.H * p.W, tma.tiles_per_image(p, c)
    elems = {"input": 0, "weight": 0, "output": p.output_elements}
    for _ in range(pl.m_tiles):
        for bx in range(min(pl.persistent_blocks, pl.n_tiles)):
            elems["weight"] += c.tile_m * pl.cp     # the formula counts rows ≥ K (the kernel's zero fill)
            for tile in range(bx, pl.n_tiles, pl.persistent_blocks):
                px = (tile % tpi) * c.tile_n
                elems["input"] += pl.chunks * 64 * max(0, min(c.tile_n, hw - px))
    return elems


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=64 H=4 W=6 K=70 R=1 S=1 dtype=float16", Config(64, 1, 2, 4, 1)),
    ("N=2 C=128 H=8 W=12 K=20 R=1 S=1 dtype=bfloat16", Config(128, 1, 1, 4, 1)),
    ("N=40 C=192 H=16 W=16 K=150 R=1 S=1 dtype=bfloat16", Config(64, 1, 1, 4, 1)),   # 160 tiles over 132 blocks
    (YOLO_HEAD, Config(64, 2, 2, 6, 1)),
])
def test_traffic_formula_matches_the_walk(text: str, config: Config) -> None:
    pl = plan(P(text), config, H200)
    assert tma.traffic_elements(pl) == _simulated_traffic(pl)


def test_prepared_launch_passes_arguments_and_tensor_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch_recorder import install

    from convtune.kernels.igemm.half import HalfKernels

    rec = install(monkeypatch)
    p = P("N=3 C=128 H=4 W=6 K=70 R=1 S=1 dtype=bfloat16")
    kernels = HalfKernels(None, rec.kernel(tma.ENTRY, 3, 5, n_maps=2), None)
    pl = plan(p, Config(64, 1, 1, 4, 1), H200)
    prepared = tma.prepare_plan(pl, 0, kernels)
    assert prepared.operands == ("x", "filters", "y") and prepared.workspace_bytes == 0
    prepared((0x1000, 0x2000, 0x3000), 0x77)
    (gemm,) = rec.calls
    assert gemm.pointers == (0x1000, 0x2000, 0x3000) and list(gemm.ints) == [128, 24, 70, 1, 3]   # TPI 1, 3 tiles
    assert gemm.grid == pl.grid == (3, 2, 1) and gemm.block == (256, 1, 1) and gemm.smem_bytes == pl.smem_bytes
    x_map, f_map = (spec for spec, _, _ in rec.encoded)
    assert [ptr for _, ptr, _ in rec.encoded] == [0x1000, 0x2000]
    assert x_map == TiledMap("bfloat16", 24, 3 * 128, 64, 64, 128)          # N·C rows of H·W pixels, 64 × 64 boxes
    assert f_map == TiledMap("bfloat16", 128, 70, 64, 64, 128)              # K rows of Cp, tile_m × 64 boxes
    assert gemm.maps == tuple(data for *_, data in rec.encoded)


def test_registry_row_and_model() -> None:
    spec = get_spec(tma.FAMILY)
    pl = plan(P(YOLO_HEAD), Config(64, 2, 2, 6, 1), H200)
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0 and 0 < spec.predict_s(pl, H200) < 1
    assert spec.source_sha256() != get_spec(resident.FAMILY).source_sha256()


REPRESENTATIVE = [
    ("bf16_256x64_wg2_s6_nch4", YOLO_HEAD, Config(64, 2, 2, 6, 1)),
    ("f16_128x128_wg2_s4", "N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=float16", Config(128, 1, 2, 4, 1)),
    ("bf16_128x256_wg1_s4", "N=32 C=64 H=56 W=56 K=256 R=1 S=1 dtype=bfloat16", Config(256, 1, 1, 4, 1)),
    ("bf16_128x128_wg1_mi2_s6", "N=32 C=256 H=28 W=28 K=128 R=1 S=1 dtype=bfloat16", Config(128, 2, 1, 6, 1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernel_compiles_for_sm90a_without_spills() -> None:
    plans = [(name, plan(P(problem), config, H200)) for name, problem, config in REPRESENTATIVE]
    result, entries = compile_unit(tma._family_source(), plans, tma.ENTRY,
                                   'extern "C" __global__ void igemm_wgmma_pack(', helpers_once=True)
    assert_within_launch_bounds(result, entries)
    assert "injected" not in result.log, result.log[-2000:]

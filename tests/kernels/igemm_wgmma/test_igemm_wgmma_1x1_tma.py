"""The TMA-fed persistent TF32 wgmma 1×1 family (filters resident, a producer warpgroup, stores from the
accumulators) without a GPU: its problems (C a multiple of 32), tuned and chosen untuned on the yolov3 head, tiles
within one image, the register and shared-memory limits, the traffic formula against a simulation of the box walk,
the tensor maps and arguments of the prepared launch through the driver seam, and the kernel compiled by nvcc for
sm_90a (no spills, wgmma neither serialised nor waited for at a back edge)."""

from __future__ import annotations

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, required_arch
from convtune.kernels.igemm_wgmma import tf32_1x1_resident as resident
from convtune.kernels.igemm_wgmma import tf32_1x1_tma as tma
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.igemm_wgmma.tf32_1x1_tma import IgemmWgmma1x1TmaFwdConfig as Config
from convtune.kernels.registry import get_spec, specs_for
from convtune.kernels.tensor_map import TiledMap
from convtune.machine import MachineModel
from convtune.ops.conv2d import model_choice
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
YOLO_HEAD = "N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    (YOLO_HEAD, True),
    ("N=3 C=32 H=4 W=6 K=70 R=1 S=1 math=tf32", True),
    ("N=3 C=48 H=4 W=6 K=70 R=1 S=1 math=tf32", False),             # C not a multiple of 32: a box crosses images
    ("N=3 C=64 H=5 W=5 K=70 R=1 S=1 math=tf32", False),             # H·W = 25: rows of 100 bytes
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 stride=2 math=tf32", False),
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1", False),                       # strict fp32
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 dtype=bfloat16", False),
])
def test_supports_tuned_and_chosen_untuned_on_the_head(text: str, ok: bool) -> None:
    """GPU-verified, so the tuner measures it where it runs; the untuned op picks it on the yolov3 head (its choice
    scale is the resident family's, 2^-0.5, and its model's walk is shorter there: 128-pixel tiles fit)."""
    assert tma.supports(P(text)) is ok
    assert (get_spec(tma.FAMILY) in specs_for(P(text))) is ok
    if text == YOLO_HEAD:
        assert model_choice(P(text), H200).family == tma.FAMILY


def test_tiles_stay_within_one_image_and_resources() -> None:
    pl = plan(P(YOLO_HEAD), Config(128, 1, 2, 4, 1), H200)
    assert pl.config.tile_m == 128 and pl.config.threads == 384 and pl.n_tiles == 2
    assert pl.m_tiles == 8 * 22 and pl.grid == (H200.sm_count // 2, 2, 1)   # 2704 = 21·128 + 16: 22 tiles an image
    assert pl.tiles_per_block == 3
    assert pl.smem_bytes == 256 * 128 * 4 + 4 * 128 * 128 + 128 + 1024 <= H200.smem_per_block_bytes
    assert required_arch(pl.source()) == "sm_90a" and "128, 1, 2, 4, 8>(" in pl.source()   # NCH = 8
    six = plan(P(YOLO_HEAD), Config(128, 1, 2, 6, 1), H200)   # no staged tile: six 16 KB stages fit next to 128 KB
    assert six.smem_bytes <= H200.smem_per_block_bytes
    with pytest.raises(InvalidConfig) as err:
        plan(P(YOLO_HEAD), Config(128, 1, 2, 4, 2), H200)
    assert err.value.field == "splits"
    with pytest.raises(InvalidConfig) as err:   # 128 accumulators + two A sets of 32: ptxas spilled
        plan(P(YOLO_HEAD), Config(128, 2, 1, 4, 1), H200)
    assert err.value.field == "tile_n" and "spills" in str(err.value)
    with pytest.raises(InvalidConfig) as err:   # C = 512 × 128 rows: 256 KB of filters
        plan(P(YOLO_HEAD).replace(C=512), Config(128, 1, 2, 4, 1), H200)
    assert err.value.field == "tile_n" and "resident filter rows" in str(err.value)
    with pytest.raises(InvalidConfig) as err:
        plan(P(YOLO_HEAD).replace(C=200), Config(128, 1, 2, 4, 1), H200)
    assert err.value.field == "problem" and "multiple of 32" in str(err.value)
    plans = list(enumerate_plans(P(YOLO_HEAD), H200, family=tma.FAMILY))
    assert plans and all(p.config.splits == 1 and p.smem_bytes <= H200.smem_per_block_bytes for p in plans)
    assert all(p.config.accumulators + 32 * p.config.m_blocks <= tma.MAX_OPERAND_REGS for p in plans)


def _simulated_traffic(pl: tma.IgemmWgmma1x1TmaPlan) -> dict[str, int]:
    """Words the box walk reads: each block's filter boxes once (rows ≥ K read nothing), then per tile and chunk
    the x boxes' pixels below H·W (channels are always below C: C % 32 == 0)."""
    p, c = pl.problem, pl.config
    hw, tpi = p.H * p.W, tma.tiles_per_image(p, c)
    words = {"input": 0, "weight": 0, "output": p.output_elements}
    for _ in range(pl.n_tiles):
        for bx in range(min(pl.persistent_blocks, pl.m_tiles)):
            words["weight"] += c.tile_n * pl.cp     # the formula counts rows ≥ K (the kernel's zero fill)
            for tile in range(bx, pl.m_tiles, pl.persistent_blocks):
                px = (tile % tpi) * c.tile_m
                words["input"] += pl.chunks * 32 * max(0, min(c.tile_m, hw - px))
    return words


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=32 H=4 W=6 K=70 R=1 S=1 math=tf32", Config(64, 1, 2, 4, 1)),
    ("N=2 C=96 H=8 W=12 K=20 R=1 S=1 math=tf32", Config(128, 1, 1, 4, 1)),
    ("N=40 C=192 H=16 W=16 K=150 R=1 S=1 math=tf32", Config(64, 1, 1, 4, 1)),   # 160 tiles over the blocks
    (YOLO_HEAD, Config(128, 1, 2, 6, 1)),
])
def test_traffic_formula_matches_the_walk(text: str, config: Config) -> None:
    pl = plan(P(text), config, H200)
    assert tma.traffic_words(pl) == _simulated_traffic(pl)


def test_prepared_launch_passes_arguments_and_tensor_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch_recorder import install

    rec = install(monkeypatch)
    p = P("N=3 C=128 H=4 W=6 K=70 R=1 S=1 math=tf32")
    kernel = rec.kernel(tma.ENTRY, 3, 5, n_maps=2)
    pl = plan(p, Config(64, 1, 1, 4, 1), H200)
    prepared = tma.prepare_plan(pl, 0, kernel)
    assert prepared.operands == ("x", "filters", "y") and prepared.workspace_bytes == 0
    prepared((0x1000, 0x2000, 0x3000), 0x77)
    (gemm,) = rec.calls
    assert gemm.pointers == (0x1000, 0x2000, 0x3000) and list(gemm.ints) == [128, 24, 70, 1, 3]   # TPI 1, 3 tiles
    assert gemm.grid == pl.grid == (3, 2, 1) and gemm.block == (256, 1, 1) and gemm.smem_bytes == pl.smem_bytes
    x_map, f_map = (spec for spec, _, _ in rec.encoded)
    assert [ptr for _, ptr, _ in rec.encoded] == [0x1000, 0x2000]
    assert x_map == TiledMap("float32", 24, 3 * 128, 32, 32, 128)          # N·C rows of H·W pixels, 32 × 32 boxes
    assert f_map == TiledMap("float32", 128, 70, 32, 64, 128)              # K rows of Cp, tile_n × 32 boxes
    assert gemm.maps == tuple(data for *_, data in rec.encoded)


def test_registry_row_and_model() -> None:
    spec = get_spec(tma.FAMILY)
    pl = plan(P(YOLO_HEAD), Config(128, 1, 2, 4, 1), H200)
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0 and 0 < spec.predict_s(pl, H200) < 1
    assert spec.source_sha256() != get_spec(resident.FAMILY).source_sha256()
    assert spec.choice_classes == ("tf32",) and spec.choice_scale == 2 ** -0.5


REPRESENTATIVE = [
    ("n128_wg2_s4_nch8", YOLO_HEAD, Config(128, 1, 2, 4, 1)),
    ("n128_wg2_s6", YOLO_HEAD, Config(128, 1, 2, 6, 1)),
    ("n256_wg1_s4", "N=32 C=64 H=56 W=56 K=256 R=1 S=1 math=tf32", Config(256, 1, 1, 4, 1)),
    ("n64_mi2_wg2_s6_nch3", "N=32 C=96 H=28 W=28 K=128 R=1 S=1 math=tf32", Config(64, 2, 2, 6, 1)),
    ("n64_mi2_wg1_s4", "N=4 C=160 H=14 W=16 K=64 R=1 S=1 math=tf32", Config(64, 2, 1, 4, 1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernel_compiles_for_sm90a_without_spills() -> None:
    plans = [(name, plan(P(problem), config, H200)) for name, problem, config in REPRESENTATIVE]
    result, entries = compile_unit(tma._family_source(), plans, tma.ENTRY,
                                   'extern "C" __global__ void igemm_wgmma_pack(', helpers_once=True)
    assert_within_launch_bounds(result, entries)
    assert "injected" not in result.log, result.log[-2000:]

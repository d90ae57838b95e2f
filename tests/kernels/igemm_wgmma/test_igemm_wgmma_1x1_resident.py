"""The persistent TF32 wgmma 1×1 family (filters resident in shared memory) without a GPU: which problems and configs
it takes (no split, the filters must fit), the persistent grid, the traffic formula against a simulation of the block
walk, the prepared launch's arguments through the driver seam, and the kernel compiled by nvcc for sm_90a (no
spills, wgmma neither serialised nor waited for at a back edge)."""

from __future__ import annotations

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, required_arch
from convtune.kernels.igemm_wgmma import persistent
from convtune.kernels.igemm_wgmma import tf32_1x1_resident as resident
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.igemm_wgmma.tf32_1x1 import traffic_words
from convtune.kernels.igemm_wgmma.tf32_1x1_resident import IgemmWgmma1x1ResidentFwdConfig as Config
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
YOLO_HEAD = "N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    (YOLO_HEAD, True),
    ("N=3 C=13 H=4 W=6 K=70 R=1 S=1 math=tf32", True),
    ("N=3 C=13 H=5 W=5 K=70 R=1 S=1 math=tf32", False),               # H·W = 25
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 stride=2 math=tf32", False),
    ("N=2 C=64 H=8 W=8 K=64 R=3 S=3 pad=1 math=tf32", False),
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1", False),                         # strict float32
    ("N=2 C=64 H=8 W=8 K=64 R=1 S=1 dtype=bfloat16", False),
    ("N=33554428 C=1 H=8 W=8 K=1 R=1 S=1 math=tf32", False),   # N·H·W + 256 ≥ 2^31: 32-bit pixel indices
    ("N=33554427 C=1 H=8 W=8 K=1 R=1 S=1 math=tf32", True),
])
def test_supports_the_tf32_1x1_problems(text: str, ok: bool) -> None:
    assert resident.supports(P(text)) is ok
    assert (get_spec(resident.FAMILY) in specs_for(P(text))) is ok


def test_persistent_grid_and_resources() -> None:
    pl = plan(P(YOLO_HEAD), Config(128, 1, 1, 4, 1), H200)
    assert pl.config.tile_m == 64 and pl.n_tiles == 2 and pl.m_tiles == -(-8 * 52 * 52 // 64)
    assert pl.grid == (H200.sm_count // 2, 2, 1) and pl.tiles_per_block == 6        # 338 tiles over 66 blocks
    assert pl.smem_bytes == 256 * 128 * 4 + 4 * 32 * 72 * 4 + 128 * 68 * 4 + 128 + 1024 <= H200.smem_per_block_bytes
    assert required_arch(pl.source()) == "sm_90a" and "<128, 1, 1, 4, 8>(" in pl.source()   # NCH = 8
    wide = plan(P(YOLO_HEAD).replace(C=96), Config(256, 1, 1, 4, 1), H200)           # 256 rows: one column tile
    assert wide.grid == (H200.sm_count, 1, 1) and wide.chunks == 3
    small = plan(P("N=1 C=13 H=4 W=6 K=70 R=1 S=1 math=tf32"), Config(64, 1, 1, 4, 1), H200)
    assert small.grid == (1, 2, 1)                                                 # one pixel tile: one block a column
    no_machine = plan(P(YOLO_HEAD), Config(128, 1, 1, 4, 1))
    assert no_machine.grid == (persistent.DEFAULT_SMS // 2, 2, 1)


def test_refuses_splits_and_filters_that_do_not_fit() -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(YOLO_HEAD), Config(128, 1, 1, 4, 2), H200)
    assert err.value.field == "splits" and "allowed 1" in str(err.value)
    with pytest.raises(InvalidConfig) as err:   # C = 256 × 256 rows: 256 KB of filters
        plan(P(YOLO_HEAD), Config(256, 1, 1, 4, 1), H200)
    assert err.value.field == "tile_n" and "resident filter rows" in str(err.value)
    plans = list(enumerate_plans(P(YOLO_HEAD), H200, family=resident.FAMILY))
    assert plans and all(pl.config.splits == 1 and pl.smem_bytes <= H200.smem_per_block_bytes for pl in plans)
    assert {pl.config.tile_n for pl in plans} == {64, 128}
    assert not list(enumerate_plans(P(YOLO_HEAD).replace(C=2048), H200, family=resident.FAMILY))


def _simulated_traffic(pl: resident.IgemmWgmma1x1ResidentPlan) -> dict[str, int]:
    """Words the block walk requests: each block copies its tile_n filter rows × Cp once (rows ≥ K too), then per
    tile of its walk and chunk, an A copy (4 pixels of one channel) reads when the channel is below C and the pixels
    exist."""
    p, c = pl.problem, pl.config
    pixels = p.N * p.H * p.W
    words = {"input": 0, "weight": 0, "output": p.output_elements}
    for _by in range(pl.n_tiles):
        for bx in range(pl.persistent_blocks):
            if bx >= pl.m_tiles:
                continue
            words["weight"] += c.tile_n * pl.cp
            for tile in range(bx, pl.m_tiles, pl.persistent_blocks):
                for chunk in range(pl.chunks):
                    for cl in range(32):
                        if chunk * 32 + cl < p.C:
                            words["input"] += 4 * sum(tile * c.tile_m + 4 * j < pixels for j in range(c.tile_m // 4))
    return words


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=13 H=4 W=6 K=70 R=1 S=1 math=tf32", Config(64, 1, 2, 4, 1)),
    ("N=2 C=130 H=8 W=12 K=20 R=1 S=1 math=tf32", Config(64, 2, 1, 4, 1)),
    ("N=3 C=70 H=2 W=6 K=20 R=1 S=1 math=tf32", Config(64, 1, 1, 6, 1)),     # H·W = 12
    ("N=40 C=70 H=16 W=16 K=150 R=1 S=1 math=tf32", Config(64, 1, 1, 4, 1)),  # 160 tiles over 44 blocks a column
])
def test_traffic_formula_matches_the_walk(text: str, config: Config) -> None:
    pl = plan(P(text), config, H200)
    assert resident.traffic_words(pl) == _simulated_traffic(pl)


def test_prepared_launch_passes_the_kernel_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch_recorder import install

    rec = install(monkeypatch)
    p = P("N=3 C=13 H=4 W=6 K=70 R=1 S=1 math=tf32")
    kernels = rec.kernel(resident.ENTRY, 3, 5)
    pl = plan(p, Config(64, 1, 1, 4, 1), H200)
    prepared = resident.prepare_plan(pl, 0, kernels)
    assert prepared.operands == ("x", "filters", "y") and prepared.workspace_bytes == 0
    prepared((0x1000, 0x2000, 0x3000), 0x77)
    (gemm,) = rec.calls
    assert gemm.pointers == (0x1000, 0x2000, 0x3000) and list(gemm.ints) == [13, 24, 70, 72, 2]
    assert gemm.grid == pl.grid == (2, 2, 1) and gemm.smem_bytes == pl.smem_bytes


def test_registry_row_and_model() -> None:
    spec = get_spec(resident.FAMILY)
    pl = plan(P(YOLO_HEAD), Config(128, 1, 1, 4, 1), H200)
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0 and 0 < spec.predict_s(pl, H200) < 1
    assert spec.source_sha256() != get_spec("igemm_wgmma_1x1").source_sha256()
    # the filters are read once per block, not once per (pixel tile, column tile): far fewer weight requests
    first = plan(P(YOLO_HEAD), get_spec("igemm_wgmma_1x1").config_class(128, 1, 1, 4, 1), H200)
    assert resident.traffic_words(pl)["weight"] * 2 < traffic_words(first)["weight"]
    # the packed filters are the other TF32 wgmma plans' (one packing per weight tensor)
    assert spec.launcher.filters_key(pl) == get_spec("igemm_wgmma_1x1").launcher.filters_key(first)


REPRESENTATIVE = [
    ("128x64_s4_nch8", YOLO_HEAD, Config(128, 1, 1, 4, 1)),
    ("64x128_wg2_s3", YOLO_HEAD, Config(64, 1, 2, 3, 1)),
    ("64x128_mi2_s4", "N=8 C=200 H=52 W=52 K=64 R=1 S=1 math=tf32", Config(64, 2, 1, 4, 1)),
    ("256x64_s4_nch3", "N=32 C=96 H=28 W=28 K=256 R=1 S=1 math=tf32", Config(256, 1, 1, 4, 1)),
    ("64x256_nch1_s3", "N=32 C=13 H=14 W=14 K=100 R=1 S=1 math=tf32", Config(64, 2, 2, 3, 1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernel_compiles_for_sm90a_without_spills() -> None:
    plans = [(name, plan(P(problem), config, H200)) for name, problem, config in REPRESENTATIVE]
    result, entries = compile_unit(resident._family_source(), plans, resident.ENTRY,
                                   'extern "C" __global__ void igemm_wgmma_pack(', helpers_once=True)
    assert_within_launch_bounds(result, entries)
    # no wgmma wait forced at a loop's back edge (ptxas C7517 "warpgroup.wait is injected"): the MMAs of one chunk
    # overlap the next chunk's fragment reads
    assert "injected" not in result.log, result.log[-2000:]
    for entry, (name, _) in entries.items():
        print(name, result.resources[entry])

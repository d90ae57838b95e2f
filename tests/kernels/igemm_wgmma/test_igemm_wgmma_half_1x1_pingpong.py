"""The ping-pong 16-bit wgmma 1×1 family (filters resident, warpgroups taking turns over a block's tiles) without a
GPU: its problems and configs (no split, filters and the warpgroups' rings must fit, registers for every warpgroup),
the grid, the traffic formula against a simulation of the walk, the model's concurrent pipelines, the prepared
launch's arguments through the driver seam, and the kernel compiled by nvcc for sm_90a (no spills, wgmma neither
serialised nor waited for at a back edge)."""

from __future__ import annotations

import pytest
from test_igemm_wgmma_half_1x1_resident import _simulated_traffic
from wgmma_cases import assert_within_launch_bounds, compile_unit

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.compile import nvcc_available, required_arch
from convtune.kernels.igemm_wgmma import half_1x1_pingpong as pingpong
from convtune.kernels.igemm_wgmma import half_1x1_resident as resident
from convtune.kernels.igemm_wgmma.half_1x1_pingpong import IgemmWgmmaHalf1x1PingpongFwdConfig as Config
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
YOLO_HEAD = "N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=bfloat16"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize("text", [YOLO_HEAD, "N=3 C=13 H=5 W=5 K=70 R=1 S=1 dtype=float16",
                                  "N=2 C=64 H=8 W=8 K=64 R=1 S=1 stride=2 dtype=bfloat16",
                                  "N=2 C=64 H=8 W=8 K=64 R=1 S=1 math=tf32"])
def test_supports_what_the_resident_family_supports_when_opted_in(text: str, monkeypatch) -> None:
    assert pingpong.supports(P(text)) is resident.supports(P(text))
    assert get_spec(pingpong.FAMILY) not in specs_for(P(text))    # the op, tuner and service leave it alone
    monkeypatch.setenv(experimental.ENV, pingpong.FAMILY)
    assert (get_spec(pingpong.FAMILY) in specs_for(P(text))) is resident.supports(P(text))


def test_every_warpgroup_covers_all_rows_and_has_its_own_ring() -> None:
    pl = plan(P(YOLO_HEAD), Config(64, 4, 2, 6, 1), H200)
    assert pl.config.tile_m == 256 and pl.config.threads == 256 and pl.m_tiles == 1
    assert pl.grid == (H200.sm_count, 1, 1) and pl.tiles_per_block == 3             # 338 tiles over 132 blocks
    assert pl.smem_bytes == 256 * 256 * 2 + 2 * 6 * 64 * 128 + 1024 <= H200.smem_per_block_bytes
    assert required_arch(pl.source()) == "sm_90a" and "64, 4, 2, 6, 8, 4>(" in pl.source()   # PIX = 8, NCH = 4
    three = plan(P(YOLO_HEAD), Config(64, 2, 3, 6, 1), H200)                          # 128 rows: two row tiles
    assert three.config.threads == 384 and three.grid == (H200.sm_count // 2, 2, 1)


def test_refuses_splits_filters_and_registers_that_do_not_fit() -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(YOLO_HEAD), Config(64, 4, 2, 6, 2), H200)
    assert err.value.field == "splits" and "allowed 1" in str(err.value)
    with pytest.raises(InvalidConfig) as err:   # C = 512 × 256 rows: 256 KB of filters
        plan(P(YOLO_HEAD).replace(C=512), Config(64, 4, 2, 4, 1), H200)
    assert err.value.field == "m_blocks" and "resident filter rows" in str(err.value)
    with pytest.raises(InvalidConfig) as err:   # 3 × 128 threads × ~176 registers > 64 K
        plan(P(YOLO_HEAD).replace(C=64), Config(64, 4, 3, 4, 1), H200)
    assert err.value.field == "warpgroups" and "registers" in str(err.value)
    with pytest.raises(InvalidConfig) as err:
        plan(P(YOLO_HEAD), Config(64, 2, 1, 4, 1), H200)
    assert err.value.field == "warpgroups" and "allowed (2, 3)" in str(err.value)
    plans = list(enumerate_plans(P(YOLO_HEAD), H200, family=pingpong.FAMILY))
    assert plans and all(pl.config.splits == 1 and pl.smem_bytes <= H200.smem_per_block_bytes for pl in plans)
    assert {pl.config.tile_m for pl in plans} == {64, 128, 256} and {pl.config.warpgroups for pl in plans} == {2, 3}


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=13 H=4 W=6 K=70 R=1 S=1 dtype=float16", Config(64, 1, 2, 4, 1)),
    ("N=2 C=130 H=8 W=12 K=20 R=1 S=1 dtype=bfloat16", Config(128, 1, 3, 4, 1)),
    ("N=40 C=70 H=16 W=16 K=150 R=1 S=1 dtype=bfloat16", Config(64, 4, 2, 4, 1)),   # 160 tiles over 132 blocks
])
def test_traffic_formula_matches_the_walk(text: str, config: Config) -> None:
    """The warpgroups split a block's tiles, not its requests: the resident kernel's walk."""
    pl = plan(P(text), config, H200)
    assert pingpong.traffic_elements(pl) == _simulated_traffic(pl)


def test_model_runs_the_block_tiles_on_concurrent_pipelines() -> None:
    spec = get_spec(pingpong.FAMILY)
    pl = plan(P(YOLO_HEAD), Config(64, 4, 2, 6, 1), H200)
    same = plan(P(YOLO_HEAD), get_spec(resident.FAMILY).config_class(64, 2, 2, 6, 1), H200)   # 256 rows, one ring
    assert same.tiles_per_block == pl.tiles_per_block == 3
    assert 0 < spec.predict_s(pl, H200) < get_spec(resident.FAMILY).predict_s(same, H200)
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0
    assert spec.source_sha256() != get_spec(resident.FAMILY).source_sha256()


def test_prepared_launch_passes_the_kernel_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch_recorder import install

    from convtune.kernels.igemm.half import HalfKernels

    rec = install(monkeypatch)
    p = P("N=3 C=13 H=4 W=6 K=70 R=1 S=1 dtype=bfloat16")
    kernels = HalfKernels(None, rec.kernel(pingpong.ENTRY, 3, 6), None)
    pl = plan(p, Config(64, 1, 2, 4, 1), H200)
    prepared = pingpong.prepare_plan(pl, 0, kernels)
    assert prepared.operands == ("x", "filters", "y") and prepared.workspace_bytes == 0
    prepared((0x1000, 0x2000, 0x3000), 0x77)
    (gemm,) = rec.calls
    assert gemm.pointers == (0x1000, 0x2000, 0x3000) and list(gemm.ints) == [13, 24, 70, 72, 64, 2]
    assert gemm.grid == pl.grid == (2, 2, 1) and gemm.block == (256, 1, 1) and gemm.smem_bytes == pl.smem_bytes


REPRESENTATIVE = [
    ("bf16_256x64_wg2_s6_nch4", YOLO_HEAD, Config(64, 4, 2, 6, 1)),
    ("bf16_128x64_wg3_s6", YOLO_HEAD, Config(64, 2, 3, 6, 1)),
    ("f16_128x128_wg2_s4", "N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=float16", Config(128, 2, 2, 4, 1)),
    ("bf16_pix4_64x128_wg3_nch1", "N=32 C=40 H=14 W=14 K=100 R=1 S=1 dtype=bfloat16", Config(128, 1, 3, 4, 1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernel_compiles_for_sm90a_without_spills() -> None:
    plans = [(name, plan(P(problem), config, H200)) for name, problem, config in REPRESENTATIVE]
    result, entries = compile_unit(pingpong._family_source(), plans, pingpong.ENTRY,
                                   'extern "C" __global__ void igemm_wgmma_pack(', helpers_once=True)
    assert_within_launch_bounds(result, entries)
    assert "injected" not in result.log, result.log[-2000:]

"""The TF32 1×1 wgmma family (``igemm_wgmma_1x1``: x read from NCHW into registers) without a GPU: which problems it
takes, config rules naming the field, the traffic formula against a simulation of the kernel's copy loops, the
prepared launch through the driver seam (no layout change, no workspace; a split zeroes y), the filters shared with
the general TF32 plans, and the kernel compiled by nvcc for sm_90a (no spills, wgmma not serialised)."""

from __future__ import annotations

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available
from convtune.kernels.igemm_wgmma import launcher, tf32_1x1
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.igemm_wgmma.tf32_1x1 import IgemmWgmma1x1FwdConfig, supports, traffic_words
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
LAYER = "N=32 C=1024 H=14 W=14 K=256 R=1 S=1 math=tf32"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    (LAYER, True),
    ("N=3 C=13 H=5 W=4 K=7 R=1 S=1 math=tf32", True),                # H·W = 20
    ("N=3 C=13 H=5 W=5 K=7 R=1 S=1 math=tf32", False),               # H·W = 25: a copy would straddle images
    ("N=32 C=256 H=56 W=56 K=64 R=1 S=1", False),                    # strict float32
    ("N=32 C=256 H=56 W=56 K=64 R=1 S=1 stride=2 math=tf32", False),
    ("N=32 C=256 H=56 W=56 K=64 R=1 S=1 pad=1 math=tf32", False),
    ("N=32 C=256 H=56 W=56 K=64 R=3 S=3 pad=1 math=tf32", False),
    ("N=32 C=256 H=56 W=56 K=64 R=1 S=1 dtype=bfloat16", False),     # 16-bit: igemm_wgmma_half_1x1
])
def test_supports_tf32_1x1_stride_1_unpadded(text: str, ok: bool) -> None:
    assert supports(P(text)) is ok
    assert (get_spec("igemm_wgmma_1x1") in specs_for(P(text))) is ok


@pytest.mark.parametrize(("config", "field"), [
    (IgemmWgmma1x1FwdConfig(tile_n=96), "tile_n"),
    (IgemmWgmma1x1FwdConfig(tile_n=256, m_blocks=2), "tile_n"),      # 256 accumulators per thread
    (IgemmWgmma1x1FwdConfig(splits=33), "splits"),                    # 32 chunks of 32 channels
    (IgemmWgmma1x1FwdConfig(tile_n=256, m_blocks=1, warpgroups=2, stages=6), "stages"),   # shared memory
])
def test_bad_configs_name_the_field(config: IgemmWgmma1x1FwdConfig, field: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(LAYER), config, H200)
    assert err.value.field == field


def test_space_and_plan() -> None:
    """Rows are pixels (64 · warpgroups · m_blocks), columns output channels; Cp and KRp are ⌈C/32⌉·32; shared memory
    holds [32 channels][BM + 8 pixels] words of A and BN 128-byte rows of B per stage."""
    plans = list(enumerate_plans(P(LAYER), H200, family="igemm_wgmma_1x1"))
    assert len(plans) >= 12 and all(pl.smem_bytes <= H200.smem_per_block_bytes for pl in plans)
    pl = plan(P("N=3 C=13 H=5 W=4 K=77 R=1 S=1 math=tf32"), IgemmWgmma1x1FwdConfig(64, 2, 1, 4, 1), H200)
    assert (pl.cp, pl.krp, pl.chunks, pl.grid) == (32, 32, 1, (1, 2, 1))
    assert pl.smem_bytes == 4 * (32 * (128 + 8) * 4 + 64 * 128) + 1024
    assert "<convtune_tf32, 64, 2, 1, 4, 128, 0, true>" in pl.source()


def _simulated_traffic(pl: tf32_1x1.IgemmWgmma1x1Plan) -> dict[str, int]:
    """What the kernel's copy loops request, block by block: A copies of 4 pixels of a channel read only inside
    N·H·W and C; every B copy of a tile counts; y written per split (and zeroed once when split)."""
    p, c = pl.problem, pl.config
    pixels, out = p.N * p.H * p.W, p.output_elements
    words = {"input": 0, "weight": 0}
    for bx in range(pl.m_tiles):
        for _ in range(pl.n_tiles):
            for chunk in range(pl.chunks):
                channels = sum(1 for cl in range(32) if chunk * 32 + cl < p.C)
                px = sum(4 for q in range(bx * c.tile_m, (bx + 1) * c.tile_m, 4) if q < pixels)
                words["input"] += channels * px
                words["weight"] += c.tile_n * 32
    return {**words, "output": out * pl.splits_launched + (out if pl.splits_launched > 1 else 0)}


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=13 H=5 W=4 K=77 R=1 S=1 math=tf32", IgemmWgmma1x1FwdConfig(64, 1, 1, 4, 1)),
    ("N=2 C=100 H=6 W=6 K=300 R=1 S=1 math=tf32", IgemmWgmma1x1FwdConfig(128, 2, 1, 4, 2)),
    ("N=1 C=64 H=4 W=9 K=3 R=1 S=1 math=tf32", IgemmWgmma1x1FwdConfig(256, 1, 2, 4, 1)),
])
def test_traffic_formula_matches_the_copy_loops(text: str, config: IgemmWgmma1x1FwdConfig) -> None:
    pl = plan(P(text), config, H200)
    assert traffic_words(pl) == _simulated_traffic(pl)


def test_prepared_launch_reads_x_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """One launch on (x, filters, y) with arguments (N, C, H·W, K, KRp, chunks per split); a split zeroes y first
    and launches the GEMM over its splits; no workspace. The filters are the general TF32 plans' of the problem."""
    from launch_recorder import install

    rec = install(monkeypatch)
    p = P("N=3 C=100 H=6 W=6 K=70 R=1 S=1 math=tf32")
    for splits, zeroed in ((1, False), (2, True)):
        rec.calls.clear()
        pl = plan(p, IgemmWgmma1x1FwdConfig(64, 1, 1, 4, splits), H200)
        kernels = rec.kernel(tf32_1x1.ENTRY, 3, 6)
        prepared = tf32_1x1.prepare_plan(pl, 0, kernels)
        assert prepared.workspace_bytes == 0 and prepared.operands == ("x", "filters", "y")
        prepared((0x1000, 0x2000, 0x3000), 0x77)
        (gemm,) = rec.launches()
        assert gemm.pointers == (0x1000, 0x2000, 0x3000) and list(gemm.ints) == [3, 100, 36, 70, 128, 4 // splits]
        assert gemm.grid == (-(-108 // 64), 2, splits) and gemm.block == (128, 1, 1)
        memsets = [c for c in rec.calls if c.kind == "memset"]
        assert [(m.pointers, m.nbytes) for m in memsets] == ([((0x3000,), 4 * p.output_elements)] if zeroed else [])
    general = plan(p, IgemmWgmmaFwdConfig(64, 1, 1, 4, 1), H200)
    assert launcher.layout_key(pl) == launcher.layout_key(general)    # one packed (K, Cp) operand for both


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernel_compiles_for_sm90a_without_spills() -> None:
    configs = (IgemmWgmma1x1FwdConfig(256, 1, 2, 4, 1), IgemmWgmma1x1FwdConfig(128, 2, 1, 4, 1),
               IgemmWgmma1x1FwdConfig(64, 1, 1, 6, 4))
    plans = [(config.key(), plan(P(LAYER), config, H200)) for config in configs]
    # the GEMM entries only
    result, entries = compile_unit(launcher._family_source(), plans, tf32_1x1.ENTRY,
                                   'extern "C" __global__ void igemm_wgmma_pack(')
    assert_within_launch_bounds(result, entries)


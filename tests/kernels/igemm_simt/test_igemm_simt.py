"""The implicit-GEMM CUDA-core family without a GPU: which problems it takes, config rules naming the field, the
traffic formula against a simulation of the kernel's copy loops (padding, strides, dilation, tails), the space, the
registry row, and the kernel compiled by nvcc (no spills, registers within ``__launch_bounds__``)."""

from __future__ import annotations

import re

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.igemm_simt import launcher
from convtune.kernels.igemm_simt.launcher import IgemmSimtFwdConfig, supports, traffic_words
from convtune.kernels.igemm_simt.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
STRIDED = "N=32 C=256 H=28 W=28 K=256 R=3 S=3 stride=2 pad=1"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    ("N=2 C=8 H=7 W=7 K=16 R=3 S=3 pad=1", True),
    ("N=2 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3", True),
    ("N=2 C=8 H=17 W=17 K=16 R=7 S=1 pad=3", True),
    ("N=2 C=8 H=33 W=33 K=16 R=3 S=3 pad=6 dilation=6", True),
    ("N=2 C=8 H=7 W=7 K=16 R=1 S=1", True),
    ("N=2 C=8 H=7 W=7 K=8 R=3 S=3 groups=8", False),
    ("N=2 C=8 H=7 W=7 K=8 R=3 S=3 dtype=bfloat16", False),
])
def test_supports_every_dense_float32_convolution(text: str, ok: bool) -> None:
    assert supports(P(text)) is ok
    assert (get_spec("igemm_simt") in specs_for(P(text))) is ok


@pytest.mark.parametrize(("config", "field"), [
    (IgemmSimtFwdConfig(tile_m=48), "tile_m"),
    (IgemmSimtFwdConfig(tile_n=36), "tile_n"),
    (IgemmSimtFwdConfig(tile_m=256, tile_n=256), "tile_n"),           # 1024 threads
    (IgemmSimtFwdConfig(chunk_crs=6), "chunk_crs"),
    (IgemmSimtFwdConfig(tile_n=32, chunk_crs=8), "chunk_crs"),        # 16 input copies per thread
    (IgemmSimtFwdConfig(stages=5), "stages"),
    (IgemmSimtFwdConfig(chunk_crs=16, splits=256), "splits"),         # C·R·S=2304 has 144 chunks of 16
    (IgemmSimtFwdConfig(tile_m=256, tile_n=128, chunk_crs=64, stages=4), "chunk_crs"),
])
def test_bad_configs_name_the_field(config: IgemmSimtFwdConfig, field: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(STRIDED), config, H200)
    assert err.value.field == field


def test_a_split_without_reduction_rows_is_refused() -> None:
    with pytest.raises(InvalidConfig) as err:  # C·R·S = 45 rows: 6 chunks of 8 in 4 splits of 2 leave one empty
        plan(P("N=1 C=5 H=8 W=8 K=32 R=3 S=3 pad=1"), IgemmSimtFwdConfig(chunk_crs=8, splits=4), H200)
    assert err.value.field == "splits" and "splits=3" in str(err.value)


def _simulated_traffic(pl: launcher.IgemmSimtFwdPlan) -> dict[str, int]:
    """Words the kernel's copy loops request, block by block (the .cu's load_stage and epilogue): a copy reads
    only when its row is inside C·R·S, its pixel inside M and its tap inside the map."""
    p, c = pl.problem, pl.config
    m_total = p.N * p.P * p.Q
    crs = p.C * p.R * p.S
    words = {"input": 0, "weight": 0, "output": 0}
    chunks = -(-crs // c.chunk_crs)
    for bz in range(c.splits):
        first = bz * pl.chunks_per_split
        for bx in range(pl.m_tiles):
            for by in range(pl.k_tiles):
                for chunk in range(first, min(chunks, first + pl.chunks_per_split)):
                    for kk in range(c.chunk_crs):
                        j = chunk * c.chunk_crs + kk
                        if j >= crs:
                            continue
                        r, s = (j % (p.R * p.S)) // p.S, j % p.S
                        for mm in range(c.tile_m):
                            m = bx * c.tile_m + mm
                            if m >= m_total:
                                continue
                            pq = m % (p.P * p.Q)
                            ih = (pq // p.Q) * p.stride_h - p.pad_h + r * p.dil_h
                            iw = (pq % p.Q) * p.stride_w - p.pad_w + s * p.dil_w
                            words["input"] += 0 <= ih < p.H and 0 <= iw < p.W
                        for col in range(0, c.tile_n, 4):
                            words["weight"] += 4 * (by * c.tile_n + col < pl.kp)
    out = p.N * p.K * p.P * p.Q
    words["output"] = out * c.splits + (out if c.splits > 1 else 0)
    return words


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=5 H=7 W=9 K=37 R=3 S=3 pad=1", IgemmSimtFwdConfig(32, 64, 8, 2, 1)),
    ("N=2 C=3 H=15 W=13 K=20 R=7 S=7 stride=2 pad=3", IgemmSimtFwdConfig(64, 32, 4, 3, 2)),
    ("N=1 C=4 H=9 W=11 K=16 R=1 S=5 pad_h=0 pad_w=2", IgemmSimtFwdConfig(32, 64, 8, 4, 1)),
    ("N=2 C=2 H=6 W=6 K=130 R=3 S=3 pad=4 dilation=4", IgemmSimtFwdConfig(128, 64, 8, 2, 1)),
    ("N=1 C=3 H=19 W=19 K=8 R=11 S=11 stride=4 pad=2", IgemmSimtFwdConfig(32, 64, 4, 2, 4)),
])
def test_traffic_formula_matches_the_copy_loops(text: str, config: IgemmSimtFwdConfig) -> None:
    pl = plan(P(text), config, H200)
    assert traffic_words(pl) == _simulated_traffic(pl)


def test_space_covers_the_layers_it_is_for_within_the_machine() -> None:
    for text in (STRIDED, "N=16 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3", "N=16 C=160 H=17 W=17 K=192 R=7 S=1",
                 "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2", "N=1 C=1024 H=41 W=41 K=21 R=3 S=3 pad=24 dilation=24"):
        plans = list(enumerate_plans(P(text), H200))
        assert len(plans) >= 24, text
        for pl in plans:
            assert pl.smem_bytes <= H200.smem_per_block_bytes and 32 <= pl.config.threads <= 512
            assert pl.a_copies <= launcher.MAX_COPIES and pl.b_copies <= launcher.MAX_COPIES
    # a small grid gets split configs; one that fills the GPU does not
    assert any(pl.config.splits > 1 for pl in enumerate_plans(P("N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1"), H200))
    assert all(pl.config.splits == 1 for pl in enumerate_plans(P("N=32 C=64 H=56 W=56 K=256 R=3 S=3 pad=1"), H200))


def test_registry_row_shares_the_direct_bound_floor_and_filters() -> None:
    spec = get_spec("igemm_simt")
    direct = get_spec("direct")
    p = P(STRIDED)
    pl = plan(p, IgemmSimtFwdConfig(), H200)
    assert spec.algorithm == "direct" and spec.bound_words(pl, 12288) == direct.bound_words(
        direct.plan(p, direct.config_class(), H200), 12288)
    assert spec.floor_work(p, 12288) == direct.floor_work(p, 12288)
    assert spec.launcher.filters_key(pl) == direct.launcher.filters_key(None)
    assert len(spec.source_sha256()) == 64
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > spec.config_class().threads * 64
    assert IgemmSimtFwdConfig().key().startswith("igemm_simt.fwd tile_m=128")
    assert 0 < spec.predict_s(pl, H200) < 1


REPRESENTATIVE = [
    ("strided_128x128", STRIDED, IgemmSimtFwdConfig(128, 128, 8, 3, 1)),
    ("stem_256x64", "N=16 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3", IgemmSimtFwdConfig(256, 64, 8, 2, 1)),
    ("7x1_64x64_split4", "N=16 C=160 H=17 W=17 K=192 R=7 S=1", IgemmSimtFwdConfig(64, 64, 8, 4, 4)),
    ("5x5_bk16", "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2", IgemmSimtFwdConfig(64, 128, 16, 3, 1)),
    ("dilated_narrow", "N=1 C=1024 H=41 W=41 K=21 R=3 S=3 pad=24 dilation=24", IgemmSimtFwdConfig(128, 32, 4, 4, 8)),
    ("two_pixels", "N=4 C=64 H=7 W=7 K=64 R=3 S=3 pad=1", IgemmSimtFwdConfig(128, 32, 4, 2, 1)),
    ("alexnet_11x11", "N=16 C=3 H=224 W=224 K=64 R=11 S=11 stride=4 pad=2", IgemmSimtFwdConfig(128, 64, 8, 4, 1)),
]


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_without_spills() -> None:
    family = launcher._family_source()
    text, entries = family, {}
    for i, (name, problem, config) in enumerate(REPRESENTATIVE):
        pl = plan(P(problem), config, H200)
        wrapper = pl.source()[len(family):]
        entry = f"igemm_simt_fwd_{i}"
        text += re.sub(rf"\b{launcher.ENTRY}\(", f"{entry}(", wrapper)
        entries[entry] = (name, pl)
    resources = nvcc_compile(text, "sm_90").resources
    for entry, (name, pl) in entries.items():
        res = resources[entry]
        assert not res.spills, f"{name}: {res}"
        assert res.num_regs <= min(255, 65536 // (pl.config.threads * pl.min_blocks)), f"{name}: {res.num_regs}"

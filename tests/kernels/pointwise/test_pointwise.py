"""The pointwise (1×1) family without a GPU: which problems it takes, config rules naming the field, the
traffic formula against a simulation of the kernel's copy loops, the space, the registry row, and the kernel
compiled by nvcc (no spills, registers within ``__launch_bounds__``) at representative configs."""

from __future__ import annotations

import re

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.pointwise import launcher
from convtune.kernels.pointwise.launcher import PointwiseFwdConfig, supports, traffic_words
from convtune.kernels.pointwise.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
RESNET_1X1 = "N=32 C=256 H=14 W=14 K=1024 R=1 S=1"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    ("N=2 C=8 H=7 W=7 K=16 R=1 S=1", True),
    ("N=2 C=8 H=9 W=9 K=16 R=1 S=1 stride=2", True),
    ("N=2 C=8 H=7 W=7 K=16 R=1 S=1 dilation=3", True),     # dilation is irrelevant for 1×1 filters
    ("N=2 C=8 H=7 W=7 K=16 R=1 S=1 pad=1", False),
    ("N=2 C=8 H=7 W=7 K=16 R=3 S=3 pad=1", False),
    ("N=2 C=8 H=7 W=7 K=8 R=1 S=1 groups=8", False),
])
def test_supports_only_unpadded_1x1_dense(text: str, ok: bool) -> None:
    assert supports(P(text)) is ok
    assert (get_spec("pointwise") in specs_for(P(text))) is ok


@pytest.mark.parametrize(("config", "field"), [
    (PointwiseFwdConfig(tile_m=36), "tile_m"),
    (PointwiseFwdConfig(tile_n=512), "tile_n"),
    (PointwiseFwdConfig(tile_m=8, tile_n=8), "tile_m"),            # 1 thread
    (PointwiseFwdConfig(chunk_c=6), "chunk_c"),
    (PointwiseFwdConfig(stages=1), "stages"),
    (PointwiseFwdConfig(splits=64), "splits"),                      # C=256 has 32 chunks of 8
    (PointwiseFwdConfig(chunk_c=8, splits=3), "splits"),           # 32 chunks in 3 splits of 11: fine
    (PointwiseFwdConfig(tile_m=128, tile_n=128, chunk_c=64, stages=4), "chunk_c"),  # 256 KiB of smem
])
def test_bad_configs_name_the_field(config: PointwiseFwdConfig, field: str) -> None:
    if config.splits == 3:
        plan(P(RESNET_1X1), config, H200)  # a valid uneven split: 11 + 11 + 10 chunks
        return
    with pytest.raises(InvalidConfig) as err:
        plan(P(RESNET_1X1), config, H200)
    assert err.value.field == field


def test_a_split_without_channels_is_refused() -> None:
    with pytest.raises(InvalidConfig) as err:  # 5 chunks in 4 splits of 2: the last split is empty
        plan(P("N=1 C=40 H=8 W=8 K=32 R=1 S=1"), PointwiseFwdConfig(chunk_c=8, splits=4), H200)
    assert err.value.field == "splits" and "splits=3" in str(err.value)


def test_copy_width_follows_stride_and_map_size() -> None:
    assert plan(P("N=2 C=8 H=14 W=14 K=16 R=1 S=1"), PointwiseFwdConfig(), H200).vec == 4
    assert plan(P("N=2 C=8 H=7 W=7 K=16 R=1 S=1"), PointwiseFwdConfig(), H200).vec == 1     # 49 % 4
    assert plan(P("N=2 C=8 H=14 W=14 K=16 R=1 S=1 stride=2"), PointwiseFwdConfig(), H200).vec == 1


def _simulated_traffic(pl: launcher.PointwiseFwdPlan) -> dict[str, int]:
    """Words the kernel's copy loops request, block by block (the .cu's load_stage and epilogue)."""
    p, c = pl.problem, pl.config
    m_total = p.N * p.P * p.Q
    words = {"input": 0, "weight": 0, "output": 0}
    chunks = -(-p.C // c.chunk_c)
    for bz in range(c.splits):
        first = bz * pl.chunks_per_split
        count = min(chunks - first, pl.chunks_per_split)
        for bx in range(pl.m_tiles):
            for by in range(pl.k_tiles):
                for chunk in range(first, first + max(0, count)):
                    c0 = chunk * c.chunk_c
                    for kk in range(c.chunk_c):
                        if c0 + kk >= p.C:
                            continue
                        for mm in range(0, c.tile_m, pl.vec):
                            if bx * c.tile_m + mm < m_total:
                                words["input"] += pl.vec
                        for col in range(0, c.tile_n, 4):
                            if by * c.tile_n + col < pl.kp:
                                words["weight"] += 4
    out = p.N * p.K * p.P * p.Q
    words["output"] = out * c.splits + (out if c.splits > 1 else 0)
    return words


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=20 H=7 W=7 K=37 R=1 S=1", PointwiseFwdConfig(32, 64, 8, 2, 1)),
    ("N=2 C=33 H=8 W=12 K=70 R=1 S=1", PointwiseFwdConfig(64, 32, 8, 3, 2)),
    ("N=1 C=64 H=9 W=11 K=16 R=1 S=1 stride=2", PointwiseFwdConfig(32, 64, 16, 4, 4)),
    ("N=5 C=8 H=4 W=4 K=130 R=1 S=1", PointwiseFwdConfig(128, 64, 8, 2, 1)),
])
def test_traffic_formula_matches_the_copy_loops(text: str, config: PointwiseFwdConfig) -> None:
    pl = plan(P(text), config, H200)
    assert traffic_words(pl) == _simulated_traffic(pl)


def test_space_covers_resnet_layers_within_the_machine() -> None:
    for text in (RESNET_1X1, "N=32 C=2048 H=7 W=7 K=512 R=1 S=1", "N=32 C=1024 H=14 W=14 K=2048 R=1 S=1 stride=2"):
        plans = list(enumerate_plans(P(text), H200))
        assert len(plans) >= 24, text
        for pl in plans:
            assert pl.smem_bytes <= H200.smem_per_block_bytes and 32 <= pl.config.threads <= 512
    assert list(enumerate_plans(P("N=1 C=8 H=8 W=8 K=8 R=3 S=3 pad=1"), H200)) == []
    # small maps with many channels get split-C configs; a grid that fills the GPU does not
    assert any(pl.config.splits > 1 for pl in enumerate_plans(P("N=32 C=2048 H=7 W=7 K=512 R=1 S=1"), H200))
    assert all(pl.config.splits == 1 for pl in enumerate_plans(P("N=32 C=256 H=56 W=56 K=256 R=1 S=1"), H200))


def test_registry_row_shares_the_direct_bound_and_filters() -> None:
    spec = get_spec("pointwise")
    direct = get_spec("direct")
    p = P(RESNET_1X1)
    pl = plan(p, PointwiseFwdConfig(), H200)
    assert spec.algorithm == "direct" and spec.bound_words(pl, 12288) == direct.bound_words(
        direct.plan(p, direct.config_class(), H200), 12288)
    assert spec.floor_work(p, 12288) == direct.floor_work(p, 12288)
    assert spec.launcher.filters_key(pl) == direct.launcher.filters_key(None)
    assert len(spec.source_sha256()) == 64
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > spec.config_class().threads * 64
    assert PointwiseFwdConfig().key().startswith("pointwise.fwd tile_m=128")


REPRESENTATIVE = [
    ("vec4", "N=32 C=256 H=14 W=14 K=1024 R=1 S=1", PointwiseFwdConfig(128, 128, 8, 3, 1)),
    ("vec4_bk16_s4", "N=32 C=256 H=56 W=56 K=64 R=1 S=1", PointwiseFwdConfig(64, 64, 16, 4, 1)),
    ("vec1_7x7_split4", "N=32 C=2048 H=7 W=7 K=512 R=1 S=1", PointwiseFwdConfig(32, 128, 16, 2, 4)),
    ("vec1_stride2", "N=32 C=1024 H=14 W=14 K=2048 R=1 S=1 stride=2", PointwiseFwdConfig(64, 128, 8, 4, 1)),
    ("narrow_n", "N=32 C=96 H=56 W=56 K=24 R=1 S=1", PointwiseFwdConfig(128, 32, 16, 3, 1)),
    ("most_copies", "N=4 C=64 H=7 W=7 K=64 R=1 S=1", PointwiseFwdConfig(64, 32, 8, 2, 1)),
]


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_without_spills() -> None:
    family = launcher._family_source()
    text, entries = family, {}
    for i, (name, problem, config) in enumerate(REPRESENTATIVE):
        pl = plan(P(problem), config, H200)
        wrapper = pl.source()[len(family):]
        entry = f"pointwise_fwd_{i}"
        text += re.sub(rf"\b{launcher.ENTRY}\(", f"{entry}(", wrapper)
        entries[entry] = (name, pl)
    resources = nvcc_compile(text, "sm_90").resources
    for entry, (name, pl) in entries.items():
        res = resources[entry]
        assert not res.spills, f"{name}: {res}"
        assert res.num_regs <= min(255, 65536 // (pl.config.threads * pl.min_blocks)), f"{name}: {res.num_regs}"

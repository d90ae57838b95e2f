"""The 16-bit direct family without a GPU: which problems it takes, config rules naming the field, the persistent
traffic formula against a simulation of the threads' loads, the prepared launch's arguments through the driver seam,
the registry row and the untuned choice on the stems it exists for, and the kernel compiled by nvcc (no spills,
registers within ``__launch_bounds__``) at representative configs."""

from __future__ import annotations

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.direct_half import launcher
from convtune.kernels.direct_half.launcher import DirectHalfFwdConfig as Config
from convtune.kernels.direct_half.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
LENET = "N=64 C=1 H=28 W=28 K=20 R=5 S=5 dtype=bfloat16"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    (LENET, True),
    ("N=2 C=3 H=9 W=11 K=7 R=3 S=3 stride=2 pad=1 dtype=float16", True),
    ("N=2 C=16 H=9 W=11 K=7 R=2 S=2 dilation=2 dtype=bfloat16", True),      # C·R·S = 64
    ("N=2 C=16 H=9 W=11 K=7 R=3 S=3 dtype=bfloat16", False),                 # C·R·S = 144: tensor cores win
    ("N=16 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16", False),   # a 7×7 stem
    ("N=2 C=17 H=9 W=11 K=7 R=3 S=3 dtype=bfloat16", False),                 # C above the family's range
    ("N=2 C=3 H=9 W=11 K=7 R=3 S=3 dtype=float32", False),
    ("N=2 C=3 H=9 W=11 K=6 R=3 S=3 groups=3 dtype=bfloat16", False),
])
def test_supports_few_channel_16bit_problems(text: str, ok: bool) -> None:
    assert launcher.supports(P(text)) is ok
    assert (get_spec("direct_half") in specs_for(P(text))) is ok


def test_plan_geometry_and_rules() -> None:
    pl = plan(P(LENET), Config(8, 2, 8, 4), H200)
    assert pl.grid == (-(-24 // 16), 24 // 4, 64 * 3) and pl.k_tiles == 3 and pl.threads == 32
    assert pl.smem_bytes == 4 * 8 * 25 and "8, 2, 8, 4, 5, 5, 1, 1, 1, 1>(" in pl.source()
    for bad, field in ((Config(6, 2, 8, 4), "k_block"), (Config(8, 3, 8, 4), "pixels"),
                       (Config(8, 2, 8, 2), "threads_y"), (Config(32, 4, 8, 4), "pixels")):
        with pytest.raises(InvalidConfig) as err:
            plan(P(LENET), bad, H200)
        assert err.value.field == field, (bad, err.value)
    with pytest.raises(InvalidConfig) as err:
        plan(P("N=1 C=16 H=32 W=32 K=64 R=3 S=3 dtype=bfloat16"), Config(32, 1, 32, 4), H200)
    assert err.value.field == "problem" and "C·R·S ≤ 64" in str(err.value)
    plans = list(enumerate_plans(P(LENET), H200))
    assert plans and {pl.config.k_block for pl in plans} == {4, 8, 16, 32}
    assert all(pl.config.threads_x * pl.config.pixels <= 32 for pl in plans)        # Q = 24: rows of ≤ 32 outputs


def _simulated_traffic(pl: launcher.DirectHalfFwdPlan) -> dict[str, int]:
    """Per block, the hull of the input rows and columns its threads' loads touch (in-image loads only), per channel;
    its KB·C·R·S filters; y once."""
    p, c = pl.problem, pl.config
    elems = {"input": 0, "weight": 0, "output": p.output_elements}
    for _bz in range(p.N * pl.k_tiles):
        for by in range(pl.y_tiles):
            for bx in range(pl.x_tiles):
                elems["weight"] += c.k_block * p.C * p.R * p.S
                rows, cols = set(), set()
                for ty in range(c.threads_y):
                    prow = by * c.threads_y + ty
                    if prow >= p.P:
                        continue
                    for tx in range(c.threads_x):
                        q0 = (bx * c.threads_x + tx) * c.pixels
                        if q0 >= p.Q:
                            continue
                        for r in range(p.R):
                            ih = prow * p.stride_h - p.pad_h + r * p.dil_h
                            if 0 <= ih < p.H:
                                rows.add(ih)
                        for u in range(launcher.span(p, c)):
                            iw = q0 * p.stride_w - p.pad_w + u
                            if 0 <= iw < p.W:
                                cols.add(iw)
                hull = (max(rows) - min(rows) + 1 if rows else 0) * (max(cols) - min(cols) + 1 if cols else 0)
                elems["input"] += p.C * hull
    return elems


@pytest.mark.parametrize(("text", "config"), [
    ("N=2 C=3 H=9 W=11 K=7 R=3 S=3 stride=2 pad=1 dtype=float16", Config(4, 2, 8, 4)),
    ("N=1 C=2 H=13 W=17 K=9 R=5 S=3 pad=2 dilation=2 dtype=bfloat16", Config(8, 1, 8, 4)),
    ("N=2 C=1 H=20 W=20 K=5 R=5 S=5 dtype=bfloat16", Config(4, 4, 8, 8)),
    ("N=1 C=1 H=30 W=33 K=16 R=7 S=7 stride=2 pad=3 dtype=bfloat16", Config(16, 2, 16, 2)),
])
def test_traffic_formula_matches_the_loads(text: str, config: Config) -> None:
    pl = plan(P(text), config, H200)
    assert launcher.traffic_elements(pl) == _simulated_traffic(pl)


def test_prepared_launch_passes_the_kernel_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch_recorder import install

    rec = install(monkeypatch)
    p = P("N=2 C=3 H=9 W=11 K=7 R=3 S=3 stride=2 dtype=bfloat16").replace(pad_h=1, pad_w=2)
    pl = plan(p, Config(4, 2, 8, 4), H200)
    prepared = launcher.prepare_plan(pl, 0, rec.kernel(launcher.ENTRY, 3, 9))
    assert prepared.operands == ("x", "filters", "y") and prepared.filters is None and prepared.workspace_bytes == 0
    prepared((0x1000, 0x2000, 0x3000), 0x77)
    (call,) = rec.calls
    assert call.pointers == (0x1000, 0x2000, 0x3000)
    assert list(call.ints) == [3, 9, 11, 7, p.P, p.Q, 1, 2, 2] and call.grid == pl.grid
    assert call.block == (8, 4, 1) and call.smem_bytes == pl.smem_bytes


def test_registry_row_and_the_choice_on_small_stems() -> None:
    spec = get_spec("direct_half")
    pl = plan(P(LENET), Config(8, 2, 8, 4), H200)
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0 and 0 < spec.predict_s(pl, H200) < 1
    assert spec.algorithm == "direct" and spec.choice_classes == ("bfloat16", "float16")
    # the untuned choice takes it on the three stems with C·R·S ≤ 27, where it measured fastest on the H100 and the
    # H200 (the MobileNetV2 stem only since its choice scale matched igemm_wgmma_half's: six_families_h200/README.md)
    from convtune.ops.conv2d import model_choice

    assert spec.choice_scale == 2 ** -0.75
    for machine in (H200, MachineModel.preset("h100")):
        for text in (LENET, "N=4 C=3 H=224 W=224 K=13 R=3 S=3 stride=2 pad=1 dtype=bfloat16",
                     "N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 dtype=bfloat16"):
            assert model_choice(P(text), machine).family == "direct_half", (machine.name, text)


REPRESENTATIVE = [
    ("lenet_k8_p1", LENET, Config(8, 1, 8, 4)),
    ("stem_s2_k16_p4", "N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 dtype=bfloat16", Config(16, 4, 16, 4)),
    ("c1_7x7_k32_p2_f16", "N=16 C=1 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 dtype=float16", Config(32, 2, 32, 2)),
    ("c16_dil_k4_p4", "N=2 C=16 H=40 W=40 K=12 R=2 S=2 pad=2 dilation=2 dtype=bfloat16", Config(4, 4, 32, 8)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
@pytest.mark.parametrize(("name", "problem", "config"), REPRESENTATIVE, ids=[r[0] for r in REPRESENTATIVE])
def test_kernel_compiles_without_spills(name: str, problem: str, config: Config) -> None:
    pl = plan(P(problem), config, H200)
    result = nvcc_compile(pl.source(), "sm_90")
    res = result.resources[launcher.ENTRY]
    assert not res.spills, f"{name}: {res}"
    assert res.num_regs <= min(255, 65536 // (config.threads * pl.min_blocks)), f"{name}: {res.num_regs}"

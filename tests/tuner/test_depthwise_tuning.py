"""The depthwise families in the tuner: registry rows, time model, bound and floor, pruning, ``convtune tune``
on the model backend (CPU), and the GPU benchmarker's verified measurement of depthwise plans (gpu)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import pytest

from convtune.cli import main
from convtune.errors import InvalidConfig
from convtune.kernels.depthwise import model
from convtune.kernels.depthwise.configs import VARIANTS_1D, FastDgradConfig, FastFwdConfig
from convtune.kernels.depthwise.conv1d import family as family1d
from convtune.kernels.depthwise.conv1d import traffic
from convtune.kernels.depthwise.conv1d.plan import plan as plan_1d
from convtune.kernels.depthwise.conv2d import fast, packed, tiled
from convtune.kernels.registry import REGISTRY, get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.efficiency import floor_time_s, floors
from convtune.tuner.prune import prune

H200 = MachineModel.preset("h200")
PAPER = ConvProblem.depthwise1d(B=16384, C=128, L=48, K=48)
SMALL_1D = ConvProblem.depthwise1d(B=4, C=8, L=48, K=7)
MOBILENET = ConvProblem.parse("N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144")
SMALL_2D = ConvProblem.parse("N=2 C=16 H=14 W=14 K=16 R=3 S=3 pad=1 groups=16")


def _best(problem: ConvProblem, fam: str):
    spec = get_spec(fam)
    return min(spec.enumerate_plans(problem, H200), key=lambda pl: spec.predict_s(pl, H200))


def test_every_1d_variant_and_2d_kernel_has_a_forward_row() -> None:
    families = {f for f, d in REGISTRY if f.startswith("depthwise")}
    assert families == ({f"depthwise1d_{v}" for v in VARIANTS_1D}
                        | {"depthwise2d_tiled", "depthwise2d_fast", "depthwise2d_packed"})
    assert all(REGISTRY[(f, "fwd")].algorithm == "depthwise" for f in families)
    assert all(REGISTRY[(f"depthwise1d_{v}", "fwd")].launcher is family1d for v in VARIANTS_1D)
    assert [REGISTRY[(f"depthwise2d_{k}", "fwd")].launcher for k in ("tiled", "fast", "packed")] == [tiled, fast,
                                                                                                      packed]


def test_direct_and_winograd_rows_do_not_take_depthwise_problems() -> None:
    for problem in (PAPER, MOBILENET):
        assert not {s.family for s in specs_for(problem)} & {"direct", "winograd", "winograd_unfused"}
    assert get_spec("depthwise2d_tiled").supports(MOBILENET) and not get_spec("depthwise2d_tiled").supports(PAPER)
    assert not get_spec("depthwise1d_fast").supports(MOBILENET)
    assert not get_spec("depthwise1d_fast").supports(ConvProblem.depthwise1d(2, 3, 8, 2, dilation=2))


def test_model_orders_the_variants_like_the_h200_measurements() -> None:
    """Measured at the paper shape (benchmarks/results/depthwise_h200/suite_v2, the warp-tiled register
    design): fast 0.232 < warp 0.298 < shared 1.236 < coalesced 1.652 < naive 10.9 ms."""
    t = {v: get_spec(f"depthwise1d_{v}").predict_s(_best(PAPER, f"depthwise1d_{v}"), H200) for v in VARIANTS_1D}
    assert t["fast"] < t["warp"] < t["shared"] < t["coalesced"] < t["naive"]
    assert 0.15e-3 < t["fast"] < 0.35e-3          # measured 0.231 ms
    assert 0.2e-3 < t["warp"] < 0.45e-3           # measured 0.298 ms
    assert 0.9e-3 < t["shared"] < 1.6e-3          # measured 1.235 ms
    assert 8e-3 < t["naive"] < 14e-3              # measured 10.9 ms


def test_model_terms_and_what_binds() -> None:
    pl = _best(PAPER, "depthwise1d_fast")
    pred = model.predict(pl, H200)
    assert pred.bound_by == "dram" and 0 < pred.efficiency <= 1 and pred.launches == 1
    rounds, serial = model.pipeline_rounds(pl, H200)
    assert rounds > 0 and not serial
    stretch = (rounds + model.UNOVERLAPPED_ROUNDS) / rounds   # prologue load + epilogue store, not overlapped
    assert pred.dram_s == pytest.approx(stretch * traffic.compulsory_bytes(PAPER, "fwd") /
                                        H200.copy_bandwidth_bytes_per_s)
    assert pred.time_s >= pred.dram_s
    shared = model.predict(_best(PAPER, "depthwise1d_shared"), H200)
    assert shared.bound_by == "issue"
    two_d = model.predict(_best(MOBILENET, "depthwise2d_tiled"), H200)
    assert two_d.time_s > two_d.dram_s > 0
    # dgrad and wgrad plans are priced too (convtune.ops.torch picks their configs by the model)
    wgrad = model.predict(plan_1d(PAPER, FastDgradConfig(), H200), H200)
    assert wgrad.time_s > 0


def test_a_block_that_does_not_fit_is_infinitely_slow() -> None:
    pl = plan_1d(SMALL_1D, FastFwdConfig(rows=256, tile_l=48, blocks_per_sm=1), H200)
    tiny = dataclasses.replace(H200, regs_per_sm=1024)
    assert model.predict(pl, tiny).time_s == float("inf")


def test_bound_floor_and_onchip_words() -> None:
    pl = _best(PAPER, "depthwise1d_fast")
    spec = get_spec("depthwise1d_fast")
    s_words = spec.onchip_words(pl)
    assert s_words >= pl.smem_bytes // 4 + pl.threads * pl.ke
    bound = spec.bound_words(pl, s_words)
    assert bound == PAPER.compulsory_elements           # depthwise: the bound is compulsory traffic
    assert spec.traffic_words(pl) >= bound - PAPER.weight_elements
    [(variant, flops, words)] = spec.floor_work(PAPER, H200.fast_memory_words("l2"))
    assert variant == "depthwise" and flops == traffic.flops(PAPER) and words == bound
    floor = floor_time_s(PAPER, H200, spec)
    assert floor == pytest.approx(4 * PAPER.compulsory_elements / H200.copy_bandwidth_bytes_per_s)
    assert floors(MOBILENET, H200, get_spec("depthwise2d_tiled"))[0]["binding"] == "memory (DRAM)"


def test_pruning_keeps_the_fast_variant_first() -> None:
    result = prune(PAPER, H200, specs_for(PAPER))
    assert result.survivors and result.survivors[0].spec.family == "depthwise1d_fast"
    pruned_families = {d.candidate.spec.family for d in result.decisions if d.stage == "traffic"}
    assert "depthwise1d_naive" in pruned_families    # every tap reloads x and w: ~K× the bound


def test_family_protocol_without_a_device() -> None:
    fwd = plan_1d(SMALL_1D, FastFwdConfig(rows=32, tile_l=48), H200)
    assert family1d.tolerance(fwd) == 1e-5 == tiled.tolerance(_best(SMALL_2D, "depthwise2d_tiled"))
    assert family1d.filters_key(fwd) != tiled.filters_key(_best(SMALL_2D, "depthwise2d_tiled"))
    with pytest.raises(InvalidConfig, match="only forward plans"):
        family1d.launch(plan_1d(SMALL_1D, FastDgradConfig(rows=32, tile_l=48), H200), None, None, None, None)


def _tune(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("problem", [SMALL_1D, SMALL_2D, SMALL_1D.replace(dtype="bfloat16"),
                                     SMALL_2D.replace(dtype="float16")],
                         ids=["causal1d", "depthwise2d", "causal1d-bf16", "depthwise2d-fp16"])
def test_convtune_tune_runs_depthwise_problems(problem: ConvProblem, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVTUNE_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    rc, out, err = _tune(["tune", *problem.key().split(), "--backend", "model", "--budget-trials", "12",
                          "--db", f"sqlite:///{tmp_path / 'dw.db'}", "--json"])
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["best_config"].startswith("depthwise")
    assert summary["predicted"] is True and 0 < summary["efficiency"] <= 1
    assert set(summary["families"]) == {s.family for s in specs_for(problem)}
    assert summary["bound_favours"] in summary["families"]


def test_tune_families_option_takes_a_depthwise_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    rc, out, err = _tune(["tune", *SMALL_1D.key().split(), "--backend", "model", "--budget-trials", "5",
                          "--families", "depthwise1d_warp", "--db", f"sqlite:///{tmp_path / 'dw.db'}", "--json"])
    assert rc == 0, err
    assert json.loads(out)["best_config"].startswith("depthwise1d_warp.fwd")
    rc, _, err = _tune(["tune", *SMALL_1D.key().split(), "--backend", "model", "--families", "direct",
                        "--db", f"sqlite:///{tmp_path / 'dw.db'}"])
    assert rc == 2 and "--families" in err


_GPU_CASES = [SMALL_1D, ConvProblem.depthwise1d(B=3, C=5, L=33, K=40), SMALL_2D,
              ConvProblem.parse("N=2 C=8 H=9 W=11 K=8 R=5 S=3 stride=2 pad=2 groups=8"),
              ConvProblem.parse("N=3 C=24 H=7 W=7 K=24 R=5 S=5 pad=2 groups=24")]   # packed (W ≤ 32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("problem", _GPU_CASES,
                         ids=["causal1d", "causal1d-K>L", "depthwise2d", "depthwise2d-strided", "depthwise2d-packed"])
def test_gpu_benchmarker_verifies_depthwise_plans(problem: ConvProblem, dtype: str) -> None:
    """Every depthwise family's best-predicted plans of the problem in ``dtype`` pass the benchmarker's float64 check
    (1e-5 in float32; 16-bit storage: 1e-3 float16, 8e-3 bfloat16) and time."""
    problem = problem.replace(dtype=dtype)
    assert specs_for(problem)
    from convtune.tuner.gpu import CupyBenchmarker

    bench = CupyBenchmarker(reps=5, measure_device_ceilings=False)
    try:
        for spec in specs_for(problem):
            plans = sorted(spec.enumerate_plans(problem, bench.machine),
                           key=lambda pl, spec=spec: spec.predict_s(pl, bench.machine))
            assert plans, spec.family
            for pl in plans[:2]:
                result = bench.measure(problem, pl)
                assert result.status == "ok", (pl.config.key(), result.error)
                assert result.rel_error <= spec.launcher.tolerance(pl) and result.median_ms > 0
                assert spec.launcher.tolerance(pl) == {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    finally:
        bench.close()

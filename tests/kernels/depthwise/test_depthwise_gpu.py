"""GPU correctness of every depthwise kernel against the float64 references (needs a CUDA device).

1-D: every variant × path (× both weight-gradient modes) on fixed edge shapes (K = 1, K = L, K > L, L = 7,
L = 1, C = 3, B = 1, L % 4 ≠ 0, long rows) and seeded random shapes, each with several configurations drawn
from the variant's space on this device. Inputs are fresh normal draws; outputs (and the deterministic
partials workspace) are poisoned with NaN first. Tolerances: relative error ≤ 1e-5 for fwd/dgrad, ≤ 1e-4
for wgrad. The deterministic weight gradient is run twice and must be bitwise equal. One case per fast
path runs at the S4ConvD paper shape (B=16384, C=128, L=48, K=48).

2-D: the tiled forward and the fast forward on random shapes (R, S ∈ 1..7, stride 1 and 2, padding 0..3,
odd sizes) and the public suite's depthwise2d shapes, relative error ≤ 1e-5 (fast: the first and last plan
of its space per shape and two seeded draws); the 2-D input gradient (≤ 1e-5) and weight gradient (≤ 1e-4,
both modes, deterministic bitwise repeatable) on the same shapes.

Fused 1-D backward (dx ≤ 1e-5 and dw ≤ 1e-4 from one launch) on the 1-D shapes with L ≤ 64, both modes,
and at the paper shape.
"""

from __future__ import annotations

import random
import zlib

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.depthwise.configs import MODE_DETERMINISTIC, PATHS, VARIANTS_1D, Dw2dTiledFwdConfig
from convtune.kernels.depthwise.conv1d.fused import plan as plan_fused
from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan, plan
from convtune.kernels.depthwise.conv2d.fast import plan as plan_2d_fast
from convtune.kernels.depthwise.conv2d.tiled import plan as plan_2d
from convtune.kernels.depthwise.space import enumerate_plans
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

TOLERANCE = {"fwd": 1e-5, "dgrad": 1e-5, "wgrad": 1e-4}
CONFIGS_PER_SHAPE = 3
H200 = MachineModel.preset("h200")  # collection runs before the device is known: plans are re-made on it

EDGE = [(1, 1, 1, 1), (2, 3, 7, 1), (2, 3, 7, 7), (3, 3, 7, 10), (1, 3, 7, 64), (4, 5, 48, 48), (1, 2, 13, 13),
        (5, 4, 50, 5), (2, 8, 129, 4), (3, 16, 300, 16), (2, 4, 1024, 4), (1, 7, 333, 70), (40, 6, 24, 24)]


def _random_shapes(rng: random.Random, n: int) -> list[tuple[int, int, int, int]]:
    shapes = []
    for _ in range(n):
        L = rng.choice([1, 2, 3, 5, 7, 8, 12, 31, 48, 64, 100, 257, 512])
        K = rng.choice([1, 2, 3, 4, 7, max(1, L // 2), L, L + rng.randint(1, 5)])
        shapes.append((rng.choice([1, 2, 3, 9, 33]), rng.choice([1, 3, 5, 17, 64]), L, min(K, 200)))
    return shapes


def _cases_1d() -> list:
    rng = random.Random(20261201)
    shapes = EDGE + _random_shapes(rng, 12)
    cases = []
    for variant in VARIANTS_1D:
        for path in PATHS:
            for shape in shapes:
                problem = ConvProblem.depthwise1d(*shape)
                plans = list(enumerate_plans(problem, H200, variant, path))
                if not plans:
                    continue
                by_mode: dict[int, list[Depthwise1dPlan]] = {}
                for pl in plans:
                    by_mode.setdefault(getattr(pl.config, "mode", 0), []).append(pl)
                for mode, group in sorted(by_mode.items()):
                    picks = [group[0], group[-1], *rng.sample(group, min(len(group), CONFIGS_PER_SHAPE - 2))]
                    for k, pl in enumerate(dict.fromkeys(picks)):
                        tag = f"{variant}-{path}" + (f"-m{mode}" if mode else "") + f"-{'x'.join(map(str, shape))}-{k}"
                        cases.append(pytest.param(problem, pl.config, id=tag))
    return cases


CASES_1D = _cases_1d()


def _cases_fused() -> list:
    """The fused backward on the 1-D shapes it takes (L ≤ 64): per mode the first and last plan of its space
    and two seeded draws."""
    from convtune.kernels.depthwise.space import enumerate_plans_fused

    rng = random.Random(20261204)
    cases = []
    for shape in EDGE + _random_shapes(random.Random(20261201), 12):
        plans = list(enumerate_plans_fused(ConvProblem.depthwise1d(*shape), H200))
        for mode in sorted({pl.config.mode for pl in plans}):
            group = [pl for pl in plans if pl.config.mode == mode]
            picks = [group[0], group[-1], *rng.sample(group, min(len(group), 2))]
            for k, pl in enumerate(dict.fromkeys(picks)):
                cases.append(pytest.param(pl.problem, pl.config, id=f"fused-m{mode}-{'x'.join(map(str, shape))}-{k}"))
    return cases


CASES_FUSED = _cases_fused()


def _bwd_module(config):
    from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
    from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad

    return plan2d_dgrad if config.direction == "dgrad" else plan2d_wgrad


def _problems_2d() -> list[ConvProblem]:
    rng = random.Random(20261202)
    problems = [ConvProblem.parse(t) for t in (
        "N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144",
        "N=32 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960",
        "N=4 C=96 H=56 W=56 K=96 R=7 S=7 pad=3 groups=96",
        "N=8 C=32 H=112 W=112 K=32 R=3 S=3 stride=2 pad=1 groups=32")]
    for _ in range(30):
        r, s = rng.choice([1, 3, 5, 7]), rng.choice([1, 3, 5, 7])
        stride = rng.choice([1, 2])
        pad = rng.randint(0, 3)
        h, w = rng.randint(max(1, r - 2 * pad), 40), rng.randint(max(1, s - 2 * pad), 40)
        c = rng.choice([1, 3, 8, 17])
        problems.append(ConvProblem(N=rng.choice([1, 2, 3]), C=c, H=h, W=w, K=c, R=r, S=s, stride_h=stride,
                                    stride_w=stride, pad_h=pad, pad_w=rng.randint(0, 3) if w > s else pad, groups=c))
    return problems


def _cases_2d() -> list:
    problems = _problems_2d()
    configs = [Dw2dTiledFwdConfig(8, 32, 4, 1), Dw2dTiledFwdConfig(8, 8, 2, 4), Dw2dTiledFwdConfig(4, 16, 1, 2),
               Dw2dTiledFwdConfig(16, 32, 8, 1)]
    cases = []
    for i, problem in enumerate(problems):
        for j, config in enumerate(configs):
            try:
                plan_2d(problem, config, H200)
            except InvalidConfig:
                continue
            cases.append(pytest.param(problem, config, id=f"2d-{i}-{j}"))
    return cases


CASES_2D = _cases_2d()


def _cases_2d_fast() -> list:
    """Per 2-D problem of :func:`_problems_2d`: the first and last plan of the fast space and two seeded draws."""
    from convtune.kernels.depthwise.space import enumerate_plans_2d_fast

    rng = random.Random(20261203)
    cases = []
    for i, problem in enumerate(_problems_2d()):
        plans = list(enumerate_plans_2d_fast(problem, H200))
        picks = [plans[0], plans[-1], *rng.sample(plans, min(len(plans), 2))]
        for j, pl in enumerate(dict.fromkeys(picks)):
            cases.append(pytest.param(problem, pl.config, id=f"2dfast-{i}-{j}"))
    return cases


CASES_2D_FAST = _cases_2d_fast()


def _cases_2d_bwd() -> list:
    """Per 2-D problem of :func:`_problems_2d`: the input gradient's first and last plan and one seeded draw, the
    weight gradient's first and last plan and one seeded draw per mode."""
    from convtune.kernels.depthwise.space import enumerate_plans_2d_dgrad, enumerate_plans_2d_wgrad

    rng = random.Random(20261205)
    cases = []
    for i, problem in enumerate(_problems_2d()):
        groups = {"dgrad": list(enumerate_plans_2d_dgrad(problem, H200))}
        wplans = list(enumerate_plans_2d_wgrad(problem, H200))
        for mode in (1, 2):
            groups[f"wgrad-m{mode}"] = [pl for pl in wplans if pl.config.mode == mode]
        for tag, plans in groups.items():
            picks = [plans[0], plans[-1], rng.choice(plans)]
            for j, pl in enumerate(dict.fromkeys(picks)):
                cases.append(pytest.param(problem, pl.config, id=f"2d{tag}-{i}-{j}"))
    return cases


CASES_2D_BWD = _cases_2d_bwd()


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    texts = []
    for case in CASES_1D:
        try:
            pl = plan(case.values[0], case.values[1], machine)
        except InvalidConfig:
            continue
        texts.append(pl.source())
        if pl.deterministic:
            texts.append(pl.reduce_source())
    for case in CASES_FUSED:
        try:
            fp = plan_fused(case.values[0], case.values[1], machine)
        except InvalidConfig:
            continue
        texts += [fp.source()] + ([fp.reduce_source()] if fp.deterministic else [])
    texts += [plan_2d(c.values[0], c.values[1], machine).source() for c in CASES_2D]
    texts += [plan_2d_fast(c.values[0], c.values[1], machine).source() for c in CASES_2D_FAST]
    for case in CASES_2D_BWD:
        bp = _bwd_module(case.values[1]).plan(case.values[0], case.values[1], machine)
        texts += [bp.source()] + ([bp.reduce_source()] if getattr(bp, "deterministic", False) else [])
    cubin_cache(texts)


def test_case_counts() -> None:
    for variant in VARIANTS_1D:
        for path in PATHS:
            n = sum(1 for c in CASES_1D if c.id.startswith(f"{variant}-{path}-"))
            assert n >= 20, f"{variant} {path}: only {n} cases"
    assert len(CASES_2D) >= 60
    assert len(CASES_FUSED) >= 60
    assert len(CASES_2D_FAST) >= 120
    assert sum(1 for c in CASES_2D_BWD if c.id.startswith("2ddgrad")) >= 90
    assert sum(1 for c in CASES_2D_BWD if c.id.startswith("2dwgrad")) >= 180


def _inputs(problem: ConvProblem):
    import cupy as cp

    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    B, C, L, K = problem.N, problem.C, problem.W, problem.S
    x = rng.standard_normal((B, C, L), dtype=cp.float32)
    dy = rng.standard_normal((B, C, L), dtype=cp.float32)
    w = rng.standard_normal((C, K), dtype=cp.float32)
    return x, dy, w


def _run(pl: Depthwise1dPlan, kernels, a, b):
    """Launch into a NaN-poisoned output (and a NaN-poisoned workspace); returns the output."""
    import cupy as cp

    from convtune.kernels.depthwise.conv1d.launcher import allocate_workspace, launch

    shape = (pl.C, pl.K) if pl.path == "wgrad" else (pl.B, pl.C, pl.L)
    out = cp.full(shape, cp.nan, dtype=cp.float32)
    workspace = allocate_workspace(pl)
    if workspace is not None:
        workspace.fill(cp.nan)
    launch(pl, kernels, a, b, out, workspace=workspace)
    cp.cuda.get_current_stream().synchronize()
    return out


def _check_1d(problem: ConvProblem, config, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise.conv1d.launcher import compile_plan
    from convtune.kernels.depthwise.reference import (
        dw1d_dgrad_reference,
        dw1d_fwd_reference,
        dw1d_wgrad_reference,
    )
    from convtune.kernels.reference import relative_error

    try:
        pl = plan(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    kernels = compile_plan(pl)
    x, dy, w = _inputs(problem)
    a, b, ref = {"fwd": (x, w, lambda: dw1d_fwd_reference(x, w)),
                 "dgrad": (dy, w, lambda: dw1d_dgrad_reference(dy, w)),
                 "wgrad": (x, dy, lambda: dw1d_wgrad_reference(x, dy, problem.S))}[pl.path]
    out = _run(pl, kernels, a, b)
    assert not bool(cp.isnan(out).any()), f"some outputs were never written ({pl.config.key()})"
    err = relative_error(out, ref())
    assert err <= TOLERANCE[pl.path], f"relative error {err:.3e} for {problem.key()} / {pl.config.key()}"
    if pl.deterministic:
        again = _run(pl, kernels, a, b)
        assert bool(cp.array_equal(out, again)), f"deterministic wgrad differs between runs ({pl.config.key()})"


@pytest.mark.parametrize(("problem", "config"), CASES_1D)
def test_depthwise1d_matches_float64(problem: ConvProblem, config, machine) -> None:
    _check_1d(problem, config, machine)


PAPER = ConvProblem.depthwise1d(16384, 128, 48, 48)


@pytest.mark.parametrize("path", PATHS)
def test_fast_at_the_paper_shape(path: str, machine) -> None:
    from convtune.kernels.depthwise.conv1d.traffic import total_traffic_words

    plans = [pl for pl in enumerate_plans(PAPER, machine, "fast", path)
             if getattr(pl.config, "mode", MODE_DETERMINISTIC) == MODE_DETERMINISTIC]
    best = min(plans, key=lambda pl: (total_traffic_words(pl), -pl.min_blocks, pl.config.key()))
    _check_1d(PAPER, best.config, machine)


@pytest.mark.parametrize("fields", [{"warps": 4, "outputs_per_lane": 12, "lanes_per_row": 4},
                                    {"warps": 4, "outputs_per_lane": 6, "lanes_per_row": 8}])
@pytest.mark.parametrize("path", ["fwd", "dgrad", "wgrad-m1", "wgrad-m2"])
def test_warp_register_design_at_the_paper_shape(path: str, fields: dict, machine) -> None:
    from convtune.kernels.depthwise.configs import CONFIG_CLASSES_1D

    if path.startswith("wgrad"):
        config = CONFIG_CLASSES_1D[("warp", "wgrad")](**fields, rows=1, design=2, mode=int(path[-1]))
    else:
        config = CONFIG_CLASSES_1D[("warp", path)](**fields)
    _check_1d(PAPER, config, machine)


def _check_fused(problem: ConvProblem, config, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
    from convtune.kernels.depthwise.reference import dw1d_dgrad_reference, dw1d_wgrad_reference
    from convtune.kernels.reference import relative_error

    try:
        pl = plan_fused(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    kernels = plan1d_fused.compile_plan(pl)
    x, dy, w = _inputs(problem)

    def run():
        dx = cp.full((pl.B, pl.C, pl.L), cp.nan, dtype=cp.float32)
        dw = cp.full((pl.C, pl.K), cp.nan, dtype=cp.float32)
        ws = plan1d_fused.allocate_workspace(pl)
        if ws is not None:
            ws.fill(cp.nan)
        plan1d_fused.launch(pl, kernels, x, dy, w, dx, dw, workspace=ws)
        cp.cuda.get_current_stream().synchronize()
        return dx, dw

    dx, dw = run()
    assert not bool(cp.isnan(dx).any()) and not bool(cp.isnan(dw).any()), "some outputs were never written"
    err_dx = relative_error(dx, dw1d_dgrad_reference(dy, w))
    err_dw = relative_error(dw, dw1d_wgrad_reference(x, dy, problem.S))
    assert err_dx <= TOLERANCE["dgrad"], f"dx relative error {err_dx:.3e} ({config.key()})"
    assert err_dw <= TOLERANCE["wgrad"], f"dw relative error {err_dw:.3e} ({config.key()})"
    if pl.deterministic:
        dx2, dw2 = run()
        assert bool(cp.array_equal(dw, dw2)) and bool(cp.array_equal(dx, dx2)), "deterministic run differs"


@pytest.mark.parametrize(("problem", "config"), CASES_FUSED)
def test_fused_backward_matches_float64(problem: ConvProblem, config, machine) -> None:
    _check_fused(problem, config, machine)


@pytest.mark.parametrize("mode", [1, 2])
def test_fused_backward_at_the_paper_shape(mode: int, machine) -> None:
    from convtune.kernels.depthwise.configs import FusedBwdConfig

    _check_fused(PAPER, FusedBwdConfig(rows=128, stages=2, vec=4, blocks_per_sm=2, mode=mode), machine)


@pytest.mark.parametrize(("problem", "config"), CASES_2D)
def test_depthwise2d_fwd_matches_float64(problem: ConvProblem, config: Dw2dTiledFwdConfig, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise.conv2d import tiled as plan2d
    from convtune.kernels.depthwise.reference import dw2d_fwd_reference
    from convtune.kernels.reference import relative_error

    pl = plan2d.plan(problem, config, machine)
    kernel = plan2d.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.C, 1, problem.R, problem.S), dtype=cp.float32)
    y = cp.full((problem.N, problem.C, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    plan2d.launch(pl, kernel, x, w, y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = dw2d_fwd_reference(x, w, (problem.stride_h, problem.stride_w), (problem.pad_h, problem.pad_w))
    err = relative_error(y, ref)
    assert err <= 1e-5, f"relative error {err:.3e} for {problem.key()} / {config.key()}"


@pytest.mark.parametrize(("problem", "config"), CASES_2D_FAST)
def test_depthwise2d_fast_fwd_matches_float64(problem: ConvProblem, config, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
    from convtune.kernels.depthwise.reference import dw2d_fwd_reference
    from convtune.kernels.reference import relative_error

    try:
        pl = plan2d_fast.plan(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    kernel = plan2d_fast.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()) + 1)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.C, 1, problem.R, problem.S), dtype=cp.float32)
    y = cp.full((problem.N, problem.C, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    plan2d_fast.launch(pl, kernel, x, w, y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = dw2d_fwd_reference(x, w, (problem.stride_h, problem.stride_w), (problem.pad_h, problem.pad_w))
    err = relative_error(y, ref)
    assert err <= 1e-5, f"relative error {err:.3e} for {problem.key()} / {config.key()}"


@pytest.mark.parametrize(("problem", "config"), CASES_2D_BWD)
def test_depthwise2d_backward_matches_float64(problem: ConvProblem, config, machine) -> None:
    """dgrad: dx against the float64 adjoint, ≤ 1e-5; wgrad: dw against float64, ≤ 1e-4, deterministic mode
    bitwise equal across two runs. Outputs and the partials workspace are poisoned with NaN."""
    import cupy as cp

    from convtune.kernels.depthwise.reference import dw2d_dgrad_reference, dw2d_wgrad_reference
    from convtune.kernels.reference import relative_error

    module = _bwd_module(config)
    try:
        pl = module.plan(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    p = problem
    st, pad = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()) + 2)
    x = rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32)
    w = rng.standard_normal((p.C, 1, p.R, p.S), dtype=cp.float32)
    dy = rng.standard_normal((p.N, p.C, p.P, p.Q), dtype=cp.float32)
    kernels = module.compile_plan(pl)
    if config.direction == "dgrad":
        dx = cp.full((p.N, p.C, p.H, p.W), cp.nan, dtype=cp.float32)
        module.launch(pl, kernels, dy, w, dx)
        cp.cuda.get_current_stream().synchronize()
        assert not bool(cp.isnan(dx).any()), "some outputs were never written"
        err = relative_error(dx, dw2d_dgrad_reference(dy, w, (p.H, p.W), st, pad))
        assert err <= 1e-5, f"relative error {err:.3e} for {p.key()} / {config.key()}"
        return

    def run():
        dw = cp.full((p.C, 1, p.R, p.S), cp.nan, dtype=cp.float32)
        ws = module.allocate_workspace(pl)
        if ws is not None:
            ws.fill(cp.nan)
        module.launch(pl, kernels, x, dy, dw, workspace=ws)
        cp.cuda.get_current_stream().synchronize()
        return dw

    dw = run()
    assert not bool(cp.isnan(dw).any()), "some outputs were never written"
    err = relative_error(dw, dw2d_wgrad_reference(x, dy, (p.R, p.S), st, pad))
    assert err <= 1e-4, f"relative error {err:.3e} for {p.key()} / {config.key()}"
    if pl.deterministic:
        assert bool(cp.array_equal(dw, run())), "deterministic wgrad differs between runs"

"""GPU correctness of the depthwise kernels with 16-bit storage (float16, bfloat16; fp32 accumulation) against
float64 references computed from the same 16-bit inputs (needs a CUDA device).

Kernels: the 1-D fast variant (fwd, dgrad, wgrad in both modes), the fused 1-D backward (both modes), the 2-D
fast and packed forwards, the 2-D input and weight gradients (both modes). Inputs are normal draws rounded to
the storage type; the reference is the float64 operator of those rounded values, so the only differences left
are the kernel's fp32 sums (relative ~1e-6 at these sizes) and the single rounding of each output to the storage
type.

Tolerances (relative error ‖out − ref‖₂ / ‖ref‖₂): rounding to nearest moves every output by at most half a
unit in the last place, a relative 2⁻¹¹ ≈ 4.9e-4 for float16 (11 significant bits) and 2⁻⁸ ≈ 3.9e-3 for
bfloat16 (8 bits), and the norm-wise error is bounded by the same factor; ``TOLERANCE`` allows about twice
that: 1e-3 and 8e-3. Outputs and workspaces are poisoned with NaN first; deterministic weight gradients must
be bitwise equal across two runs. Configurations come from the float32 space of each shape (the spaces
enumerate float32 problems) re-planned for the 16-bit problem, as ``convtune.ops.depthwise`` does.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import replace

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.depthwise.configs import MODE_ATOMIC, MODE_DETERMINISTIC, PATHS
from convtune.kernels.depthwise.family import TOLERANCES
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

DTYPES = ("float16", "bfloat16")
#: twice the worst-case relative rounding of one output (module docstring)
TOLERANCE = {dtype: TOLERANCES[dtype] for dtype in ("float16", "bfloat16")}   # what the tuner's trials check too
H200 = MachineModel.preset("h200")  # collection runs before the device is known: plans are re-made on it

SHAPES_1D = [(2, 3, 7, 3), (1, 3, 7, 10), (4, 5, 48, 48), (5, 4, 50, 5), (2, 8, 129, 4), (3, 16, 300, 16),
             (2, 4, 1024, 4), (40, 6, 24, 24), (1, 2, 64, 64)]
SHAPES_2D = ["N=8 C=32 H=56 W=56 K=32 R=3 S=3 pad=1 groups=32", "N=16 C=96 H=7 W=7 K=96 R=3 S=3 pad=1 groups=96",
             "N=2 C=24 H=28 W=28 K=24 R=7 S=7 pad=3 groups=24",
             "N=4 C=16 H=56 W=56 K=16 R=3 S=3 stride=2 pad=1 groups=16",
             "N=3 C=7 H=17 W=19 K=7 R=5 S=5 stride=2 pad=2 groups=7",
             "N=2 C=5 H=13 W=11 K=5 R=3 S=3 pad=0 groups=5", "N=1 C=3 H=9 W=24 K=3 R=1 S=7 pad_h=0 pad_w=3 groups=3"]


# ---- 16-bit arrays on the device --------------------------------------------------------------------------
def _to_storage(x32, dtype: str):
    """(array in the storage dtype — bfloat16 as uint16 bits —, float64 copy of the rounded values)."""
    import cupy as cp

    if dtype == "float16":
        h = x32.astype(cp.float16)
        return h, h.astype(cp.float64)
    u = x32.astype(cp.float32).view(cp.uint32)
    bits = ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)  # round to nearest even
    return bits, _to_f64(bits, dtype)


def _to_f64(a, dtype: str):
    import cupy as cp

    if dtype == "float16":
        return a.astype(cp.float64)
    return (a.astype(cp.uint32) << 16).view(cp.float32).astype(cp.float64)


def _nan_storage(shape, dtype: str):
    import cupy as cp

    if dtype == "float16":
        return cp.full(shape, cp.nan, dtype=cp.float16)
    return cp.full(shape, 0x7FC0, dtype=cp.uint16)  # a bfloat16 NaN


def _draw(shape, dtype: str, seed: int):
    import cupy as cp

    return _to_storage(cp.random.default_rng(seed).standard_normal(shape, dtype=cp.float32), dtype)


def _check(out, ref, dtype: str, what: str) -> None:
    import cupy as cp

    from convtune.kernels.reference import relative_error

    out64 = _to_f64(out, dtype)
    assert not bool(cp.isnan(out64).any()), f"{what}: some outputs were never written"
    err = relative_error(out64, ref)
    assert err <= TOLERANCE[dtype], f"{what}: relative error {err:.3e} > {TOLERANCE[dtype]:.0e}"


def _picks(plans: list, rng: random.Random) -> list:
    return list(dict.fromkeys([plans[0], plans[-1], *rng.sample(plans, min(len(plans), 1))]))


# ---- 1-D fast --------------------------------------------------------------------------------------------
def _cases_1d() -> list:
    from convtune.kernels.depthwise.space import enumerate_plans

    rng = random.Random(20261210)
    cases = []
    for shape in SHAPES_1D:
        twin = ConvProblem.depthwise1d(*shape)
        for path in PATHS:
            plans = list(enumerate_plans(twin, H200, "fast", path))
            for mode in ((MODE_DETERMINISTIC, MODE_ATOMIC) if path == "wgrad" else (None,)):
                group = [pl for pl in plans if mode is None or pl.config.mode == mode]
                for k, pl in enumerate(_picks(group, rng)):
                    tag = f"fast-{path}" + (f"-m{mode}" if mode else "") + f"-{'x'.join(map(str, shape))}-{k}"
                    cases.append(pytest.param(shape, pl.config, id=tag))
    return cases


CASES_1D = _cases_1d()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "config"), CASES_1D)
def test_fast_1d_16bit_matches_float64(shape, config, dtype: str, machine) -> None:
    from convtune.kernels.depthwise.conv1d import launcher
    from convtune.kernels.depthwise.conv1d.plan import plan
    from convtune.kernels.depthwise.reference import dw1d_dgrad_reference, dw1d_fwd_reference, dw1d_wgrad_reference

    problem = ConvProblem.depthwise1d(*shape, dtype=dtype)
    try:
        pl = plan(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    B, C, L, K = shape
    seed = zlib.crc32(f"{problem.key()} {config.key()}".encode())
    a, a64 = _draw((B, C, L), dtype, seed)
    kernels = launcher.compile_plan(pl)
    if pl.path in ("fwd", "dgrad"):
        w, w64 = _draw((C, K), dtype, seed + 1)
        out = _nan_storage((B, C, L), dtype)
        launcher.launch(pl, kernels, a, w, out)
        ref = dw1d_fwd_reference(a64, w64) if pl.path == "fwd" else dw1d_dgrad_reference(a64, w64)
        _check(out, ref, dtype, f"{pl.path} {problem.key()} / {config.key()}")
        return
    dy, dy64 = _draw((B, C, L), dtype, seed + 2)

    def run():
        dw = _nan_storage((C, K), dtype)
        ws = launcher.allocate_workspace(pl)
        if ws is not None:
            ws.fill(float("nan"))
        launcher.launch(pl, kernels, a, dy, dw, ws)
        return dw

    dw = run()
    _check(dw, dw1d_wgrad_reference(a64, dy64, K), dtype, f"wgrad {problem.key()} / {config.key()}")
    if pl.deterministic:
        import cupy as cp

        assert bool(cp.array_equal(dw, run())), "deterministic wgrad differs between runs"


# ---- fused 1-D backward ------------------------------------------------------------------------------------
def _cases_fused() -> list:
    from convtune.kernels.depthwise.space import enumerate_plans_fused

    rng = random.Random(20261211)
    cases = []
    for shape in [s for s in SHAPES_1D if s[2] <= 64]:
        plans = list(enumerate_plans_fused(ConvProblem.depthwise1d(*shape), H200))
        for mode in (MODE_DETERMINISTIC, MODE_ATOMIC):
            for k, pl in enumerate(_picks([pl for pl in plans if pl.config.mode == mode], rng)):
                cases.append(pytest.param(shape, pl.config, id=f"fused-m{mode}-{'x'.join(map(str, shape))}-{k}"))
    return cases


CASES_FUSED = _cases_fused()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "config"), CASES_FUSED)
def test_fused_backward_16bit_matches_float64(shape, config, dtype: str, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
    from convtune.kernels.depthwise.reference import dw1d_dgrad_reference, dw1d_wgrad_reference

    problem = ConvProblem.depthwise1d(*shape, dtype=dtype)
    try:
        pl = plan1d_fused.plan(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    B, C, L, K = shape
    seed = zlib.crc32(f"{problem.key()} {config.key()}".encode())
    (x, x64), (dy, dy64), (w, w64) = (_draw(s, dtype, seed + i) for i, s in enumerate(((B, C, L), (B, C, L), (C, K))))
    kernels = plan1d_fused.compile_plan(pl)

    def run():
        dx, dw = _nan_storage((B, C, L), dtype), _nan_storage((C, K), dtype)
        ws = plan1d_fused.allocate_workspace(pl)
        if ws is not None:
            ws.fill(float("nan"))
        plan1d_fused.launch(pl, kernels, x, dy, w, dx, dw, ws)
        return dx, dw

    dx, dw = run()
    what = f"{problem.key()} / {config.key()}"
    _check(dx, dw1d_dgrad_reference(dy64, w64), dtype, f"fused dx {what}")
    _check(dw, dw1d_wgrad_reference(x64, dy64, K), dtype, f"fused dw {what}")
    if pl.deterministic:
        dx2, dw2 = run()
        assert bool(cp.array_equal(dw, dw2)) and bool(cp.array_equal(dx, dx2)), "fused backward differs between runs"


# ---- 2-D input and weight gradients ------------------------------------------------------------------------
def _cases_2d() -> list:
    from convtune.kernels.depthwise.space import enumerate_plans_2d_dgrad, enumerate_plans_2d_wgrad

    rng = random.Random(20261212)
    cases = []
    for i, text in enumerate(SHAPES_2D):
        twin = ConvProblem.parse(text)
        groups = {"dgrad": list(enumerate_plans_2d_dgrad(twin, H200))}
        wplans = list(enumerate_plans_2d_wgrad(twin, H200))
        for mode in (MODE_DETERMINISTIC, MODE_ATOMIC):
            groups[f"wgrad-m{mode}"] = [pl for pl in wplans if pl.config.mode == mode]
        for name, plans in groups.items():
            for k, pl in enumerate(_picks(plans, rng)):
                cases.append(pytest.param(text, pl.config, id=f"2d-{name}-{i}-{k}"))
    return cases


CASES_2D = _cases_2d()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("text", "config"), CASES_2D)
def test_2d_gradients_16bit_match_float64(text: str, config, dtype: str, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
    from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
    from convtune.kernels.depthwise.reference import dw2d_dgrad_reference, dw2d_wgrad_reference

    problem = replace(ConvProblem.parse(text), dtype=dtype)
    module = plan2d_dgrad if config.direction == "dgrad" else plan2d_wgrad
    try:
        pl = module.plan(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    p = problem
    st, pad = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)
    seed = zlib.crc32(f"{problem.key()} {config.key()}".encode())
    kernels = module.compile_plan(pl)
    dy, dy64 = _draw((p.N, p.C, p.P, p.Q), dtype, seed)
    what = f"{config.direction} {p.key()} / {config.key()}"
    if config.direction == "dgrad":
        w, w64 = _draw((p.C, 1, p.R, p.S), dtype, seed + 1)
        dx = _nan_storage((p.N, p.C, p.H, p.W), dtype)
        module.launch(pl, kernels, dy, w, dx)
        _check(dx, dw2d_dgrad_reference(dy64, w64, (p.H, p.W), st, pad), dtype, what)
        return
    x, x64 = _draw((p.N, p.C, p.H, p.W), dtype, seed + 2)

    def run():
        dw = _nan_storage((p.C, 1, p.R, p.S), dtype)
        ws = module.allocate_workspace(pl)
        if ws is not None:
            ws.fill(float("nan"))
        module.launch(pl, kernels, x, dy, dw, workspace=ws)
        return dw

    dw = run()
    _check(dw, dw2d_wgrad_reference(x64, dy64, (p.R, p.S), st, pad), dtype, what)
    if pl.deterministic:
        assert bool(cp.array_equal(dw, run())), "deterministic wgrad differs between runs"


# ---- 2-D forwards (fast, packed) --------------------------------------------------------------------------
def _cases_2d_fwd() -> list:
    from convtune.kernels.depthwise.space import enumerate_plans_2d_fast, enumerate_plans_2d_packed

    rng = random.Random(20261213)
    cases = []
    for i, text in enumerate(SHAPES_2D):
        twin = ConvProblem.parse(text)
        for name, plans in (("fast", list(enumerate_plans_2d_fast(twin, H200))),
                            ("packed", list(enumerate_plans_2d_packed(twin, H200)))):
            for k, pl in enumerate(_picks(plans, rng) if plans else []):
                cases.append(pytest.param(text, pl.config, id=f"2d-fwd-{name}-{i}-{k}"))
    return cases


CASES_2D_FWD = _cases_2d_fwd()


def _fwd_module(config):
    from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
    from convtune.kernels.depthwise.conv2d import packed as plan2d_packed

    return plan2d_packed if config.family == "depthwise2d_packed" else plan2d_fast


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("text", "config"), CASES_2D_FWD)
def test_2d_forward_16bit_matches_float64(text: str, config, dtype: str, machine) -> None:
    from convtune.kernels.depthwise.reference import dw2d_fwd_reference

    problem = replace(ConvProblem.parse(text), dtype=dtype)
    module = _fwd_module(config)
    try:
        pl = module.plan(problem, config, machine)
    except InvalidConfig as exc:
        pytest.skip(f"not valid on this device: {exc}")
    p = problem
    seed = zlib.crc32(f"{problem.key()} {config.key()}".encode())
    x, x64 = _draw((p.N, p.C, p.H, p.W), dtype, seed)
    w, w64 = _draw((p.C, 1, p.R, p.S), dtype, seed + 1)
    y = _nan_storage((p.N, p.C, p.P, p.Q), dtype)
    module.launch(pl, module.compile_plan(pl), x, w, y)
    ref = dw2d_fwd_reference(x64, w64, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w))
    _check(y, ref, dtype, f"fwd {p.key()} / {config.key()}")


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
    from convtune.kernels.depthwise.conv1d import plan as plan1d
    from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
    from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad

    texts = []
    for dtype in DTYPES:
        made = []
        for case in CASES_1D:
            made.append((plan1d.plan, ConvProblem.depthwise1d(*case.values[0], dtype=dtype), case.values[1]))
        for case in CASES_FUSED:
            made.append((plan1d_fused.plan, ConvProblem.depthwise1d(*case.values[0], dtype=dtype), case.values[1]))
        for case in CASES_2D:
            module = plan2d_dgrad if case.values[1].direction == "dgrad" else plan2d_wgrad
            made.append((module.plan, replace(ConvProblem.parse(case.values[0]), dtype=dtype), case.values[1]))
        for case in CASES_2D_FWD:
            made.append((_fwd_module(case.values[1]).plan, replace(ConvProblem.parse(case.values[0]), dtype=dtype),
                         case.values[1]))
        for make, problem, config in made:
            try:
                pl = make(problem, config, machine)
            except InvalidConfig:
                continue
            texts += [pl.source()] + ([pl.reduce_source()] if getattr(pl, "needs_reduce", False) else [])
    cubin_cache(texts)


@pytest.mark.parametrize("dtype", DTYPES)
def test_16bit_launchers_refuse_float32_arrays(dtype: str, machine) -> None:
    """A 16-bit plan takes raw pointers: a float32 array (twice the bytes) must be refused, naming the argument."""
    import cupy as cp

    from convtune.errors import InvalidInput
    from convtune.kernels.depthwise.conv1d import launcher
    from convtune.ops.depthwise import model_plan

    pl = model_plan(ConvProblem.depthwise1d(2, 3, 16, 4, dtype=dtype), machine, "fwd")
    x, _x64 = _draw((2, 3, 16), dtype, 1)
    w32 = cp.zeros((3, 4), dtype=cp.float32)
    with pytest.raises(InvalidInput) as info:
        launcher.launch(pl, launcher.compile_plan(pl), x, w32, _nan_storage((2, 3, 16), dtype))
    assert info.value.field == "w"

"""Prepared launches on the GPU, called as the ops call them: ``prepare(problem, config, device)`` then raw device
pointers and a raw stream. Every family (direct with and without split-C and 16-byte copies, fused and unfused
Winograd F(2)/F(4), the depthwise 1-D paths incl. both weight-gradient modes, the fused backward, the 2-D
forwards and gradients) against float64 references; outputs and workspaces poisoned with NaN first, inputs fresh
normal draws. The filter preparations (packing, U = G g Gᵀ on the GPU) against the host-side ones; the
``CONVTUNE_LAUNCH=cupy`` fallback against the driver path; a prepared launch inside a CUDA graph; a launch
prepared for another device than the current one. (The kernel test modules run every plan through the same
prepared launches via the ``launch`` functions.)"""

from __future__ import annotations

import zlib

import pytest

from convtune.kernels.depthwise.configs import MODE_ATOMIC, MODE_DETERMINISTIC
from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.kernels.winograd.launcher import WinogradFwdConfig
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

DENSE = [
    pytest.param("N=2 C=19 H=17 W=15 K=21 R=3 S=3 pad=1", DirectFwdConfig(), 1e-5, id="direct"),
    pytest.param("N=2 C=32 H=16 W=16 K=24 R=3 S=3 pad=1", DirectFwdConfig(splits=2, chunk_c=8), 1e-5,
                 id="direct-split"),
    pytest.param("N=1 C=8 H=20 W=24 K=16 R=3 S=3 stride=2 pad=1", DirectFwdConfig(vec=4), 1e-5, id="direct-vec4-s2"),
    pytest.param("N=2 C=7 H=13 W=11 K=9 R=5 S=3 pad_h=2 pad_w=1 dilation=2", DirectFwdConfig(), 1e-5,
                 id="direct-dilated"),
    pytest.param("N=2 C=19 H=17 W=15 K=21 R=3 S=3 pad=1", WinogradFwdConfig(), 1e-4, id="winograd-f2"),
    pytest.param("N=2 C=19 H=17 W=15 K=21 R=3 S=3 pad=1", WinogradFwdConfig(4, 32, 32, 8, 2, 2, 2), 1e-3,
                 id="winograd-f4"),
    pytest.param("N=2 C=19 H=17 W=15 K=21 R=3 S=3 pad=1", WinogradUnfusedConfig(m=2), 1e-4, id="unfused-f2"),
    pytest.param("N=3 C=33 H=14 W=14 K=40 R=3 S=3 pad=1", WinogradUnfusedConfig(m=4), 1e-3, id="unfused-f4"),
]


def _rng(tag: str):
    import cupy as cp

    return cp.random.default_rng(zlib.crc32(tag.encode()))


def _stream() -> int:
    import cupy as cp

    return cp.cuda.get_current_stream().ptr


def _dense_run(prepared, x, w):
    """Filters by the layout's own prep launch, then the convolution into a NaN-poisoned y (and workspace)."""
    import cupy as cp

    p = prepared.problem
    f = cp.full(prepared.filters.words, cp.nan, dtype=cp.float32)
    prepared.filters.prep((w.data.ptr, f.data.ptr), _stream())
    y = cp.full((p.N, p.K, p.P, p.Q), cp.nan, dtype=cp.float32)
    ptrs = [x.data.ptr, f.data.ptr, y.data.ptr]
    ws = None
    if prepared.workspace_bytes:
        ws = cp.full(prepared.workspace_bytes // 4, cp.nan, dtype=cp.float32)
        ptrs.append(ws.data.ptr)
    prepared(ptrs, _stream())
    cp.cuda.get_current_stream().synchronize()
    return y


@pytest.mark.parametrize(("key", "config", "tol"), DENSE)
def test_dense_families_match_float64(key, config, tol) -> None:
    from convtune.kernels.prepared import prepare
    from convtune.kernels.reference import conv2d_reference_for, relative_error

    p = ConvProblem.parse(key)
    prepared = prepare(p, config, 0)
    assert prepared.kind == config.kind and prepared.output_shape == (p.N, p.K, p.P, p.Q)
    rng = _rng(key)
    import cupy as cp

    x = rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32)
    w = rng.standard_normal((p.K, p.C, p.R, p.S), dtype=cp.float32)
    y = _dense_run(prepared, x, w)
    ref = conv2d_reference_for(p, cp.asnumpy(x), cp.asnumpy(w))
    assert relative_error(cp.asnumpy(y), ref) <= tol
    # a second call on other data: nothing of the first call leaks into it
    x2 = rng.standard_normal(x.shape, dtype=cp.float32)
    y2 = _dense_run(prepared, x2, w)
    assert relative_error(cp.asnumpy(y2), conv2d_reference_for(p, cp.asnumpy(x2), cp.asnumpy(w))) <= tol


def test_filter_preparations_match_the_host_side_ones() -> None:
    import cupy as cp

    from convtune.kernels.direct.launcher import pack_weights
    from convtune.kernels.prepared import prepare
    from convtune.kernels.reference import relative_error
    from convtune.kernels.winograd.launcher import transform_filters

    p = ConvProblem.parse("N=1 C=19 H=9 W=9 K=21 R=3 S=3 pad=1")
    w = _rng("filters").standard_normal((p.K, p.C, 3, 3), dtype=cp.float32)
    direct = prepare(p, DirectFwdConfig(), 0)
    packed = cp.full(direct.filters.words, cp.nan, dtype=cp.float32)
    direct.filters.prep((w.data.ptr, packed.data.ptr), _stream())
    assert cp.array_equal(packed, pack_weights(w).ravel())
    for config in (WinogradFwdConfig(), WinogradUnfusedConfig(m=4), WinogradUnfusedConfig(m=2)):
        launch = prepare(p, config, 0)
        u = cp.full(launch.filters.words, cp.nan, dtype=cp.float32)
        launch.filters.prep((w.data.ptr, u.data.ptr), _stream())
        pl = launch.plan
        host = transform_filters(w, config.m, pl.cp, pl.kp).ravel()
        assert not cp.isnan(u).any()
        assert relative_error(u, host) <= 1e-7          # double sums on both sides, rounded to float once


# ---- depthwise -------------------------------------------------------------------------------------------------
def _poisoned(shape, dtype="float32"):
    import cupy as cp

    return cp.full(shape, cp.nan, dtype=dtype)


def _pick(plans, pred=lambda pl: True):
    return next(pl for pl in plans if pred(pl))


@pytest.mark.parametrize("variant", ["naive", "coalesced", "shared", "warp", "fast"])
def test_depthwise_1d_paths(variant, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise import reference as ref
    from convtune.kernels.depthwise.space import enumerate_plans
    from convtune.kernels.prepared import prepare
    from convtune.kernels.reference import relative_error

    p = ConvProblem.depthwise1d(B=3, C=5, L=50, K=7)
    rng = _rng(f"dw1d-{variant}")
    x, dy = (rng.standard_normal((3, 5, 50), dtype=cp.float32) for _ in range(2))
    w = rng.standard_normal((5, 7), dtype=cp.float32)
    for path in ("fwd", "dgrad", "wgrad"):
        modes = (MODE_DETERMINISTIC, MODE_ATOMIC) if path == "wgrad" else (0,)
        for mode in modes:
            pl = _pick(enumerate_plans(p, machine, variant, path),
                       lambda q, mode=mode: getattr(q.config, "mode", 0) == mode)
            launch = prepare(p, pl.config, 0)
            out = _poisoned(launch.output_shape)
            a, b, expected, tol = {"fwd": (x, w, ref.dw1d_fwd_reference(x, w), 1e-5),
                                   "dgrad": (dy, w, ref.dw1d_dgrad_reference(dy, w), 1e-5),
                                   "wgrad": (x, dy, ref.dw1d_wgrad_reference(x, dy, 7), 1e-4)}[path]
            ptrs = [a.data.ptr, b.data.ptr, out.data.ptr]
            ws = _poisoned(launch.workspace_bytes // 4) if launch.workspace_bytes else None
            if ws is not None:
                ptrs.append(ws.data.ptr)
            launch(ptrs, _stream())
            cp.cuda.get_current_stream().synchronize()
            assert relative_error(out, expected) <= tol, f"{variant} {path} mode {mode}"


@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC], ids=["deterministic", "atomic"])
def test_depthwise_fused_backward(mode, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise import reference as ref
    from convtune.kernels.depthwise.space import enumerate_plans_fused
    from convtune.kernels.prepared import prepare
    from convtune.kernels.reference import relative_error

    p = ConvProblem.depthwise1d(B=4, C=6, L=48, K=9)
    pl = _pick(enumerate_plans_fused(p, machine), lambda q: q.config.mode == mode)
    launch = prepare(p, pl.config, 0)
    rng = _rng(f"fused-{mode}")
    x, dy = (rng.standard_normal((4, 6, 48), dtype=cp.float32) for _ in range(2))
    w = rng.standard_normal((6, 9), dtype=cp.float32)
    dx, dw = _poisoned((4, 6, 48)), _poisoned((6, 9))
    ptrs = [x.data.ptr, dy.data.ptr, w.data.ptr, dx.data.ptr, dw.data.ptr]
    if launch.workspace_bytes:
        ws = _poisoned(launch.workspace_bytes // 4)
        ptrs.append(ws.data.ptr)
    launch(ptrs, _stream())
    cp.cuda.get_current_stream().synchronize()
    assert relative_error(dx, ref.dw1d_dgrad_reference(dy, w)) <= 1e-5
    assert relative_error(dw, ref.dw1d_wgrad_reference(x, dy, 9)) <= 1e-4


@pytest.mark.parametrize("key", ["N=2 C=16 H=15 W=17 K=16 R=3 S=3 pad=1 groups=16",
                                 "N=4 C=24 H=7 W=7 K=24 R=3 S=3 pad=1 groups=24",
                                 "N=2 C=8 H=21 W=20 K=8 R=5 S=5 stride=2 pad=2 groups=8"])
def test_depthwise_2d_paths(key, machine) -> None:
    import cupy as cp

    from convtune.kernels.depthwise import reference as ref
    from convtune.kernels.depthwise import space
    from convtune.kernels.prepared import prepare
    from convtune.kernels.reference import relative_error

    p = ConvProblem.parse(key)
    st, pad = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)
    rng = _rng(key)
    x = rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32)
    w = rng.standard_normal((p.C, 1, p.R, p.S), dtype=cp.float32)
    dy = rng.standard_normal((p.N, p.C, p.P, p.Q), dtype=cp.float32)
    plans = [*list(space.enumerate_plans_2d(p, machine))[:1], *list(space.enumerate_plans_2d_fast(p, machine))[:1],
             *list(space.enumerate_plans_2d_packed(p, machine))[:1]]
    wplans = list(space.enumerate_plans_2d_wgrad(p, machine))
    plans += [*list(space.enumerate_plans_2d_dgrad(p, machine))[:1],
              _pick(wplans, lambda q: q.config.mode == MODE_DETERMINISTIC),
              _pick(wplans, lambda q: q.config.mode == MODE_ATOMIC)]
    for pl in plans:
        launch = prepare(p, pl.config, 0)
        out = _poisoned(launch.output_shape)
        direction = pl.config.direction
        a, b, expected, tol = {
            "fwd": (x, w, ref.dw2d_fwd_reference(x, w, st, pad), 1e-5),
            "dgrad": (dy, w, ref.dw2d_dgrad_reference(dy, w, (p.H, p.W), st, pad), 1e-5),
            "wgrad": (x, dy, ref.dw2d_wgrad_reference(x, dy, (p.R, p.S), st, pad), 1e-4)}[direction]
        ptrs = [a.data.ptr, b.data.ptr, out.data.ptr]
        if launch.workspace_bytes:
            ws = _poisoned(launch.workspace_bytes // 4)
            ptrs.append(ws.data.ptr)
        launch(ptrs, _stream())
        cp.cuda.get_current_stream().synchronize()
        assert relative_error(out, expected) <= tol, pl.config.key()


# ---- the protocol on the device --------------------------------------------------------------------------------
def test_the_cupy_fallback_launches_the_same_bytes(monkeypatch) -> None:
    import cupy as cp

    from convtune.kernels import prepared as prep

    p = ConvProblem.parse("N=3 C=33 H=14 W=14 K=40 R=3 S=3 pad=1")
    rng = _rng("fallback")
    x = rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32)
    w = rng.standard_normal((p.K, p.C, 3, 3), dtype=cp.float32)
    for config in (WinogradUnfusedConfig(m=4), DirectFwdConfig(splits=3, chunk_c=11)):
        driver_y = _dense_run(prep.prepare(p, config, 0), x, w)
        monkeypatch.setenv(prep.LAUNCH_ENV, "cupy")
        cupy_y = _dense_run(prep.prepare(p, config, 0), x, w)
        monkeypatch.delenv(prep.LAUNCH_ENV)
        if getattr(config, "splits", 1) == 1:  # deterministic kernels: equal bits; split-C adds in any order
            assert cp.array_equal(driver_y, cupy_y)
        else:
            assert float(cp.abs(driver_y - cupy_y).max()) <= 1e-4 * float(cp.abs(driver_y).max())


def test_a_prepared_launch_inside_a_cuda_graph() -> None:
    import cupy as cp

    from convtune.kernels.prepared import prepare
    from convtune.kernels.reference import conv2d_reference_for, relative_error

    p = ConvProblem.parse("N=2 C=16 H=14 W=14 K=24 R=3 S=3 pad=1")
    launch = prepare(p, WinogradUnfusedConfig(m=2), 0)
    rng = _rng("graph")
    x = rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32)
    w = rng.standard_normal((p.K, p.C, 3, 3), dtype=cp.float32)
    f = cp.empty(launch.filters.words, dtype=cp.float32)
    y = cp.full((p.N, p.K, p.P, p.Q), cp.nan, dtype=cp.float32)
    ws = cp.empty(launch.workspace_bytes, dtype=cp.uint8)
    cp.cuda.Device().synchronize()                      # the inputs exist before the side stream reads them
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        launch.filters.prep((w.data.ptr, f.data.ptr), stream.ptr)
        stream.begin_capture()
        launch((x.data.ptr, f.data.ptr, y.data.ptr, ws.data.ptr), stream.ptr)
        graph = stream.end_capture()
        stream.synchronize()
        assert bool(cp.isnan(y).all())                  # capturing launched nothing
        x[...] = rng.standard_normal(x.shape, dtype=cp.float32)   # the replay reads the new input
        graph.launch(stream)
    stream.synchronize()
    assert relative_error(cp.asnumpy(y), conv2d_reference_for(p, cp.asnumpy(x), cp.asnumpy(w))) <= 1e-4


def test_a_launch_prepared_for_another_device() -> None:
    import cupy as cp

    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    from convtune.kernels.prepared import prepare
    from convtune.kernels.reference import conv2d_reference_for, relative_error

    p = ConvProblem.parse("N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1")
    launch = prepare(p, DirectFwdConfig(), 1)
    with cp.cuda.Device(1):
        rng = _rng("device1")
        x = rng.standard_normal((1, 8, 9, 9), dtype=cp.float32)
        w = rng.standard_normal((8, 8, 3, 3), dtype=cp.float32)
        f = cp.empty(launch.filters.words, dtype=cp.float32)
        y = cp.full((1, 8, 9, 9), cp.nan, dtype=cp.float32)
        stream = cp.cuda.get_current_stream().ptr
    with cp.cuda.Device(0):                              # called from device 0: the launch switches
        launch.filters.prep((w.data.ptr, f.data.ptr), stream)
        launch((x.data.ptr, f.data.ptr, y.data.ptr), stream)
    with cp.cuda.Device(1):
        cp.cuda.get_current_stream().synchronize()
        assert relative_error(cp.asnumpy(y), conv2d_reference_for(p, cp.asnumpy(x), cp.asnumpy(w))) <= 1e-5

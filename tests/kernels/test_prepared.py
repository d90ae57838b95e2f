"""Prepared launches without a GPU: what each family's ``prepare_plan`` hands the driver — grids, blocks, shared
memory, the pointer and int32 arguments in the order of the kernel entries' parameter lists, the memsets of
split and atomic reductions, workspace offsets — decoded from the real ``kernelParams`` buffers by a recording
driver (tests/launch_recorder.py). The expected argument lists are written out from each wrapper's C signature
(as the CuPy ``launch`` functions passed them before), so a slot in the wrong place fails here, not on a GPU."""

from __future__ import annotations

import ctypes

import pytest
from dw2d_problems import dw
from launch_recorder import FakeDriverError, install

from convtune.errors import InvalidConfig, LaunchError
from convtune.kernels import prepared
from convtune.kernels.depthwise import space as dw_space
from convtune.kernels.depthwise.configs import MODE_ATOMIC, MODE_DETERMINISTIC
from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
from convtune.kernels.depthwise.conv1d import launcher as dw1d
from convtune.kernels.depthwise.conv1d import plan as plan1d
from convtune.kernels.depthwise.conv1d.plan import REDUCE_WARPS
from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
from convtune.kernels.depthwise.conv2d import packed as plan2d_packed
from convtune.kernels.depthwise.conv2d import tiled as plan2d
from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
from convtune.kernels.direct import launcher as direct
from convtune.kernels.direct import space as direct_space
from convtune.kernels.tensor_map import Im2colMap, TiledMap
from convtune.kernels.winograd import filters as wino_filters
from convtune.kernels.winograd import launcher as wino
from convtune.kernels.winograd import space as wino_space
from convtune.kernels.winograd import unfused
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
PTRS = (0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 0x60000)
STREAM = 0x77


@pytest.fixture
def rec(monkeypatch):
    return install(monkeypatch)


def _one(rec, name, grid, block, smem, ptrs, ints):
    return [("launch", name, tuple(grid), tuple(block), smem, STREAM, tuple(ptrs), tuple(ints))]


def _seen(rec):
    return [(c.kind, c.name, c.grid, c.block, c.smem_bytes, c.stream, c.pointers, c.ints) if c.kind == "launch"
            else (c.kind, c.pointers, c.nbytes, c.stream) for c in rec.calls]


# ---- dense -------------------------------------------------------------------------------------------------
P_DENSE = ConvProblem.parse("N=2 C=16 H=14 W=13 K=24 R=3 S=3 pad=1")


@pytest.mark.parametrize("splits", [1, 2], ids=["one-split", "split-C"])
def test_direct(rec, splits) -> None:
    pl = direct_space.plan(P_DENSE, direct.DirectFwdConfig(splits=splits), H200)
    k = rec.kernel("direct_fwd", 3, 12)
    launch = direct.prepare_plan(pl, 0, k)
    assert launch.operands == ("x", "filters", "y") and launch.workspace_bytes == 0
    assert launch.output_shape == (2, 24, 14, 13)
    launch(PTRS[:3], STREAM)
    p = P_DENSE
    expected = _one(rec, "direct_fwd", pl.grid, (pl.config.threads, 1, 1), pl.smem_bytes, PTRS[:3],
                    (p.C, p.H, p.W, p.K, pl.kp, p.P, p.Q, p.pad_h, p.pad_w, pl.tiles_q, pl.chunks_per_split, splits))
    if splits > 1:   # atomic adds into y: zeroed first, on the same stream
        expected.insert(0, ("memset", (PTRS[2],), 4 * p.N * p.K * p.P * p.Q, STREAM))
    assert _seen(rec) == expected


def test_direct_filter_packing(rec, monkeypatch) -> None:
    pack = rec.kernel("direct_pack_weights", 2, 3)
    monkeypatch.setattr(direct, "load_kernel", lambda text, entry, *a, **k: pack)
    pl = direct_space.plan(P_DENSE, direct.DirectFwdConfig(), H200)
    layout = direct.prepare_plan(pl, 0, rec.kernel("direct_fwd", 3, 12)).filters
    assert layout.key == ("direct",) and layout.words == 16 * 9 * 24
    layout.prep(PTRS[:2], STREAM)
    crs = 16 * 9
    assert _seen(rec) == _one(rec, "direct_pack_weights", (-(-crs * 24 // 256), 1, 1), (256, 1, 1), 0, PTRS[:2],
                              (24, 24, crs))


def test_winograd_fused(rec) -> None:
    pl = wino_space.plan(P_DENSE, wino.WinogradFwdConfig(), H200)
    launch = wino.prepare_plan(pl, 0, rec.kernel("winograd_fwd", 3, 13))
    launch(PTRS[:3], STREAM)
    p = P_DENSE
    assert _seen(rec) == _one(rec, "winograd_fwd", pl.grid, (pl.config.threads, 1, 1), pl.smem_bytes, PTRS[:3],
                              (p.C, p.H, p.W, p.K, p.P, p.Q, p.pad_h, p.pad_w, pl.tiles_p, pl.tiles_q, pl.tiles,
                               pl.cp, pl.kp))


def test_winograd_unfused_three_launches_share_one_workspace(rec) -> None:
    pl = wino_space.plan_unfused(P_DENSE, unfused.WinogradUnfusedConfig(), H200)
    kernels = unfused.UnfusedKernels(rec.kernel("winograd_input", 2, 10), rec.kernel("winograd_gemm", 3, 3),
                                     rec.kernel("winograd_output", 2, 8))
    launch = unfused.prepare_plan(pl, 0, kernels)
    assert launch.operands == ("x", "filters", "y", "workspace") and launch.launches == 3
    assert launch.workspace_bytes == pl.workspace_bytes
    x, u, y, ws = PTRS[:4]
    launch((x, u, y, ws), STREAM)
    p, c = P_DENSE, pl.config
    m = ws + 4 * c.alpha ** 2 * pl.cp * pl.tp            # M follows V in the workspace
    assert (m - ws) % 16 == 0
    assert _seen(rec) == [
        *_one(rec, "winograd_input", pl.input_grid, (256, 1, 1), 0, (x, ws),
              (p.C, p.H, p.W, p.pad_h, p.pad_w, pl.tiles_p, pl.tiles_q, pl.tiles, pl.cp, pl.tp)),
        *_one(rec, "winograd_gemm", pl.grid, (c.threads, 1, 1), pl.smem_bytes, (u, ws, m), (pl.cp, pl.kp, pl.tp)),
        *_one(rec, "winograd_output", pl.output_grid, (256, 1, 1), 0, (m, y),
              (p.K, p.P, p.Q, pl.tiles_p, pl.tiles_q, pl.tiles, pl.kp, pl.tp)),
    ]
    assert m + 4 * c.alpha ** 2 * pl.kp * pl.tp == ws + pl.workspace_bytes


def test_winograd_unfused_passes_run_each_images_kernels_from_its_first_image(rec) -> None:
    """images_per_pass=2 over N=5: passes of 2, 2 and 1 images, three launches each, every pass reusing the one
    workspace (V at its start, M after the full pass's V), x and y offset by the pass's first image, the grids and
    tile counts the pass's own (the last pass's fewer tiles padded to its own Tp)."""
    p = ConvProblem.parse("N=5 C=16 H=14 W=13 K=24 R=3 S=3 pad=1")
    config = unfused.WinogradUnfusedConfig(m=2, tile_t=32, images_per_pass=2)
    pl = unfused.derive_plan(p, config, H200)
    assert [(ps.first, ps.images) for ps in pl.passes] == [(0, 2), (2, 2), (4, 1)]
    per_image = pl.tiles_p * pl.tiles_q
    assert pl.tiles == 2 * per_image and pl.tp == -(-2 * per_image // 32) * 32
    kernels = unfused.UnfusedKernels(rec.kernel("winograd_input", 2, 10), rec.kernel("winograd_gemm", 3, 3),
                                     rec.kernel("winograd_output", 2, 8))
    launch = unfused.prepare_plan(pl, 0, kernels)
    assert launch.launches == 9 and launch.workspace_bytes == pl.workspace_bytes
    x, u, y, ws = PTRS[:4]
    launch((x, u, y, ws), STREAM)
    m = ws + 4 * config.alpha ** 2 * pl.cp * pl.tp
    expected = []
    for first, images in ((0, 2), (2, 2), (4, 1)):
        tiles = images * per_image
        tp = -(-tiles // 32) * 32
        xi, yi = x + 4 * first * p.C * p.H * p.W, y + 4 * first * p.K * p.P * p.Q
        expected += [
            *_one(rec, "winograd_input", (-(-tp // 256), pl.cp, 1), (256, 1, 1), 0, (xi, ws),
                  (p.C, p.H, p.W, p.pad_h, p.pad_w, pl.tiles_p, pl.tiles_q, tiles, pl.cp, tp)),
            *_one(rec, "winograd_gemm", (tp // 32, pl.kp // config.tile_k, config.alpha ** 2), (config.threads, 1, 1),
                  pl.smem_bytes, (u, ws, m), (pl.cp, pl.kp, tp)),
            *_one(rec, "winograd_output", (-(-tiles // 256), p.K, 1), (256, 1, 1), 0, (m, yi),
                  (p.K, p.P, p.Q, pl.tiles_p, pl.tiles_q, tiles, pl.kp, tp)),
        ]
    assert _seen(rec) == expected


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_filter_transform_launch(rec, monkeypatch, m) -> None:
    transform = rec.kernel("winograd_filter", 2, 4)
    monkeypatch.setattr(wino_filters, "load_kernel", lambda text, entry, *a, **k: transform)
    pl = wino_space.plan_unfused(P_DENSE, unfused.WinogradUnfusedConfig(m=m), H200)
    fused_pl = wino_space.plan(P_DENSE, wino.WinogradFwdConfig(m=m, tile_n=32, tile_k=64, chunk_c=16, thread_n=1,
                                                         thread_k=4))
    layout = unfused.prepare_plan(pl, 0, unfused.UnfusedKernels(*(rec.kernel(n, 3, 10) for n in "abc"))).filters
    assert layout.key == ("winograd", m, pl.cp, pl.kp) == wino_filters.layout(fused_pl, 0).key  # one U for both
    assert layout.words == (m + 2) ** 2 * pl.cp * pl.kp
    layout.prep(PTRS[:2], STREAM)
    assert _seen(rec) == _one(rec, "winograd_filter", (-(-pl.cp * pl.kp // 256), 1, 1), (256, 1, 1), 0, PTRS[:2],
                              (16, 24, pl.cp, pl.kp))


def test_winograd_filter_source_holds_g_exactly() -> None:
    """The generated table is the float64 G of transforms.py, digit for digit (repr round-trips)."""
    import re

    from convtune.kernels.winograd.transforms import matrices

    for m in (2, 4):
        text = wino_filters.source(m)
        table = re.search(r"const double G\[(\d+)\]\[3\] = \{(.*)\};", text)
        assert table is not None and int(table.group(1)) == m + 2
        values = [float(v) for v in re.findall(r"-?[\d.e+-]+", table.group(2))]
        assert values == [float(v) for v in matrices(m)[1].ravel()]


# ---- depthwise 1-D ---------------------------------------------------------------------------------------------
P1 = ConvProblem.depthwise1d(B=4, C=8, L=48, K=7)


def _first(plans, pred=lambda pl: True):
    return next(pl for pl in plans if pred(pl))


@pytest.mark.parametrize("variant", ["naive", "coalesced", "shared", "warp", "fast"])
@pytest.mark.parametrize("path", ["fwd", "dgrad"])
def test_1d_forward_and_input_gradient(rec, variant, path) -> None:
    pl = _first(dw_space.enumerate_plans(P1, H200, variant, path))
    kernels = dw1d.DepthwiseKernels(rec.kernel(pl.entry, 3, len(pl.int_args)))
    launch = dw1d.prepare_plan(pl, 0, kernels)
    assert launch.operands == (("x", "w", "y") if path == "fwd" else ("dy", "w", "dx"))
    launch(PTRS[:3], STREAM)
    assert _seen(rec) == _one(rec, pl.entry, (pl.grid, 1, 1), (pl.threads, 1, 1), pl.smem_bytes, PTRS[:3],
                              pl.int_args)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC], ids=["deterministic", "atomic"])
def test_1d_weight_gradient_sequences(rec, mode, dtype) -> None:
    problem = ConvProblem.depthwise1d(B=4, C=8, L=48, K=7, dtype=dtype)
    pl = _first(dw_space.enumerate_plans(ConvProblem.depthwise1d(B=4, C=8, L=48, K=7), H200, "fast", "wgrad"),
                lambda p: p.config.mode == mode)
    pl = plan1d.plan(problem, pl.config, H200)
    kernels = dw1d.DepthwiseKernels(rec.kernel(pl.entry, 3, len(pl.int_args)),
                                    rec.kernel("dw_reduce", 2, 5) if pl.needs_reduce else None)
    launch = dw1d.prepare_plan(pl, 0, kernels)
    x, dy, dwp, ws = PTRS[:4]
    main = (pl.entry, (pl.grid, 1, 1), (pl.threads, 1, 1), pl.smem_bytes, STREAM)
    reduce = ("dw_reduce", (pl.reduce_grid, 1, 1), (REDUCE_WARPS * 32, 1, 1), 0, STREAM)
    if mode == MODE_DETERMINISTIC:              # partials into the workspace, reduced in slice order into dw
        assert launch.operands == ("x", "dy", "dw", "workspace")
        assert launch.workspace_bytes == 4 * pl.slices * pl.C * pl.ke
        launch((x, dy, dwp, ws), STREAM)
        expected = [("launch", *main[:4], STREAM, (x, dy, ws), pl.int_args),
                    ("launch", *reduce[:4], STREAM, (ws, dwp), (pl.slices, pl.slots, pl.C, pl.K, pl.ke))]
    elif dtype == "float32":                    # atomic adds straight into dw, zeroed first
        assert launch.operands == ("x", "dy", "dw") and launch.workspace_bytes == 0
        launch((x, dy, dwp), STREAM)
        expected = [("memset", (dwp,), 4 * pl.C * pl.K, STREAM),
                    ("launch", *main[:4], STREAM, (x, dy, dwp), pl.int_args)]
    else:                                       # 16-bit: fp32 atomics into the workspace, converted into dw
        assert launch.operands == ("x", "dy", "dw", "workspace") and launch.workspace_bytes == 4 * pl.C * pl.K
        launch((x, dy, dwp, ws), STREAM)
        expected = [("memset", (ws,), 4 * pl.C * pl.K, STREAM),
                    ("launch", *main[:4], STREAM, (x, dy, ws), pl.int_args),
                    ("launch", *reduce[:4], STREAM, (ws, dwp), (1, pl.C, pl.C, pl.K, pl.K))]
    assert _seen(rec) == expected


@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC], ids=["deterministic", "atomic"])
def test_fused_backward(rec, mode) -> None:
    pl = _first(dw_space.enumerate_plans_fused(P1, H200), lambda p: p.config.mode == mode)
    kernels = plan1d_fused.FusedKernels(rec.kernel("dw1d_fused_bwd", 5, 5),
                                        rec.kernel("dw_reduce", 2, 5) if pl.needs_reduce else None)
    launch = plan1d_fused.prepare_plan(pl, 0, kernels)
    x, dy, w, dx, dwp, ws = PTRS
    ints = (pl.rows, pl.C, pl.L, pl.K, pl.ngroups)
    block = (pl.threads, 1, 1)
    if mode == MODE_DETERMINISTIC:
        launch((x, dy, w, dx, dwp, ws), STREAM)
        expected = [("launch", "dw1d_fused_bwd", (pl.grid, 1, 1), block, pl.smem_bytes, STREAM, (x, dy, w, dx, ws),
                     ints),
                    ("launch", "dw_reduce", (pl.reduce_grid, 1, 1), (REDUCE_WARPS * 32, 1, 1), 0, STREAM, (ws, dwp),
                     (pl.slices, pl.slots, pl.C, pl.K, pl.ke))]
    else:
        launch((x, dy, w, dx, dwp), STREAM)
        expected = [("memset", (dwp,), 4 * pl.C * pl.K, STREAM),
                    ("launch", "dw1d_fused_bwd", (pl.grid, 1, 1), block, pl.smem_bytes, STREAM, (x, dy, w, dx, dwp),
                     ints)]
    assert _seen(rec) == expected


# ---- depthwise 2-D ---------------------------------------------------------------------------------------------
P2 = dw(2, 8, 15, 17, 3, 3, 1, 1)
P2_SMALL = dw(4, 16, 7, 7, 3, 3, 1, 1)


def test_2d_forwards(rec) -> None:
    p = P2
    tiled = _first(dw_space.enumerate_plans_2d(p, H200))
    plan2d.prepare_plan(tiled, 0, rec.kernel("dw2d_fwd", 3, 10))(PTRS[:3], STREAM)
    fast = _first(dw_space.enumerate_plans_2d_fast(p, H200))
    plan2d_fast.prepare_plan(fast, 0, rec.kernel("dw2d_fast_fwd", 3, 3))(PTRS[:3], STREAM)
    packed = _first(dw_space.enumerate_plans_2d_packed(P2_SMALL, H200))
    plan2d_packed.prepare_plan(packed, 0, rec.kernel("dw2d_packed_fwd", 3, 2))(PTRS[:3], STREAM)
    q = P2_SMALL
    assert _seen(rec) == [
        *_one(rec, "dw2d_fwd", (tiled.grid, 1, 1), (tiled.threads, 1, 1), tiled.smem_bytes, PTRS[:3],
              (p.N * p.C, p.C, p.H, p.W, p.P, p.Q, p.pad_h, p.pad_w, tiled.tiles_q, tiled.tiles_p * tiled.tiles_q)),
        *_one(rec, "dw2d_fast_fwd", (fast.grid, 1, 1), (fast.threads, 1, 1), fast.smem_bytes, PTRS[:3],
              (p.N * p.C, p.C, fast.nbands)),
        *_one(rec, "dw2d_packed_fwd", (packed.grid, 1, 1), (packed.threads, 1, 1), packed.smem_bytes, PTRS[:3],
              (q.N * q.C, q.C)),
    ]


def test_2d_input_gradient(rec) -> None:
    pl = _first(dw_space.enumerate_plans_2d_dgrad(P2, H200))
    launch = plan2d_dgrad.prepare_plan(pl, 0, rec.kernel("dw2d_dgrad", 3, 3))
    assert launch.operands == ("dy", "w", "dx") and launch.output_shape == (2, 8, 15, 17)
    launch(PTRS[:3], STREAM)
    assert _seen(rec) == _one(rec, "dw2d_dgrad", (pl.grid, 1, 1), (pl.threads, 1, 1), pl.smem_bytes, PTRS[:3],
                              (P2.N * P2.C, P2.C, pl.nbands))


@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC], ids=["deterministic", "atomic"])
def test_2d_weight_gradient(rec, mode) -> None:
    pl = _first(dw_space.enumerate_plans_2d_wgrad(P2, H200), lambda p: p.config.mode == mode)
    kernels = plan2d_wgrad.Dw2dWgradKernels(rec.kernel("dw2d_wgrad", 3, 4),
                                            rec.kernel("dw_reduce", 2, 5) if pl.needs_reduce else None)
    launch = plan2d_wgrad.prepare_plan(pl, 0, kernels)
    p = P2
    x, dy, dwp, ws = PTRS[:4]
    ints = (p.N, p.C, pl.nbands, pl.n_groups)
    main = ("dw2d_wgrad", (pl.grid, 1, 1), (pl.threads, 1, 1), pl.smem_bytes, STREAM)
    if mode == MODE_DETERMINISTIC:
        launch((x, dy, dwp, ws), STREAM)
        expected = [("launch", *main, (x, dy, ws), ints),
                    ("launch", "dw_reduce", (pl.reduce_grid, 1, 1), (REDUCE_WARPS * 32, 1, 1), 0, STREAM, (ws, dwp),
                     (pl.slices, pl.slots, p.C, pl.taps, pl.taps))]
    else:
        launch((x, dy, dwp), STREAM)
        expected = [("memset", (dwp,), 4 * p.C * pl.taps, STREAM), ("launch", *main, (x, dy, dwp), ints)]
    assert _seen(rec) == expected


@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC], ids=["deterministic", "atomic"])
def test_chain_runs_both_gradients_on_shared_operands(rec, mode) -> None:
    """The chained backward: the input gradient's launch, then the weight gradient's steps (memset or reduction
    included), each with its own operands taken from the chain's by name."""
    dg = _first(dw_space.enumerate_plans_2d_dgrad(P2, H200))
    wg = _first(dw_space.enumerate_plans_2d_wgrad(P2, H200), lambda p: p.config.mode == mode)
    d = plan2d_dgrad.prepare_plan(dg, 0, rec.kernel("dw2d_dgrad", 3, 3))
    w = plan2d_wgrad.prepare_plan(wg, 0, plan2d_wgrad.Dw2dWgradKernels(
        rec.kernel("dw2d_wgrad", 3, 4), rec.kernel("dw_reduce", 2, 5) if wg.needs_reduce else None))
    names = ("x", "dy", "dw") + (("workspace",) if w.workspace_bytes else ())
    both = prepared.chain([(d, ("dy", "w", "dx")), (w, names)], "dw2d.bwd")
    assert both.operands == ("dy", "w", "dx", "x", "dw", *names[3:])
    assert both.workspace_bytes == w.workspace_bytes and both.parts == (d, w)
    assert both.launches == d.launches + w.launches
    ptrs = PTRS[:len(both.operands)]
    dy, wp, dx, x, dwp = ptrs[:5]
    both(ptrs, STREAM)
    seen = _seen(rec)
    rec.calls.clear()
    d((dy, wp, dx), STREAM)
    w((x, dy, dwp, *ptrs[5:]), STREAM)
    assert seen == _seen(rec)   # the same launches, in order, as the two prepared launches called one by one


def test_chain_refuses_mismatched_names(rec) -> None:
    d = plan2d_dgrad.prepare_plan(_first(dw_space.enumerate_plans_2d_dgrad(P2, H200)), 0,
                                  rec.kernel("dw2d_dgrad", 3, 3))
    with pytest.raises(InvalidConfig, match="operands"):
        prepared.chain([(d, ("dy", "w"))], "short")
    with pytest.raises(InvalidConfig, match="workspace"):
        prepared.chain([(d, ("dy", "workspace", "dx"))], "scratch")
    with pytest.raises(InvalidConfig, match="parts"):
        prepared.chain([], "empty")


# ---- the protocol itself ---------------------------------------------------------------------------------------
def test_prepare_dispatches_on_the_config_kind(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr("convtune.kernels.devices.device_machine", lambda device: H200)
    for module in (direct, wino, unfused, dw1d, plan1d_fused, plan2d, plan2d_fast, plan2d_packed, plan2d_dgrad,
                   plan2d_wgrad):
        monkeypatch.setattr(module, "prepare_plan", lambda pl, device, kernels=None, _m=module: seen.append(
            (_m.__name__.rsplit(".", 1)[1], pl.config.kind, device)))
    prepared.prepare(P_DENSE, direct.DirectFwdConfig(), 3)
    prepared.prepare(P_DENSE, unfused.WinogradUnfusedConfig(), 0)
    prepared.prepare(P1, _first(dw_space.enumerate_plans(P1, H200, "warp", "wgrad")).config, 0)
    prepared.prepare(P2, _first(dw_space.enumerate_plans_2d_dgrad(P2, H200)).config, 1)
    assert seen == [("launcher", "direct.fwd", 3), ("unfused", "winograd_unfused.fwd", 0),
                    ("launcher", "depthwise1d_warp.wgrad", 0), ("dgrad", "depthwise2d_fast.dgrad", 1)]
    with pytest.raises(InvalidConfig) as exc:   # validation happens here, naming the field
        prepared.prepare(P_DENSE, direct.DirectFwdConfig(thread_w=3), 0)
    assert exc.value.field == "thread_w"


def test_a_call_switches_to_the_launch_device_and_back(rec) -> None:
    pl = direct_space.plan(P_DENSE, direct.DirectFwdConfig(), H200)
    launch = direct.prepare_plan(pl, 2, rec.kernel("direct_fwd", 3, 12))
    rec.current_device = 0
    launch(PTRS[:3], STREAM)
    assert rec.calls[-1].device == 2 and rec.current_device == 0


def test_wrong_pointer_counts_and_driver_errors_are_typed(rec) -> None:
    single = direct.prepare_plan(direct_space.plan(P_DENSE, direct.DirectFwdConfig(), H200), 0,
                                 rec.kernel("direct_fwd", 3, 12))
    with pytest.raises(InvalidConfig, match="operands"):
        single(PTRS[:2], STREAM)
    multi = direct.prepare_plan(direct_space.plan(P_DENSE, direct.DirectFwdConfig(splits=2), H200), 0,
                                rec.kernel("direct_fwd", 3, 12))
    with pytest.raises(InvalidConfig, match="operands"):
        multi(PTRS[:4], STREAM)
    rec.fail_next = FakeDriverError("CUDA_ERROR_INVALID_VALUE")
    with pytest.raises(LaunchError, match=r"direct\.fwd"):
        single(PTRS[:3], STREAM)


def test_a_workspace_operand_exactly_when_workspace_bytes(rec) -> None:
    pl = direct_space.plan(P_DENSE, direct.DirectFwdConfig(), H200)
    step = prepared.Launch(rec.kernel("k", 3, 0), (1, 1, 1), (32, 1, 1), 0, prepared.pointers(0, 1, 2))
    with pytest.raises(InvalidConfig, match="workspace"):
        prepared.PreparedLaunch(plan=pl, device=0, operands=("x", "w", "y"), steps=[step], kernels=None,
                                workspace_bytes=64)
    with pytest.raises(InvalidConfig, match="operands"):
        prepared.PreparedLaunch(plan=pl, device=0, operands=("x", "w"), steps=[step], kernels=None)


# ---- TMA tensor maps -------------------------------------------------------------------------------------------
# Two maps of different kinds: the prepared launch must pass each through the driver's encode_map untouched.
MAP_A = TiledMap("float32", inner=96, rows=40, box_inner=32, box_rows=64, swizzle_bytes=128)
MAP_B = Im2colMap("bfloat16", n=2, h=9, w=7, c=64, lower=(-1, -1), upper=(-1, -1), stride_w=1, stride_h=1,
                  channels=64, pixels=128, swizzle_bytes=128)


def _compiled_steps(launch: prepared.PreparedLaunch) -> list[tuple]:
    """The per-step tuples ``_build_call`` keeps (white box: the ``kernelParams`` arrays and the map slots are only
    reachable there); found through the closures of the call function (the general path's generated ``run`` keeps
    them as its global ``_keep``)."""
    call = launch._call
    for _ in range(3):
        if "_keep" in call.__globals__ and call.__globals__ is not prepared.__dict__:
            return call.__globals__["_keep"]
        cells = dict(zip(call.__code__.co_freevars, (c.cell_contents for c in call.__closure__ or ()), strict=True))
        if "compiled" in cells:
            return cells["compiled"]
        call = cells["run"]
    raise AssertionError("prepared._build_call no longer keeps `compiled` where this test looks")


def _map_launch(rec, maps=((0, MAP_A), (1, MAP_B))):
    """One launch of a kernel taking 2 pointers (operands 0 and 1, in order: the shape of the single-launch fast
    path), 1 int and the maps."""
    pl = direct_space.plan(P_DENSE, direct.DirectFwdConfig(), H200)
    kernel = rec.kernel("tma_gemm", 2, 1, n_maps=len(maps))
    step = prepared.Launch(kernel, (3, 2, 1), (384, 1, 1), 1024, prepared.pointers(0, 1), (7,), maps)
    return prepared.PreparedLaunch(plan=pl, device=0, operands=("a", "b"), steps=[step], kernels=kernel)


def test_tensor_maps_follow_the_ints_as_128_byte_parameters(rec) -> None:
    """kernelParams holds n_pointers + n_ints + one entry per map; each map entry points at its own 128-byte buffer
    holding exactly what encode_map returned for (the map, its operand's pointer), in the step's map order."""
    launch = _map_launch(rec)
    launch(PTRS[:2], STREAM)
    assert [(spec, ptr) for spec, ptr, _ in rec.encoded] == [(MAP_A, PTRS[0]), (MAP_B, PTRS[1])]
    encoded = tuple(data for *_, data in rec.encoded)
    assert len(set(encoded)) == 2 and all(len(d) == 128 for d in encoded)
    (call,) = rec.launches()
    assert (call.pointers, call.ints, call.maps) == (PTRS[:2], (7,), encoded)
    assert (call.grid, call.block, call.smem_bytes, call.stream) == ((3, 2, 1), (384, 1, 1), 1024, STREAM)
    ((*_, (params, slots)),) = _compiled_steps(launch)
    assert len(params) == 2 + 1 + 2
    for j, slot in enumerate(slots):
        assert ctypes.sizeof(slot.buffer) == 128 and params[3 + j] == ctypes.addressof(slot.buffer)
        assert bytes(slot.buffer) == encoded[j]


def test_a_map_is_encoded_again_only_when_its_operand_moves(rec) -> None:
    """A single launch whose pointers are the operands in order would take the fast path, which never touches the
    maps: with maps it must not, so every call re-checks them; an unmoved operand's map is not re-encoded (a driver
    call per launch is what the caching saves), a moved one's is, alone, and its buffer changes."""
    launch = _map_launch(rec)
    launch(PTRS[:2], STREAM)
    launch(PTRS[:2], STREAM)
    assert len(rec.encoded) == 2
    first, second = rec.launches()
    assert first.maps == second.maps
    moved = PTRS[4]
    launch((moved, PTRS[1]), STREAM)
    assert [(spec, ptr) for spec, ptr, _ in rec.encoded[2:]] == [(MAP_A, moved)]
    third = rec.launches()[-1]
    assert third.pointers == (moved, PTRS[1])
    assert third.maps == (rec.encoded[2][2], first.maps[1]) and third.maps[0] != first.maps[0]
    launch((moved, PTRS[5]), STREAM)                 # now only operand 1 moves
    assert [(spec, ptr) for spec, ptr, _ in rec.encoded[3:]] == [(MAP_B, PTRS[5])]
    assert rec.launches()[-1].maps == (rec.encoded[2][2], rec.encoded[3][2])
    with pytest.raises(InvalidConfig, match="operands"):     # the general path still checks the pointer count
        launch(PTRS[:3], STREAM)


def test_a_map_takes_its_operands_base_pointer_in_a_sequence(rec) -> None:
    """In a sequence (a memset, then the launch) a map may read an operand the kernel takes no pointer of, and is
    encoded for the operand's own pointer, not a pointer argument's offset into it."""
    pl = direct_space.plan(P_DENSE, direct.DirectFwdConfig(), H200)
    kernel = rec.kernel("tma_gemm", 2, 1, n_maps=1)
    steps = [prepared.Memset(2, 64),
             prepared.Launch(kernel, (1, 1, 1), (256, 1, 1), 0, prepared.pointers(1, (2, 64)), (5,), ((0, MAP_A),))]
    launch = prepared.PreparedLaunch(plan=pl, device=0, operands=("x", "w", "y"), steps=steps, kernels=kernel)
    launch(PTRS[:3], STREAM)
    assert [(spec, ptr) for spec, ptr, _ in rec.encoded] == [(MAP_A, PTRS[0])]
    zero, call = rec.calls
    assert zero.kind == "memset" and call.pointers == (PTRS[1], PTRS[2] + 64)
    assert call.maps == (rec.encoded[0][2],)


def test_a_failed_encoding_launches_nothing_and_is_retried(rec, monkeypatch) -> None:
    """A refused map (LaunchError from the driver) stops the call before the launch and is not remembered as
    encoded: the next call with the same pointers encodes it again."""
    attempts = []

    def flaky(spec, pointer):
        attempts.append((spec, pointer))
        if len(attempts) == 1:
            raise LaunchError("the CUDA driver refused a TMA tensor map (CUresult 1)")
        return rec.encode_map(spec, pointer)

    drv = prepared.Driver(rec.launch_kernel, rec.memset, rec.get_device, rec.use_device, (FakeDriverError,), flaky)
    monkeypatch.setattr(prepared, "_driver", drv)
    launch = _map_launch(rec)
    with pytest.raises(LaunchError, match="CUresult 1"):
        launch(PTRS[:2], STREAM)
    assert rec.launches() == []
    launch(PTRS[:2], STREAM)
    assert attempts == [(MAP_A, PTRS[0]), (MAP_A, PTRS[0]), (MAP_B, PTRS[1])]
    (call,) = rec.launches()
    assert call.maps == tuple(data for *_, data in rec.encoded)

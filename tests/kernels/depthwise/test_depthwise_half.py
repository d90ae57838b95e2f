"""16-bit storage (float16, bfloat16; fp32 accumulation) of the depthwise kernels on the CPU: which plans accept
it and which refuse it naming ``dtype``, shared memory and workspaces, traffic bytes at the itemsize (fp32
partials and atomics at 4 bytes), the choice of ``convtune.ops.depthwise`` for 16-bit problems, and an
``nvcc -arch=sm_90`` compile of the 16-bit instantiations (no spills, registers within the launch bounds)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.depthwise import dtypes
from convtune.kernels.depthwise.configs import (
    CONFIG_CLASSES_1D,
    MODE_ATOMIC,
    MODE_DETERMINISTIC,
    Dw2dFastDgradConfig,
    Dw2dFastWgradConfig,
    Dw2dTiledFwdConfig,
    FusedBwdConfig,
)
from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
from convtune.kernels.depthwise.conv1d import plan as plan1d
from convtune.kernels.depthwise.conv1d import traffic
from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
from convtune.kernels.depthwise.conv2d import tiled as plan2d
from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
HALF = ("float16", "bfloat16")
P1 = ConvProblem.depthwise1d(16, 8, 48, 7)
P2 = ConvProblem.parse("N=4 C=16 H=28 W=28 K=16 R=3 S=3 pad=1 groups=16")
FAST = {"rows": 32, "tile_l": 12, "lanes_per_row": 2, "stages": 2, "vec": 4, "blocks_per_sm": 2}
OTHER_1D = {"naive": {}, "coalesced": {}, "shared": {"rows": 2, "tile_l": 16}, "warp": {"warps": 2}}


def _fast(problem: ConvProblem, path: str, mode: int | None = None, **fields: int):
    extra = {"mode": mode} if mode is not None else {}
    return plan1d.plan(problem, CONFIG_CLASSES_1D[("fast", path)](**{**FAST, **fields, **extra}), H200)


def _half(problem: ConvProblem, dtype: str) -> ConvProblem:
    return replace(problem, dtype=dtype)


# ---- which plans take 16-bit storage --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(("path", "mode"), [("fwd", None), ("dgrad", None), ("wgrad", MODE_DETERMINISTIC),
                                            ("wgrad", MODE_ATOMIC)])
def test_fast_1d_takes_16bit_storage_with_half_the_shared_memory(path: str, mode: int | None, dtype: str) -> None:
    full, half = _fast(P1, path, mode), _fast(_half(P1, dtype), path, mode)
    assert half.smem_bytes * 2 == full.smem_bytes
    assert (half.grid, half.threads, half.template_args, half.int_args) == (full.grid, full.threads,
                                                                            full.template_args, full.int_args)
    ctype = dtypes.CUDA_TYPES[dtype]
    assert f"FastTraits<{', '.join(map(str, half.template_args))}, {ctype}>" in half.wrapper()
    out_type = "float" if path == "wgrad" else ctype
    assert f"const {ctype}* __restrict__ a" in half.wrapper() and f"{out_type}* __restrict__ out" in half.wrapper()


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("variant", sorted(OTHER_1D))
def test_other_1d_variants_refuse_16bit_naming_dtype(variant: str, dtype: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan1d.plan(_half(P1, dtype), CONFIG_CLASSES_1D[(variant, "fwd")](**OTHER_1D[variant]), H200)
    assert info.value.field == "dtype"
    assert f"depthwise1d_{variant} supports float32; got {dtype}" in str(info.value)


@pytest.mark.parametrize("dtype", HALF)
def test_2d_tiled_forward_refuses_16bit_naming_dtype(dtype: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan2d.plan(_half(P2, dtype), Dw2dTiledFwdConfig(8, 32, 4, 1), H200)
    assert info.value.field == "dtype" and "float32" in str(info.value)
    assert plan2d.applies(_half(P2, dtype)) is not None
    assert plan2d.applies(_half(P2, dtype), dtypes.STORAGE_DTYPES) is None


@pytest.mark.parametrize("dtype", HALF)
def test_2d_gradients_take_16bit_storage(dtype: str) -> None:
    for module, config in ((plan2d_dgrad, Dw2dFastDgradConfig(4, 2, 4, 1, 32)),
                           (plan2d_wgrad, Dw2dFastWgradConfig(4, 2, 4, 1, 32))):
        full, half = module.plan(P2, config, H200), module.plan(_half(P2, dtype), config, H200)
        assert half.template_args() == full.template_args() and half.grid == full.grid
        assert f"{', '.join(map(str, half.template_args()))}, {dtypes.CUDA_TYPES[dtype]}>" in half.wrapper()
    dg_full = plan2d_dgrad.plan(P2, Dw2dFastDgradConfig(4, 2, 4, 1, 32), H200)
    assert plan2d_dgrad.plan(_half(P2, dtype), Dw2dFastDgradConfig(4, 2, 4, 1, 32), H200).smem_bytes * 2 == \
        dg_full.smem_bytes
    # weight gradient: staging at the itemsize, but never less than the fp32 block reduction (warps · R·S floats)
    wg = plan2d_wgrad.plan(_half(P2, dtype), Dw2dFastWgradConfig(1, 1, 1, 1, 32), H200)
    assert wg.smem_bytes >= 4 * P2.R * P2.S


@pytest.mark.parametrize("dtype", HALF)
def test_fused_backward_takes_16bit_storage(dtype: str) -> None:
    config = FusedBwdConfig(rows=32, stages=2, vec=4, blocks_per_sm=2)
    full, half = plan1d_fused.plan(P1, config, H200), plan1d_fused.plan(_half(P1, dtype), config, H200)
    assert half.smem_bytes * 2 == full.smem_bytes and half.grid == full.grid
    assert f"FastTraits<{', '.join(map(str, half.template_args()))}, {dtypes.CUDA_TYPES[dtype]}>" in half.wrapper()


def test_dtype_errors_name_the_supported_dtypes() -> None:
    with pytest.raises(InvalidConfig) as info:
        dtypes.check_dtype(_half(P1, "bfloat16"), dtypes.FP32_ONLY, "kernel X")
    assert info.value.field == "dtype" and str(info.value).endswith("kernel X supports float32; got bfloat16")
    dtypes.check_dtype(_half(P1, "bfloat16"), dtypes.STORAGE_DTYPES, "kernel X")


# ---- workspaces ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF)
def test_16bit_atomic_weight_gradients_add_into_an_fp32_workspace(dtype: str) -> None:
    """16-bit atomics would round every addition: the atomic modes add into C × K fp32 words, converted into dw
    by the reduction kernel; the deterministic modes keep their fp32 partials; float32 atomics need nothing."""
    p1, p2 = _half(P1, dtype), _half(P2, dtype)
    atomic_1d = _fast(p1, "wgrad", MODE_ATOMIC)
    assert atomic_1d.atomic_workspace and atomic_1d.needs_reduce and atomic_1d.workspace_words == P1.C * P1.S
    assert _fast(p1, "wgrad", MODE_DETERMINISTIC).workspace_words == _fast(P1, "wgrad", MODE_DETERMINISTIC) \
        .workspace_words
    full_atomic = _fast(P1, "wgrad", MODE_ATOMIC)
    assert not full_atomic.atomic_workspace and not full_atomic.needs_reduce and full_atomic.workspace_words == 0
    fused = plan1d_fused.plan(p1, FusedBwdConfig(rows=32, mode=MODE_ATOMIC), H200)
    assert fused.atomic_workspace and fused.workspace_words == P1.C * P1.S
    wg = plan2d_wgrad.plan(p2, Dw2dFastWgradConfig(4, 2, 4, 1, 32, MODE_ATOMIC), H200)
    assert wg.atomic_workspace and wg.needs_reduce and wg.workspace_words == P2.C * P2.R * P2.S
    assert dtypes.CUDA_TYPES[dtype] in atomic_1d.reduce_source() and dtypes.CUDA_TYPES[dtype] in wg.reduce_source()
    assert "reduce_body<16, float>" in full_atomic.reduce_source()


# ---- traffic at the itemsize -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF)
def test_traffic_bytes_scale_with_the_itemsize(dtype: str) -> None:
    p1 = _half(P1, dtype)
    for path in ("fwd", "dgrad", "wgrad"):
        assert traffic.compulsory_bytes(p1, path) * 2 == traffic.compulsory_bytes(P1, path)
    for path in ("fwd", "dgrad"):
        assert traffic.total_traffic_bytes(_fast(p1, path)) * 2 == traffic.total_traffic_bytes(_fast(P1, path))
    det_full, det_half = _fast(P1, "wgrad", MODE_DETERMINISTIC), _fast(p1, "wgrad", MODE_DETERMINISTIC)
    words = traffic.traffic_words(det_half)
    assert words == traffic.traffic_words(det_full)
    fp32 = words["partials"] + words["reduce_read"]
    assert traffic.total_traffic_bytes(det_half) == 2 * (sum(words.values()) - fp32) + 4 * fp32
    atomic = traffic.traffic_words(_fast(p1, "wgrad", MODE_ATOMIC))
    assert set(atomic) == {"x", "dy", "atomics", "ws_zero", "reduce_read", "dw"}
    assert atomic["ws_zero"] == atomic["reduce_read"] == atomic["dw"] == P1.C * P1.S


@pytest.mark.parametrize("dtype", HALF)
def test_2d_gradient_traffic_and_model_at_the_itemsize(dtype: str) -> None:
    from convtune.kernels.depthwise.conv2d import model_bwd as model2d_bwd

    p2 = _half(P2, dtype)
    dg = plan2d_dgrad.plan(p2, Dw2dFastDgradConfig(4, 2, 4, 1, 32), H200)
    dg_full = plan2d_dgrad.plan(P2, Dw2dFastDgradConfig(4, 2, 4, 1, 32), H200)
    assert plan2d_dgrad.traffic_words(dg) == plan2d_dgrad.traffic_words(dg_full)
    assert model2d_bwd.predict(dg, H200).dram_s * 2 == pytest.approx(model2d_bwd.predict(dg_full, H200).dram_s)
    wg = plan2d_wgrad.plan(p2, Dw2dFastWgradConfig(4, 2, 4, 1, 32, MODE_ATOMIC), H200)
    words = plan2d_wgrad.traffic_words(wg)
    assert words["ws_zero"] == words["reduce_read"] == words["dw"] == P2.C * P2.R * P2.S
    assert model2d_bwd.predict(wg, H200).launches == 3


# ---- what convtune.ops.depthwise chooses -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", HALF)
def test_model_plan_for_16bit_problems(dtype: str) -> None:
    """1-D: the fast variant (the only one with 16-bit storage), every path; 2-D: the forward (fast or
    packed, never the fp32-only tiled kernel) and both gradients; configurations come from the float32 twin's
    space."""
    from convtune.ops import depthwise as ops

    ops.clear_cache()
    p1, p2 = _half(P1, dtype), _half(P2, dtype)
    for path in ("fwd", "dgrad", "wgrad"):
        pl = ops.model_plan(p1, H200, path)
        assert pl.variant == "fast" and pl.problem == p1 and pl.path == path
    assert ops.model_plan(p1, H200, "wgrad").config.mode == MODE_DETERMINISTIC
    assert isinstance(ops.model_plan(p2, H200, "dgrad"), plan2d_dgrad.Dw2dDgradPlan)
    assert ops.model_plan(p2, H200, "wgrad").problem == p2
    fwd = ops.model_plan(p2, H200, "fwd")
    assert fwd.problem == p2 and fwd.config.family in ("depthwise2d_fast", "depthwise2d_packed")
    with pytest.raises(InvalidConfig, match="no valid"):                  # 80 taps: more than 64 in registers
        ops.model_plan(ConvProblem.depthwise1d(2, 3, 100, 80, dtype=dtype), H200, "fwd")
    ops.clear_cache()


# ---- nvcc compile of the 16-bit instantiations ------------------------------------------------------------
def _entries() -> list[tuple[str, str, int, int]]:
    """(id, CUDA text, threads, min_blocks) of 16-bit plans: 1-D fast per path and mode with 8- and 2-byte
    copies, halo and stages, the fused backward, the 2-D gradients with 8-byte copies and vector reads and
    with single-element copies, and the reduction kernel."""
    odd = ConvProblem.depthwise1d(5, 3, 50, 5)                     # L % 4 ≠ 0: single-element copies
    paper = ConvProblem.depthwise1d(16384, 128, 48, 48)
    odd2 = ConvProblem.parse("N=3 C=7 H=17 W=19 K=7 R=5 S=5 stride=2 pad=2 groups=7")
    out = []
    for dtype in HALF:
        plans = []
        for path in ("fwd", "dgrad", "wgrad"):
            for mode in ((MODE_DETERMINISTIC, MODE_ATOMIC) if path == "wgrad" else (None,)):
                plans.append(_fast(_half(paper, dtype), path, mode, rows=128, tile_l=48, lanes_per_row=1))
                plans.append(_fast(_half(odd, dtype), path, mode, vec=1, stages=1))
        plans.append(plan1d_fused.plan(_half(paper, dtype), FusedBwdConfig(128, 2, 4, 2, MODE_DETERMINISTIC), H200))
        plans.append(plan1d_fused.plan(_half(odd, dtype), FusedBwdConfig(64, 1, 1, 2, MODE_ATOMIC), H200))
        for problem in (_half(P2, dtype), _half(odd2, dtype)):
            plans.append(plan2d_dgrad.plan(problem, Dw2dFastDgradConfig(4, 2, 4, 1, 32), H200))
            plans.append(plan2d_wgrad.plan(problem, Dw2dFastWgradConfig(4, 2, 4, 1, 32), H200))
        plans.append(plan2d_dgrad.plan(_half(P2, dtype), Dw2dFastDgradConfig(4, 2, 3, 1, 32), H200))  # scalar reads
        for i, pl in enumerate(plans):
            out.append((f"{dtype}-{pl.entry}-{i}", pl.source(), pl.threads, pl.min_blocks))
        out.append((f"{dtype}-reduce", plan1d.reduce_source(dtype), 512, 1))
    return out


ENTRIES = _entries()


@pytest.fixture(scope="module")
def compiled() -> dict:
    if not nvcc_available():
        pytest.skip("nvcc is not on PATH: the compile checks need the CUDA toolkit (no GPU needed)")
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = pool.map(lambda e: nvcc_compile(e[1], "sm_90").resources, ENTRIES)
        return {e[0]: r for e, r in zip(ENTRIES, results, strict=True)}


@pytest.mark.slow  # nvcc: CI runs it after the README's test command (`-m slow`)
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e[0])
def test_16bit_instantiations_compile_without_spills(compiled: dict, entry) -> None:
    name, _, threads, min_blocks = entry
    (res,) = compiled[name].values()
    assert not res.spills, f"{name}: {res.local_bytes} B stack, spills {res.spill_store_bytes}/{res.spill_load_bytes}"
    assert res.num_regs <= min(255, 65536 // (threads * min_blocks))
    assert res.static_smem_bytes == (2048 if name.endswith("reduce") else 0)


def test_model_counts_the_launches_of_each_weight_gradient_mode() -> None:
    """fp32 atomic: memset + main; deterministic: main + reduction; 16-bit atomic: memset of the fp32
    workspace + main + the converting reduction."""
    from convtune.kernels.depthwise import model
    from convtune.kernels.depthwise.space import enumerate_plans

    problem = ConvProblem.depthwise1d(64, 32, 256, 7)
    plans = list(enumerate_plans(problem, H200, "fast", "wgrad"))
    atomic = next(pl for pl in plans if pl.config.mode == MODE_ATOMIC)
    det = next(pl for pl in plans if pl.config.mode == MODE_DETERMINISTIC)
    half = plan1d.plan(_half(problem, "float16"), atomic.config, H200)
    assert model.predict(atomic, H200).launches == 2
    assert model.predict(det, H200).launches == 2
    assert model.predict(half, H200).launches == 3

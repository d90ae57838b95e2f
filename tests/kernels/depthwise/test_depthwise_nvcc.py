"""Compile every depthwise kernel with ``nvcc -arch=sm_90 -Xptxas -v`` at representative configs (no GPU needed).

Every 1-D variant × path (× both weight-gradient modes) at the S4ConvD paper shape, the suite's long
shapes and odd small shapes (K > L, L = 7, C = 3, B = 1, L % 4 ≠ 0), the reduction kernel, the 2-D
forward kernel at the public suite's depthwise2d shapes plus stride-2 and 5×5/1×7 corners, and the 2-D
gradient plans the model chooses for ``convtune.ops.torch`` at those shapes. Entries are renamed and batched
per family source into a few CUDA texts compiled in parallel; ptxas must report no
spills and no stack frame, registers within the ``__launch_bounds__`` cap, no static shared memory (the
reduction's 2 KiB excepted), and the plans' dynamic shared memory must fit the H200's per-block limit.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from convtune.kernels.compile import KernelResources, expand_includes, nvcc_available, nvcc_compile
from convtune.kernels.depthwise.configs import (
    CONFIG_CLASSES_1D,
    MODE_ATOMIC,
    Dw2dFastDgradConfig,
    Dw2dFastFwdConfig,
    Dw2dFastWgradConfig,
    Dw2dTiledFwdConfig,
    FusedBwdConfig,
)
from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
from convtune.kernels.depthwise.conv1d.plan import REDUCE_ENTRY, REDUCE_SOURCE, REDUCE_WARPS, SOURCES, plan
from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
from convtune.kernels.depthwise.conv2d.tiled import SOURCE as SOURCE_2D
from convtune.kernels.depthwise.conv2d.tiled import plan as plan_2d
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

# slow (minutes of nvcc on 2 cores): CI runs them after the README's test command (`-m slow`)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH: the compile checks need the "
                                 "CUDA toolkit (no GPU needed)")]

H200 = MachineModel.preset("h200")
H200_SMEM_LIMIT = 232_448
PUBLIC_SUITE = Path(__file__).resolve().parents[3] / "benchmarks" / "suites" / "public.json"
SUITE = json.loads(PUBLIC_SUITE.read_text())

PAPER = ConvProblem.depthwise1d(16384, 128, 48, 48)
MAMBA = ConvProblem.depthwise1d(64, 768, 1024, 4)
LONG = ConvProblem.depthwise1d(32, 256, 4096, 7)
ODD = ConvProblem.depthwise1d(1, 3, 7, 9)       # K > L, L % 4 ≠ 0, B = 1, C = 3
ODD2 = ConvProblem.depthwise1d(5, 3, 50, 5)     # L % 4 ≠ 0 with several segments

# per variant: (problem, fields) pairs; wgrad adds both modes
FIELDS: dict[str, list[tuple[ConvProblem, dict[str, int]]]] = {
    "naive": [(PAPER, {"threads": 256}), (ODD, {"threads": 64})],
    "coalesced": [(PAPER, {"threads": 256}), (ODD, {"threads": 128})],
    "shared": [(PAPER, {"rows": 8, "tile_l": 48, "threads": 128}), (MAMBA, {"rows": 4, "tile_l": 256, "threads": 256}),
               (ODD, {"rows": 1, "tile_l": 7, "threads": 64})],
    "warp": [(PAPER, {"warps": 4, "outputs_per_lane": 2}), (MAMBA, {"warps": 8, "outputs_per_lane": 8}),
             (ODD, {"warps": 1, "outputs_per_lane": 1})],
    "fast": [(PAPER, {"rows": 128, "tile_l": 48, "lanes_per_row": 1, "stages": 2, "vec": 4, "blocks_per_sm": 2}),
             (PAPER, {"rows": 64, "tile_l": 48, "lanes_per_row": 1, "stages": 1, "vec": 4, "blocks_per_sm": 4}),
             (PAPER, {"rows": 32, "tile_l": 24, "lanes_per_row": 2, "stages": 2, "vec": 4, "blocks_per_sm": 4}),
             (MAMBA, {"rows": 4, "tile_l": 16, "lanes_per_row": 32, "stages": 2, "vec": 4, "blocks_per_sm": 4}),
             (LONG, {"rows": 8, "tile_l": 32, "lanes_per_row": 16, "stages": 2, "vec": 4, "blocks_per_sm": 3}),
             (ODD, {"rows": 32, "tile_l": 8, "lanes_per_row": 1, "stages": 1, "vec": 1, "blocks_per_sm": 4}),
             (ODD2, {"rows": 32, "tile_l": 12, "lanes_per_row": 2, "stages": 2, "vec": 1, "blocks_per_sm": 4})],
}
WARP_WGRAD_ROWS = {PAPER: 64, MAMBA: 16, ODD: 1}
# warp register design (fwd/dgrad, and wgrad with design=2): row groups (lanes_per_row) at the suite's shapes
WARP_REGISTER: list[tuple[ConvProblem, dict[str, int]]] = [
    (PAPER, {"warps": 4, "outputs_per_lane": 12, "lanes_per_row": 4}),
    (PAPER, {"warps": 4, "outputs_per_lane": 6, "lanes_per_row": 8}),
    (PAPER, {"warps": 8, "outputs_per_lane": 3, "lanes_per_row": 16}),
    (PAPER, {"warps": 4, "outputs_per_lane": 16, "lanes_per_row": 4}),
    (ConvProblem.depthwise1d(16384, 128, 48, 4), {"warps": 4, "outputs_per_lane": 12, "lanes_per_row": 4}),
    (MAMBA, {"warps": 8, "outputs_per_lane": 8, "lanes_per_row": 32}),
    (LONG, {"warps": 4, "outputs_per_lane": 16, "lanes_per_row": 32}),
    (ODD2, {"warps": 2, "outputs_per_lane": 3, "lanes_per_row": 4}),
]

# fused backward: (problem, config)
FUSED = [
    (PAPER, FusedBwdConfig(rows=128, stages=2, vec=4, blocks_per_sm=2, mode=1)),
    (PAPER, FusedBwdConfig(rows=128, stages=1, vec=4, blocks_per_sm=3, mode=MODE_ATOMIC)),
    (PAPER, FusedBwdConfig(rows=64, stages=1, vec=4, blocks_per_sm=4, mode=1)),
    (ConvProblem.depthwise1d(16384, 128, 48, 4), FusedBwdConfig(rows=128, stages=2, vec=4, blocks_per_sm=2)),
    (ODD, FusedBwdConfig(rows=32, stages=1, vec=1, blocks_per_sm=1)),
    (ODD2, FusedBwdConfig(rows=64, stages=2, vec=1, blocks_per_sm=2, mode=MODE_ATOMIC)),
    (ConvProblem.depthwise1d(8, 8, 64, 64), FusedBwdConfig(rows=64, stages=2, vec=4, blocks_per_sm=2)),
]

DW2D = [(s["name"], ConvProblem.from_mapping(s)) for s in SUITE["depthwise2d"]] + [
    ("mobilenet_s2", ConvProblem.parse("N=8 C=96 H=112 W=112 K=96 R=3 S=3 stride=2 pad=1 groups=96")),
    ("dw5x5_s2_odd", ConvProblem.parse("N=3 C=7 H=17 W=19 K=7 R=5 S=5 stride=2 pad=2 groups=7")),
    ("dw1x7", ConvProblem.parse("N=2 C=16 H=9 W=33 K=16 R=1 S=7 pad_h=0 pad_w=3 groups=16")),
]
DW2D_CONFIGS = [Dw2dTiledFwdConfig(8, 32, 4, 1), Dw2dTiledFwdConfig(8, 8, 2, 4), Dw2dTiledFwdConfig(16, 32, 8, 1)]
# fast 2-D forward: (problem name, config) pairs, the suite's shapes with their likely configs and the corners
DW2D_FAST = [
    ("mobilenetv2_dw_144_b32", Dw2dFastFwdConfig(8, 2, 4, 1, 64)),
    ("mobilenetv2_dw_144_b32", Dw2dFastFwdConfig(56, 2, 4, 1, 128)),
    ("mobilenetv2_dw_144_b32", Dw2dFastFwdConfig(28, 4, 8, 1, 64)),
    ("mobilenetv2_dw_384_b32", Dw2dFastFwdConfig(14, 2, 4, 4, 128)),
    ("mobilenetv2_dw_384_b32", Dw2dFastFwdConfig(14, 7, 7, 8, 32)),
    ("mobilenetv2_dw_960_b32", Dw2dFastFwdConfig(7, 7, 7, 64, 64)),
    ("mobilenetv2_dw_960_b32", Dw2dFastFwdConfig(7, 1, 7, 32, 224)),
    ("convnext_dw7_96_b32", Dw2dFastFwdConfig(8, 4, 8, 2, 32)),
    ("convnext_dw7_96_b32", Dw2dFastFwdConfig(56, 4, 8, 1, 128)),
    ("convnext_dw7_96_b32", Dw2dFastFwdConfig(16, 2, 4, 1, 128)),
    ("mobilenet_s2", Dw2dFastFwdConfig(8, 2, 4, 1, 64)),
    ("mobilenet_s2", Dw2dFastFwdConfig(56, 4, 2, 1, 256)),
    ("dw5x5_s2_odd", Dw2dFastFwdConfig(4, 2, 3, 2, 32)),
    ("dw1x7", Dw2dFastFwdConfig(9, 1, 8, 2, 64)),
]
# 2-D input and weight gradients: (problem name, config)
DW2D_BWD = [
    ("mobilenetv2_dw_144_b32", Dw2dFastDgradConfig(8, 2, 4, 1, 64)),
    ("mobilenetv2_dw_144_b32", Dw2dFastDgradConfig(56, 4, 8, 1, 128)),
    ("mobilenetv2_dw_960_b32", Dw2dFastDgradConfig(7, 7, 7, 64, 64)),
    ("convnext_dw7_96_b32", Dw2dFastDgradConfig(8, 4, 8, 2, 32)),
    ("mobilenet_s2", Dw2dFastDgradConfig(8, 2, 4, 1, 64)),
    ("mobilenet_s2", Dw2dFastDgradConfig(16, 4, 8, 1, 32)),
    ("dw5x5_s2_odd", Dw2dFastDgradConfig(4, 2, 4, 2, 32)),
    ("dw1x7", Dw2dFastDgradConfig(9, 1, 8, 2, 64)),
    ("mobilenetv2_dw_144_b32", Dw2dFastWgradConfig(8, 2, 4, 1, 64)),
    ("mobilenetv2_dw_144_b32", Dw2dFastWgradConfig(56, 4, 8, 1, 128, MODE_ATOMIC)),
    ("mobilenetv2_dw_960_b32", Dw2dFastWgradConfig(7, 7, 7, 32, 32, MODE_ATOMIC)),
    ("convnext_dw7_96_b32", Dw2dFastWgradConfig(8, 4, 8, 2, 32)),
    ("convnext_dw7_96_b32", Dw2dFastWgradConfig(56, 4, 4, 1, 64)),
    ("mobilenet_s2", Dw2dFastWgradConfig(8, 2, 4, 1, 64)),
    ("dw5x5_s2_odd", Dw2dFastWgradConfig(4, 2, 4, 2, 32)),
    ("dw1x7", Dw2dFastWgradConfig(9, 1, 8, 2, 64, MODE_ATOMIC)),
]


@dataclass(frozen=True)
class Entry:
    id: str
    source: str
    entry: str
    wrapper: str
    threads: int
    min_blocks: int
    smem_bytes: int


def _entries_1d() -> list[Entry]:
    out: list[Entry] = []
    for (variant, path), cls in CONFIG_CLASSES_1D.items():
        extra_cases = WARP_REGISTER if variant == "warp" else []
        for i, (problem, fields) in enumerate(FIELDS[variant] + extra_cases):
            for mode in ((1, MODE_ATOMIC) if path == "wgrad" else (None,)):
                extra = dict(fields)
                if mode is not None:
                    extra["mode"] = mode
                if variant == "warp" and path == "wgrad":
                    if "lanes_per_row" in extra:  # the register design
                        extra.update(design=2, rows=1)
                    else:
                        extra["rows"] = WARP_WGRAD_ROWS[problem]
                pl = plan(problem, cls(**extra), H200)
                name = f"dw1d_{variant}_{path}_{i}" + (f"_m{mode}" if mode else "")
                out.append(Entry(name, SOURCES[variant], name, pl.wrapper(name), pl.threads, pl.min_blocks,
                                 pl.smem_bytes))
    return out


def _entries_2d() -> list[Entry]:
    out = []
    for name, problem in DW2D:
        for i, config in enumerate(DW2D_CONFIGS):
            pl = plan_2d(problem, config, H200)
            entry = f"dw2d_{name}_{i}"
            out.append(Entry(entry, SOURCE_2D, entry, pl.wrapper(entry), pl.threads, 1, pl.smem_bytes))
    problems = dict(DW2D)
    for i, (name, config) in enumerate(DW2D_FAST):
        fp = plan2d_fast.plan(problems[name], config, H200)
        entry = f"dw2d_fast_{name}_{i}"
        out.append(Entry(entry, plan2d_fast.SOURCE, entry, fp.wrapper(entry), fp.threads, fp.min_blocks,
                         fp.smem_bytes))
    for i, (name, config) in enumerate(DW2D_BWD):
        module = plan2d_dgrad if config.direction == "dgrad" else plan2d_wgrad
        bp = module.plan(problems[name], config, H200)
        entry = f"dw2d_{config.direction}_{name}_{i}"
        out.append(Entry(entry, module.SOURCE, entry, bp.wrapper(entry), bp.threads, bp.min_blocks, bp.smem_bytes))
    return out


def _entries_2d_model() -> list[Entry]:
    """The gradient plans ``convtune.ops.torch`` runs (the model's choices) at every 2-D shape."""
    from convtune.ops.depthwise import model_plan

    out = []
    for name, problem in DW2D:
        for module, path in ((plan2d_dgrad, "dgrad"), (plan2d_wgrad, "wgrad")):
            bp = model_plan(problem, H200, path)
            entry = f"dw2d_model_{path}_{name}"
            out.append(Entry(entry, module.SOURCE, entry, bp.wrapper(entry), bp.threads, bp.min_blocks,
                             bp.smem_bytes))
    return out


def _entries_fused() -> list[Entry]:
    out = []
    for i, (problem, config) in enumerate(FUSED):
        pl = plan1d_fused.plan(problem, config, H200)
        entry = f"dw1d_fused_bwd_{i}"
        out.append(Entry(entry, plan1d_fused.SOURCE, entry, pl.wrapper(entry), pl.threads, pl.min_blocks,
                         pl.smem_bytes))
    return out


ENTRIES = _entries_1d() + _entries_fused() + _entries_2d() + _entries_2d_model()


def _compile(source: str, entries: list[Entry]) -> dict[str, KernelResources]:
    text = expand_includes(f'#include "{source}"\n') + "".join(e.wrapper for e in entries)
    return nvcc_compile(text, "sm_90").resources


@pytest.fixture(scope="module")
def compiled() -> dict[str, KernelResources | None]:
    groups: dict[str, list[Entry]] = {}
    for e in ENTRIES:
        groups.setdefault(e.source, []).append(e)
    # the fast kernels dominate compile time: split them in chunks of 8 so the compiles run side by side
    jobs: list[tuple[str, list[Entry]]] = []
    for source, entries in groups.items():
        for k in range(0, len(entries), 8):
            jobs.append((source, entries[k:k + 8]))
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: _compile(*job), jobs))
    resources: dict[str, KernelResources | None] = {}
    for (_, entries), res in zip(jobs, results, strict=True):
        for e in entries:
            resources[e.id] = res.get(e.entry)
    reduce_text = expand_includes(f'#include "{REDUCE_SOURCE}"\n') + plan(PAPER, CONFIG_CLASSES_1D[
        ("fast", "wgrad")](blocks_per_sm=2), H200).reduce_source().split("}  // namespace convtune")[-1]
    resources[REDUCE_ENTRY] = nvcc_compile(reduce_text, "sm_90").resources.get(REDUCE_ENTRY)
    return resources


def test_every_variant_and_path_is_represented() -> None:
    ids = [e.id for e in ENTRIES]
    assert len(set(ids)) == len(ids)
    for variant, path in CONFIG_CLASSES_1D:
        assert any(i.startswith(f"dw1d_{variant}_{path}_") for i in ids)
    tiled = [i for i in ids if i.startswith("dw2d_")
             and not i.startswith(("dw2d_fast_", "dw2d_dgrad_", "dw2d_wgrad_", "dw2d_model_"))]
    assert len(tiled) == len(DW2D) * len(DW2D_CONFIGS)
    assert sum(i.startswith(("dw2d_dgrad_", "dw2d_wgrad_")) for i in ids) == len(DW2D_BWD)
    assert sum(i.startswith("dw2d_fast_") for i in ids) == len(DW2D_FAST)
    assert sum(i.startswith("dw2d_model_") for i in ids) == 2 * len(DW2D)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_compiles_without_spills(compiled: dict[str, KernelResources | None], entry: Entry) -> None:
    res = compiled[entry.id]
    assert res is not None, f"ptxas reported nothing for {entry.entry}"
    assert not res.spills, (f"{entry.id}: {res.local_bytes} B stack frame, {res.spill_store_bytes} B spill stores, "
                            f"{res.spill_load_bytes} B spill loads ({res.num_regs} registers)")
    cap = min(255, 65536 // (entry.threads * entry.min_blocks))
    assert res.num_regs <= cap, f"{entry.id}: {res.num_regs} registers exceed the cap {cap}"
    assert res.static_smem_bytes == 0, f"{entry.id}: unexpected static shared memory {res.static_smem_bytes} B"
    assert entry.smem_bytes <= H200_SMEM_LIMIT


def test_reduce_kernel_compiles(compiled: dict[str, KernelResources | None]) -> None:
    res = compiled[REDUCE_ENTRY]
    assert res is not None and not res.spills
    assert res.static_smem_bytes == 4 * 32 * REDUCE_WARPS

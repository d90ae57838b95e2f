"""Compile the direct forward kernel with ``nvcc -arch=sm_90 -Xptxas -v`` at representative configs.

No GPU needed. All entries go into a few generated CUDA texts (the family source once, then one
``extern "C"`` wrapper per config, each renamed ``direct_fwd_<i>``), compiled in parallel; ptxas's
per-entry report must show no spills and no stack frame, registers within the cap implied by the
wrapper's ``__launch_bounds__(threads, min_blocks)``, and the plan's dynamic shared memory must fit the
H200's per-block limit. Representatives: the model's best config for every conv2d entry of the public
suite, plus hand-picked corners (1×1, 3×3, 5×5, 7×7 stride 2, stride 3, dilation 2, vec=4, stages 1..4,
split-C, thread tiles 1..8 wide × 4/8 channels, tile_k 16..128).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from convtune.kernels.compile import KernelResources, nvcc_available, nvcc_compile
from convtune.kernels.direct import launcher
from convtune.kernels.direct.launcher import DirectFwdConfig, DirectFwdPlan
from convtune.kernels.direct.space import model_best, plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

# slow (minutes of nvcc on 2 cores): CI runs them after the README's test command (`-m slow`)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH: the compile checks need the "
                                 "CUDA toolkit (no GPU needed)")]

H200 = MachineModel.preset("h200")
H200_SMEM_LIMIT = 232_448
ARCH = "sm_90"
PUBLIC_SUITE = Path(__file__).resolve().parents[3] / "benchmarks" / "suites" / "public.json"
PUBLIC_CONV2D = json.loads(PUBLIC_SUITE.read_text())["conv2d"]


def _cfg(**fields: int) -> DirectFwdConfig:
    return DirectFwdConfig(**fields)


# (id, problem, config): corners of the space the public suite's best configs may not reach
VARIED: list[tuple[str, str, DirectFwdConfig]] = [
    ("1x1_vec4", "N=8 C=64 H=28 W=28 K=128 R=1 S=1",
     _cfg(tile_h=4, tile_w=16, tile_k=64, chunk_c=16, thread_h=1, thread_w=4, thread_k=8, stages=2, vec=4)),
    ("1x1_stride2_tk128", "N=4 C=128 H=28 W=28 K=256 R=1 S=1 stride=2",
     _cfg(tile_h=8, tile_w=8, tile_k=128, chunk_c=16, thread_h=1, thread_w=4, thread_k=8, stages=3)),
    ("3x3_thread_2x8x8", "N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1",
     _cfg(tile_h=4, tile_w=32, tile_k=64, chunk_c=4, thread_h=2, thread_w=8, thread_k=8, stages=2)),
    ("3x3_stages1", "N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1",
     _cfg(tile_h=4, tile_w=32, tile_k=64, chunk_c=8, thread_h=1, thread_w=4, thread_k=8, stages=1)),
    ("3x3_stages4_vec4", "N=1 C=64 H=56 W=64 K=64 R=3 S=3 pad=1",
     _cfg(tile_h=8, tile_w=32, tile_k=32, chunk_c=4, thread_h=1, thread_w=8, thread_k=8, stages=4, vec=4)),
    ("3x3_thread_1x1x4", "N=1 C=32 H=20 W=20 K=16 R=3 S=3 pad=1",
     _cfg(tile_h=4, tile_w=8, tile_k=16, chunk_c=8, thread_h=1, thread_w=1, thread_k=4, stages=2)),
    ("3x3_thread_1x2x8_tk128", "N=1 C=64 H=28 W=28 K=256 R=3 S=3 pad=1",
     _cfg(tile_h=2, tile_w=8, tile_k=128, chunk_c=4, thread_h=1, thread_w=2, thread_k=8, stages=3)),
    ("3x3_thread_4x4x4", "N=1 C=32 H=32 W=32 K=32 R=3 S=3 pad=1",
     _cfg(tile_h=16, tile_w=16, tile_k=32, chunk_c=2, thread_h=4, thread_w=4, thread_k=4, stages=2)),
    ("3x3_tk16_thread_w8_vec4", "N=1 C=16 H=64 W=64 K=16 R=3 S=3 pad=1",
     _cfg(tile_h=16, tile_w=32, tile_k=16, chunk_c=4, thread_h=1, thread_w=8, thread_k=4, stages=2, vec=4)),
    ("3x3_splits8_stages3", "N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1",
     _cfg(tile_h=8, tile_w=8, tile_k=64, chunk_c=8, thread_h=1, thread_w=8, thread_k=4, stages=3, splits=8)),
    ("3x3_odd_sizes_splits2", "N=3 C=7 H=17 W=19 K=37 R=3 S=3 pad=1",
     _cfg(tile_h=4, tile_w=8, tile_k=32, chunk_c=3, thread_h=1, thread_w=1, thread_k=8, stages=2, splits=2)),
    ("3x3_stride3", "N=1 C=16 H=30 W=30 K=32 R=3 S=3 stride=3",
     _cfg(tile_h=4, tile_w=8, tile_k=32, chunk_c=4, thread_h=1, thread_w=2, thread_k=8, stages=2)),
    ("3x3_dilation2_vec4", "N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=2 dilation=2",
     _cfg(tile_h=8, tile_w=8, tile_k=32, chunk_c=4, thread_h=1, thread_w=2, thread_k=4, stages=3, vec=4)),
    ("5x5", "N=2 C=32 H=32 W=32 K=64 R=5 S=5 pad=2",
     _cfg(tile_h=8, tile_w=8, tile_k=64, chunk_c=4, thread_h=1, thread_w=4, thread_k=8, stages=3)),
    ("7x7_stride2", "N=2 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3",
     _cfg(tile_h=8, tile_w=16, tile_k=64, chunk_c=3, thread_h=1, thread_w=4, thread_k=8, stages=2)),
    ("1x7_vec4", "N=1 C=32 H=20 W=64 K=48 R=1 S=7 pad_h=0 pad_w=3",
     _cfg(tile_h=2, tile_w=64, tile_k=16, chunk_c=8, thread_h=1, thread_w=8, thread_k=4, stages=2, vec=4)),
]


@dataclass(frozen=True)
class Entry:
    id: str
    plan: DirectFwdPlan
    entry: str


def _wrapper(pl: DirectFwdPlan, entry: str) -> str:
    """The plan's ``extern "C"`` wrapper (``DirectFwdPlan.source()`` minus the family source), renamed."""
    family = launcher._family_source()
    text = pl.source()
    assert text.startswith(family)
    wrapper = text[len(family):]
    renamed, count = re.subn(rf"\b{launcher.ENTRY}\(", f"{entry}(", wrapper)
    assert count == 1, f"expected one {launcher.ENTRY}( in the wrapper, found {count}"
    return renamed


def _compile(entries: list[Entry]) -> dict[str, KernelResources]:
    text = launcher._family_source() + "".join(_wrapper(e.plan, e.entry) for e in entries)
    return nvcc_compile(text, ARCH).resources


def _public_best(spec: dict[str, object]) -> DirectFwdPlan:
    problem = ConvProblem.from_mapping(spec)
    return plan(problem, model_best(problem, H200), H200)


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[Entry, KernelResources | None]]:
    """Compile every representative once: the hand-picked ones in the background while the model ranks
    the public suite's configs (nvcc runs in a subprocess, so the two overlap)."""
    varied = [Entry(name, plan(ConvProblem.parse(problem), config, H200), f"direct_fwd_varied_{i}")
              for i, (name, problem, config) in enumerate(VARIED)]
    half = len(varied) // 2
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs: list[tuple[list[Entry], Future[dict[str, KernelResources]]]] = [
            (varied[:half], pool.submit(_compile, varied[:half])),
            (varied[half:], pool.submit(_compile, varied[half:]))]
        public = [Entry(spec["name"], _public_best(spec), f"direct_fwd_public_{i}")
                  for i, spec in enumerate(PUBLIC_CONV2D)]
        jobs.append((public, pool.submit(_compile, public)))
        result: dict[str, tuple[Entry, KernelResources | None]] = {}
        for entries, job in jobs:
            resources = job.result()  # a compile error fails every test here, with nvcc's log
            for e in entries:
                result[e.id] = (e, resources.get(e.entry))
    return result


def _check(entry: Entry, res: KernelResources | None) -> None:
    pl = entry.plan
    what = f"{entry.id}: {pl.problem.key()} / {pl.config.key()}"
    assert res is not None, f"ptxas reported nothing for {entry.entry} ({what})"
    assert not res.spills, (f"{what}: {res.local_bytes} B stack frame, {res.spill_store_bytes} B spill stores, "
                            f"{res.spill_load_bytes} B spill loads ({res.num_regs} registers)")
    cap = min(255, 65536 // (pl.config.threads * pl.min_blocks))
    assert res.num_regs <= cap, (f"{what}: {res.num_regs} registers exceed the cap {cap} of "
                                 f"__launch_bounds__({pl.config.threads}, {pl.min_blocks})")
    assert pl.smem_bytes <= H200_SMEM_LIMIT, f"{what}: {pl.smem_bytes} B dynamic shared memory > {H200_SMEM_LIMIT}"
    assert res.static_smem_bytes == 0, f"{what}: unexpected static shared memory {res.static_smem_bytes} B"


def test_enough_representatives() -> None:
    assert len(VARIED) + len(PUBLIC_CONV2D) >= 20
    ids = [name for name, _, _ in VARIED] + [spec["name"] for spec in PUBLIC_CONV2D]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("name", [spec["name"] for spec in PUBLIC_CONV2D])
def test_public_model_best_compiles_without_spills(compiled: dict[str, tuple[Entry, KernelResources | None]],
                                                   name: str) -> None:
    _check(*compiled[name])


@pytest.mark.parametrize("name", [name for name, _, _ in VARIED])
def test_varied_config_compiles_without_spills(compiled: dict[str, tuple[Entry, KernelResources | None]],
                                               name: str) -> None:
    _check(*compiled[name])


def test_pack_weights_entry_compiles() -> None:
    resources = nvcc_compile(launcher._family_source(), ARCH).resources
    assert launcher.PACK_ENTRY in resources
    assert not resources[launcher.PACK_ENTRY].spills

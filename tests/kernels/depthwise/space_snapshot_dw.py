"""Snapshot of the depthwise search spaces: per space and problem, the count, the grid size and a hash of the
enumerated config keys (sorted, and in enumeration order).

``tests/data/space_snapshot_dw_h200.json`` was written by :func:`main`
(``python -m tests.kernels.depthwise.space_snapshot_dw``) with the depthwise spaces as they were before they
were declared as data (hand-written loops with inline skips, branch ``dwspace`` at 3654335);
``tests/kernels/depthwise/test_space_snapshot_dw.py`` recomputes it with the current code. Spaces without a
grid-size function then (fused backward, 2-D dgrad/wgrad) record ``grid_size: null``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from convtune.cli.bounds import load_suite
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from tests.kernels.space_snapshot import fingerprint, write

PATH = Path(__file__).resolve().parents[2] / "data" / "space_snapshot_dw_h200.json"

_dw1d = ConvProblem.depthwise1d


def _dw2d(N: int, C: int, H: int, W: int, R: int, stride: int = 1, pad: int | None = None) -> ConvProblem:
    pad = R // 2 if pad is None else pad
    return ConvProblem(N=N, C=C, H=H, W=W, K=C, R=R, S=R, stride_h=stride, stride_w=stride, pad_h=pad, pad_w=pad,
                       groups=C)


# odd shapes next to the public suite
EXTRA: dict[str, ConvProblem] = {
    "dw1d_L50_k4": _dw1d(B=8, C=64, L=50, K=4),            # L not a multiple of 4
    "dw1d_L3_k2": _dw1d(B=2, C=3, L=3, K=2),               # tiny L
    "dw1d_L1_k1": _dw1d(B=1, C=1, L=1, K=1),
    "dw1d_L30_k3": _dw1d(B=5, C=7, L=30, K=3),
    "dw1d_L256_k96": _dw1d(B=4, C=32, L=256, K=96),        # large K (more than 64 taps)
    "dw1d_L2048_k200": _dw1d(B=2, C=16, L=2048, K=200),
    "dw1d_dilated": _dw1d(B=4, C=32, L=128, K=4, dilation=2),
    "dw1d_half": _dw1d(B=4, C=32, L=128, K=4, dtype="float16"),
    "dw2d_3x3_stride2": _dw2d(N=4, C=32, H=28, W=28, R=3, stride=2),
    "dw2d_5x5_stride2_odd": _dw2d(N=2, C=24, H=15, W=17, R=5, stride=2),
    "dw2d_7x7_narrow": _dw2d(N=8, C=48, H=7, W=7, R=3),    # narrow images: the packed kernel
    "dw2d_14x14_k5": _dw2d(N=4, C=40, H=14, W=14, R=5),
    "dw2d_narrow_tall": _dw2d(N=2, C=16, H=40, W=12, R=3),
    "dw2d_tiny": _dw2d(N=1, C=3, H=2, W=3, R=3),
    "dw2d_3x3_nopad": _dw2d(N=2, C=8, H=9, W=10, R=3, pad=0),
    "dw2d_wide_33": _dw2d(N=1, C=8, H=9, W=33, R=3),         # just too wide for packed
}


def problems() -> dict[str, ConvProblem]:
    out = {f"public/{name}": p for family, name, p in load_suite("public")
           if family in ("depthwise2d", "depthwise1d_causal")}
    out.update(EXTRA)
    return out


Space = tuple[Callable[..., Iterable[Any]], Callable[[ConvProblem], int] | None]


def spaces() -> dict[str, Space]:
    from convtune.kernels import depthwise
    from convtune.kernels.depthwise import space as dw
    from convtune.kernels.depthwise.configs import PATHS, VARIANTS_1D

    out: dict[str, Space] = {
        f"dw1d_{variant}_{path}": (dw.plans_enumerator(variant, path),
                                   partial(dw.grid_size, variant=variant, path=path))
        for variant in VARIANTS_1D for path in PATHS}
    out.update({
        "dw1d_fused_bwd": (dw.enumerate_plans_fused, getattr(dw, "grid_size_fused", None)),
        "dw2d_tiled": (dw.enumerate_plans_2d, depthwise.grid_size_2d),
        "dw2d_fast": (dw.enumerate_plans_2d_fast, depthwise.grid_size_2d_fast),
        "dw2d_packed": (dw.enumerate_plans_2d_packed, depthwise.grid_size_2d_packed),
        "dw2d_fast_dgrad": (dw.enumerate_plans_2d_dgrad, getattr(dw, "grid_size_2d_dgrad", None)),
        "dw2d_fast_wgrad": (dw.enumerate_plans_2d_wgrad, getattr(dw, "grid_size_2d_wgrad", None)),
    })
    return out


def snapshot_one(space: str, problem: ConvProblem, machine: MachineModel,
                 with_grid_size: bool = True) -> dict[str, Any]:
    enumerate_plans, grid_size = spaces()[space]
    return fingerprint(enumerate_plans, grid_size if with_grid_size else None, problem, machine)


def main() -> None:
    write(PATH, "3654335", snapshot_one, spaces(), problems())

if __name__ == "__main__":
    main()

"""Snapshot of the search spaces: per problem, the count and a hash of the enumerated config keys.

``tests/data/space_snapshot_h200.json`` was written by :func:`main` (``python -m tests.kernels.space_snapshot``)
with the spaces as they were before they were declared as data (commit c35758d);
``tests/kernels/test_space_snapshot.py`` recomputes it with the current code.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from convtune.cli.bounds import load_suite
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

PATH = Path(__file__).resolve().parents[1] / "data" / "space_snapshot_h200.json"

# padding-dominated and odd shapes next to the public suite
EXTRA: dict[str, ConvProblem] = {
    "pad_dominated_3x3": ConvProblem(N=2, C=3, H=2, W=2, K=5, R=3, S=3, pad_h=2, pad_w=2),
    "odd_5x5_stride2": ConvProblem(N=1, C=7, H=9, W=11, K=13, R=5, S=5, stride_h=2, stride_w=2, pad_h=2, pad_w=2),
    "tiny_1x1": ConvProblem(N=1, C=1, H=1, W=1, K=1, R=1, S=1),
    "odd_1x1": ConvProblem(N=3, C=17, H=7, W=5, K=33, R=1, S=1),
    "wide_1x1": ConvProblem(N=1, C=512, H=14, W=14, K=1000, R=1, S=1),
    "odd_3x3_pad1": ConvProblem(N=1, C=5, H=7, W=9, K=6, R=3, S=3, pad_h=1, pad_w=1),
    "big_3x3_pad3": ConvProblem(N=2, C=64, H=5, W=5, K=96, R=3, S=3, pad_h=3, pad_w=3),
    "dilated_3x3": ConvProblem(N=1, C=16, H=20, W=20, K=32, R=3, S=3, pad_h=2, pad_w=2, dil_h=2, dil_w=2),
    "grouped": ConvProblem(N=1, C=8, H=8, W=8, K=8, R=3, S=3, pad_h=1, pad_w=1, groups=2),
    "half": ConvProblem(N=1, C=8, H=8, W=8, K=8, R=3, S=3, pad_h=1, pad_w=1, dtype="float16"),
}


def problems() -> dict[str, ConvProblem]:
    out = {f"public/{name}": p for family, name, p in load_suite("public") if family == "conv2d"}
    out.update(EXTRA)
    return out


def _digest(keys: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]


def spaces() -> dict[str, tuple[Callable[..., Iterable[Any]], Callable[[ConvProblem], int]]]:
    from convtune.kernels.direct import space as direct
    from convtune.kernels.pointwise import space as pointwise
    from convtune.kernels.winograd import space as winograd

    return {
        "direct": (direct.enumerate_plans, direct.grid_size),
        "pointwise": (pointwise.enumerate_plans, pointwise.grid_size),
        "winograd": (winograd.enumerate_plans, winograd.grid_size),
        "winograd_unfused": (_one_pass(winograd.enumerate_unfused_plans), _one_pass_grid),
    }


def _one_pass(enumerate_plans: Callable[..., Iterable[Any]]) -> Callable[..., Iterable[Any]]:
    """The unfused plans that run the batch in one pass: the space before ``images_per_pass`` (added after the
    snapshot; its own tests are tests/kernels/winograd/test_winograd_passes.py)."""
    return lambda problem, machine: (pl for pl in enumerate_plans(problem, machine) if pl.config.images_per_pass == 0)


def _one_pass_grid(problem: ConvProblem) -> int:
    """The unfused grid without the ``images_per_pass`` axis."""
    from convtune.kernels.winograd import space as winograd

    values = winograd.unfused_space(problem).values
    return winograd.unfused_grid_size(problem) // len(values.get("images_per_pass", (0,)))


def fingerprint(enumerate_plans: Callable[..., Iterable[Any]], grid_size: Callable[[ConvProblem], int] | None,
                problem: ConvProblem, machine: MachineModel) -> dict[str, Any]:
    """Count, grid size (None without a grid-size function) and hashes of the keys, sorted and in order."""
    keys = [pl.config.key() for pl in enumerate_plans(problem, machine)]
    return {"count": len(keys), "grid_size": grid_size(problem) if grid_size is not None else None,
            "sorted_sha": _digest(sorted(keys)), "ordered_sha": _digest(keys)}


def snapshot_one(space: str, problem: ConvProblem, machine: MachineModel) -> dict[str, Any]:
    return fingerprint(*spaces()[space], problem, machine)


def write(path: Path, commit: str, one: Callable[[str, ConvProblem, MachineModel], dict[str, Any]],
          names: Iterable[str], problems: dict[str, ConvProblem]) -> None:
    """Write every space × problem fingerprint (``one``) to ``path``, naming the commit whose code made it."""
    machine = MachineModel.preset("h200")
    spaces = {space: {name: one(space, p, machine) for name, p in problems.items()} for space in names}
    path.write_text(json.dumps({"machine": "h200", "commit": commit, "spaces": spaces}, indent=1, sort_keys=True)
                    + "\n")


def main() -> None:
    write(PATH, "c35758d", snapshot_one, spaces(), problems())

if __name__ == "__main__":
    main()

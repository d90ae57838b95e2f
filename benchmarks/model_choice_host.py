"""Host time of the untuned choice (``convtune.ops.conv2d.model_choice``) per suite entry and class: the search a
process runs on the first call of an untuned shape, and the same call in a later process that finds the choice in
the cross-process cache (:mod:`convtune.ops.choice_cache`). CPU only (no GPU: the machine model is a preset).

    python benchmarks/model_choice_host.py --suites benchmarks/suites/public.json benchmarks/suites/wide.json \\
        --out benchmarks/results/model_choice_host
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from convtune.machine import MachineModel
from convtune.ops import choice_cache
from convtune.ops import conv2d as ops
from convtune.problem import ConvProblem

CLASSES = {"float32": ("float32", "ieee"), "tf32": ("float32", "tf32"), "bfloat16": ("bfloat16", "ieee")}


def _timed_choice(problem: ConvProblem, machine: MachineModel) -> tuple[float, str]:
    ops.forget_model_choices()       # a new process: no in-memory choice
    choice_cache.forget()
    start = time.perf_counter()
    config = ops.model_choice(problem, machine)
    return time.perf_counter() - start, config.key()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", nargs="+", type=Path, default=[Path("benchmarks/suites/public.json")])
    ap.add_argument("--machine", default="h200")
    ap.add_argument("--classes", nargs="+", default=list(CLASSES))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    machine = MachineModel.preset(args.machine)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[choice_cache.ENV] = str(Path(tmp) / "model_choices.json")
        for suite in args.suites:
            for entry in json.loads(suite.read_text())["conv2d"]:
                for cls in args.classes:
                    dtype, math = CLASSES[cls]
                    problem = ConvProblem.from_mapping(entry).replace(dtype=dtype, math=math)
                    search_s, key = _timed_choice(problem, machine)      # stores the choice
                    cached_s, cached_key = _timed_choice(problem, machine)
                    assert cached_key == key, (problem.key(), key, cached_key)
                    rows.append({"name": entry["name"], "class": cls, "search_ms": search_s * 1e3,
                                 "cached_ms": cached_s * 1e3, "family": key.split(".")[0]})
    rows.sort(key=lambda r: -r["search_ms"])
    search = [r["search_ms"] for r in rows]
    cached = [r["cached_ms"] for r in rows]
    lines = [f"# Host time of the untuned choice ({platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, machine preset {args.machine})", "",
             f"{len(rows)} choices ({', '.join(s.name for s in args.suites)} × {', '.join(args.classes)}). search: a "
             "new process, nothing cached; cached: a new process that finds the choice in the cross-process file.",
             "", "| | median ms | max ms | total s |", "|---|---|---|---|",
             f"| search | {statistics.median(search):.1f} | {max(search):.0f} | {sum(search) / 1e3:.1f} |",
             f"| cached | {statistics.median(cached):.2f} | {max(cached):.1f} | {sum(cached) / 1e3:.2f} |", "",
             "The slowest searches:", "", "| shape | class | chosen family | search ms | cached ms |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['class']} | {r['family']} | {r['search_ms']:.0f} | {r['cached_ms']:.2f} |"
              for r in rows[:15]]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "model_choice_host.md").write_text(text)
        (args.out / "model_choice_host.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

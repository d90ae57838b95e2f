"""Compile off the GPU host the kernels a device call will load, into a cubin folder to carry as ``cubins.tar.xz``
(``benchmarks/gpu_check.sh`` unpacks it into ``$CONVTUNE_CUBIN_DIR``), so device time goes to running, not nvcc.

Two sources of plans, on the given machine preset:

* ``--suite S --families F... --top N [--dtype D | --math tf32]``: per conv2d entry and family, the model's top N
  configs, as ``vs_cudnn.py --top N --buckets 0`` picks them;
* ``--choice``: with ``--suite``, also each entry's untuned choice across every family (what the op runs without a
  database), in each of ``--classes``;
* ``--table T``: the fastest correct config of every problem of a replay table (what ``user_suite.py --configs-from
  T`` serves: the ``calls`` step's tuned column);
* ``--cases FILE.py:NAME``: a GPU test module's list of ``pytest.param(problem, config)`` cases (``CASES``), each
  planned with the space's ``plan``.

Usage::

    python benchmarks/precompile_cubins.py --out .cubins --suite benchmarks/suites/conv1x1.json --dtype bfloat16 \\
        --families igemm_wgmma_half_1x1 igemm_wgmma_half_1x1_resident --top 16 \\
        --cases tests/kernels/igemm_wgmma/test_igemm_wgmma_half_gpu.py:CASES
    # a model tuning run on the GPU host: the tuner's first 12 trials of every layer, loaded instead of compiled
    python benchmarks/precompile_cubins.py --out .cubins --machine h200 --warm-start 12 \
        --problems benchmarks/suites/models_b32_fp32_problems.txt
    tar cJf cubins.tar.xz .cubins
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from convtune.kernels.compile import CompileError, precompile
from convtune.kernels.epilogue import launcher as epilogue_launcher
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

ARCH = "sm_90"


def suite_sources(suite: Path, families: list[str], top: int, machine: MachineModel, dtype: str,
                  math: str) -> list[str]:
    """The sources of the model's top ``top`` configs per family on every conv2d entry of ``suite``."""
    texts = []
    for entry in json.loads(suite.read_text())["conv2d"]:
        problem = ConvProblem.from_mapping(entry).replace(dtype=dtype, math=math)
        for spec in specs_for(problem, tuple(families)):
            scored = sorted(((spec.predict_s(pl, machine), pl.config.key(), pl)
                             for pl in spec.enumerate_plans(problem, machine)), key=lambda t: (t[0], t[1]))
            texts += [pl.source() for _, _, pl in scored[:top]]
    return texts


def warm_start_sources(problems: list[ConvProblem], n: int, machine: MachineModel) -> list[str]:
    """The sources of the first ``n`` configs the tuner measures on each problem: the pruning survivors' warm-start
    order (:func:`convtune.tuner.prune.warm_start_order`), so a tuning run on the GPU host loads instead of
    compiling its first ``n`` trials."""
    from convtune.tuner.prune import prune, warm_start_order

    texts = []
    for problem in problems:
        survivors = prune(problem, machine, specs_for(problem)).survivors
        texts += [c.plan.source() for c in warm_start_order(survivors, n) if hasattr(c.plan, "source")]
    return texts


def choice_sources(suite: Path, classes: list[str], machine: MachineModel) -> list[str]:
    """The sources of every conv2d entry's untuned choice (the op's model choice) in each precision class."""
    from convtune.ops.conv2d import model_choice

    texts = []
    for entry in json.loads(suite.read_text())["conv2d"]:
        for cls in classes:
            dtype, math = (cls, "ieee") if cls in ("bfloat16", "float16") else ("float32", cls)
            problem = ConvProblem.from_mapping(entry).replace(dtype=dtype, math=math)
            config = model_choice(problem, machine)
            pl = get_spec(config.family).plan(problem, config, machine)
            texts += [pl.source()] if hasattr(pl, "source") else []
    return texts


def table_sources(path: Path, machine: MachineModel) -> list[str]:
    """The sources of each problem's fastest ``ok`` config of a current kernel version in replay table ``path``
    (:meth:`ReplayTable.fastest_configs`, what ``user_suite.py --configs-from`` serves)."""
    from convtune.kernels.config import parse_config_key
    from convtune.tuner.benchmark import ReplayTable

    texts = []
    for key, config_key in ReplayTable.load(path).fastest_configs().items():
        config = parse_config_key(config_key)
        pl = get_spec(config.family).plan(ConvProblem.parse(key), config, machine)
        texts += [pl.source()] if hasattr(pl, "source") else []
    return texts


def case_sources(spec_text: str, machine: MachineModel) -> list[str]:
    """The sources of a test module's cases (``path.py:NAME``, a list of ``pytest.param(problem, config)``)."""
    path, name = spec_text.split(":")
    sys.path.insert(0, str(Path(path).parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    module_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    texts = []
    for case in getattr(module, name):
        problem, config = case.values[:2]
        texts.append(get_spec(config.family).plan(problem, config, machine).source())
    return texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(".cubins"))
    ap.add_argument("--machine", default="h200", help="machine preset the plans are derived for")
    ap.add_argument("--suite", type=Path)
    ap.add_argument("--families", nargs="*", default=[])
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--math", default="ieee")
    ap.add_argument("--table", nargs="*", type=Path, default=[], help="replay tables: each problem's fastest config")
    ap.add_argument("--cases", nargs="*", default=[], help="test module cases, path.py:NAME")
    ap.add_argument("--choice", action="store_true", help="also the untuned choice of every --suite entry")
    ap.add_argument("--classes", nargs="*", default=["bfloat16"], help="precision classes of --choice: ieee (strict "
                    "float32), tf32, bfloat16, float16")
    ap.add_argument("--warm-start", type=int, default=0, help="also the tuner's first N trials of every --suite "
                    "entry (in --dtype / --math) and every --problems line")
    ap.add_argument("--problems", type=Path, help="a file of problem keys, one per line (e.g. a model's layers)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)
    machine = MachineModel.preset(args.machine)
    texts = (suite_sources(args.suite, args.families, args.top, machine, args.dtype, args.math)
             if args.suite and args.families else [])
    if args.suite and args.choice:
        texts += choice_sources(args.suite, args.classes, machine)
    if args.warm_start:
        problems = [ConvProblem.parse(line) for line in args.problems.read_text().splitlines()
                    if line.strip()] if args.problems else []
        if args.suite:
            problems += [ConvProblem.from_mapping(entry).replace(dtype=args.dtype, math=args.math)
                         for entry in json.loads(args.suite.read_text())["conv2d"]]
        texts += warm_start_sources(problems, args.warm_start, machine)
    for table in args.table:
        texts += table_sources(table, machine)
    for spec_text in args.cases:
        texts += case_sources(spec_text, machine)
    # the convolution epilogue (convtune.ops.torch.fuse runs it after every fused convolution): one small source
    texts.append(epilogue_launcher.source())
    unique = list(dict.fromkeys(texts))
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results = precompile(unique, ARCH, args.out, jobs=args.jobs)
    failed = [r for r in results.values() if isinstance(r, CompileError)]
    print(f"{len(unique)} sources, {len(failed)} failed, {time.perf_counter() - start:.0f} s into {args.out}")
    for exc in failed[:5]:
        print(str(exc)[:400], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

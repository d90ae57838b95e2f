"""``convtune analyze``: counter-free analysis of the 1-D depthwise kernels on this machine's GPU.

Registered by :func:`convtune.cli.build_parser`; the work is in :mod:`convtune.analysis.depthwise1d`. Input
errors (problem, ``--variants``, ``--paths``, ``--modes``, ``--reps``) and a missing GPU print one line
naming the field and exit with status 2; they are checked before anything touches the device.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from convtune.errors import InvalidConfig
from convtune.problem import ConvProblem


def add_analyze_parser(sub: Any) -> None:
    p = sub.add_parser(
        "analyze", help="time every depthwise 1-D variant × path on the GPU: bandwidth, roofline, efficiency",
        description="Verify and time (CUDA events) the model's best configurations of every 1-D causal depthwise "
                    "variant × path; report time, effective bandwidth (modelled bytes / time), %% of the copy "
                    "bandwidth measured in the same run, arithmetic intensity, the bound's floor and efficiency; "
                    "write analysis.md, analysis.json and a roofline plot (PNG, SVG; needs matplotlib) under --out.",
        epilog="example: convtune analyze B=16384 C=128 L=48 K=48 --paths fwd,dgrad,wgrad --out analysis/")
    p.add_argument("problem", nargs="+", metavar="FIELD=VALUE", help="a 1-D causal depthwise problem: B C L K")
    p.add_argument("--variants", default="all", help="comma-separated of naive, coalesced, shared, warp, fast "
                                                     "(default all)")
    p.add_argument("--paths", default="fwd,dgrad,wgrad", help="comma-separated of fwd, dgrad, wgrad (default all)")
    p.add_argument("--modes", default="deterministic,atomic", help="weight-gradient modes (default both)")
    p.add_argument("--reps", type=int, default=30, help="timed repetitions per row (median reported; default 30)")
    p.add_argument("--candidates", type=int, default=8,
                   help="the model's best N configurations timed per row; the fastest is reported (default 8)")
    p.add_argument("--out", default="convtune_analysis", metavar="DIR",
                   help="output folder (default ./convtune_analysis)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    from convtune.analysis import depthwise1d as da

    problem = ConvProblem.parse(" ".join(args.problem))
    da.check_problem(problem)
    variants = da.parse_list(args.variants, da.VARIANTS_1D, "--variants")
    paths = da.parse_list(args.paths, da.PATHS, "--paths")
    modes = da.parse_list(args.modes, ("deterministic", "atomic"), "--modes")
    if args.reps < 1:
        raise InvalidConfig("--reps", f"{args.reps} must be >= 1")
    if args.candidates < 1:
        raise InvalidConfig("--candidates", f"{args.candidates} must be >= 1")
    why = da.device_ready()
    if why is not None:
        raise InvalidConfig("device", f"{why}: convtune analyze times kernels on a CUDA GPU")
    measurements, ceilings, machine = da.measure(problem, variants, paths, modes, reps=args.reps,
                                                 candidates=args.candidates)
    rows = da.analysis_rows(problem, measurements, ceilings, machine)
    files, note = da.write_report(Path(args.out), problem, rows, ceilings)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(da.markdown_table(problem, rows, ceilings), end="")
    print("wrote " + ", ".join(str(f) for f in files), file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
    return 0

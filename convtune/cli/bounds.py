"""``convtune bounds``: the MACs, compulsory bytes, every I/O lower bound with its validity, the suggested tile and
the roofline floor time of one convolution or of every entry of a suite (``--suite public``)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from convtune import suites
from convtune.bounds import (
    depthwise_lower_bound,
    depthwise_tiled_traffic,
    direct_literature_bound,
    direct_lower_bound,
    direct_safe_bound,
    direct_tile,
    floor_time,
    window_reuse,
    winograd_bounds,
)
from convtune.cli._common import PROBLEM_HELP, CliError, machine_preset, read_json
from convtune.errors import ConvtuneError
from convtune.machine import MachineModel, preset_help
from convtune.problem import ConvProblem
from convtune.tuner.efficiency import family_choice

SUITE_FAMILIES = ("conv2d", "depthwise2d", "depthwise1d_causal")
WINOGRAD_M = (2, 4)


def add_bounds_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bounds", help="I/O lower bounds, suggested tile and floor time of a convolution",
        description="Print the MACs, compulsory bytes, every I/O lower bound with its validity, the binding "
                    "term, the suggested output tile and the roofline floor time of a convolution "
                    "(Winograd bounds for 3×3 stride-1 layers, depthwise bounds for depthwise layers).",
        epilog="example: convtune bounds N=1 C=64 H=56 W=56 K=64 R=3 S=3 stride=1 pad=1 --smem-kib 48")
    p.add_argument("problem", nargs="*", metavar="FIELD=VALUE", help=PROBLEM_HELP)
    p.add_argument("--suite", metavar="FILE", help="a suite JSON file, or the name of a suite shipped with convtune "
                   f"({', '.join(suites.names())}; e.g. {suites.path('public')})")
    p.add_argument("--machine", default="h200", help=f"machine preset ({preset_help()}); default h200")
    p.add_argument("--smem-kib", type=float, default=None, metavar="KIB",
                   help="fast memory S per block in KiB (default: the machine's per-block budget: shared "
                        "memory + half an SM's registers)")
    p.add_argument("--json", action="store_true", help="print one JSON object (a list with --suite)")
    p.set_defaults(func=cmd_bounds)




# ---- bounds -----------------------------------------------------------------------------------------
def cmd_bounds(args: argparse.Namespace) -> int:
    """``convtune bounds``: one problem from FIELD=VALUE tokens, or every entry of ``--suite``."""
    machine = machine_preset(args.machine)
    if args.smem_kib is not None and not args.smem_kib > 0:
        raise CliError("--smem-kib", f"{args.smem_kib:g} must be > 0")
    if args.suite and args.problem:
        raise CliError("--suite", "give either a problem (FIELD=VALUE ...) or --suite FILE, not both")
    if args.suite:
        reports = [bounds_report(p, machine, args.smem_kib, name=name, family=family)
                   for family, name, p in load_suite(args.suite)]
        print(json.dumps(reports, indent=1) if args.json else format_suite_table(reports))
        return 0
    if not args.problem:
        raise CliError("problem", "missing: give FIELD=VALUE tokens (e.g. N=1 C=64 H=56 W=56 K=64 R=3 S=3) "
                                  "or --suite FILE")
    problem = ConvProblem.parse(" ".join(args.problem))
    report = bounds_report(problem, machine, args.smem_kib)
    print(json.dumps(report, indent=1) if args.json else format_report(report))
    return 0


def load_suite(path: str) -> list[tuple[str, str, ConvProblem]]:
    """(family, name, problem) for every entry of a suite file (or packaged suite: ``public``); one-line
    :class:`CliError` on bad input."""
    packaged = path in suites.names() and not os.path.exists(path)  # a file of that name wins
    return suite_entries(read_json(str(suites.path(path)) if packaged else path, "--suite"), path)


def suite_entries(data: Any, path: str) -> list[tuple[str, str, ConvProblem]]:
    """(family, name, problem) for every entry of a parsed suite file."""
    if not isinstance(data, dict):
        raise CliError("--suite", f"{path!r}: expected a JSON object with lists under {', '.join(SUITE_FAMILIES)}")
    entries: list[tuple[str, str, ConvProblem]] = []
    for family in SUITE_FAMILIES:
        items = data.get(family, [])
        if not isinstance(items, list):
            raise CliError(family, f"in {path!r} must be a list of problems")
        for i, spec in enumerate(items):
            where = f"{family}[{i}]"
            if not isinstance(spec, dict):
                raise CliError(where, f"in {path!r} must be an object")
            name = spec.get("name")
            if not isinstance(name, str) or not name:
                raise CliError(f"{where}.name", f"in {path!r} is missing or not a string")
            try:
                problem = ConvProblem.from_mapping(spec)
            except ConvtuneError as exc:
                raise CliError(f"{where} ({name})", str(exc)) from None
            entries.append((family, name, problem))
    if not entries:
        raise CliError("--suite", f"{path!r} has no entries under {', '.join(SUITE_FAMILIES)}")
    return entries


def fast_memory(problem: ConvProblem, machine: MachineModel, smem_kib: float | None) -> tuple[int, str]:
    """S in words of the problem's dtype, and where it came from."""
    word = problem.itemsize_bytes
    if smem_kib is not None:
        return max(1, int(smem_kib * 1024 // word)), f"--smem-kib {smem_kib:g}"
    return machine.fast_memory_words("block", word_bytes=word), \
        f"{machine.name} per-block budget: shared memory per block + half an SM's registers"


def bounds_report(problem: ConvProblem, machine: MachineModel, smem_kib: float | None, *, name: str | None = None,
                  family: str | None = None) -> dict[str, Any]:
    """Everything ``convtune bounds`` prints, as one JSON-friendly dict."""
    s, source = fast_memory(problem, machine, smem_kib)
    report: dict[str, Any] = {}
    if name is not None:
        report.update(name=name, family=family)
    report.update(
        problem=problem.key(), output_shape=[problem.P, problem.Q], reduction_length=problem.reduction_length,
        window_reuse=window_reuse(problem),
        machine={"name": machine.name, "copy_bandwidth_bytes_per_s": machine.copy_bandwidth_bytes_per_s,
                 "fp32_peak_flops_per_s": machine.fp32_peak_flops_per_s, "ceilings_source": machine.ceilings_source,
                 "datasheet_bandwidth_bytes_per_s": machine.datasheet_bandwidth_bytes_per_s,
                 "datasheet_fp32_flops_per_s": machine.datasheet_fp32_flops_per_s,
                 "datasheet_source": machine.datasheet_source,
                 "l2_bandwidth_bytes_per_s": machine.l2_bandwidth_bytes_per_s,
                 "launch_floor_s": machine.launch_floor_s},
        fast_memory_words=s, fast_memory_bytes=s * problem.itemsize_bytes, fast_memory_source=source,
        macs=problem.macs, macs_nonpad=problem.macs_nonpad, flops=problem.flops,
        compulsory_words=problem.compulsory_elements, compulsory_bytes=problem.compulsory_bytes)
    # A floor time must not assume more work than the least any schedule does: non-padding FLOPs.
    floor_flops = 2 * problem.macs_nonpad
    if problem.is_depthwise:
        lb = depthwise_lower_bound(problem, s)
        th, tw = (1, min(problem.Q, 256)) if problem.causal else (min(problem.P, 32), min(problem.Q, 32))
        tiled = depthwise_tiled_traffic(problem, tile_w=tw, tile_h=th)
        report.update(bounds={"depthwise": lb.to_dict()}, reported=lb.to_dict(),
                      tile={"algorithm": "depthwise", "tile_h": th, "tile_w": tw, **tiled.to_dict(),
                            "ratio_to_bound": tiled.words / lb.words})
    else:
        lb = direct_lower_bound(problem, s)
        try:
            tile = direct_tile(problem, s)
        except ValueError as exc:
            raise CliError("--smem-kib", f"S = {s} words is too small for any output tile ({exc})") from None
        report.update(bounds={"direct.literature": direct_literature_bound(problem, s).to_dict(),
                              "direct.safe": direct_safe_bound(problem, s).to_dict()},
                      reported=lb.to_dict(),
                      tile={**tile.to_dict(), "ratio_to_bound": tile.predicted_words / lb.words})
    report["floor_time"] = floor_time(floor_flops, lb.bytes, machine).to_dict()
    report["winograd"] = [_winograd_report(problem, s, m, machine) for m in WINOGRAD_M] \
        if _winograd_applies(problem) else []
    report["family_choice"] = family_choice(problem, machine)
    report["floors"] = floors_summary(problem, machine, report["family_choice"])
    return report


def floors_summary(problem: ConvProblem, machine: MachineModel, choice: dict[str, Any]) -> dict[str, Any]:
    """The reported floor (docs/bounds.md §11): the favoured algorithm's best variant, its DRAM, on-chip and launch
    floors and what binds, on the machine's ceilings and on the datasheet peaks, with the levels' S."""
    word = problem.itemsize_bytes
    out: dict[str, Any] = {
        "dram_fast_memory_words": machine.fast_memory_words("l2", word_bytes=word),
        "onchip_fast_memory_words_per_sm": machine.fast_memory_words("sm", word_bytes=word),
        "sm_count": machine.sm_count, "l2_bandwidth_bytes_per_s": machine.l2_bandwidth_bytes_per_s,
        "ceilings_source": machine.ceilings_source, "datasheet_source": machine.datasheet().ceilings_source}
    if not choice["floors"]:
        return {**out, "algorithm": None}
    best = choice["floors"][0]
    out.update(algorithm=best["algorithm"], variant=best["variant"], flops=best["flops"],
               dram_bound_bytes=best["bound_bytes"], onchip_bound_bytes=best["onchip_bound_bytes"],
               floor_ms=best["floor_ms"], binding=best["binding"], launch_bound=best["launch_bound"],
               dram_floor_ms=best["dram_floor_ms"], onchip_floor_ms=best["onchip_floor_ms"],
               launch_floor_ms=best["launch_floor_ms"], datasheet_floor_ms=best["datasheet_floor_ms"],
               datasheet_binding=best["datasheet_binding"])
    return out


def _winograd_applies(p: ConvProblem) -> bool:
    return (p.R == p.S == 3 and p.stride_h == p.stride_w == 1 and p.dil_h == p.dil_w == 1
            and not p.is_depthwise and not p.causal)


def _winograd_report(problem: ConvProblem, s: int, m: int, machine: MachineModel) -> dict[str, Any]:
    wb = winograd_bounds(problem, s, m)
    flops = 2 * wb.shape.multiplications
    return {**wb.to_dict(), "floor_time": floor_time(flops, wb.cdag.bytes, machine).to_dict(),
            "fused_floor_time": floor_time(flops, wb.fused.bytes, machine).to_dict()}


# ---- text formatting --------------------------------------------------------------------------------
def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f} µs"


def _status(bound: dict[str, Any]) -> str:
    if bound["valid"]:
        return f"valid (binding: {bound['binding_term']})"
    failed = "; ".join(a["text"] for a in bound["assumptions"] if not a["holds"])
    return f"INVALID, not used: {failed} fails"


def format_report(r: dict[str, Any]) -> str:
    """The human-readable form of :func:`bounds_report`."""
    m, ft, rep = r["machine"], r["floor_time"], r["reported"]
    lines = [
        f"problem      {r['problem']}",
        f"output       P×Q = {r['output_shape'][0]}×{r['output_shape'][1]}; reduction L = {r['reduction_length']:,};"
        f" window reuse R_w = {r['window_reuse']}",
        f"machine      {m['name']}: copy {m['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, fp32 "
        f"{m['fp32_peak_flops_per_s'] / 1e12:.1f} TFLOP/s ({m['ceilings_source']})",
        f"fast memory  S = {r['fast_memory_words']:,} words = {r['fast_memory_bytes'] / 1024:,.1f} KiB "
        f"({r['fast_memory_source']})",
        f"MACs         {r['macs']:,} ({r['macs_nonpad']:,} read real input); {r['flops'] / 1e9:,.3f} GFLOP",
        f"compulsory   {r['compulsory_bytes']:,} B ({r['compulsory_words']:,} words)",
        f"bounds       {'name':<34} {'words':>14} {'bytes':>16}  status",
    ]
    for name, b in r["bounds"].items():
        lines.append(f"             {name:<34} {b['words']:>14,.0f} {b['bytes']:>16,.0f}  {_status(b)}")
    lines.append(f"             {'=> ' + rep['name'] + ' (reported)':<34} {rep['words']:>14,.0f} {rep['bytes']:>16,.0f}"
                 f"  binding term: {rep['binding_term']}")
    t = r["tile"]
    if t["algorithm"] == "depthwise":
        lines.append(f"tile         {t['tile_h']}×{t['tile_w']} outputs per tile: halo-tiled traffic {t['words']:,.0f}"
                     f" words ({t['ratio_to_bound']:.2f}× bound), footprint {t['fast_memory_words']:,} words")
    else:
        lines.append(f"tile         x={t['x']} cols, y={t['y']} rows, z={t['z']} channels, c_s={t['c_s']}: "
                     f"xy/(R·z) = {t['balance']:.2f}, footprint {t['footprint_words']:,} words, predicted "
                     f"{t['predicted_words']:,.0f} words ({t['ratio_to_bound']:.2f}× bound)")
    lines.append(f"floor time   {_us(ft['time_s'])} ({ft['binding']}-bound: memory {_us(ft['memory_time_s'])}, "
                 f"compute {_us(ft['compute_time_s'])})")
    for w in r["winograd"]:
        sh = w["shape"]
        lines.append(
            f"winograd     F({sh['m']}×{sh['m']},3×3): {sh['multiplications']:,} multiplications "
            f"({sh['multiplications'] / sh['direct_multiplications']:.2f}× direct); CDAG bound "
            f"{w['cdag']['words']:,.0f} words ({w['cdag']['binding_term']}); fused floor "
            f"{w['fused']['words']:,.0f}; unfused floor {w['unfused']['words']:,.0f}; "
            f"floor time {_us(w['floor_time']['time_s'])}"
            f" (fused {_us(w['fused_floor_time']['time_s'])})")
    fl = r["floors"]
    lines.append(f"datasheet    copy {m['datasheet_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, fp32 "
                 f"{m['datasheet_fp32_flops_per_s'] / 1e12:.1f} TFLOP/s ({m['datasheet_source'] or 'unknown'}); "
                 f"L2→SM {m['l2_bandwidth_bytes_per_s'] / 1e12:.1f} TB/s (optimistic); launch floor "
                 f"{_us(m['launch_floor_s'])}")
    if fl.get("algorithm"):
        lines.append(
            f"floors       {fl['algorithm']} {fl['variant']}: DRAM {_us(fl['dram_floor_ms'] * 1e-3)} "
            f"(S = L2 + SMs, {fl['dram_bound_bytes']:,.0f} B), on-chip {_us(fl['onchip_floor_ms'] * 1e-3)} "
            f"({fl['sm_count']} SMs × {fl['onchip_fast_memory_words_per_sm']:,} words, "
            f"{fl['onchip_bound_bytes']:,.0f} B), launch {_us(fl['launch_floor_ms'] * 1e-3)}")
        lines.append(f"             => floor {_us(fl['floor_ms'] * 1e-3)} (binding: {fl['binding']}"
                     f"{'; LAUNCH-BOUND' if fl['launch_bound'] else ''}) on {fl['ceilings_source']}; "
                     f"{_us(fl['datasheet_floor_ms'] * 1e-3)} (binding: {fl['datasheet_binding']}) on "
                     f"{fl['datasheet_source']}")
    choice = r["family_choice"]
    if choice["favoured"]:
        lines.append(f"family       the bound favours {choice['favoured']}: {choice['reason']} "
                     "(floors = max(compute, DRAM, on-chip, launch))")
    return "\n".join(lines)


def format_suite_table(reports: list[dict[str, Any]]) -> str:
    """One line per suite entry."""
    header = (f"{'name':<26} {'family':<18} {'MACs':>14} {'compulsory MB':>13} {'bound MB':>10} {'binding':<11} "
              f"{'floor µs':>10} {'bound by':<8} {'tile':<16} {'favours':<9}")
    lines = [header, "-" * len(header)]
    for r in reports:
        rep, t = r["reported"], r["tile"]
        tile = f"{t['tile_h']}×{t['tile_w']}" if t["algorithm"] == "depthwise" else f"{t['x']}×{t['y']}×{t['z']}"
        lines.append(f"{r['name']:<26} {r['family']:<18} {r['macs']:>14,} {r['compulsory_bytes'] / 1e6:>13.2f} "
                     f"{rep['bytes'] / 1e6:>10.2f} {rep['binding_term']:<11} {r['floor_time']['time_s'] * 1e6:>10.2f} "
                     f"{r['floor_time']['binding']:<8} {tile:<16} {r['family_choice']['favoured'] or '-':<9}")
    first = reports[0]
    lines.append(f"S = {first['fast_memory_words']:,} words ({first['fast_memory_source']}); "
                 f"floor = max(2·MACs/peak, bound bytes/copy bandwidth) on {first['machine']['name']}")
    return "\n".join(lines)


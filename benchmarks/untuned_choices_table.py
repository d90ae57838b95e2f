"""Write the replay table ``tests/ops/test_untuned_choice_measured.py`` checks: every conv2d entry's untuned choice
(the shipped models, no database), as a ``user_suite.py`` run measured it through ``convtune.ops.torch.conv2d``.

Usage::

    python benchmarks/untuned_choices_table.py RUN/user_suite/user_suite.json --source <where RUN is committed> \\
        --out tests/data/wide_untuned_choices_h100.json

The table names the machine preset of the run's device (``h100`` / ``h200``): the test asks that preset's models.
Rows whose config was not the models' choice (a database's, or a served table's) are refused: the run must be
untuned, or measured with ``--untuned-too`` (its untuned column is read; the tensor-core classes' tables,
``wide_untuned_choices_<preset>_<class>.json``, come from such runs).

A model change measured on one preset's device leaves the other preset's table stale: ``--supersede TABLE --why
TEXT`` moves the rows whose choice the shipped models no longer make into the table's ``superseded`` section (kept,
with the reason, until that device measures the suite again)::

    python benchmarks/untuned_choices_table.py --supersede tests/data/wide_untuned_choices_h200.json --why "..."

A model change that moves a few choices, measured on the table's device on those entries only (an untuned run of a
smaller suite): ``--update TABLE`` puts the run's rows in place of the table's rows of the same entries, superseded
ones included (the run must cover every entry the models moved, on the table's preset and class) and says so in
``about``::

    python benchmarks/untuned_choices_table.py RUN/user_suite.json --source <where RUN is committed> \
        --update tests/data/wide_untuned_choices_h100_tf32.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from convtune.api.inputs import machine_for_name
from convtune.machine import PRESETS


def preset_of(device: str) -> str:
    """The key of the preset the device belongs to ("NVIDIA H100 80GB HBM3" → "h100")."""
    machine = machine_for_name(device)
    if machine is None:
        raise SystemExit(f"device {device!r}: no machine preset matches (presets: {sorted(PRESETS)})")
    return next(key for key, preset in PRESETS.items() if preset is machine)


def baseline_of(meta: dict) -> str:
    """The baseline a run's class is measured against ("cuDNN TF32", ...; strict runs: "cuDNN fp32")."""
    return {"tf32": "cuDNN TF32", "bfloat16": "cuDNN bf16", "float16": "cuDNN fp16"}.get(meta.get("class", ""),
                                                                                         "cuDNN fp32")


def table(run: dict, source: str) -> dict:
    """The table of an untuned run, or of the untuned column of a run with ``--untuned-too`` (``untuned_*`` fields:
    the tensor-core classes' runs measure both in one process)."""
    meta, rows = run["meta"], run["rows"]
    column = "untuned_" if meta.get("untuned_too") else ""
    speedup = "speedup_untuned_kernel" if column else "speedup_kernel"
    not_model = [r["name"] for r in rows if r.get(f"{column}config_source") != "model"]
    if not_model:
        raise SystemExit(f"not an untuned run: {len(not_model)} rows ran other configs ({', '.join(not_model[:4])})")
    baseline = baseline_of(meta)
    return {
        "about": (f"The untuned choice (the shipped models, no database) on every conv2d entry of "
                  f"{meta.get('suite')}, as measured on the {meta['device']} on {meta['date'][:10]} through "
                  f"convtune.ops.torch.conv2d against {baseline} ({source}). tests/ops/test_untuned_choice_measured.py "
                  f"checks the models of preset {preset_of(meta['device'])!r} still choose these configs."),
        "device": meta["device"],
        "preset": preset_of(meta["device"]),
        "choices": [{"name": r["name"], "problem": r["problem"], "config": r[f"{column}config"],
                     "speedup_kernel": round(r[speedup], 4)} for r in rows],
    }


def moved_rows(old: dict) -> list[dict]:
    """The rows of ``old`` whose config its preset's shipped models no longer choose."""
    from convtune.machine import MachineModel
    from convtune.ops.conv2d import model_choice
    from convtune.problem import ConvProblem

    machine = MachineModel.preset(old["preset"])
    return [r for r in old["choices"] if model_choice(ConvProblem.parse(r["problem"]), machine).key() != r["config"]]


def supersede(old: dict, why: str) -> dict:
    """``old`` with the rows the preset's models no longer choose moved into ``superseded`` (``entries``, ``why``,
    ``rows``; rows superseded earlier stay, their reasons joined)."""
    moved = moved_rows(old)
    if not moved:
        return old
    earlier = old.get("superseded", {"entries": [], "why": "", "rows": []})
    rows = earlier["rows"] + moved
    return {**old, "choices": [r for r in old["choices"] if r not in moved],
            "superseded": {"entries": [r["name"] for r in rows],
                           "why": " ".join(w for w in (earlier["why"], why) if w), "rows": rows}}


def update(old: dict, run: dict, source: str, skip_extra: bool = False) -> dict:
    """``old`` with the rows of the entries ``run`` measured replaced by its rows (same order; superseded rows it
    measured come back into ``choices``); refused unless the run is of the table's preset and baseline class, names
    only the table's entries (``skip_extra``: the others are left out, e.g. a suite that also holds entries of
    another suite) and covers every row whose choice the preset's models no longer make."""
    new, baseline = table(run, source), baseline_of(run["meta"])
    if new["preset"] != old["preset"] or f"against {baseline} (" not in old["about"]:
        raise SystemExit(f"the run ({new['preset']}, against {baseline}) is not of the table's preset and class "
                         f"({old['preset']}: {old['about'][:120]}...)")
    rows = {r["name"]: r for r in new["choices"]}
    superseded = old.get("superseded", {"entries": [], "why": "", "rows": []})
    unknown = sorted(set(rows) - {r["name"] for r in old["choices"] + superseded["rows"]})
    if unknown and skip_extra:
        print(f"left out, not in the table: {', '.join(unknown)}", file=sys.stderr)
        rows = {name: row for name, row in rows.items() if name not in unknown}
    elif unknown:
        raise SystemExit(f"the run measured entries the table does not hold: {', '.join(unknown)}")
    moved = [r["name"] for r in moved_rows(old) if r["name"] not in rows]
    if moved:
        raise SystemExit(f"the models moved {len(moved)} choices the run did not measure: {', '.join(moved)}")
    date = run["meta"]["date"][:10]
    restored = [rows[r["name"]] for r in superseded["rows"] if r["name"] in rows]   # measured again: back in
    out = {**old, "about": f"{old['about']} Re-measured on {date} ({source}): {', '.join(rows)}.",
           "choices": [rows.get(r["name"], r) for r in old["choices"]] + restored}
    left = [r for r in superseded["rows"] if r["name"] not in rows]
    if left:
        out["superseded"] = {**superseded, "entries": [r["name"] for r in left], "rows": left}
    else:
        out.pop("superseded", None)
    return out


def write(path: Path, table_: dict) -> None:
    """A table as the tests read it: indented JSON, text as written (no escapes)."""
    path.write_text(json.dumps(table_, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, nargs="?", help="user_suite.json of an untuned run")
    ap.add_argument("--source", help="where the run is committed (quoted in the table)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--supersede", type=Path, help="a table whose rows the models no longer choose move aside")
    ap.add_argument("--why", default="", help="the reason recorded with --supersede")
    ap.add_argument("--update", type=Path, help="a table whose rows of the run's entries the run's rows replace")
    ap.add_argument("--skip-extra", action="store_true",
                    help="with --update: leave out the run's entries the table does not hold (another suite's)")
    args = ap.parse_args(argv)
    if args.supersede is not None:
        old = json.loads(args.supersede.read_text())
        new = supersede(old, args.why)
        write(args.supersede, new)
        print(f"{len(old['choices']) - len(new['choices'])} rows superseded -> {args.supersede}", file=sys.stderr)
        return 0
    if args.run is not None and args.source is not None and args.update is not None:
        new = update(json.loads(args.update.read_text()), json.loads(args.run.read_text()), args.source,
                     args.skip_extra)
        write(args.update, new)
        print(f"rows of {args.run} -> {args.update}", file=sys.stderr)
        return 0
    if args.run is None or args.source is None or args.out is None:
        ap.error("a run needs RUN, --source and --out (or --update TABLE)")
    out = table(json.loads(args.run.read_text()), args.source)
    write(args.out, out)
    print(f"{len(out['choices'])} choices, preset {out['preset']} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

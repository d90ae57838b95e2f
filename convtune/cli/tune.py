"""``convtune tune | best | history | why | db``: the tuner and its database from the command line.

Registered by :func:`convtune.cli.build_parser`; heavy imports (Optuna, SQLAlchemy, CuPy) happen inside
the ``cmd_`` functions so ``convtune bounds`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from convtune.cli._common import PROBLEM_HELP, add_db_arg, open_database, precision_of
from convtune.errors import DeviceUnavailable, InvalidConfig
from convtune.machine import preset_help
from convtune.problem import ConvProblem
from convtune.vocabulary import BACKENDS as BACKENDS
from convtune.vocabulary import DEMO_BACKENDS, OVERALL_SCOPE


def add_tuning_parsers(sub: Any) -> None:
    p = sub.add_parser("tune", help="tune a convolution: prune by the I/O bound, search with Optuna, store all",
                       epilog="example: convtune tune N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 --budget-trials 100 "
                              "(add math=tf32 to tune the TF32 class: every family that accepts it is searched)")
    p.add_argument("problem", nargs="+", metavar="FIELD=VALUE", help=PROBLEM_HELP)
    p.add_argument("--budget-trials", type=int, default=200)
    p.add_argument("--budget-s", type=float, default=300.0,
                   help="seconds of search after pruning (pruning's own seconds are reported apart; the warm "
                        "start is always measured); default 300")
    p.add_argument("--patience", type=int, default=60, help="stop after this many trials without improvement")
    p.add_argument("--epsilon", type=float, default=0.05, help="stop when within this fraction of the floor time")
    p.add_argument("--backend", choices=BACKENDS, default="gpu")
    p.add_argument("--replay", metavar="FILE", help="timing table for --backend replay (.json or .json.gz)")
    p.add_argument("--machine", default=None,
                   help=f"machine preset for --backend model ({preset_help()}; default h200); a bounds-only "
                        "preset is refused with --backend gpu")
    p.add_argument("--families", default=None, help="comma-separated kernel families (default: all that apply)")
    p.add_argument("--sampler", choices=("tpe", "random"), default="tpe")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warm-start", type=int, default=16, help="best-predicted configs enqueued first")
    p.add_argument("--target-ms", type=float, default=None, help="stop once a config this fast is found")
    p.add_argument("--force", action="store_true", help="tune again even if a finished run is stored")
    p.add_argument("--no-baseline", action="store_true", help="skip timing cuDNN through torch (gpu backend)")
    add_db_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("best", help="look up the stored best configuration of a convolution (no tuning)",
                       epilog="a tf32 problem (math=tf32) is answered by the fastest of its own rows and its strict "
                              "float32 twin's; a strict problem never by a tf32 row")
    p.add_argument("problem", nargs="+", metavar="FIELD=VALUE", help=PROBLEM_HELP)
    p.add_argument("--device", default=None, help="device name (default: any)")
    p.add_argument("--family", default=OVERALL_SCOPE,
                   help=f"family scope (default: overall best, {OVERALL_SCOPE!r})")
    add_db_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_best)

    p = sub.add_parser("history", help="tuning runs, newest first (of one problem when given)")
    p.add_argument("problem", nargs="*", metavar="FIELD=VALUE", help=PROBLEM_HELP)
    p.add_argument("--limit", type=int, default=50)
    add_db_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("why", help="the pruning decision for one configuration of a problem",
                       epilog="example: convtune why N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 direct.fwd tile_h=4 "
                              "tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 thread_k=8 stages=2 vec=1 splits=1")
    p.add_argument("tokens", nargs="+", metavar="TOKEN", help="problem FIELD=VALUE tokens, then the config key")
    p.add_argument("--device", default=None)
    p.add_argument("--machine", default="h200",
                   help=f"machine preset used to re-derive an unrecorded decision ({preset_help()})")
    add_db_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_why)

    p = sub.add_parser("db", help="database maintenance")
    dbsub = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    up = dbsub.add_parser("upgrade", help="bring the database schema to the newest revision")
    add_db_arg(up)
    up.set_defaults(func=cmd_db_upgrade)




def _tune_database(args: argparse.Namespace) -> str | None:
    """``--db``, else ``$CONVTUNE_DATABASE_URL``; with neither, a replay or model run writes a demo file of its own
    (said in one line on stderr), so that replayed or predicted rows never land in the default database."""
    import os

    from convtune.storage.session import DATABASE_URL_ENV, demo_database_url

    if args.db or os.environ.get(DATABASE_URL_ENV) or args.backend not in DEMO_BACKENDS:
        return args.db
    url = demo_database_url(args.backend)
    print(f"convtune: --backend {args.backend} results go to the demo database {url}, not your default database "
          "(choose one with --db or CONVTUNE_DATABASE_URL)", file=sys.stderr)
    return url


def _problem(tokens: list[str]) -> ConvProblem:
    return ConvProblem.parse(" ".join(tokens))


# ---- tune ---------------------------------------------------------------------------------------------
def _benchmarker(args: argparse.Namespace) -> Any:
    from convtune.machine import MachineModel
    from convtune.tuner.benchmark import ModelBenchmarker, ReplayBenchmarker, ReplayTable

    if args.backend == "replay":
        return ReplayBenchmarker(ReplayTable.for_option(args.replay))
    if args.backend == "model":
        return ModelBenchmarker(MachineModel.preset(args.machine or "h200"))
    if args.machine is not None:  # gpu: the device is what it is; a preset that no kernel runs on is refused
        MachineModel.preset(args.machine).require_kernels("--machine")
    from convtune.tuner.trial_process import SubprocessBenchmarker

    try:
        return SubprocessBenchmarker(GPU_FACTORY)
    except DeviceUnavailable as exc:  # no CuPy, no GPU, a GPU below sm_80: say which backends work here
        raise type(exc)(f"--backend gpu: {exc} (without a usable GPU: --backend model or --backend replay)") from None


#: The trial worker's benchmarker ("module:factory"; tests point it at a simulated device).
GPU_FACTORY = "convtune.tuner.gpu:CupyBenchmarker"


def _families(problem: ConvProblem, text: str | None) -> list[str] | None:
    """``--families`` checked against the registry and the problem (InvalidConfig names the option)."""
    from convtune.kernels.registry import REGISTRY, specs_for

    known = sorted({family for family, _ in REGISTRY})
    families = [f.strip() for f in text.split(",") if f.strip()] if text else None
    for family in families or []:
        if family not in known:
            raise InvalidConfig("--families", f"{family!r} is not a kernel family: allowed {', '.join(known)}")
    if not specs_for(problem, families):
        raise InvalidConfig("--families", f"no family among {families or known} can run {problem.key()}")
    return families


def cmd_tune(args: argparse.Namespace) -> int:
    from convtune.cli.progress import TuneProgress, progress_enabled
    from convtune.tuner.tune import tune

    problem = _problem(args.problem)
    for name in ("budget_trials", "patience", "warm_start"):
        if getattr(args, name) < (1 if name != "warm_start" else 0):
            raise InvalidConfig(f"--{name.replace('_', '-')}", f"{getattr(args, name)} must be >= 1")
    if not args.budget_s > 0:
        raise InvalidConfig("--budget-s", f"{args.budget_s:g} must be > 0")
    families = _families(problem, args.families)
    bench = _benchmarker(args)  # before the database: bad --backend/--replay input creates nothing
    try:
        engine = open_database(_tune_database(args))
    except BaseException:  # a bad --db: the trial worker must not outlive the one-line error
        bench.close()
        raise
    bar = TuneProgress(progress_enabled(args))
    try:
        result = tune(problem, bench, engine, families=families, budget_trials=args.budget_trials,
                      budget_s=args.budget_s, patience=args.patience, epsilon=args.epsilon, sampler=args.sampler,
                      seed=args.seed, warm_start=args.warm_start, force=args.force, progress=bar.trial,
                      prune_progress=bar.prune, stop_at_ms=args.target_ms)
    except ValueError as exc:
        raise InvalidConfig("problem", str(exc)) from None
    finally:
        bar.close()
        bench.close()
    baseline = None
    if args.backend == "gpu" and not args.no_baseline and result.time_ms:
        from convtune.ops.baseline import pytorch_ms

        baseline = pytorch_ms(problem)
    summary = {
        "problem": problem.key(), "device": result.device_name, "backend": result.backend, "run_id": result.run_id,
        "best_config": result.best_config, "time_ms": result.time_ms, "tflops": result.tflops, "gbps": result.gbps,
        "floor_ms": result.floor_ms, "efficiency": result.efficiency, "binding": result.binding,
        "launch_bound": result.launch_bound, "ceilings_source": result.ceilings_source,
        "datasheet_floor_ms": result.datasheet_floor_ms, "efficiency_datasheet": result.efficiency_datasheet,
        "datasheet_source": result.datasheet_source, "predicted": result.predicted,
        "trials": result.trials, "measured": result.measured, "reused": result.reused, "failed": result.failed,
        "statuses": result.statuses, "stop_reason": result.stop_reason, "stop_code": result.stop_code,
        "pruning": result.prune_summary, "pruning_s": round(result.pruning_s, 3), "search_s": round(result.search_s, 3),
        "elapsed_s": round(result.elapsed_s, 2), "precision": problem.precision,
        # PyTorch's convolution (cuDNN) in the problem's own precision class
        "cudnn_ms": baseline, "cudnn_precision": problem.precision,
        "cudnn_fp32_ms": baseline if problem.precision == "float32" else None,
        "cudnn_tf32_ms": baseline if problem.precision == "tf32" else None,
        "speedup_vs_cudnn": (baseline / result.time_ms) if baseline and result.time_ms else None,
        "families": {f: {"floor_ms": floor, "best_ms": result.family_best_ms.get(f)}
                     for f, floor in result.floors_ms.items()},
        "bound_favours": result.bound_favours,
        # where the operands fit in L2 the final choice is by hot back-to-back re-times (the op's calls, a network's
        # layer after its predecessor); time_ms stays the cold-L2 time the floors compare with
        "call_time_ms": result.call_time_ms, "chosen_by": result.chosen_by,
    }
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"problem     {summary['problem']} (precision {problem.precision})\n"
          f"device      {summary['device']} (backend {summary['backend']}"
          f"{', PREDICTED by the model' if result.predicted else ''})")
    if result.resumed_from_db:
        print("            already tuned: answered from the database, nothing measured (use --force to tune again)")
    else:
        print(f"pruning     {summary['pruning']}")
        print(f"trials      {result.trials} ({result.measured} measured, {result.reused} from the database, "
              f"{result.failed} failed); stop: {result.stop_reason}")
        print(f"seconds     pruning {result.pruning_s:.1f} s, search {result.search_s:.1f} s of --budget-s "
              f"{args.budget_s:g}")
    if result.best_config is None:
        print("best        none verified")
        return 1
    print(f"best        {result.best_config}")
    print(f"time        {result.time_ms:.4f} ms  {result.tflops:.1f} TFLOP/s (direct-equivalent FLOPs)  "
          f"{result.gbps:.0f} GB/s (compulsory)")
    if result.call_time_ms is not None:
        print(f"hot L2      {result.call_time_ms:.4f} ms back to back (the operands fit in L2: these re-times chose "
              "the best; the time above is cold, as the floors count)")
    print(f"bound       floor {result.floor_ms:.4f} ms  efficiency {result.efficiency:.2f} vs "
          f"{result.ceilings_source or 'the machine ceilings'}"
          + (f"; binding: {result.binding}" if result.binding else "")
          + (" (LAUNCH-BOUND: no kernel finishes faster than a launch)" if result.launch_bound else ""))
    if result.efficiency_datasheet is not None and result.datasheet_floor_ms is not None:
        print(f"datasheet   floor {result.datasheet_floor_ms:.4f} ms  efficiency {result.efficiency_datasheet:.2f} vs "
              f"{result.datasheet_source}")
    if len(result.floors_ms) > 1:
        per_family = ", ".join(f"{f} floor {floor:.4f} ms / best {_ms_or_dash(result.family_best_ms.get(f))}"
                               for f, floor in result.floors_ms.items())
        print(f"families    {per_family}; the bound favours {result.bound_favours}, "
              f"the measured winner is {result.best_config.split('.', 1)[0]}")
    if baseline and result.time_ms:
        print(f"cuDNN {problem.precision}  {baseline:.4f} ms  speedup "
              f"{baseline / result.time_ms:.2f}x")
    return 0


def _ms_or_dash(ms: float | None) -> str:
    return f"{ms:.4f} ms" if ms is not None else "not measured"


# ---- lookups ------------------------------------------------------------------------------------------
def cmd_best(args: argparse.Namespace) -> int:
    """``convtune best``: the stored best row (measured on a GPU first) and, flagged beside it, the other
    backends' rows of the problem (a replayed or predicted row is never shown as measured). A tf32 problem
    (``math=tf32``) also sees its strict float32 twin's rows, the fastest first; a strict problem only its own."""
    from convtune.storage import queries as repo
    from convtune.storage.session import session_scope

    problem = _problem(args.problem)
    with session_scope(open_database(args.db)) as session:
        views = repo.list_best_configs(session, problem_key=problem, device_name=args.device, scope=args.family,
                                       serving=True)
    if not views:
        print(f"no stored result for {problem.key()}: run `convtune tune {problem.key()}`{_demo_hint(args.db)}",
              file=sys.stderr)
        return 1
    answer, others = views[0], views[1:]
    d = {**_best_dict(answer), "others": [_best_dict(v) for v in others]}
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    print(f"{d['config']}\n{d['time_ms']:.4f} ms on {d['device']}; floor {d['floor_ms']:.4f} ms, "
          f"efficiency {d['efficiency']:.2f}; run {d['run_id']}; {_flag(answer)}")
    if answer.problem_key != problem.key():
        print(f"  measured for {answer.problem_key} ({d['precision']}: a config verified for a stricter class serves "
              f"{problem.precision}; `convtune tune {problem.key()}` tunes the {problem.precision} problem itself)")
    for v in others:
        print(f"  also stored: {v.time_ms:.4f} ms on {v.device_name}, {_flag(v)}: {v.config_key}")
    return 0


def _best_dict(view: Any) -> dict[str, Any]:
    return {"problem": view.problem_key, "precision": precision_of(view.problem_key), "device": view.device_name,
            "scope": view.scope, "config": view.config_key,
            "time_ms": view.time_ms, "floor_ms": view.floor_ms, "efficiency": view.efficiency,
            "provisional": view.provisional, "backend": view.backend, "measured": view.measured_here,
            "run_id": view.tuning_run_id}


def _flag(view: Any) -> str:
    """``measured`` for a GPU row of this device name; otherwise what the figures are, in capitals."""
    return "measured" if view.measured_here else view.provenance.upper()


def _demo_hint(db: str | None) -> str:
    """Where a demo (replay or model) run stored its results, when the default database was read."""
    import os

    from convtune.storage.session import DATABASE_URL_ENV, demo_database_path

    if db or os.environ.get(DATABASE_URL_ENV):
        return ""
    found = [p for p in (demo_database_path(b) for b in DEMO_BACKENDS) if p.is_file()]
    return "".join(f"; demo results are in --db sqlite:///{p}" for p in found)


def cmd_history(args: argparse.Namespace) -> int:
    from convtune.storage import queries as repo
    from convtune.storage.session import session_scope

    rows: list[dict[str, Any]] = []
    with session_scope(open_database(args.db)) as session:
        problem_id = None
        if args.problem:
            found = repo.find_problem(session, _problem(args.problem))
            if found is None:
                print("no tuning history for this problem", file=sys.stderr)
                return 1
            problem_id = found.id
        for run in repo.list_runs(session, problem_id, limit=args.limit):
            best = repo.get_measurement(session, run.best_measurement_id) if run.best_measurement_id else None
            rows.append({"run": run.id, "problem": repo.get_problem(session, run.problem_id).key,
                         "device": repo.get_device(session, run.device_id).name, "backend": run.backend,
                         "status": run.status, "trials": run.trials_done,
                         "best_ms": best.median_ms if best else None, "stop_reason": run.stop_reason,
                         "started": run.started_at.isoformat(timespec="seconds")})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'run':>4}  {'started':19}  {'backend':7}  {'status':9}  {'trials':>6}  {'best ms':>9}  problem")
    for r in rows:
        best_text = f"{r['best_ms']:.4f}" if r["best_ms"] is not None else "—"
        print(f"{r['run']:>4}  {r['started'][:19]:19}  {r['backend']:7}  {r['status']:9}  {r['trials'] or 0:>6}  "
              f"{best_text:>9}  {r['problem']}")
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    from convtune.kernels.config import parse_config_key
    from convtune.kernels.registry import get_spec
    from convtune.machine import MachineModel
    from convtune.storage import queries as repo
    from convtune.storage.session import session_scope

    split = next((i for i, t in enumerate(args.tokens) if "." in t and "=" not in t), None)
    if split is None or split == 0:
        raise InvalidConfig("config", "give the problem tokens, then a config key starting with e.g. 'direct.fwd'")
    problem = _problem(args.tokens[:split])
    config = parse_config_key(" ".join(args.tokens[split:]))
    answer: dict[str, Any] = {"problem": problem.key(), "config": config.key()}
    with session_scope(open_database(args.db)) as session:
        prob = repo.find_problem(session, problem)
        devices = [repo.find_device(session, args.device)] if args.device else repo.list_devices(session)
        for dev in filter(None, devices):
            if prob is None:
                break
            found = repo.find_pruning_decision(session, device_id=dev.id, problem_id=prob.id, config_key=config)
            if found is not None:
                answer |= {"recorded": True, "device": dev.name, "run_id": found.tuning_run_id, "stage": found.stage,
                           "reason": found.reason, "numbers": found.numbers}
                break
    if "stage" not in answer:  # re-derive: plan() and the model are deterministic
        machine = MachineModel.preset(args.machine)
        spec = get_spec(config.family, config.direction)
        answer["recorded"] = False
        try:
            pl = spec.plan(problem, config, machine)
        except InvalidConfig as exc:
            answer |= {"stage": "infeasible", "reason": str(exc), "machine": machine.name}
        else:
            bound = spec.bound_words(pl, spec.onchip_words(pl))
            traffic = spec.traffic_words(pl)
            answer |= {"stage": "not recorded", "machine": machine.name,
                       "reason": "feasible; no stored tuning run decided about it",
                       "numbers": {"traffic_words": traffic, "bound_words": bound, "traffic_ratio": traffic / bound,
                                   "predicted_s": spec.predict_s(pl, machine)}}
    if args.json:
        print(json.dumps(answer, indent=1))
    else:
        print(f"{answer['stage']}: {answer['reason']}")
        for k, v in (answer.get("numbers") or {}).items():
            print(f"  {k} = {v:.6g}" if isinstance(v, float) else f"  {k} = {v}")
        if answer.get("recorded"):
            print(f"  (run {answer['run_id']} on {answer['device']})")
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from convtune.storage.migrate import current_revision, upgrade
    from convtune.storage.session import default_database_url, make_engine

    url = args.db or default_database_url()
    engine = make_engine(url)
    upgrade(engine)
    print(f"{engine.url.render_as_string(hide_password=True)} at revision {current_revision(engine)}")
    return 0

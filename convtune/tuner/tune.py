"""The tuning loop: prune, warm-start, search with Optuna, store every trial, choose and store the best.

Order of work for ``tune(problem, benchmarker, engine)``:

1. the device, problem and kernel versions get their rows; if this (device, problem, families,
   backend) already has a finished run and ``force`` is false, the stored best is returned and
   nothing is measured;
2. :func:`~convtune.tuner.prune.prune` runs; its decisions are stored with the run;
3. the study (Optuna, same database) is opened or resumed; the best-predicted survivors are enqueued;
4. once they are measured, :class:`~convtune.tuner.neighbours.LocalSearch` proposes most trials (the
   unevaluated neighbours of the best measured configurations) and the sampler the rest; each
   sampler trial maps its suggestion to an unevaluated survivor; a configuration measured
   before on this device and kernel version is answered from the database, anything else is measured
   by the benchmarker and committed at once (a crash later loses nothing);
5. the loop stops at the trial budget, the time budget, ``patience`` trials without improvement, an
   exhausted space, or when the best time is within ``epsilon`` of the bound's floor time. The time
   budget ``budget_s`` is SEARCH time: its clock starts after pruning (pruning's seconds are reported
   apart, ``pruning_s``); it is checked between compiled batches and never before the warm start (the
   first, best-predicted trials) has been measured, however small it is;
6. the finalists — the best three, and each other family's best within ``FAMILY_FINALIST_SLACK`` of the
   fastest (a family is not ruled out on one trial) — are re-timed interleaved; among those within
   ``TIE_TOLERANCE`` of the fastest the smallest config key wins (so repeated tuning gives the same answer).
   Where the problem's operands fit in half the L2 (:func:`l2_resident`) they are also re-timed hot —
   back to back on one buffer set, as a network's layer finds the input its predecessor just wrote and
   as the op's calls run — and the hot times choose (on the H200 the rotating protocol ranked the
   resident 1×1 bf16 kernel first on YOLOv3's 52×52 head, which the TMA kernel runs 1.32× faster hot);
   the stored time stays the cold one, so efficiency is still against the DRAM floor. Best rows (per
   family and overall, scope "*") are upserted with floor time and efficiency.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna
from sqlalchemy.engine import Engine

from convtune.kernels.registry import KernelSpec, specs_for
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage.session import session_scope
from convtune.tuner.benchmark import Benchmarker, TrialResult
from convtune.tuner.efficiency import best_floor, efficiency
from convtune.tuner.neighbours import LocalSearch
from convtune.tuner.prune import Candidate, PruneResult, PruneSettings, prune, warm_start_order
from convtune.tuner.study import ConfigSpace, make_sampler, open_study, study_name

#: Why a search stopped, as stored in a job's ``stop_reason`` (the run keeps the sentence, e.g.
#: "time budget (20 s) reached"); ``cancelled`` and ``error`` are set by whoever interrupted the run.
STOP_CODES = ("budget_trials", "budget_s", "patience", "floor", "target", "exhausted", "no_survivors", "stored",
              "cancelled", "error")

TIE_TOLERANCE = 0.02
FINALISTS = 3
#: a family's best joins the finalists when within this factor of the fastest measured time
FAMILY_FINALIST_SLACK = 1.25
MAX_FINALISTS = 6
BATCH = 16  # trials asked and compiled together when the benchmarker can pre-compile (GPU)


@dataclass(frozen=True, slots=True)
class Progress:
    """After each trial: counts, search seconds so far (``elapsed_s``, pruning excluded) and the best so far."""

    trials: int
    budget_trials: int
    elapsed_s: float
    best_ms: float | None
    best_config: str | None
    efficiency: float | None
    last_config: str
    last_status: str
    reused: bool


@dataclass
class TuneResult:
    problem: ConvProblem
    device_name: str
    backend: str
    run_id: int
    best_config: str | None
    time_ms: float | None
    floor_ms: float
    efficiency: float | None
    trials: int = 0
    measured: int = 0
    reused: int = 0
    failed: int = 0
    stop_reason: str = ""
    stop_code: str = ""                # one of STOP_CODES
    predicted: bool = False
    resumed_from_db: bool = False
    prune_summary: str = ""
    elapsed_s: float = 0.0             # the whole call: pruning + search + final re-timing
    pruning_s: float = 0.0             # pruning alone (not charged to budget_s)
    search_s: float = 0.0              # the search loop, what budget_s limits
    statuses: dict[str, int] = field(default_factory=dict)
    floors_ms: dict[str, float] = field(default_factory=dict)       # per family: the bound's floor time
    # per family: the floor on the datasheet peaks, what binds the floor, and the ceilings each used
    datasheet_floors_ms: dict[str, float] = field(default_factory=dict)
    floor_bindings: dict[str, str] = field(default_factory=dict)
    ceilings_source: str = ""
    datasheet_source: str = ""
    family_best_ms: dict[str, float] = field(default_factory=dict)  # per family: its best measured time
    call_time_ms: float | None = None   # the best's hot-L2 re-time (operands left in L2), where it chose the best
    chosen_by: str = ""                 # "cold" or "hot": the final re-time whose times chose the best

    @property
    def bound_favours(self) -> str | None:
        """The family whose algorithm has the lowest floor time (ties: first registered)."""
        return min(self.floors_ms, key=lambda f: self.floors_ms[f]) if self.floors_ms else None

    @property
    def best_family(self) -> str | None:
        return self.best_config.split(".", 1)[0] if self.best_config else None

    @property
    def datasheet_floor_ms(self) -> float | None:
        """The best family's floor on the datasheet peaks (else the lowest), ms; None when unknown."""
        if not self.datasheet_floors_ms:
            return None
        fam = self.best_family
        return self.datasheet_floors_ms.get(fam, min(self.datasheet_floors_ms.values())) if fam else \
            min(self.datasheet_floors_ms.values())

    @property
    def efficiency_datasheet(self) -> float | None:
        """Floor on the datasheet peaks / best time (≤ :attr:`efficiency`)."""
        floor = self.datasheet_floor_ms
        return floor / self.time_ms if floor is not None and self.time_ms else None

    @property
    def binding(self) -> str | None:
        """What binds the reported floor: compute, memory (DRAM), memory (on-chip) or launch."""
        fam = self.best_family
        if fam in self.floor_bindings:
            return self.floor_bindings[fam]
        return self.floor_bindings.get(self.bound_favours or "", None)

    @property
    def launch_bound(self) -> bool:
        return self.binding == "launch"

    @property
    def tflops(self) -> float | None:
        return self.problem.flops / (self.time_ms * 1e-3) / 1e12 if self.time_ms else None

    @property
    def gbps(self) -> float | None:
        return self.problem.compulsory_bytes / (self.time_ms * 1e-3) / 1e9 if self.time_ms else None


@dataclass
class _Rows:
    device_id: int
    problem_id: int
    kernel_version_ids: dict[str, int]
    config_ids: dict[str, int] = field(default_factory=dict)


def _result_fields(result: TrialResult) -> dict[str, Any]:
    d = result.to_dict()
    d.pop("predicted", None)
    return d


def tune(problem: ConvProblem, benchmarker: Benchmarker, engine: Engine, *, families: list[str] | None = None,
         budget_trials: int = 200, budget_s: float = 300.0, patience: int = 60, epsilon: float = 0.05,
         sampler: str = "tpe", seed: int | None = 0, warm_start: int = 16, settings: PruneSettings | None = None,
         force: bool = False, progress: Callable[[Progress], None] | None = None,
         stop_at_ms: float | None = None, job_id: int | None = None, on_run: Callable[[int], None] | None = None,
         check: Callable[[], None] | None = None, fail_orphans: bool = False,
         prune_progress: Callable[[str, int], None] | None = None, pruned: PruneResult | None = None,
         clock: Callable[[], float] = time.monotonic) -> TuneResult:
    """Tune ``problem`` on ``benchmarker``'s device; every trial is stored through ``engine``.

    Args:
        stop_at_ms: end the search as soon as a configuration at or below that time is found.
        job_id: the service job this run tunes for (stored with the run, so the job's trials are counted
            from the measurements its runs stored).
        on_run: called with the new run's id as soon as the run is stored (before pruning).
        check: called often — through pruning, between phases, before each trial — and raises to stop
            (the worker's cancel and shutdown); the run then ends ``failed`` with the exception's message
            unless the caller marks it otherwise, and every trial stored so far stays.
        fail_orphans: mark the study's trials left ``RUNNING`` failed before searching (a worker died in
            them); the job queue guarantees that no other process tunes this study at the same time.
        budget_s: seconds of search after pruning (see the module docstring).
        prune_progress: called as pruning goes, ``(stage, count)``: see :func:`~convtune.tuner.prune.prune`.
        pruned: ``prune(problem, machine, specs_for(problem))`` made ahead for this benchmarker's machine (a
            whole-model tuning prunes the next layer while this one's trials run). Used only where the tuner
            would prune exactly that space: no ``families``, no ``settings``, a benchmarker that can measure any
            config; otherwise pruned anew.
        clock: seconds, monotonic; what the time budget and the reported seconds are measured with (tests
            inject one).
    """
    start = clock()
    device = benchmarker.device()
    machine = device.machine
    specs = specs_for(problem, families)
    if not specs:
        raise ValueError(f"no kernel family can run {problem.key()} (families={families})")
    available = benchmarker.available(problem)
    if available is not None and families is None:  # a replay table tunes the families it measured
        specs = [s for s in specs if any(k.startswith(s.kind + " ") for k in available)] or specs
    family_names = [s.family for s in specs]
    backend = benchmarker.backend
    kernel_versions = {s.kind: benchmarker.kernel_version(s) for s in specs}
    # a new kernel version starts a new study: trials of the old one say nothing about the new code
    name = study_name(device.name, problem.key(), family_names, backend,
                      [kernel_versions[s.kind][:12] for s in specs])
    best_rows = {s.family: best_floor(problem, machine, s) for s in specs}
    floors = {f: float(r["floor_s"]) for f, r in best_rows.items()}
    overall_floor_s = min(floors.values())
    # the epsilon stop rule uses the bandwidth/compute floors only: the launch floor is the least time we ever
    # measured, so a shape at it would stop at once (and a model backend's predictions sit below it)
    stop_floor_s = min(max(float(r["dram_floor_s"]), float(r["onchip_floor_s"])) for r in best_rows.values())
    floor_info: dict[str, Any] = {
        "datasheet_floors_ms": {f: float(r["datasheet_floor_s"]) * 1e3 for f, r in best_rows.items()},
        "floor_bindings": {f: str(r["binding"]) for f, r in best_rows.items()},
        "ceilings_source": machine.ceilings_source, "datasheet_source": machine.datasheet().ceilings_source}

    with session_scope(engine) as session:
        dev = repo.get_or_create_device(
            session, name=device.name, compute_capability=device.compute_capability, sm_count=device.sm_count,
            driver_version=device.driver_version, cuda_version=device.cuda_version,
            copy_bandwidth_bytes_per_s=machine.copy_bandwidth_bytes_per_s,
            fp32_peak_flops_per_s=machine.fp32_peak_flops_per_s, ceilings_source=machine.ceilings_source)
        prob = repo.get_or_create_problem(session, problem)
        rows = _Rows(dev.id, prob.id, {s.kind: repo.get_or_create_kernel_version(
            session, s.family, s.direction, kernel_versions[s.kind]).id for s in specs})
        if not force:
            done = [r for r in repo.list_runs(session, prob.id, device_id=dev.id)
                    if r.status == "finished" and r.backend == backend and r.families == ",".join(family_names)
                    and r.study_name == name and r.best_measurement_id is not None]
            if done:
                stored = _stored_result(session, problem, device.name, backend, done[0], overall_floor_s,
                                        clock() - start)
                for key, value in floor_info.items():
                    setattr(stored, key, value)
                return stored

    # the run exists before pruning (seconds on large spaces), so a job can name it and a crash leaves it visible
    with session_scope(engine) as session:
        run_id = repo.create_run(session, device_id=rows.device_id, problem_id=rows.problem_id, families=family_names,
                                 backend=backend, sampler=sampler, budget_trials=budget_trials, budget_s=budget_s,
                                 study_name=name, job_id=job_id).id
    if on_run is not None:
        on_run(run_id)
    result = TuneResult(problem, device.name, backend, run_id, None, None, overall_floor_s * 1e3, None,
                        floors_ms={f: s * 1e3 for f, s in floors.items()}, **floor_info)
    try:
        if pruned is None or families is not None or settings is not None or available is not None:
            pruned = prune(problem, machine, specs, settings, check=check, report=prune_progress, clock=clock)
        survivors = pruned.survivors
        if available is not None:  # a replay table answers only what was measured
            survivors = [c for c in survivors if c.key in available]
        result.prune_summary = pruned.summary()
        result.pruning_s = pruned.elapsed_s
        with session_scope(engine) as session:
            repo.update_run(session, run_id, pruning_s=pruned.elapsed_s, space_size=pruned.grid_size,
                            stage_survivors=pruned.stage_counts | {"replayable": len(survivors)})
            repo.record_pruning_decisions(session, run_id, rows.device_id, rows.problem_id,
                                          [(d.candidate.config, d.stage, d.reason, d.numbers)
                                           for d in pruned.decisions])
        if check is not None:
            check()
        search_start = clock()  # budget_s starts now: pruning is not search time
        _search(problem, benchmarker, engine, rows, result, survivors, name, sampler, seed, warm_start,
                budget_trials, budget_s, patience, epsilon, stop_floor_s, search_start, progress, available,
                stop_at_ms, check, fail_orphans, clock)
        result.search_s = clock() - search_start
        _finalize(problem, benchmarker, engine, rows, result, survivors, specs, floors)
    except BaseException as exc:
        try:
            with session_scope(engine) as session:
                repo.finish_run(session, run_id, "cancelled" if isinstance(exc, KeyboardInterrupt) else "failed",
                                f"{type(exc).__name__}: {exc}"[:255])
        except Exception:  # the database is away: the run stays "running" and its job's next claim ends it
            pass
        raise
    result.elapsed_s = clock() - start
    return result


def _search(problem: ConvProblem, benchmarker: Benchmarker, engine: Engine, rows: _Rows, result: TuneResult,
            survivors: list[Candidate], name: str, sampler: str, seed: int | None, warm_start: int,
            budget_trials: int, budget_s: float, patience: int, epsilon: float, floor_s: float, start: float,
            progress: Callable[[Progress], None] | None, available: set[str] | None = None,
            stop_at_ms: float | None = None, check: Callable[[], None] | None = None,
            fail_orphans: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
    if not survivors:
        result.stop_code = "no_survivors"
        result.stop_reason = ("no configuration survived pruning" if available is None else
                              "none of the surviving configurations is in the replay table")
        return
    space = ConfigSpace(survivors)
    # GPU benchmarkers compile ahead in parallel: ask a batch of trials, compile them all at once, then
    # measure one by one (TPE's constant liar keeps a batch diverse). Others take one trial at a time.
    prefetch = getattr(benchmarker, "prefetch", None)
    batch_size = max(BATCH, warm_start) if prefetch is not None else 1
    storage_url = engine.url.render_as_string(hide_password=False)
    study = open_study(storage_url, name, make_sampler(sampler, seed))
    if fail_orphans:
        fail_running_trials(study)
    evaluated: set[str] = set()
    local = LocalSearch(space)
    for t in study.trials:
        if "config" in t.user_attrs:
            evaluated.add(t.user_attrs["config"])
            if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None:
                local.record(t.user_attrs["config"], t.value)
    _adopt_stored(study, space, engine, rows, benchmarker.backend, evaluated, local)
    warm = [c for c in warm_start_order(survivors, warm_start) if c.key not in evaluated]
    for cand in warm:
        study.enqueue_trial(space.params_of(cand), skip_if_exists=True)
    # the enqueued warm start is asked first; the time budget may stop the search only once it is measured
    warm_trials = len(warm)
    by_key = {c.key: c for c in survivors}
    best_ms = math.inf
    since_best = 0
    pending: list[tuple[optuna.Trial, Candidate]] = []

    def close_pending() -> None:  # asked but never evaluated: no config attribute, so a later run may try them
        for trial, _ in pending:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        pending.clear()

    while True:
        elapsed = clock() - start
        # a batch already compiled is measured (milliseconds per config, after seconds of nvcc), and the
        # warm start always is: a job must not end before its best predictions were measured
        code, stop = _stop_check(result.trials, budget_trials, elapsed, budget_s, since_best, patience, best_ms,
                                 floor_s, epsilon,
                                 time_may_stop=not pending and result.trials >= max(1, warm_trials))
        if not stop and stop_at_ms is not None and best_ms <= stop_at_ms:
            code, stop = "target", f"target time {stop_at_ms:g} ms reached"
        if not stop and not pending:
            pending = _ask_batch(study, space, evaluated, min(batch_size, budget_trials - result.trials), local)
            if not pending:
                code, stop = "exhausted", "every surviving configuration was evaluated"
            elif prefetch is not None:
                prefetch(problem, [c.plan for _, c in pending])
        if stop:
            close_pending()
            result.stop_code, result.stop_reason = code, stop
            return
        if check is not None:
            try:
                check()
            except BaseException:
                close_pending()
                raise
        trial, cand = pending.pop(0)
        try:
            outcome, reused = _evaluate(problem, benchmarker, engine, rows, result.run_id, by_key[cand.key])
        except BaseException:
            # interrupted mid-trial: close the trials without their config, so a later run measures them
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            close_pending()
            raise
        trial.set_user_attr("config", cand.key)  # only once its outcome is stored
        result.trials += 1
        result.statuses[outcome.status] = result.statuses.get(outcome.status, 0) + 1
        result.reused += reused
        result.measured += not reused
        if outcome.ok:
            assert outcome.median_ms is not None  # an ok outcome has a time
            study.tell(trial, outcome.median_ms)
            local.record(cand.key, outcome.median_ms)
            if outcome.median_ms < best_ms * (1 - 1e-9):
                best_ms, since_best = outcome.median_ms, 0
                result.best_config, result.time_ms = cand.key, outcome.median_ms
                result.predicted = outcome.predicted
            else:
                since_best += 1
        else:
            result.failed += 1
            since_best += 1
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        if progress is not None:
            eff = floor_s / (best_ms * 1e-3) if math.isfinite(best_ms) else None
            progress(Progress(result.trials, budget_trials, clock() - start,
                              best_ms if math.isfinite(best_ms) else None, result.best_config, eff, cand.key,
                              outcome.status, reused))


def fail_running_trials(study: optuna.Study) -> int:
    """Mark the study's ``RUNNING`` trials failed (a worker died in them, or was cut off from the database);
    returns how many. Their configurations were never stored as evaluated, so they can be asked again."""
    orphans = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))]
    for t in orphans:
        study._storage.set_trial_state_values(t._trial_id, state=optuna.trial.TrialState.FAIL)
    return len(orphans)


def _adopt_stored(study: optuna.Study, space: ConfigSpace, engine: Engine, rows: _Rows, backend: str,
                  evaluated: set[str], local: LocalSearch) -> None:
    """Add to the study, as finished trials, the survivors stored on this device, kernel version and backend
    that it does not hold: a configuration measured by a worker that died before telling Optuna, or by
    another study of the problem. They are never measured again nor counted as this run's trials."""
    kv_ids = set(rows.kernel_version_ids.values())
    by_key = {c.key: c for fam in space.families for c in space.by_family[fam]}
    with session_scope(engine) as session:
        stored = [(m.config_id, m.status, m.median_ms)
                  for m in repo.measurements_for(session, device_id=rows.device_id, problem_id=rows.problem_id,
                                                 backend=backend) if m.kernel_version_id in kv_ids]
        keys = repo.config_keys_by_id(session, {config_id for config_id, _, _ in stored})
    for config_id, status, median_ms in stored:
        key = keys.get(config_id)
        cand = by_key.get(key) if key is not None else None
        if cand is None or cand.key in evaluated:
            continue
        ok = status == "ok" and median_ms is not None
        study.add_trial(optuna.trial.create_trial(
            params=space.params_of(cand), distributions=space.distributions_of(cand), value=median_ms if ok else None,
            state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL,
            user_attrs={"config": cand.key, "adopted": True}))
        evaluated.add(cand.key)
        if ok and median_ms is not None:
            local.record(cand.key, median_ms)


def _ask_batch(study: optuna.Study, space: ConfigSpace, evaluated: set[str], size: int,
               local: LocalSearch | None = None) -> list[tuple[optuna.Trial, Candidate]]:
    """Ask up to ``size`` trials, each mapped to a distinct unevaluated survivor. Once the enqueued warm
    start is used up and something was measured, ``local``'s share of them are its proposals."""
    batch = []
    for _ in range(size):
        if local is not None and local.measured and not study.get_trials(
                deepcopy=False, states=(optuna.trial.TrialState.WAITING,)) and local.next_is_local():
            proposal = local.propose(evaluated)
            if proposal is not None:  # asked as an enqueued trial, so the sampler learns from it too
                study.enqueue_trial(space.params_of(proposal))
        trial = study.ask()
        cand = space.nearest(space.suggest(trial), evaluated)
        if cand is None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            break
        evaluated.add(cand.key)
        batch.append((trial, cand))
    return batch


def _stop_reason(trials: int, budget_trials: int, elapsed: float, budget_s: float, since_best: int, patience: int,
                 best_ms: float, floor_s: float, epsilon: float, *, time_may_stop: bool = True) -> str:
    """The sentence of :func:`_stop_check` ("" while the search goes on)."""
    return _stop_check(trials, budget_trials, elapsed, budget_s, since_best, patience, best_ms, floor_s, epsilon,
                       time_may_stop=time_may_stop)[1]


def _stop_check(trials: int, budget_trials: int, elapsed: float, budget_s: float, since_best: int, patience: int,
                best_ms: float, floor_s: float, epsilon: float, *, time_may_stop: bool = True) -> tuple[str, str]:
    """(code of :data:`STOP_CODES`, sentence) of the first stop criterion met, ``("", "")`` for none;
    ``elapsed`` and ``budget_s`` are search seconds."""
    if trials >= budget_trials:
        return "budget_trials", f"trial budget ({budget_trials}) reached"
    if time_may_stop and elapsed >= budget_s:
        return "budget_s", f"time budget ({budget_s:g} s) reached"
    if since_best >= patience:
        return "patience", f"no improvement in {patience} trials"
    if math.isfinite(best_ms) and best_ms * 1e-3 <= floor_s * (1 + epsilon):
        return "floor", f"best time within {epsilon:.0%} of the bound's floor time"
    return "", ""


def _evaluate(problem: ConvProblem, benchmarker: Benchmarker, engine: Engine, rows: _Rows, run_id: int,
              cand: Candidate) -> tuple[TrialResult, bool]:
    """Answer from the database when this config was measured before on this device and kernel version."""
    kv_id = rows.kernel_version_ids[cand.spec.kind]
    with session_scope(engine) as session:
        config_id = rows.config_ids.get(cand.key) or repo.get_or_create_config(session, cand.config).id
        rows.config_ids[cand.key] = config_id
        found = repo.find_measurement(session, device_id=rows.device_id, problem_id=rows.problem_id,
                                      kernel_version_id=kv_id, config_id=config_id, backend=benchmarker.backend)
        if found is not None:
            return TrialResult.from_dict({c: getattr(found, c) for c in TrialResult.__dataclass_fields__}), True
    outcome = benchmarker.measure(problem, cand.plan)
    with session_scope(engine) as session:
        repo.record_measurement(session, device_id=rows.device_id, problem_id=rows.problem_id,
                                kernel_version_id=kv_id, config_id=config_id, tuning_run_id=run_id,
                                backend=benchmarker.backend, **_result_fields(outcome))
    return outcome, False


def _finalize(problem: ConvProblem, benchmarker: Benchmarker, engine: Engine, rows: _Rows, result: TuneResult,
              survivors: list[Candidate], specs: list[KernelSpec], floors: dict[str, float]) -> None:
    with session_scope(engine) as session:
        kv_ids = set(rows.kernel_version_ids.values())
        measured = [m for m in repo.measurements_for(session, device_id=rows.device_id, problem_id=rows.problem_id,
                                                     backend=benchmarker.backend)
                    if m.status == "ok" and m.median_ms is not None and m.kernel_version_id in kv_ids]
        keys = {m.id: repo.get_config(session, m.config_id).key for m in measured}
        for m in measured:
            family = keys[m.id].split(".", 1)[0]
            result.family_best_ms[family] = min(_ok_ms(m.median_ms), result.family_best_ms.get(family, math.inf))
        ranked = sorted(measured, key=lambda m: (m.median_ms, keys[m.id]))
        candidates = {c.key: c for c in survivors}
        finalists = _finalists([m for m in ranked if keys[m.id] in candidates], keys)
        if not finalists:
            repo.finish_run(session, result.run_id, "finished", result.stop_reason or "no configuration verified")
            return
    plans = [candidates[keys[m.id]].plan for m in finalists]
    hot: list[float] | None = None
    if benchmarker.backend == "gpu" and len(plans) > 1:
        times = [_ok_ms(r.median_ms) for r in benchmarker.retime(problem, plans)]
        if l2_resident(problem, benchmarker.device().machine):
            hot = [_ok_ms(r.median_ms) for r in benchmarker.retime(problem, plans, hot=True)]
    else:
        times = [_ok_ms(m.median_ms) for m in finalists]
    score = hot or times
    fastest = min(score)
    tied = [(keys[m.id], i) for i, (m, t) in enumerate(zip(finalists, score, strict=True))
            if t <= fastest * (1 + TIE_TOLERANCE)]
    best_key, best_i = min(tied)
    best_time, best_row = times[best_i], finalists[best_i]
    best_family = candidates[best_key].spec.family
    result.best_config, result.time_ms = best_key, best_time
    result.call_time_ms, result.chosen_by = (hot[best_i], "hot") if hot else (None, "cold")
    result.floor_ms = floors[best_family] * 1e3
    result.efficiency = efficiency(floors[best_family], best_time * 1e-3)
    with session_scope(engine) as session:
        config_id = repo.get_or_create_config(session, candidates[best_key].config).id
        # one best row per backend: a replayed or predicted best never replaces the GPU's
        for scope, floor_s in ((best_family, floors[best_family]), ("*", min(floors.values()))):
            repo.upsert_best_config(session, device_id=rows.device_id, problem_id=rows.problem_id, scope=scope,
                                    config_id=config_id, measurement_id=best_row.id, time_ms=best_time,
                                    floor_ms=floor_s * 1e3, efficiency=efficiency(floor_s, best_time * 1e-3),
                                    provisional=best_row.predicted, tuning_run_id=result.run_id,
                                    backend=benchmarker.backend)
        repo.update_run(session, result.run_id, best_measurement_id=best_row.id)
        repo.finish_run(session, result.run_id, "finished", result.stop_reason)


def _finalists(ranked: list[Any], keys: dict[int, str]) -> list[Any]:
    """The final re-time's measurements, from ``ranked`` (fastest first): the first :data:`FINALISTS`, then each
    other family's fastest within :data:`FAMILY_FINALIST_SLACK` of the first, :data:`MAX_FINALISTS` in all."""
    chosen = ranked[:FINALISTS]
    families = {keys[m.id].split(".", 1)[0] for m in chosen}
    for m in ranked[FINALISTS:]:
        family = keys[m.id].split(".", 1)[0]
        if len(chosen) >= MAX_FINALISTS or m.median_ms > FAMILY_FINALIST_SLACK * ranked[0].median_ms:
            break
        if family not in families:
            chosen.append(m)
            families.add(family)
    return chosen


def l2_resident(problem: ConvProblem, machine: Any) -> bool:
    """Whether the problem's operands (x, w, y in its storage dtype) fit in half of ``machine``'s L2: then a network
    leaves the layer's input in L2 (its predecessor just wrote it), and the op's back-to-back calls find it there."""
    return 0 < problem.operand_bytes <= machine.l2_bytes // 2


def _ok_ms(median_ms: float | None) -> float:
    """The time (ms) of an ok measurement, which always has one."""
    if median_ms is None:
        raise ValueError("an ok measurement without a time")
    return median_ms


def _stored_result(session: Any, problem: ConvProblem, device_name: str, backend: str, run: Any, floor_s: float,
                   elapsed_s: float) -> TuneResult:
    best = repo.find_best_config(session, problem_key=problem.key(), device_name=device_name, backend=backend)
    return TuneResult(problem, device_name, backend, run.id, best.config_key if best else None,
                      best.time_ms if best else None, best.floor_ms if best else floor_s * 1e3,
                      best.efficiency if best else None, trials=0, stop_reason="already tuned (stored result)",
                      stop_code="stored", predicted=bool(best.provisional) if best else False,
                      resumed_from_db=True, elapsed_s=elapsed_s)

"""The config resolver every op uses (convtune/ops/resolver.py) against a real database at head: the best row
*measured on a GPU* with the current kernel source serves; replay rows, model rows and rows of a stale kernel
version never do (the model's choice serves instead); answers are cached per process; the lookup switch, the
database URL settings and the service's remembered answers."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.kernels.winograd.launcher import WinogradFwdConfig
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig
from convtune.machine import MachineModel
from convtune.ops import resolver
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage.session import make_engine, session_scope

H200 = MachineModel.preset("h200")
PROBLEM = ConvProblem.parse("N=2 C=16 H=14 W=14 K=24 R=3 S=3 pad=1")
FAMILIES = ("direct", "winograd", "winograd_unfused")
MODEL_CHOICE = WinogradFwdConfig(tile_k=32)          # a sentinel: what the "model" answers in these tests
_UPSERT_PARAMS = inspect.signature(repo.upsert_best_config).parameters


@pytest.fixture
def db(db_url: Any) -> str:
    """The test database's URL as a string (the PostgreSQL fixture gives a URL object)."""
    return db_url if isinstance(db_url, str) else db_url.render_as_string(hide_password=False)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(resolver.DATABASE_URL_ENV, raising=False)
    monkeypatch.delenv(resolver.LOOKUP_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    resolver.set_lookup(None)
    resolver.use_database(None)
    resolver.forget_remembered()
    yield
    resolver.set_lookup(None)
    resolver.use_database(None)
    resolver.forget_remembered()


def _store(url: str, config: Any, backend: str, median_ms: float, scope: str, sha: str | None = None,
           device_name: str = H200.name, problem: ConvProblem = PROBLEM) -> None:
    """One measurement and its best row, as the tuner writes them (sha: the kernel version, default current)."""
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            device = repo.get_or_create_device(
                session, name=device_name, compute_capability="9.0", sm_count=132, driver_version="580.65",
                cuda_version="13.0", copy_bandwidth_bytes_per_s=4.19e12, fp32_peak_flops_per_s=50.9e12,
                ceilings_source="measured")
            prob = repo.get_or_create_problem(session, problem)
            kv = repo.get_or_create_kernel_version(session, config.family, "fwd",
                                                   sha or resolver.kernel_shas()[config.family])
            cfg = repo.get_or_create_config(session, config)
            m = repo.record_measurement(session, device_id=device.id, problem_id=prob.id, kernel_version_id=kv.id,
                                        config_id=cfg.id, backend=backend, status="ok", median_ms=median_ms)
            extra = {"backend": backend} if "backend" in _UPSERT_PARAMS else {}   # best rows keyed by backend too
            repo.upsert_best_config(session, device_id=device.id, problem_id=prob.id, scope=scope, config_id=cfg.id,
                                    measurement_id=m.id, time_ms=median_ms, floor_ms=0.001,
                                    efficiency=0.001 / median_ms, provisional=backend == "model",
                                    tuning_run_id=None, **extra)
    finally:
        engine.dispose()


def _resolve(url: str | None = None) -> resolver.Resolution:
    return resolver.resolve(PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE, url=url)


def test_the_gpu_row_serves_not_the_faster_replay_and_model_rows(db: str) -> None:
    _store(db, WinogradUnfusedConfig(), "replay", 0.010, "*")                 # fastest, but replayed
    _store(db, WinogradFwdConfig(), "model", 0.001, "winograd")              # a prediction
    _store(db, DirectFwdConfig(), "gpu", 0.050, "direct")                    # measured on this device
    found = _resolve(db)
    assert found.source == "database" and found.config == DirectFwdConfig()


def test_only_replay_and_model_rows_give_the_models_choice(db: str) -> None:
    _store(db, WinogradUnfusedConfig(), "replay", 0.010, "*")
    _store(db, WinogradFwdConfig(), "model", 0.001, "winograd")
    assert _resolve(db) == resolver.Resolution(MODEL_CHOICE, "model")


def test_a_stale_kernel_version_is_ignored(db: str) -> None:
    _store(db, DirectFwdConfig(), "gpu", 0.020, "*", sha="f" * 64)          # an older direct source
    assert _resolve(db).source == "model"
    resolver.clear_cache()
    _store(db, WinogradUnfusedConfig(), "gpu", 0.040, "winograd_unfused")   # current: serves
    found = _resolve(db)
    assert found.source == "database" and found.config == WinogradUnfusedConfig()


def test_only_the_callers_families_and_this_device_serve(db: str) -> None:
    _store(db, DirectFwdConfig(), "gpu", 0.050, "direct", device_name="NVIDIA A100-SXM4-80GB")
    assert _resolve(db).source == "model"
    _store(db, DirectFwdConfig(), "gpu", 0.050, "direct")
    resolver.clear_cache()
    assert resolver.resolve(PROBLEM, H200, ("winograd",), lambda: MODEL_CHOICE, url=db).source == "model"
    assert _resolve(db).config == DirectFwdConfig()


def test_answers_are_cached_in_process(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _store(db, DirectFwdConfig(), "gpu", 0.050, "direct")
    reads = []
    real = repo.find_measured_best
    monkeypatch.setattr(repo, "find_measured_best", lambda *a, **k: reads.append(1) or real(*a, **k))
    for _ in range(5):
        assert _resolve(db).source == "database"
    assert len(reads) == 1
    resolver.clear_cache()
    _resolve(db)
    assert len(reads) == 2


def test_lookups_can_be_turned_off(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _store(db, DirectFwdConfig(), "gpu", 0.050, "direct")
    monkeypatch.setenv(resolver.DATABASE_URL_ENV, db)
    assert _resolve().source == "database"
    monkeypatch.setenv(resolver.LOOKUP_ENV, "off")
    assert _resolve().source == "model"
    resolver.set_lookup(True)                       # the function overrides the environment
    assert _resolve().source == "database"
    resolver.set_lookup(False)
    assert _resolve().source == "model"


def test_which_database(db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolver.database_url() is None and not (tmp_path / "xdg").exists()   # never created
    _store(db, DirectFwdConfig(), "gpu", 0.050, "direct")
    assert _resolve().source == "model"             # no database known
    monkeypatch.setenv(resolver.DATABASE_URL_ENV, db)
    assert _resolve().source == "database"
    other = f"sqlite:///{tmp_path / 'empty.db'}"
    from convtune.storage import upgrade

    upgrade(other)
    assert _resolve(url=other).source == "model"    # the explicit argument wins over the environment
    resolver.use_database(other)
    assert _resolve().source == "model"
    assert resolver.database_url() == other


def test_an_unreadable_database_gives_the_models_choice(tmp_path: Path) -> None:
    assert _resolve(f"sqlite:///{tmp_path / 'no_schema.db'}").source == "model"


def test_a_remembered_service_answer_wins_when_it_fits(db: str) -> None:
    _store(db, DirectFwdConfig(), "gpu", 0.050, "direct")
    resolver.remember(PROBLEM, H200.name, WinogradUnfusedConfig().key())
    assert _resolve(db) == resolver.Resolution(WinogradUnfusedConfig(), "service")
    resolver.remember(PROBLEM, H200.name, "direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=3 "
                                          "thread_k=8 stages=2 vec=1 splits=1")   # invalid: thread_w ∤ tile_w
    assert _resolve(db).source == "database"


def test_find_measured_best_considers_every_scope(db: str) -> None:
    """The query itself: a stale overall best does not hide a current per-family best."""
    _store(db, DirectFwdConfig(), "gpu", 0.020, "*", sha="e" * 64)
    _store(db, WinogradUnfusedConfig(), "gpu", 0.040, "winograd_unfused")
    engine = make_engine(db)
    try:
        with session_scope(engine) as session:
            view = repo.find_measured_best(session, problem_key=PROBLEM, device_name=H200.name,
                                           kernel_shas=resolver.kernel_shas())
            assert view is not None and view.scope == "winograd_unfused" and view.time_ms == 0.040
            assert repo.find_measured_best(session, problem_key=PROBLEM, device_name=H200.name,
                                           kernel_shas={}) is None
    finally:
        engine.dispose()


def test_a_replay_row_and_a_gpu_row_of_one_problem_serve_the_gpu_row(db: str) -> None:
    from best_rows import GPU_CONFIG, replay_and_gpu

    replay_and_gpu(db)  # same problem, device and scope; the replayed row is faster
    found = resolver.resolve(PROBLEM, H200, ("direct",), lambda: MODEL_CHOICE, url=db)
    assert found.source == "database" and found.config == GPU_CONFIG


# ---- precision classes: a strict config serves tf32, a tf32 config never serves strict ---------------------------
def _resolve_problem(problem: ConvProblem, db: str) -> resolver.Resolution:
    return resolver.resolve(problem, H200, ("direct",), lambda: MODEL_CHOICE, url=db)


def test_a_faster_tf32_row_never_serves_the_strict_problem(db: str) -> None:
    from best_rows import GPU_CONFIG, TF32_CONFIG, TF32_PROBLEM, strict_and_tf32

    strict_and_tf32(db)  # the tf32 row is 2.5× faster
    assert _resolve_problem(PROBLEM, db) == resolver.Resolution(GPU_CONFIG, "database")
    assert _resolve_problem(TF32_PROBLEM, db) == resolver.Resolution(TF32_CONFIG, "database")
    engine = make_engine(db)
    try:
        with session_scope(engine) as session:
            strict = repo.find_measured_best(session, problem_key=PROBLEM.key(), device_name=H200.name,
                                             kernel_shas=resolver.kernel_shas())
            assert strict is not None and strict.problem_key == PROBLEM.key() and strict.config_key == GPU_CONFIG.key()
    finally:
        engine.dispose()


def test_a_tf32_problem_is_served_the_faster_strict_row(db: str) -> None:
    from best_rows import GPU_CONFIG, GPU_MS, TF32_PROBLEM, strict_and_tf32

    strict_and_tf32(db, tf32_ms=2 * GPU_MS)  # here the strict row is the faster
    found = _resolve_problem(TF32_PROBLEM, db)
    assert found == resolver.Resolution(GPU_CONFIG, "database")


def test_a_tf32_problem_without_rows_of_its_own_is_served_the_strict_row(db: str) -> None:
    from best_rows import GPU_CONFIG, TF32_PROBLEM, store

    from convtune.storage import upgrade

    upgrade(db)
    store(db, GPU_CONFIG, "gpu", 0.05)
    assert _resolve_problem(TF32_PROBLEM, db) == resolver.Resolution(GPU_CONFIG, "database")
    resolver.clear_cache()
    assert _resolve_problem(PROBLEM.replace(dtype="float16"), db).source == "model"  # another class: not served


def test_strict_and_tf32_answers_are_cached_apart(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from best_rows import TF32_PROBLEM, strict_and_tf32

    strict_and_tf32(db)
    reads = []
    real = repo.find_measured_best
    monkeypatch.setattr(repo, "find_measured_best", lambda *a, **k: reads.append(k["problem_key"]) or real(*a, **k))
    for _ in range(3):
        _resolve_problem(PROBLEM, db)
        _resolve_problem(TF32_PROBLEM, db)
    assert reads == [PROBLEM.key(), TF32_PROBLEM.key()]   # one query each, both rows' keys in the tf32 one


def test_a_remembered_strict_answer_serves_tf32_not_the_reverse(db: str) -> None:
    from best_rows import TF32_PROBLEM

    resolver.remember(TF32_PROBLEM, H200.name, WinogradUnfusedConfig().key())
    assert _resolve() == resolver.Resolution(MODEL_CHOICE, "model")          # the strict problem: not served
    resolver.remember(PROBLEM, H200.name, DirectFwdConfig().key())
    got = resolver.resolve(TF32_PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE, url=db)
    assert got == resolver.Resolution(WinogradUnfusedConfig(), "service")    # its own answer first
    resolver.forget_remembered()
    resolver.remember(PROBLEM, H200.name, DirectFwdConfig().key())
    got = resolver.resolve(TF32_PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE, url=db)
    assert got == resolver.Resolution(DirectFwdConfig(), "service")

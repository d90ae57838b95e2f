"""The ``best_configs.backend`` revision (7c1d2e3f4a5b) on a database holding rows written at the revision before
it (32dabd296154), on SQLite and PostgreSQL: every existing best row gets the backend of its measurement
(provisional rows without one: model; others: gpu), the unique key then admits one row per backend, and the
readers serve the GPU row as measured."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import URL, MetaData, insert, select

from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.ops import resolver
from convtune.problem import ConvProblem
from convtune.storage import check, current_revision, head_revision, make_engine, session_scope, upgrade
from convtune.storage import queries as repo

BEFORE = "32dabd296154"
PROBLEM = ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 pad=1")
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
GPU, REPLAY, MODEL, ORPHAN = (DirectFwdConfig(tile_k=k) for k in (64, 32, 16, 8))


def _old_rows(url: str | URL) -> dict[str, int]:
    """Rows as the code of revision 32dabd296154 wrote them (no backend on best rows, no is_admin, no job_id)."""
    engine = make_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine)
        t = meta.tables
        assert "backend" not in t["best_configs"].c and "is_admin" not in t["api_keys"].c
        with engine.begin() as conn:
            def add(table: str, **values: Any) -> int:
                return conn.execute(insert(t[table]).values(**values).returning(t[table].c.id)).scalar_one()

            dev = add("devices", name="NVIDIA H200", compute_capability="9.0", sm_count=132, driver_version="580",
                      cuda_version="13.0", copy_bandwidth_bytes_per_s=4.19e12, fp32_peak_flops_per_s=50.9e12,
                      ceilings_source="measured", created_at=NOW, updated_at=NOW)
            prob = add("problems", key=PROBLEM.key(), spec=PROBLEM.to_dict(), flops=PROBLEM.flops,
                       compulsory_bytes=PROBLEM.compulsory_bytes, created_at=NOW)
            kv = add("kernel_versions", family="direct", direction="fwd",
                     source_sha256=resolver.kernel_shas()["direct"], created_at=NOW)
            ids = {}
            for name, config, backend, ms in (("gpu", GPU, "gpu", 0.05), ("replay", REPLAY, "replay", 0.01),
                                              ("model", MODEL, "model", 0.001)):
                cfg = add("configs", kind=config.kind, key=config.key(), params=config.to_dict(), created_at=NOW)
                m = add("measurements", device_id=dev, problem_id=prob, kernel_version_id=kv, config_id=cfg,
                        backend=backend, predicted=backend == "model", status="ok", median_ms=ms, created_at=NOW)
                # before the revision one row per (device, problem, scope): each backend's best in its own scope
                ids[name] = add("best_configs", device_id=dev, problem_id=prob, scope={"gpu": "*"}.get(name, name),
                                config_id=cfg, measurement_id=m, time_ms=ms, floor_ms=0.001, efficiency=0.001 / ms,
                                provisional=backend == "model", created_at=NOW, updated_at=NOW)
            cfg = add("configs", kind=ORPHAN.kind, key=ORPHAN.key(), params=ORPHAN.to_dict(), created_at=NOW)
            for scope, provisional in (("orphan_predicted", True), ("orphan_measured", False)):  # measurement gone
                ids[scope] = add("best_configs", device_id=dev, problem_id=prob, scope=scope, config_id=cfg,
                                 measurement_id=None, time_ms=1.0, floor_ms=0.001, efficiency=0.001,
                                 provisional=provisional, created_at=NOW, updated_at=NOW)
            ids["key"] = add("api_keys", name="old", key_hash="0" * 64, prefix="ct_00000", max_queued_jobs=5,
                             created_at=NOW)
            ids["run"] = add("tuning_runs", device_id=dev, problem_id=prob, families="direct", backend="gpu",
                             sampler="tpe", status="finished", stage_survivors={}, trials_done=3, started_at=NOW,
                             created_at=NOW, updated_at=NOW)
            ids["device"] = dev
            ids["problem"] = prob
        return ids
    finally:
        engine.dispose()


def test_upgrade_gives_old_best_rows_their_backend(empty_database_url: str | URL) -> None:
    url = empty_database_url
    upgrade(url, BEFORE)
    assert current_revision(url) == BEFORE
    ids = _old_rows(url)
    upgrade(url)
    assert current_revision(url) == head_revision()
    check(url)  # the migrated schema is the models'

    engine = make_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine)
        best, keys, runs = meta.tables["best_configs"], meta.tables["api_keys"], meta.tables["tuning_runs"]
        with engine.connect() as conn:
            backends = dict(conn.execute(select(best.c.id, best.c.backend)).all())
            assert conn.execute(select(keys.c.is_admin).where(keys.c.id == ids["key"])).scalar_one() is False
            assert conn.execute(select(runs.c.job_id).where(runs.c.id == ids["run"])).scalar_one() is None
        assert backends == {ids["gpu"]: "gpu", ids["replay"]: "replay", ids["model"]: "model",
                            ids["orphan_predicted"]: "model", ids["orphan_measured"]: "gpu"}

        with session_scope(engine) as session:
            # the readers: the GPU row is the answer and the only measured one
            views = repo.list_best_configs(session, problem_key=PROBLEM)
            assert [(v.scope, v.backend, v.measured_here) for v in views][:1] == [("*", "gpu", True)]
            assert {v.scope: v.measured_here for v in views}["replay"] is False
            found = repo.find_measured_best(session, problem_key=PROBLEM, device_name="NVIDIA H200",
                                            kernel_shas={"direct": resolver.kernel_shas()["direct"]})
            assert found is not None and found.config_key == GPU.key()
            # one row per backend now: a replayed overall best beside the measured one, which stays
            cfg = repo.find_config(session, REPLAY)
            repo.upsert_best_config(session, device_id=ids["device"], problem_id=ids["problem"], scope="*",
                                    config_id=cfg.id, measurement_id=None, time_ms=0.01, floor_ms=0.001,
                                    efficiency=0.1, provisional=False, tuning_run_id=None, backend="replay")
        with session_scope(engine) as session:
            overall = repo.list_best_configs(session, problem_key=PROBLEM, scope="*")
            assert [(v.backend, v.config_key) for v in overall] == [("gpu", GPU.key()), ("replay", REPLAY.key())]
    finally:
        engine.dispose()


def test_downgrade_keeps_the_gpu_row_of_each_scope(empty_database_url: str | URL) -> None:
    from best_rows import store

    url = empty_database_url
    upgrade(url)
    store(url, REPLAY, "replay", 0.01, problem=PROBLEM)
    store(url, GPU, "gpu", 0.05, problem=PROBLEM)
    from convtune.storage import downgrade

    downgrade(url, BEFORE)
    engine = make_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine)
        best, configs = meta.tables["best_configs"], meta.tables["configs"]
        with engine.connect() as conn:
            kept = conn.execute(select(configs.c.key).join(best, best.c.config_id == configs.c.id)).scalars().all()
        assert kept == [GPU.key()]
    finally:
        engine.dispose()
    upgrade(url)

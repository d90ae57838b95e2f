"""Best rows as the tuner writes them, of any backend (imported by name by the tests of every reader: the
resolver, the API, ``convtune best``, ``convtune export``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import URL

from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.ops import resolver
from convtune.problem import ConvProblem
from convtune.storage import make_engine, session_scope, upgrade
from convtune.storage import queries as repo

H200 = "NVIDIA H200"
PROBLEM = ConvProblem.parse("N=2 C=16 H=14 W=14 K=24 R=3 S=3 pad=1")
#: measured on the GPU, slower
GPU_CONFIG = DirectFwdConfig()
#: replayed from a recorded table, faster: it must never pass for the measured answer
REPLAY_CONFIG = DirectFwdConfig(tile_h=8, tile_k=32)
GPU_MS, REPLAY_MS = 0.050, 0.010


def url_text(url: str | URL) -> str:
    return url if isinstance(url, str) else url.render_as_string(hide_password=False)


def store(url: str | URL, config: Any, backend: str, median_ms: float, scope: str = "*", *, sha: str | None = None,
          device_name: str = H200, problem: ConvProblem = PROBLEM, floor_ms: float = 0.001) -> None:
    """One measurement and its best row (``sha``: the kernel version, default the family's current source)."""
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
            repo.upsert_best_config(session, device_id=device.id, problem_id=prob.id, scope=scope, config_id=cfg.id,
                                    measurement_id=m.id, time_ms=median_ms, floor_ms=floor_ms,
                                    efficiency=floor_ms / median_ms, provisional=backend == "model",
                                    tuning_run_id=None, backend=backend)
    finally:
        engine.dispose()


def replay_and_gpu(url: str | URL, *, migrate: bool = True) -> None:
    """The case every reader must get right: a replayed row and a GPU row of the same problem, device and scope,
    the replayed one faster."""
    if migrate:
        upgrade(url)
    store(url, REPLAY_CONFIG, "replay", REPLAY_MS)
    store(url, GPU_CONFIG, "gpu", GPU_MS)


#: the tf32 twin of PROBLEM and a config measured for it, faster than GPU_CONFIG measured for the strict PROBLEM: a
#: strict lookup must never answer it
TF32_PROBLEM = PROBLEM.replace(math="tf32")
TF32_CONFIG = DirectFwdConfig(tile_h=8, tile_w=16)
TF32_MS = 0.020


def strict_and_tf32(url: str | URL, *, tf32_ms: float = TF32_MS, migrate: bool = True) -> None:
    """A GPU row of the strict PROBLEM (GPU_CONFIG, GPU_MS) and one of its tf32 twin (TF32_CONFIG, ``tf32_ms``; by
    default the faster) on the same device and scope."""
    if migrate:
        upgrade(url)
    store(url, GPU_CONFIG, "gpu", GPU_MS)
    store(url, TF32_CONFIG, "gpu", tf32_ms, problem=TF32_PROBLEM)

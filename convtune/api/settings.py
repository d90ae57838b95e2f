"""Settings of the service (pydantic-settings): every field can be set by ``CONVTUNE_<FIELD>`` in the environment.

Example::

    CONVTUNE_DATABASE_URL=postgresql+psycopg2://tuner@db/convtune CONVTUNE_REQUIRE_KEY_FOR_READS=true convtune serve
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from convtune.storage.session import default_database_url
from convtune.vocabulary import BACKENDS

if TYPE_CHECKING:  # the type checker sees a backend as str; pydantic validates against the tuple
    Backend = str
else:
    Backend = Literal[BACKENDS]


def server_timezone() -> str:
    """The IANA name of this machine's time zone: ``$TZ``, else ``/etc/timezone``, else the
    ``/etc/localtime`` link, else ``"UTC"``."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    with contextlib.suppress(OSError):
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    with contextlib.suppress(OSError):
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    for name in candidates:
        if name and _is_zone(name):
            return name
    return "UTC"


def _is_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


class Settings(BaseSettings):
    """What ``create_app`` and ``convtune serve`` run with (field names are those of docs/service.md)."""

    model_config = SettingsConfigDict(env_prefix="CONVTUNE_", extra="ignore")

    database_url: str = Field(default_factory=default_database_url,
                              description="SQLAlchemy URL; default $CONVTUNE_DATABASE_URL, else a per-user SQLite "
                                          "file")
    require_key_for_reads: bool = Field(False, description="GET endpoints need a key too")
    max_request_bytes: int = Field(65536, ge=1024, description="larger request bodies are refused with 413")
    default_budget_trials: int = Field(200, ge=1)
    default_budget_s: float = Field(300.0, gt=0)
    timezone: str = Field(default_factory=server_timezone,
                          description="IANA time zone batch windows are read in when a request names none "
                                      "(default: the server's)")
    backend: Backend = Field("gpu", description="backend of the jobs the API queues; 'model' for demos without a GPU")
    worker_in_process: bool = Field(False, description="run one worker thread inside the API process")
    default_device: str = Field("h200", description="machine preset of provisional, model-predicted configs")
    max_wait_s: float = Field(600.0, gt=0, description="upper bound of POST /v1/tune?wait=SECONDS")
    replay_path: str | None = Field(None, description="timing table of the in-process worker with backend 'replay'")
    # ---- load: what a request may cost, and how many may work at once (docs/service.md, "Limits")
    max_concurrent: int = Field(32, ge=1, le=100_000, description="requests inside the server at once; one more is "
                                                                  "answered 503 + Retry-After at the door "
                                                                  "(/healthz never is)")
    max_in_flight: int = Field(8, ge=1, le=512, description="requests working on the database at once (the "
                                                             "connection pool holds this many plus the worker's)")
    max_waiting: int = Field(256, ge=0, le=100_000, description="requests waiting for a turn at the database; one "
                                                                "more is answered 503 + Retry-After at once")
    queue_timeout_s: float = Field(2.0, gt=0, le=60, description="how long a request waits for its turn before 503")
    db_pool_timeout_s: float = Field(5.0, gt=0, le=120, description="connection checkout timeout")
    answer_cache_s: float = Field(1.0, ge=0, le=60, description="seconds a stored (200) answer is served from "
                                                                "memory before the database is asked again "
                                                                "(0: always ask)")
    key_cache_s: float = Field(1.0, ge=0, le=60, description="seconds an API key that checked out is trusted "
                                                             "without the database (a revoked key stops working "
                                                             "within this; 0: always ask)")
    predict_budget_s: float = Field(0.5, gt=0, le=30, description="CPU seconds the analytic model may rank "
                                                                  "configurations for one request's provisional "
                                                                  "answer; the rest is finished in the background")
    worker_heartbeat_s: float = Field(10.0, gt=0, description="the in-process worker's heartbeat interval")
    worker_stale_after_s: float = Field(120.0, gt=0, description="a running job whose heartbeat is this old is "
                                                                 "claimed again")

    @model_validator(mode="after")
    def _heartbeat_below_stale(self) -> Settings:
        if self.worker_heartbeat_s >= self.worker_stale_after_s:
            raise ValueError(f"worker_heartbeat_s ({self.worker_heartbeat_s:g}) must be below worker_stale_after_s "
                             f"({self.worker_stale_after_s:g}), or live jobs would be claimed again")
        return self

    @field_validator("default_device")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        from convtune.machine import PRESETS

        if value.lower() not in PRESETS:
            raise ValueError(f"{value!r} is not a machine preset: allowed {', '.join(sorted(PRESETS))}")
        return value.lower()

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if not _is_zone(value):
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC')")
        return value

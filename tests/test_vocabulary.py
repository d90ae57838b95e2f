"""convtune.vocabulary is the one list of each stored word: the copies that remain are the same objects."""

from __future__ import annotations

from typing import get_args

from convtune import vocabulary as v
from convtune.api import schemas, settings
from convtune.storage import models
from convtune.storage import queries as repo


def test_the_api_types_are_built_from_the_vocabulary() -> None:
    assert get_args(schemas.Backend) == get_args(settings.Backend) == v.BACKENDS == ("gpu", "replay", "model")
    assert get_args(schemas.JobStatus) == v.JOB_STATUSES
    assert get_args(schemas.BatchStatus) == v.BATCH_STATUSES


def test_the_old_names_are_the_vocabulary() -> None:
    assert repo.FINAL_JOB_STATUSES is v.FINAL_JOB_STATUSES and repo.ACTIVE_JOB_STATUSES is v.ACTIVE_JOB_STATUSES
    assert repo.FINISHED_RUN_STATUSES is v.FINISHED_RUN_STATUSES
    assert models.BACKENDS is v.BACKENDS and models.OVERALL_SCOPE == v.OVERALL_SCOPE == "*"
    assert models.JOB_STATUSES is v.JOB_STATUSES and models.RUN_STATUSES is v.RUN_STATUSES


def test_the_sets_are_consistent() -> None:
    assert set(v.FINAL_JOB_STATUSES) | set(v.ACTIVE_JOB_STATUSES) == set(v.JOB_STATUSES)
    assert not set(v.FINAL_JOB_STATUSES) & set(v.ACTIVE_JOB_STATUSES)
    assert set(v.BATCH_STATUSES) <= set(v.JOB_STATUSES) and set(v.FINAL_BATCH_STATUSES) <= set(v.BATCH_STATUSES)
    assert set(v.FINISHED_RUN_STATUSES) | {v.RUN_RUNNING} == set(v.RUN_STATUSES)
    assert set(v.DEMO_BACKENDS) < set(v.BACKENDS) and v.DIRECTIONS == ("fwd", "dgrad", "wgrad")

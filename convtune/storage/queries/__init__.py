"""Every query convtune makes, in one package: the tuner, the worker, the API and the CLI call these, never SQL
of their own. This front only re-exports (call ``queries.create_job(...)``); the queries live in

* :mod:`~convtune.storage.queries.results` — devices, problems, configs, kernel versions, tuning runs,
  measurements, pruning decisions, best configs, history pages, export rows;
* :mod:`~convtune.storage.queries.jobs` — API keys, the job queue the workers claim from, batches, queue statistics.

Conventions (both modules): a session in, nothing committed; ``find_*`` -> ``None``, ``get_*`` ->
:class:`~convtune.errors.NotFound`. ``jobs`` may import ``results``, never the other way.
"""

from convtune.storage.queries.jobs import ACTIVE_JOB_STATUSES as ACTIVE_JOB_STATUSES
from convtune.storage.queries.jobs import DEFAULT_MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS
from convtune.storage.queries.jobs import DEFAULT_STALE_AFTER_S as DEFAULT_STALE_AFTER_S
from convtune.storage.queries.jobs import FINAL_JOB_STATUSES as FINAL_JOB_STATUSES
from convtune.storage.queries.jobs import PREFIX_CHARS as PREFIX_CHARS
from convtune.storage.queries.jobs import SECRET_PREFIX as SECRET_PREFIX
from convtune.storage.queries.jobs import Window as Window
from convtune.storage.queries.jobs import batch_jobs as batch_jobs
from convtune.storage.queries.jobs import batch_status as batch_status
from convtune.storage.queries.jobs import cancel_batch as cancel_batch
from convtune.storage.queries.jobs import check_timezone as check_timezone
from convtune.storage.queries.jobs import claim_job as claim_job
from convtune.storage.queries.jobs import count_active_jobs as count_active_jobs
from convtune.storage.queries.jobs import count_job_trials as count_job_trials
from convtune.storage.queries.jobs import create_api_key as create_api_key
from convtune.storage.queries.jobs import create_batch as create_batch
from convtune.storage.queries.jobs import create_job as create_job
from convtune.storage.queries.jobs import expire_claims as expire_claims
from convtune.storage.queries.jobs import find_active_job as find_active_job
from convtune.storage.queries.jobs import find_api_key as find_api_key
from convtune.storage.queries.jobs import find_api_key_by_name as find_api_key_by_name
from convtune.storage.queries.jobs import find_batch as find_batch
from convtune.storage.queries.jobs import find_job as find_job
from convtune.storage.queries.jobs import finish_job as finish_job
from convtune.storage.queries.jobs import get_api_key as get_api_key
from convtune.storage.queries.jobs import get_batch as get_batch
from convtune.storage.queries.jobs import get_job as get_job
from convtune.storage.queries.jobs import hash_secret as hash_secret
from convtune.storage.queries.jobs import heartbeat as heartbeat
from convtune.storage.queries.jobs import in_window as in_window
from convtune.storage.queries.jobs import is_eligible as is_eligible
from convtune.storage.queries.jobs import job_counts as job_counts
from convtune.storage.queries.jobs import list_api_keys as list_api_keys
from convtune.storage.queries.jobs import list_batches as list_batches
from convtune.storage.queries.jobs import list_jobs as list_jobs
from convtune.storage.queries.jobs import open_job_runs as open_job_runs
from convtune.storage.queries.jobs import parse_window as parse_window
from convtune.storage.queries.jobs import queue_stats as queue_stats
from convtune.storage.queries.jobs import release_job as release_job
from convtune.storage.queries.jobs import request_cancel as request_cancel
from convtune.storage.queries.jobs import revoke_api_key as revoke_api_key
from convtune.storage.queries.jobs import running_worker_ids as running_worker_ids
from convtune.storage.queries.results import FINISHED_RUN_STATUSES as FINISHED_RUN_STATUSES
from convtune.storage.queries.results import MEASUREMENT_IDENTITY as MEASUREMENT_IDENTITY
from convtune.storage.queries.results import PROVENANCE as PROVENANCE
from convtune.storage.queries.results import BestConfigView as BestConfigView
from convtune.storage.queries.results import ExportRow as ExportRow
from convtune.storage.queries.results import PruningInput as PruningInput
from convtune.storage.queries.results import best_measurement as best_measurement
from convtune.storage.queries.results import config_keys_by_id as config_keys_by_id
from convtune.storage.queries.results import count_problem_measurements as count_problem_measurements
from convtune.storage.queries.results import count_problem_pruning_decisions as count_problem_pruning_decisions
from convtune.storage.queries.results import create_run as create_run
from convtune.storage.queries.results import find_best_config as find_best_config
from convtune.storage.queries.results import find_config as find_config
from convtune.storage.queries.results import find_device as find_device
from convtune.storage.queries.results import find_kernel_version as find_kernel_version
from convtune.storage.queries.results import find_measured_best as find_measured_best
from convtune.storage.queries.results import find_measurement as find_measurement
from convtune.storage.queries.results import find_problem as find_problem
from convtune.storage.queries.results import find_pruning_decision as find_pruning_decision
from convtune.storage.queries.results import find_run as find_run
from convtune.storage.queries.results import finish_run as finish_run
from convtune.storage.queries.results import get_best_config as get_best_config
from convtune.storage.queries.results import get_config as get_config
from convtune.storage.queries.results import get_device as get_device
from convtune.storage.queries.results import get_measurement as get_measurement
from convtune.storage.queries.results import get_or_create_config as get_or_create_config
from convtune.storage.queries.results import get_or_create_configs as get_or_create_configs
from convtune.storage.queries.results import get_or_create_device as get_or_create_device
from convtune.storage.queries.results import get_or_create_kernel_version as get_or_create_kernel_version
from convtune.storage.queries.results import get_or_create_machine_device as get_or_create_machine_device
from convtune.storage.queries.results import get_or_create_problem as get_or_create_problem
from convtune.storage.queries.results import get_problem as get_problem
from convtune.storage.queries.results import get_run as get_run
from convtune.storage.queries.results import json_safe as json_safe
from convtune.storage.queries.results import list_best_configs as list_best_configs
from convtune.storage.queries.results import list_devices as list_devices
from convtune.storage.queries.results import list_export_rows as list_export_rows
from convtune.storage.queries.results import list_problems as list_problems
from convtune.storage.queries.results import list_runs as list_runs
from convtune.storage.queries.results import measurements_for as measurements_for
from convtune.storage.queries.results import page_problem_measurements as page_problem_measurements
from convtune.storage.queries.results import page_problem_pruning_decisions as page_problem_pruning_decisions
from convtune.storage.queries.results import pruning_stage_counts as pruning_stage_counts
from convtune.storage.queries.results import record_measurement as record_measurement
from convtune.storage.queries.results import record_pruning_decisions as record_pruning_decisions
from convtune.storage.queries.results import serving_keys as serving_keys
from convtune.storage.queries.results import update_device_ceilings as update_device_ceilings
from convtune.storage.queries.results import update_run as update_run
from convtune.storage.queries.results import upsert_best_config as upsert_best_config

"""The words convtune stores and speaks: statuses, backends, scopes, directions.

One place for each list, so the database's CHECK constraints, the API's schemas, the CLI's choices and the
worker agree. The stored values are these strings; changing one is a schema migration, not an edit here.
This module imports nothing of convtune (everything may import it).

A job's cancel request is no status: it is the job's boolean ``cancel_requested`` (a running job that was
asked to stop is still ``running`` until its worker ends it ``cancelled``).
"""

from __future__ import annotations

from typing import Final

# ---- backends --------------------------------------------------------------------------------------------
#: What measured a result: this machine's GPU, a recorded timing table, or the analytic model.
BACKEND_GPU: Final = "gpu"
BACKEND_REPLAY: Final = "replay"
BACKEND_MODEL: Final = "model"
BACKENDS: Final = (BACKEND_GPU, BACKEND_REPLAY, BACKEND_MODEL)
#: Backends whose results are no measurement of this machine (``convtune tune`` keeps them in a demo file).
DEMO_BACKENDS: Final = (BACKEND_REPLAY, BACKEND_MODEL)

# ---- scopes ----------------------------------------------------------------------------------------------
#: The ``scope`` of the overall best configuration of a (device, problem); other scopes are family names.
OVERALL_SCOPE: Final = "*"

# ---- directions ------------------------------------------------------------------------------------------
#: The convolution passes a kernel computes: forward, gradient of the input, gradient of the weights.
DIRECTIONS: Final = ("fwd", "dgrad", "wgrad")

# ---- jobs and batches (the service's queue) --------------------------------------------------------------
JOB_QUEUED: Final = "queued"
JOB_RUNNING: Final = "running"
JOB_FINISHED: Final = "finished"
JOB_FAILED: Final = "failed"
JOB_CANCELLED: Final = "cancelled"
JOB_STATUSES: Final = (JOB_QUEUED, JOB_RUNNING, JOB_FINISHED, JOB_FAILED, JOB_CANCELLED)
#: Statuses that end a job.
FINAL_JOB_STATUSES: Final = (JOB_FINISHED, JOB_FAILED, JOB_CANCELLED)
#: Statuses of a job not ended (they count against a key's ``max_queued_jobs``; a duplicate request joins them).
ACTIVE_JOB_STATUSES: Final = (JOB_QUEUED, JOB_RUNNING)
#: A batch is derived from its jobs: it never ends ``failed`` (a batch with failed jobs is ``finished``).
BATCH_STATUSES: Final = (JOB_QUEUED, JOB_RUNNING, JOB_FINISHED, JOB_CANCELLED)
FINAL_BATCH_STATUSES: Final = (JOB_FINISHED, JOB_CANCELLED)

# ---- tuning runs -----------------------------------------------------------------------------------------
RUN_RUNNING: Final = "running"
RUN_FINISHED: Final = "finished"
RUN_FAILED: Final = "failed"
RUN_CANCELLED: Final = "cancelled"
RUN_STATUSES: Final = (RUN_RUNNING, RUN_FINISHED, RUN_FAILED, RUN_CANCELLED)
#: Statuses that end a run.
FINISHED_RUN_STATUSES: Final = (RUN_FINISHED, RUN_FAILED, RUN_CANCELLED)

# ---- measurements ----------------------------------------------------------------------------------------
MEASUREMENT_OK: Final = "ok"
MEASUREMENT_STATUSES: Final = (MEASUREMENT_OK, "compile_error", "launch_error", "wrong", "timeout", "crashed",
                               "spill")

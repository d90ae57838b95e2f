"""Why a job stopped: ``jobs.stop_reason``.

A code of :data:`convtune.tuner.tune.STOP_CODES` — ``budget_s`` (the search's time budget, counted after
pruning), ``budget_trials``, ``exhausted`` (every surviving configuration evaluated), ``patience``,
``floor`` (within epsilon of the bound's floor time), ``target``, ``no_survivors``, ``stored`` (answered
by an earlier run), ``cancelled`` or ``error``. The run keeps the sentence (``tuning_runs.stop_reason``)
and the pruning seconds (``tuning_runs.pruning_s``). Existing ended jobs get the code read from their
status and their run's sentence.

Revision ID: b15a5e0c0de1
Revises: 7c1d2e3f4a5b
Create Date: 2026-12-01 13:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "b15a5e0c0de1"
down_revision: str | Sequence[str] | None = "7c1d2e3f4a5b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The run's sentence (convtune.tuner.tune._stop_check) -> the job's code, for rows stored before this revision.
SENTENCE_CODES = (("trial budget%", "budget_trials"), ("time budget%", "budget_s"),
                  ("every surviving configuration%", "exhausted"), ("no improvement%", "patience"),
                  ("best time within%", "floor"), ("target time%", "target"),
                  ("no configuration survived%", "no_survivors"), ("none of the surviving%", "no_survivors"),
                  ("already tuned%", "stored"))


def upgrade() -> None:
    """Add the column, then fill it for jobs that already ended."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("stop_reason", sa.String(length=32), nullable=True))
    op.execute("UPDATE jobs SET stop_reason = 'cancelled' WHERE status = 'cancelled'")
    op.execute("UPDATE jobs SET stop_reason = 'error' WHERE status = 'failed'")
    for pattern, code in SENTENCE_CODES:
        op.execute(sa.text(
            "UPDATE jobs SET stop_reason = :code WHERE status = 'finished' AND stop_reason IS NULL AND EXISTS "
            "(SELECT 1 FROM tuning_runs r WHERE r.id = jobs.tuning_run_id AND r.stop_reason LIKE :pattern)"
        ).bindparams(code=code, pattern=pattern))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("stop_reason")

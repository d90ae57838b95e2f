"""Persistence of convtune: typed models, one session scope, one repository module, Alembic migrations."""

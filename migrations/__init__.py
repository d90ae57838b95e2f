"""convtune's Alembic migrations (installed as the package ``convtune._migrations``)."""

"""convtune's Alembic migrations: ``env.py``, ``script.py.mako`` and ``versions/``, shipped inside the package."""

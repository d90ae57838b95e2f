"""The HTTP service of convtune (FastAPI): ``create_app(settings)`` builds it, ``convtune serve`` runs it.

The contract between the API, the storage and the worker is docs/service.md. ``create_app`` is imported
lazily, so ``convtune.service.runner`` and the report module load without the web stack's routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from convtune.api.main import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from convtune.api.main import create_app

        return create_app
    raise AttributeError(f"module 'convtune.api' has no attribute {name!r}")

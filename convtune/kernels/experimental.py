"""Families registered before a GPU has verified them run nothing until ``CONVTUNE_EXPERIMENTAL`` names them.

A family whose kernels have passed nvcc and CPU checks but no GPU test is registered (its configs parse, its plans
describe, the tuner can be pointed at it on a GPU host) with ``supports`` gated by :func:`enabled`: the untuned op,
the tuner and the service never choose it unless a user opts in, e.g. ``CONVTUNE_EXPERIMENTAL=winograd_unfused_tf32``
(comma-separated family names, or ``all``). Read at each call, so tests and a running process can switch it.
"""

from __future__ import annotations

import os

ENV = "CONVTUNE_EXPERIMENTAL"


def names() -> frozenset[str]:
    """The names ``CONVTUNE_EXPERIMENTAL`` holds now (family names, or ``all``): a cache key for whatever depends on
    which families run."""
    return frozenset(name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip())


def enabled(family: str) -> bool:
    """Whether ``CONVTUNE_EXPERIMENTAL`` names ``family`` (or is ``all``)."""
    on = names()
    return family in on or "all" in on

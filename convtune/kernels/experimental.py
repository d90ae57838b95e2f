"""Families registered before a GPU has verified them run nothing until ``CONVTUNE_EXPERIMENTAL`` names them.

A family whose kernels have passed nvcc and CPU checks but no GPU test is registered (its configs parse, its plans
describe, the tuner can be pointed at it on a GPU host) with ``supports`` gated by :func:`enabled`: the untuned op,
the tuner and the service never choose it unless a user opts in, e.g. ``CONVTUNE_EXPERIMENTAL=winograd_unfused_tf32``
(comma-separated family names, or ``all``). Read at each call, so tests and a running process can switch it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache, wraps
from typing import Any, TypeVar

ENV = "CONVTUNE_EXPERIMENTAL"


def names() -> frozenset[str]:
    """The names ``CONVTUNE_EXPERIMENTAL`` holds now (family names, or ``all``): a cache key for whatever depends on
    which families run."""
    return frozenset(name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip())


def enabled(family: str) -> bool:
    """Whether ``CONVTUNE_EXPERIMENTAL`` names ``family`` (or is ``all``)."""
    on = names()
    return family in on or "all" in on


R = TypeVar("R")


def cached_per_names(fn: Callable[[Any], R]) -> Callable[[Any], R]:
    """``functools.cache`` of a one-argument function (a family's space of a problem) keyed also by :func:`names`:
    what it returns may depend on what is enabled (an experimental field's values), and the switch is read at each
    call. ``cache_clear`` clears it."""
    cached = cache(lambda arg, _names: fn(arg))

    @wraps(fn)
    def wrapper(arg: Any) -> R:
        return cached(arg, names())

    wrapper.cache_clear = cached.cache_clear   # type: ignore[attr-defined]
    return wrapper

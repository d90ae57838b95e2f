"""The GPU Winograd tests' launch helper (imported by the test modules of this directory)."""

from __future__ import annotations

from typing import Any


def run_poisoned(launcher: Any, pl: Any, x: Any, w: Any) -> Any:
    """y of one family's launch, NaN-poisoned first; asserts every output was written."""
    import cupy as cp

    p = pl.problem
    y = cp.full((p.N, p.K, p.P, p.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, launcher.compile_plan(pl), x, launcher.prepare_filters(pl, w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), f"{pl.config.key()}: some outputs were never written"
    return y

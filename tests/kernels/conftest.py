"""Fixtures of the GPU kernel tests: the device's machine model and a cubin cache filled up front."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def machine():
    from convtune.ops.conv2d import device_machine

    return device_machine(0)


@pytest.fixture(scope="session")
def cubin_cache(machine, tmp_path_factory) -> Iterator[Callable[[Iterable[str]], None]]:
    """A function that compiles CUDA texts with nvcc in parallel into the cubin cache ``load_kernel`` reads
    (``CONVTUNE_CUBIN_DIR``, set for the session when nvcc is there); without nvcc it does nothing and
    the kernels are compiled by NVRTC one by one."""
    from convtune.kernels.compile import nvcc_available, precompile

    if not nvcc_available():
        yield lambda texts: None
        return
    out = Path(os.environ.get("CONVTUNE_CUBIN_DIR") or tmp_path_factory.mktemp("cubins"))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CONVTUNE_CUBIN_DIR", str(out))
        yield lambda texts: precompile(sorted(set(texts)), machine.arch, out, jobs=os.cpu_count() or 4)

"""A configuration's CUDA source and launch parameters, without a GPU (``convtune export --source``).

What a config runs is decided by its family's plan (:mod:`convtune.kernels.registry`) and built by the family's
``prepare_plan``: the self-contained CUDA text each launch compiles (the family source with its ``#include``\\ s
inlined plus the generated ``extern "C"`` wrapper whose template arguments carry the config — there are no
``-D`` defines: the only NVRTC option is :data:`~convtune.kernels.compile.NVRTC_OPTIONS`), and each launch's
grid, block, dynamic shared memory and trailing int32 arguments. :func:`describe` runs ``prepare_plan`` with the
compiler and the CUDA driver replaced by recorders, so it sees exactly what a real launch would compile and
launch, for any family, and needs neither CuPy nor a device.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from convtune.kernels import compile as _compile
from convtune.kernels import prepared as _prepared
from convtune.kernels.config import KernelConfig
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

_lock = threading.Lock()  # the recorders replace module globals: one description at a time
_ids = itertools.count(0x1000)


@dataclass(frozen=True, slots=True)
class KernelText:
    """One compiled unit: its ``extern "C"`` entry, the SHA-256 of its text (what the kernel caches key on) and
    the text itself."""

    entry: str
    source_sha256: str
    source: str


@dataclass(frozen=True, slots=True)
class LaunchParams:
    """One launch: entry, grid and block (x, y, z), dynamic shared memory in bytes, int32 arguments after the
    pointers, and the names of the operands its pointers are (with byte offsets)."""

    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    int_args: tuple[int, ...]
    pointers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """Everything :func:`describe` found for (problem, config) on a machine."""

    problem: str
    config: str
    machine: str
    arch: str
    nvrtc_options: tuple[str, ...]
    template_args: tuple[Any, ...] | None
    operands: tuple[str, ...]
    workspace_bytes: int
    steps: list[dict[str, Any]] = field(default_factory=list)   # launches and memsets, in stream order
    kernels: list[KernelText] = field(default_factory=list)     # distinct compiled texts, in launch order

    def to_dict(self, *, with_source: bool = True) -> dict[str, Any]:
        return {"problem": self.problem, "config": self.config, "machine": self.machine, "arch": self.arch,
                "nvrtc_options": list(self.nvrtc_options),
                "template_args": list(self.template_args) if self.template_args is not None else None,
                "operands": list(self.operands), "workspace_bytes": self.workspace_bytes, "steps": self.steps,
                "kernels": [{"entry": k.entry, "source_sha256": k.source_sha256,
                             **({"source": k.source} if with_source else {})} for k in self.kernels]}


def _fake_kernel(compiled: list[KernelText], text: str, entry: str, dynamic_smem_bytes: int = 0) -> Any:
    """Stands in for :func:`convtune.kernels.compile.load_kernel`: records the text, compiles nothing."""
    digest = _compile.source_hash(text)
    if not any(k.entry == entry and k.source_sha256 == digest for k in compiled):
        compiled.append(KernelText(entry, digest, text))
    return _compile.LoadedKernel(SimpleNamespace(kernel=SimpleNamespace(ptr=next(_ids))), entry, digest,
                                 _compile.KernelResources(0, 0, 0, 0, 0), 0.0)


@contextlib.contextmanager
def _recording(compiled: list[KernelText]) -> Iterator[None]:
    """Replace ``load_kernel`` in every kernel module that imported it, and the CUDA driver seam, for a moment."""
    real = _compile.load_kernel

    def fake(text: str, entry: str, dynamic_smem_bytes: int = 0) -> Any:
        return _fake_kernel(compiled, text, entry, dynamic_smem_bytes)

    driver = _prepared.Driver(lambda *a: None, lambda *a: None, lambda: 0, lambda index: contextlib.nullcontext(),
                              (RuntimeError,))
    with _lock:
        modules = [m for name, m in list(sys.modules.items())
                   if name.startswith("convtune.kernels") and getattr(m, "load_kernel", None) is real]
        old_driver = _prepared.set_driver(driver)
        for module in modules:
            module.load_kernel = fake  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for module in modules:
                module.load_kernel = real  # type: ignore[attr-defined]
            _prepared.set_driver(old_driver)


def describe(problem: ConvProblem, config: KernelConfig, machine: MachineModel) -> ConfigSource:
    """The CUDA text and launches of ``config`` for ``problem`` as planned for ``machine``.

    Raises:
        InvalidConfig: the config is not valid for the problem on that machine (the plan's own check), or
            its family is not registered.
    """
    from convtune.kernels.registry import get_spec

    spec = get_spec(config.family, config.direction)
    plan = spec.plan(problem, config, machine)
    _prepared._families(config.kind)  # import the family's launcher now: the recorders patch imported modules
    compiled: list[KernelText] = []
    with _recording(compiled):
        prepared = _prepared.prepare_plan(plan, 0)
        steps = [_step(s, prepared.operands, compiled) for s in prepared.steps]
    targs = plan.template_args() if callable(getattr(plan, "template_args", None)) else None
    return ConfigSource(problem=problem.key(), config=config.key(), machine=machine.name, arch=machine.arch,
                        nvrtc_options=tuple(_compile.NVRTC_OPTIONS),
                        template_args=tuple(targs) if targs is not None else None, operands=prepared.operands,
                        workspace_bytes=prepared.workspace_bytes, steps=steps, kernels=compiled)


def _step(step: Any, operands: tuple[str, ...], compiled: list[KernelText]) -> dict[str, Any]:
    if isinstance(step, _prepared.Memset):
        return {"memset": operands[step.operand], "offset_bytes": step.offset_bytes, "nbytes": step.nbytes}
    pointers = [operands[i] + (f"+{off}" if off else "") for i, off in step.pointers]
    return {"entry": step.kernel.entry, "source_sha256": step.kernel.source_sha256, "grid": list(step.grid),
            "block": list(step.block), "dynamic_smem_bytes": step.smem_bytes, "int_args": list(step.ints),
            "pointers": pointers}


def format_text(src: ConfigSource) -> str:
    """A ``.cu`` file: the launches as a comment header, then each compiled text (what NVRTC compiles)."""
    lines = [f"// convtune export --source: {src.config}",
             f"// problem   {src.problem}",
             f"// machine   {src.machine} ({src.arch}); NVRTC options: {' '.join(src.nvrtc_options)} "
             "(no -D defines: the config is in the wrapper's template arguments)"]
    if src.template_args is not None:
        lines.append(f"// template  <{', '.join(str(a) for a in src.template_args)}>")
    lines.append(f"// operands  {', '.join(src.operands)}" +
                 (f"; workspace {src.workspace_bytes} bytes" if src.workspace_bytes else ""))
    for i, s in enumerate(src.steps, start=1):
        if "memset" in s:
            lines.append(f"// step {i}   memset {s['memset']} {s['nbytes']} bytes (zeroed for atomic adds)")
        else:
            lines.append(f"// step {i}   {s['entry']}<<<grid({', '.join(map(str, s['grid']))}), "
                         f"block({', '.join(map(str, s['block']))}), dynamic smem {s['dynamic_smem_bytes']} B>>>"
                         f"({', '.join(s['pointers'])}; ints {', '.join(map(str, s['int_args']))})")
    for k in src.kernels:
        lines += ["", f"// ==== entry {k.entry}: SHA-256 {k.source_sha256} ====", k.source.rstrip("\n")]
    return "\n".join(lines) + "\n"

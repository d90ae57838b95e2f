"""The one compile helper: CUDA source -> loaded kernel (NVRTC through CuPy, or nvcc + cubin cache).

Kernel sources are real ``.cu`` files in the family folders under ``convtune/kernels``, found by file name (never by
folder: :func:`kernel_path`); a family's launcher generates a
small wrapper (``extern "C" __global__`` entry instantiating the templated body) and this module
inlines the quoted ``#include``s, so the compiled text is self-contained and its SHA-256 identifies
the kernel version exactly (the on-disk caches of CuPy and of :func:`nvcc_compile` key on it).

Two ways to build the same text:

* :func:`load_kernel` — NVRTC via ``cupy.RawModule`` for the current device's arch, memoised per
  (device, source hash, entry). If ``$CONVTUNE_CUBIN_DIR/<hash>.cubin`` exists (written by
  :func:`nvcc_compile`, e.g. by a parallel pre-compile step) it is loaded instead of compiling.
* :func:`nvcc_compile` — ``nvcc -cubin -arch=sm_XX -Xptxas -v``; parses registers, spills, stack and
  shared memory per entry. Used by CI (no GPU needed) and by parallel pre-compilation.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from convtune.errors import CompileError, DeviceUnavailable

KERNELS_DIR = Path(__file__).resolve().parent
NVRTC_OPTIONS = ("-std=c++17",)
#: A source whose text holds this marker followed by an arch (``// convtune-arch: sm_90a``) is built for that arch
#: instead of the device's plain one: Hopper's ``wgmma`` assembles only for the arch-specific sm_90a target.
ARCH_MARKER = "convtune-arch:"
_ARCH = re.compile(re.escape(ARCH_MARKER) + r"\s*(sm_\d+a?)")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)


def _index(folders: tuple[Path, ...]) -> dict[str, Path]:
    """File name -> path of every ``.cu`` / ``.cuh`` under ``folders``; a name found twice is an error, because
    sources and includes are found by file name alone."""
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*.cu*")):
            if path.suffix not in (".cu", ".cuh"):
                continue
            if path.name in found and found[path.name] != path:
                raise CompileError(f"two kernel sources are called {path.name}: {found[path.name]} and {path}")
            found[path.name] = path
    return found


@cache
def kernel_index(extra: tuple[Path, ...] = ()) -> dict[str, Path]:
    """Every kernel source of the package (and of the ``extra`` folders of families outside it), by file name."""
    return _index((*extra, KERNELS_DIR))


def kernel_path(name: str, extra: tuple[Path, ...] = ()) -> Path:
    """The file a source or include name stands for: looked up by its last component, so a folder written before
    it (``"depthwise/dw1d_common.cuh"``) is part of the text, not a place, and files may move freely."""
    try:
        return kernel_index(extra)[Path(name).name]
    except KeyError:
        folders = [str(f) for f in (*extra, KERNELS_DIR)]
        raise CompileError(f"kernel source {name!r} not found under {folders}") from None


def expand_includes(text: str, extra: tuple[Path, ...] = ()) -> str:
    """Inline every quoted ``#include`` (each file once, like ``#pragma once``), each found by file name
    (:func:`kernel_path`) and marked by the name as written. The result is a function of file contents alone:
    moving a file changes neither the text nor its hash (the kernel version)."""
    seen: set[Path] = set()

    def expand(body: str) -> str:
        def repl(match: re.Match[str]) -> str:
            name = match.group(1)
            path = kernel_path(name, extra)
            if path in seen:
                return ""
            seen.add(path)
            return f"// ---- {name} ----\n" + expand(path.read_text().replace("#pragma once", ""))

        return _INCLUDE.sub(repl, body)

    return expand(text)


def kernel_text(name: str, extra: tuple[Path, ...] = ()) -> str:
    """The self-contained text of the source called ``name``: its includes expanded."""
    return expand_includes(kernel_path(name, extra).read_text(), extra)


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class KernelResources:
    """What the compiler reports for one entry."""

    num_regs: int
    local_bytes: int           # stack frame / local memory per thread (spills, run-time indexed arrays)
    spill_store_bytes: int
    spill_load_bytes: int
    static_smem_bytes: int

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0 or self.local_bytes > 0


@dataclass(frozen=True, slots=True)
class LoadedKernel:
    """A compiled kernel ready to launch, with its resource report."""

    function: Any        # cupy RawKernel-like callable: function(grid, block, args, shared_mem=...)
    entry: str
    source_sha256: str
    resources: KernelResources
    compile_s: float     # 0.0 when served from a cache


@dataclass(frozen=True, slots=True)
class NvccResult:
    cubin_path: Path
    resources: dict[str, KernelResources]  # per entry name
    compile_s: float
    log: str


def required_arch(text: str) -> str | None:
    """The arch a source demands through its ``convtune-arch:`` marker, else None (the device's own)."""
    match = _ARCH.search(text)
    return match.group(1) if match else None


def nvcc_arch_flags(arch: str) -> list[str]:
    """nvcc's target flags: ``-arch=sm_XX``; arch-specific targets (``sm_90a``) as an explicit ``-gencode``, since
    the ``-arch=sm_90a`` shorthand of nvcc 13.0 also runs a plain sm_90 pass that rejects ``wgmma``."""
    if arch.endswith("a"):
        number = arch[3:]
        return [f"-gencode=arch=compute_{number},code={arch}"]
    return [f"-arch={arch}"]


def nvcc_available() -> bool:
    return shutil.which("nvcc") is not None


def nvcc_compile(text: str, arch: str = "sm_90", out_dir: Path | None = None) -> NvccResult:
    """Compile self-contained CUDA text to ``<out_dir>/<sha256>.cubin`` with ``-Xptxas -v``.

    Raises:
        CompileError: nvcc missing or the compile failed (the log is in the message).
    """
    if not nvcc_available():
        raise CompileError("nvcc is not on PATH")
    digest = source_hash(text + arch)
    out = Path(out_dir or tempfile.mkdtemp(prefix="convtune-cubin-"))
    out.mkdir(parents=True, exist_ok=True)
    cubin = out / f"{digest}.cubin"
    with tempfile.TemporaryDirectory(prefix="convtune-nvcc-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(text)
        start = time.perf_counter()
        proc = subprocess.run(
            ["nvcc", *NVRTC_OPTIONS, *nvcc_arch_flags(arch), "-cubin", "-Xptxas", "-v", str(src), "-o", str(cubin)],
            capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise CompileError(f"nvcc failed (exit {proc.returncode}):\n{log[-4000:]}")
    return NvccResult(cubin, parse_ptxas_log(log), elapsed, log)


def precompile(texts: list[str], arch: str, out_dir: Path, jobs: int = 8) -> dict[str, NvccResult | CompileError]:
    """Compile many sources with nvcc in parallel into ``out_dir`` (the cubin cache of :func:`load_kernel`), each
    for ``arch`` or the arch its ``convtune-arch:`` marker demands.

    Returns, per source hash, the result or the error (a failed compile is an outcome, not a crash).
    """
    from concurrent.futures import ThreadPoolExecutor

    def one(text: str) -> NvccResult | CompileError:
        target = required_arch(text) or arch   # a marked source's own target (load_kernel looks it up by it)
        if (Path(out_dir) / f"{source_hash(text + target)}.cubin").is_file():
            return NvccResult(Path(out_dir) / f"{source_hash(text + target)}.cubin", {}, 0.0, "cached")
        try:
            return nvcc_compile(text, target, out_dir)
        except CompileError as exc:
            return exc

    unique = list(dict.fromkeys(texts))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return {source_hash(t): r for t, r in zip(unique, pool.map(one, unique), strict=True)}


def parse_ptxas_log(log: str) -> dict[str, KernelResources]:
    """Registers, spills, stack and static shared memory per entry from ``ptxas -v`` output."""
    result: dict[str, KernelResources] = {}
    for block in re.split(r"Compiling entry function '", log)[1:]:
        name = block.split("'", 1)[0]
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block)
        regs = re.search(r"Used (\d+) registers", block)
        smem = re.search(r"(\d+) bytes smem", block)
        result[name] = KernelResources(
            num_regs=int(regs.group(1)) if regs else 0,
            local_bytes=int(frame.group(1)) if frame else 0,
            spill_store_bytes=int(frame.group(2)) if frame else 0,
            spill_load_bytes=int(frame.group(3)) if frame else 0,
            static_smem_bytes=int(smem.group(1)) if smem else 0,
        )
    return result


# ---- runtime loading (CuPy, lazily imported) --------------------------------------------------------
_lock = threading.Lock()
_loaded: dict[tuple[int, str, str], LoadedKernel] = {}
_modules: dict[tuple[int, str], Any] = {}   # one module per (device, source): its entries share one compile


@cache
def cupy_module() -> Any:
    """Import CuPy on first use so that ``import convtune`` works without CUDA."""
    try:
        import cupy
    except ImportError as exc:
        raise DeviceUnavailable("CuPy is not installed: pip install 'convtune[cuda]' on a GPU host") from exc
    return cupy


DEFAULT_DYNAMIC_SMEM_BYTES = 48 * 1024  # what a launch may use without opting in


def load_kernel(text: str, entry: str, dynamic_smem_bytes: int = 0) -> LoadedKernel:
    """Compile (or fetch from cache) ``entry`` of self-contained CUDA ``text`` for the current device;
    a kernel launched with more than 48 KiB of dynamic shared memory is opted in to ``dynamic_smem_bytes``.

    Raises:
        CompileError: NVRTC rejected the source (log in the message).
        DeviceUnavailable: no CuPy or no device.
    """
    cp = cupy_module()
    device = cp.cuda.Device().id
    digest = source_hash(text)
    key = (device, digest, entry)
    with _lock:
        hit = _loaded.get(key)
    if hit is not None:
        return _allow_dynamic_smem(hit, dynamic_smem_bytes)
    start = time.perf_counter()
    cubin_dir = os.environ.get("CONVTUNE_CUBIN_DIR")
    device_arch = "sm_{}{}".format(*cp.cuda.Device().compute_capability)
    arch = required_arch(text) or device_arch
    if arch.rstrip("a") != device_arch:
        raise CompileError(f"{entry} is built for {arch}; this device is {device_arch}")
    cubin = Path(cubin_dir) / f"{source_hash(text + arch)}.cubin" if cubin_dir else None
    with _lock:
        module = _modules.get((device, digest))
    try:
        if module is None:
            if cubin is not None and cubin.is_file():
                module = cp.RawModule(path=str(cubin))
            elif arch != device_arch:
                module = cp.RawModule(path=str(_nvrtc_cubin(text, arch, digest)))
            else:
                module = cp.RawModule(code=text, options=NVRTC_OPTIONS)
        function = module.get_function(entry)
        resources = KernelResources(
            num_regs=int(function.num_regs), local_bytes=int(function.local_size_bytes),
            spill_store_bytes=0, spill_load_bytes=0, static_smem_bytes=int(function.shared_size_bytes))
    except cp.cuda.compiler.CompileException as exc:
        raise CompileError(f"NVRTC failed for {entry}:\n{str(exc)[-4000:]}") from None
    loaded = LoadedKernel(function, entry, digest, resources, time.perf_counter() - start)
    with _lock:
        _modules[(device, digest)] = module
        _loaded[key] = loaded
    return _allow_dynamic_smem(loaded, dynamic_smem_bytes)


def _nvrtc_cubin(text: str, arch: str, digest: str) -> Path:
    """A cubin of ``text`` for an arch-specific target (``sm_90a``), built by NVRTC through CuPy's binding (CuPy's
    own compile path names the device's plain arch) and cached under ``$CONVTUNE_CUBIN_DIR`` or the temp dir.

    Raises:
        CompileError: NVRTC rejected the source (its log in the message).
    """
    nvrtc = importlib.import_module("cupy_backends.cuda.libs.nvrtc")   # CuPy's NVRTC binding (cupy.cuda.nvrtc)

    folder = Path(os.environ.get("CONVTUNE_CUBIN_DIR") or Path(tempfile.gettempdir()) / "convtune-cubins")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{source_hash(text + arch)}.cubin"
    if path.is_file():
        return path
    prog = nvrtc.createProgram(text, f"{digest[:16]}.cu", [], [])
    try:
        nvrtc.compileProgram(prog, [*NVRTC_OPTIONS, f"-arch={arch}"])
    except nvrtc.NVRTCError:
        raise CompileError(f"NVRTC failed for {arch}:\n{nvrtc.getProgramLog(prog)[-4000:]}") from None
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(nvrtc.getCUBIN(prog))
    tmp.replace(path)   # atomic: a concurrent loader never reads half a file
    return path


def _allow_dynamic_smem(kernel: LoadedKernel, dynamic_smem_bytes: int) -> LoadedKernel:
    if dynamic_smem_bytes > DEFAULT_DYNAMIC_SMEM_BYTES:
        kernel.function.max_dynamic_shared_size_bytes = dynamic_smem_bytes
    return kernel

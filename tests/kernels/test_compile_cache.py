"""load_kernel compiles a source once for all its entries (CPU: CuPy replaced by a counting fake)."""

from __future__ import annotations

import types

import pytest

from convtune.kernels import compile as compile_mod


class _FakeFunction:
    num_regs, local_size_bytes, shared_size_bytes = 32, 0, 0
    max_dynamic_shared_size_bytes = 0


def _fake_cupy(built: list[str]) -> types.SimpleNamespace:
    class RawModule:
        def __init__(self, code: str | None = None, path: str | None = None, options: tuple = ()) -> None:
            built.append(code or path or "")

        def get_function(self, entry: str) -> _FakeFunction:
            return _FakeFunction()

    device = types.SimpleNamespace(id=0, compute_capability="90")
    cuda = types.SimpleNamespace(Device=lambda: device, compiler=types.SimpleNamespace(CompileException=RuntimeError))
    return types.SimpleNamespace(RawModule=RawModule, cuda=cuda)


def test_entries_of_one_source_share_one_module(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    monkeypatch.setattr(compile_mod, "cupy_module", lambda: _fake_cupy(built))
    monkeypatch.setattr(compile_mod, "_loaded", {})
    monkeypatch.setattr(compile_mod, "_modules", {})
    monkeypatch.delenv("CONVTUNE_CUBIN_DIR", raising=False)
    text = 'extern "C" __global__ void a() {}\nextern "C" __global__ void b() {}\n'
    first = compile_mod.load_kernel(text, "a")
    second = compile_mod.load_kernel(text, "b")
    again = compile_mod.load_kernel(text, "a")
    assert built == [text]                       # one compile for both entries
    assert again is first and second.entry == "b"
    compile_mod.load_kernel(text + "// another source\n", "a")
    assert len(built) == 2


def test_arch_marker_picks_the_arch_specific_target() -> None:
    """A source marked ``convtune-arch: sm_90a`` (wgmma) builds for sm_90a; nvcc gets an explicit -gencode for it
    (the -arch=sm_90a shorthand of nvcc 13.0 also runs a plain sm_90 pass that rejects wgmma)."""
    from convtune.kernels.compile import nvcc_arch_flags, required_arch

    assert required_arch("// convtune-arch: sm_90a\n__global__ void k() {}") == "sm_90a"
    assert required_arch("__global__ void k() {}") is None
    assert nvcc_arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert nvcc_arch_flags("sm_90") == ["-arch=sm_90"]


def test_arch_specific_sources_go_to_nvrtc_with_the_arch(monkeypatch, tmp_path) -> None:
    """Without a cached cubin, an sm_90a source is compiled by NVRTC itself with ``-arch=sm_90a`` (CuPy's own path
    would name the device's plain arch), written atomically to the cubin cache, and an NVRTC failure is a
    CompileError carrying its log. The binding is faked: no GPU or CuPy needed."""
    import sys
    import types

    from convtune.errors import CompileError
    from convtune.kernels import compile as comp

    calls: list[tuple[str, list[str]]] = []
    fake = types.ModuleType("cupy_backends.cuda.libs.nvrtc")

    class NVRTCError(Exception):
        pass

    def compile_program(prog: str, options: list[str]) -> None:
        calls.append((prog, list(options)))
        if "broken" in prog:
            raise NVRTCError("NVRTC_ERROR_COMPILATION")

    fake.NVRTCError = NVRTCError  # type: ignore[attr-defined]
    fake.createProgram = lambda text, name, headers, includes: text  # type: ignore[attr-defined]
    fake.compileProgram = compile_program  # type: ignore[attr-defined]
    fake.getCUBIN = lambda prog: b"CUBIN:" + prog.encode()  # type: ignore[attr-defined]
    fake.getProgramLog = lambda prog: "error: wgmma needs sm_90a"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.nvrtc", fake)
    monkeypatch.setenv("CONVTUNE_CUBIN_DIR", str(tmp_path))
    text = "// convtune-arch: sm_90a\nextern \"C\" __global__ void k() {}\n"
    path = comp._nvrtc_cubin(text, "sm_90a", comp.source_hash(text))
    assert path.read_bytes() == b"CUBIN:" + text.encode() and path.parent == tmp_path
    assert calls[-1][1][-1] == "-arch=sm_90a"
    assert comp._nvrtc_cubin(text, "sm_90a", comp.source_hash(text)) == path and len(calls) == 1   # cached
    with pytest.raises(CompileError, match="sm_90a"):
        comp._nvrtc_cubin("broken " + text, "sm_90a", "x" * 64)

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

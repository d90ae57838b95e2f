"""The epilogue kernel ``out = act(y + bias[k] (+ residual))`` on the CPU: the plan's checks (typed errors naming
the field), the vector width (H·W % 4 and each pointer's alignment per dtype), the traffic formula, the prepared
launch's shape through the launch recorder, and an nvcc build of every entry without spills. GPU results:
tests/kernels/epilogue/test_bias_act_gpu.py."""

from __future__ import annotations

import re

import pytest

from convtune.errors import InvalidInput
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.epilogue import launcher


# ---- make_plan ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "field"), [
    pytest.param(("float64", 2, 8, 16, "relu", False, 4), "dtype", id="float64"),
    pytest.param(("int8", 2, 8, 16, "relu", False, 1), "dtype", id="int8"),
    pytest.param(("float32", 2, 8, 16, "gelu", False, 4), "activation", id="gelu"),
    pytest.param(("float32", 2, 8, 16, "ReLU", False, 4), "activation", id="case-matters"),
    pytest.param(("float32", 0, 8, 16, "none", False, 4), "y", id="N=0"),
    pytest.param(("float32", 2, 0, 16, "none", False, 4), "y", id="K=0"),
    pytest.param(("float32", 2, 8, 0, "none", False, 1), "y", id="hw=0"),
    pytest.param(("float32", 2, -8, 16, "none", False, 4), "y", id="K<0"),
    pytest.param(("float32", 1, 1, 2**31, "none", False, 1), "y", id="2^31-elements"),
    pytest.param(("bfloat16", 2**16, 2**8, 2**8, "none", False, 4), "y", id="2^32-elements"),
    pytest.param(("float32", 2, 8, 16, "none", False, 2), "vector", id="vector=2"),
    pytest.param(("float32", 2, 8, 16, "none", False, 8), "vector", id="vector=8"),
    pytest.param(("float32", 2, 8, 16, "none", False, 0), "vector", id="vector=0"),
    pytest.param(("float16", 2, 8, 49, "relu6", True, 4), "vector", id="vector=4-hw=49"),
    pytest.param(("float32", 2, 8, 6, "relu", False, 4), "vector", id="vector=4-hw=6"),
])
def test_make_plan_refuses_bad_arguments_by_field(args, field) -> None:
    with pytest.raises(InvalidInput) as info:
        launcher.make_plan(*args)
    assert info.value.field == field


def test_make_plan_accepts_the_limits() -> None:
    big = launcher.make_plan("float32", 1, 1, 2**31 - 1, "none", False, 1)
    assert big.elements == 2**31 - 1
    pl = launcher.make_plan("float16", 1, 5, 1, "relu6", 1, 1)   # a truthy int residual becomes a bool
    assert (pl.dtype, pl.N, pl.K, pl.hw, pl.activation, pl.residual, pl.vector) == ("float16", 1, 5, 1, "relu6",
                                                                                      True, 1)
    assert pl.residual is True and pl.config is None and pl.problem is None
    for dtype in launcher.DTYPES:
        for act in launcher.ACTIVATIONS:
            assert launcher.make_plan(dtype, 2, 13, 12, act, False, 4).vector == 4


# ---- vector_width --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("hw", "ptrs", "dtype", "expected"), [
    pytest.param(16, (0x1000, 0x2000, 0x3000), "float32", 4, id="aligned"),
    pytest.param(49, (0x1000, 0x2000, 0x3000), "float32", 1, id="hw%4"),
    pytest.param(6, (0x1000,), "bfloat16", 1, id="hw=6"),
    pytest.param(1, (0x1000,), "float16", 1, id="hw=1"),
    pytest.param(16, (0x1000, 0x2008, 0x3000), "float32", 1, id="f32-8-byte-pointer"),
    pytest.param(16, (0x1004, 0x2000, 0x3000), "float32", 1, id="f32-one-element-off"),
    pytest.param(16, (0x1000, 0x2000, 0x3010), "float32", 4, id="f32-16-byte"),
    pytest.param(16, (0x1008, 0x2000, 0x3000), "bfloat16", 4, id="bf16-8-byte"),
    pytest.param(16, (0x1000, 0x2008, 0x3000), "float16", 4, id="f16-8-byte"),
    pytest.param(16, (0x1000, 0x2004, 0x3000), "float16", 1, id="f16-4-byte"),
    pytest.param(16, (0x1000, 0x2000, 0x3002), "bfloat16", 1, id="bf16-one-element-off"),
    pytest.param(8, (), "float32", 4, id="no-pointers"),
])
def test_vector_width(hw, ptrs, dtype, expected) -> None:
    assert launcher.vector_width(hw, *ptrs, dtype=dtype) == expected


def test_vector_width_every_pointer_counts() -> None:
    aligned = [0x10000, 0x20000, 0x30000]
    assert launcher.vector_width(12, *aligned, dtype="float32") == 4
    for i in range(3):
        ptrs = list(aligned)
        ptrs[i] += 4
        assert launcher.vector_width(12, *ptrs, dtype="float32") == 1, i
        ptrs[i] += 4                                     # 8 bytes off: still short of float32's 16
        assert launcher.vector_width(12, *ptrs, dtype="float32") == 1, i
        assert launcher.vector_width(12, *ptrs, dtype="bfloat16") == 4, i


# ---- traffic ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "size"), [("float32", 4), ("bfloat16", 2), ("float16", 2)])
@pytest.mark.parametrize("residual", [False, True])
def test_traffic_bytes_formula(dtype, size, residual) -> None:
    N, K, hw = 3, 13, 49
    pl = launcher.make_plan(dtype, N, K, hw, "relu", residual, 1)
    maps = 3 if residual else 2
    assert pl.elements == N * K * hw
    assert pl.traffic_bytes() == maps * N * K * hw * size + 4 * K
    # one more map read with a residual; the bias is always float32 words
    other = launcher.make_plan(dtype, N, K, hw, "relu", not residual, 1)
    assert abs(pl.traffic_bytes() - other.traffic_bytes()) == N * K * hw * size


# ---- the prepared launch ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "N", "K", "hw", "activation", "residual", "vector"), [
    pytest.param("float32", 2, 13, 49, "none", False, 1, id="f32-none-v1"),
    pytest.param("float32", 3, 24, 96, "relu", True, 4, id="f32-relu-res-v4"),
    pytest.param("bfloat16", 1, 5, 1, "relu6", True, 1, id="bf16-relu6-res-v1"),
    pytest.param("float16", 4, 7, 64, "relu6", False, 4, id="f16-relu6-v4"),
    pytest.param("bfloat16", 1, 1, 4, "relu", False, 4, id="bf16-one-vector"),
    pytest.param("float32", 3, 40, 1024, "none", True, 4, id="f32-several-blocks"),
])
def test_prepared_launch_is_one_launch(monkeypatch, dtype, N, K, hw, activation, residual, vector) -> None:
    from launch_recorder import install

    rec = install(monkeypatch, device=0)
    kernel = rec.kernel(launcher.entry(dtype, vector), 4, 5)
    loads = []

    def fake_load(text, entry, *args, **kwargs):
        loads.append((text, entry, rec.current_device))
        return kernel

    monkeypatch.setattr(launcher, "load_kernel", fake_load)
    pl = launcher.make_plan(dtype, N, K, hw, activation, residual, vector)
    prepared = launcher.prepare(pl, 0)
    assert loads == [(launcher.source(), f"bias_act_{dtype}_v{vector}", 0)]
    assert prepared.operands == ("y", "bias", "residual", "out") and prepared.workspace_bytes == 0
    assert prepared.plan is pl and prepared.output_shape == (N, K, hw) and prepared.kernels is kernel
    assert prepared.kind == f"epilogue.bias_act.{activation}" + (".residual" if residual else "")
    y, bias, res, out = 0x10000, 0x20000, 0x30000, 0x40000
    prepared((y, bias, res, out), 7)
    (call,) = rec.calls
    total_vec = N * K * hw // vector
    assert call.kind == "launch" and call.name == f"bias_act_{dtype}_v{vector}"
    assert call.grid == (-(-total_vec // 256), 1, 1) and call.block == (256, 1, 1) and call.smem_bytes == 0
    assert call.grid[0] * 256 >= total_vec > (call.grid[0] - 1) * 256
    assert call.stream == 7 and call.pointers == (y, bias, res, out)
    assert call.ints == (hw, K, total_vec, launcher.ACTIVATIONS[activation], int(residual))
    prepared((y, bias, y, y), 9)                         # in place, no residual: y's pointer stands in
    assert len(rec.calls) == 2 and rec.calls[1].pointers == (y, bias, y, y) and rec.calls[1].stream == 9


def test_prepare_loads_on_the_plans_device(monkeypatch) -> None:
    from launch_recorder import install

    rec = install(monkeypatch, device=0)
    kernel = rec.kernel(launcher.entry("float16", 1), 4, 5)
    devices = []
    monkeypatch.setattr(launcher, "load_kernel", lambda text, entry, *a, **k: devices.append(rec.current_device)
                        or kernel)
    prepared = launcher.prepare(launcher.make_plan("float16", 1, 3, 5, "relu", False, 1), 2)
    assert devices == [2] and prepared.device == 2 and rec.current_device == 0
    prepared((1 << 20, 2 << 20, 1 << 20, 3 << 20), 0)
    assert rec.calls[-1].device == 2 and rec.calls[-1].ints == (5, 3, 15, 1, 0) and rec.calls[-1].grid == (1, 1, 1)


def test_activation_codes_and_entries() -> None:
    text = launcher.source()
    assert launcher.ACTIVATIONS == {"none": 0, "relu": 1, "relu6": 2, "silu": 3, "hardswish": 4, "hardsigmoid": 5,
                                    "sigmoid": 6}
    assert all(f"case {code}:" in text for code in range(1, len(launcher.ACTIVATIONS)))   # a case per code
    entries = set(re.findall(r"CONVTUNE_BIAS_ACT\((bias_act_\w+),", text))
    assert entries == {launcher.entry(d, v) for d in launcher.DTYPES for v in (1, 4)}
    assert "#include" not in text                         # kernel_text expanded storage.cuh
    assert "load4_f32" in text and "from_f32" in text


# ---- nvcc --------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not nvcc_available(), reason="needs nvcc")
def test_nvcc_builds_every_entry_without_spills(tmp_path) -> None:
    result = nvcc_compile(launcher.source(), "sm_90", tmp_path)
    expected = {launcher.entry(d, v) for d in launcher.DTYPES for v in (1, 4)}
    assert set(result.resources) == expected, result.log[-2000:]
    for entry, res in result.resources.items():
        assert not res.spills and res.spill_store_bytes == 0 and res.spill_load_bytes == 0, (entry, result.log)
        assert 0 < res.num_regs <= 255 and res.static_smem_bytes == 0, (entry, res)
    assert result.cubin_path.is_file()

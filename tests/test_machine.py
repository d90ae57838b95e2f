"""MachineModel: presets, fast-memory scopes, ceilings, and the CuPy device query (faked and real)."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from convtune.errors import ConvtuneError, DeviceUnavailable, UnknownMachine
from convtune.machine import PRESETS, MachineModel


def test_h200_preset_figures() -> None:
    m = MachineModel.preset("h200")
    assert m.name == "NVIDIA H200"
    assert m.compute_capability == (9, 0) and m.arch == "sm_90"
    assert m.sm_count == 132
    assert m.smem_per_block_bytes == 232_448
    assert m.copy_bandwidth_bytes_per_s == 4.19e12
    assert m.fp32_peak_flops_per_s == 50.9e12
    assert m.ceilings_source.startswith("measured")
    assert m.ridge_flops_per_byte == pytest.approx(50.9e12 / 4.19e12)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_consistent(name: str) -> None:
    m = MachineModel.preset(name)
    assert MachineModel.preset(name.upper()) is m
    assert m.sm_count > 0 and m.l2_bytes > m.smem_per_sm_bytes >= m.smem_per_block_bytes > 0
    assert m.copy_bandwidth_bytes_per_s > 0 and m.fp32_peak_flops_per_s > 0
    assert m.arch == f"sm_{m.compute_capability[0]}{m.compute_capability[1]}"
    assert hash(m) == hash(dataclasses.replace(m))


@pytest.mark.parametrize("name", ["h300", "", "nvidia h200", "rtx4090"])
def test_unknown_preset_lists_allowed_names(name: str) -> None:
    with pytest.raises(UnknownMachine) as info:
        MachineModel.preset(name)
    message = str(info.value)
    assert repr(name) in message
    assert "allowed a100, h100, h200, p100 (bounds only), v100 (bounds only)" in message
    assert isinstance(info.value, KeyError) and isinstance(info.value, ConvtuneError)


def test_fast_memory_words_scopes() -> None:
    m = MachineModel.preset("h200")
    # block: opt-in shared memory of one block + half the SM's register file
    assert m.fast_memory_words("block") == (232_448 + 65_536 * 4 // 2) // 4 == 90_880
    assert m.fast_memory_words() == m.fast_memory_words("block")
    assert m.fast_memory_words("sm") == (233_472 + 65_536 * 4) // 4 == 123_904
    assert m.fast_memory_words("l2") == 62_914_560 // 4
    assert m.fast_memory_words("block", word_bytes=2) == 2 * m.fast_memory_words("block")
    assert m.fast_memory_words("block") < m.fast_memory_words("sm") < m.fast_memory_words("l2")


def test_fast_memory_words_rejects_unknown_scope() -> None:
    with pytest.raises(ValueError, match="allowed 'block', 'sm', 'l2'"):
        MachineModel.preset("h200").fast_memory_words("grid")


def test_with_ceilings_returns_a_new_model() -> None:
    base = MachineModel.preset("a100")
    m = base.with_ceilings(1.5e12, 18e12)
    assert (m.copy_bandwidth_bytes_per_s, m.fp32_peak_flops_per_s, m.ceilings_source) == (1.5e12, 18e12, "measured")
    assert base.copy_bandwidth_bytes_per_s == 2.039e12 and base.ceilings_source == "vendor"
    assert dataclasses.replace(m, copy_bandwidth_bytes_per_s=2.039e12, fp32_peak_flops_per_s=19.5e12,
                               ceilings_source="vendor") == base
    assert base.with_ceilings(1e12, 1e13, source="bench 2026-11").ceilings_source == "bench 2026-11"
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.sm_count = 1  # type: ignore[misc]


# ---- from_device with a stand-in CuPy module --------------------------------------------------------------
def _fake_cupy(monkeypatch: pytest.MonkeyPatch, get_props: Any) -> None:
    runtime = types.SimpleNamespace(getDeviceProperties=get_props)
    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)


def _props(name: bytes) -> dict[str, Any]:
    return {"name": name, "major": 9, "minor": 0, "multiProcessorCount": 132, "sharedMemPerBlockOptin": 232_448,
            "sharedMemPerMultiprocessor": 233_472, "regsPerMultiprocessor": 65_536, "l2CacheSize": 62_914_560,
            "maxThreadsPerBlock": 1024, "maxThreadsPerMultiProcessor": 2048, "maxBlocksPerMultiProcessor": 32,
            "memoryClockRate": 2_619_000, "memoryBusWidth": 6144, "clockRate": 1_980_000}


def test_from_device_without_cupy_raises_device_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ImportError
    with pytest.raises(DeviceUnavailable, match=r"pip install 'convtune\[cuda\]'"):
        MachineModel.from_device()


def test_from_device_without_device_raises_device_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_device(device_id: int) -> dict[str, Any]:
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    _fake_cupy(monkeypatch, no_device)
    with pytest.raises(DeviceUnavailable, match="no CUDA device 3: cudaErrorNoDevice"):
        MachineModel.from_device(3)


def test_from_device_known_name_takes_preset_ceilings(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cupy(monkeypatch, lambda device_id: _props(b"NVIDIA H200"))
    m = MachineModel.from_device()
    h200 = MachineModel.preset("h200")
    assert m == h200


def test_from_device_unknown_name_uses_theoretical_ceilings(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cupy(monkeypatch, lambda device_id: _props(b"NVIDIA Future GPU"))
    m = MachineModel.from_device()
    assert m.name == "NVIDIA Future GPU" and m.ceilings_source == "device-theoretical"
    assert m.copy_bandwidth_bytes_per_s == pytest.approx(2 * 2_619_000e3 * 6144 / 8)
    assert m.fp32_peak_flops_per_s == pytest.approx(2 * 128 * 132 * 1_980_000e3)


def test_from_device_raises_or_works_here() -> None:
    """On any machine: either a usable model or DeviceUnavailable, never another error."""
    try:
        m = MachineModel.from_device()
    except DeviceUnavailable as exc:
        pytest.skip(f"no usable CUDA device here: {exc}")
    assert m.sm_count > 0


@pytest.mark.gpu
def test_from_device_real_gpu() -> None:
    m = MachineModel.from_device()
    assert m.sm_count > 0 and m.smem_per_block_bytes >= 48 * 1024 and m.regs_per_sm >= 32_768
    assert m.copy_bandwidth_bytes_per_s > 1e11 and m.fp32_peak_flops_per_s > 1e12
    assert m.arch.startswith("sm_")
    if "h200" in m.name.lower():
        assert m.sm_count == 132 and m.smem_per_block_bytes == 232_448
        assert m.copy_bandwidth_bytes_per_s == 4.19e12


def test_presets_below_sm80_are_bounds_only() -> None:
    from convtune.errors import UnsupportedDevice

    assert {k for k, m in PRESETS.items() if not m.runs_kernels} == {"v100", "p100"}
    assert MachineModel.preset("a100").require_kernels() == MachineModel.preset("a100")
    with pytest.raises(UnsupportedDevice, match=r"--machine: Tesla P100 is sm_60; .*sm_80\+"):
        MachineModel.preset("p100").require_kernels("--machine")
    assert issubclass(UnsupportedDevice, DeviceUnavailable)


# ---- the tensor cores' ceilings: carried beside the fp32 ones, used by no floor of a CUDA-core family --------------
def test_h200_carries_the_tf32_ceilings() -> None:
    m = MachineModel.preset("h200")
    assert m.tf32_peak_flops_per_s == 389e12 and m.datasheet_tf32_flops_per_s == 494.7e12
    assert m.bf16_peak_flops_per_s == 0.0                       # not measured yet: unknown
    assert (m.peak_flops_per_s(), m.peak_flops_per_s("fp32")) == (50.9e12, 50.9e12)
    assert m.peak_flops_per_s("tf32") == 389e12 and m.peak_flops_per_s("bf16") == 0.0
    sheet = m.datasheet()
    assert sheet.peak_flops_per_s("fp32") == 67e12 and sheet.peak_flops_per_s("tf32") == 494.7e12
    assert sheet.bf16_peak_flops_per_s == 0.0
    with pytest.raises(ValueError, match="allowed 'fp32', 'tf32', 'bf16'"):
        m.peak_flops_per_s("ieee")


@pytest.mark.parametrize("name", ["a100", "v100", "p100"])
def test_presets_without_tensor_core_figures_say_unknown(name: str) -> None:
    m = MachineModel.preset(name)
    assert m.peak_flops_per_s("tf32") == 0.0 and m.datasheet().peak_flops_per_s("tf32") == 0.0


def test_the_h100_preset_carries_its_measured_ceilings_and_keeps_the_datasheet_apart() -> None:
    """Measured on the device tool's H100 (machine.H100_CEILINGS_SOURCE): the ceilings the models rank with; the
    datasheet's figures stay the separate peaks efficiency is also stated against."""
    from convtune.machine import H100_CEILINGS_SOURCE

    m = MachineModel.preset("h100")
    assert (m.copy_bandwidth_bytes_per_s, m.fp32_peak_flops_per_s) == (3.04e12, 51.7e12)
    assert (m.peak_flops_per_s("tf32"), m.peak_flops_per_s("bf16")) == (413.3e12, 794.8e12)
    assert m.launch_floor_s == 0.8e-6 and H100_CEILINGS_SOURCE in m.ceilings_source
    assert (Path(__file__).parents[1] / H100_CEILINGS_SOURCE).is_file()
    sheet = m.datasheet()
    assert sheet.copy_bandwidth_bytes_per_s == 3.35e12 and sheet.peak_flops_per_s("tf32") == 494.7e12


def test_a_machine_table_written_before_the_tf32_fields_gets_them_from_its_preset() -> None:
    old = {k: v for k, v in dataclasses.asdict(MachineModel.preset("h200")).items()
           if k not in ("tf32_peak_flops_per_s", "datasheet_tf32_flops_per_s", "bf16_peak_flops_per_s")}
    assert MachineModel.from_dict(old) == MachineModel.preset("h200")
    assert MachineModel.from_dict(dataclasses.asdict(MachineModel.preset("a100"))) == MachineModel.preset("a100")

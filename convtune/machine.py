"""MachineModel: the on-chip capacities and the measured ceilings of one GPU.

Capacities come from vendor data (or a device query); the two ceilings — copy bandwidth and fp32
FMA throughput — are what the roofline floor time uses. The H200 preset carries the ceilings measured
on the project's H200 (copy 4.19 TB/s counting bytes read + written, SGEMM without TF32 50.9 TFLOP/s);
the other presets carry vendor figures, flagged by ``ceilings_source``.

Beside the ceilings the floors use (``copy_bandwidth_bytes_per_s``, ``fp32_peak_flops_per_s``) every preset
carries the vendor **datasheet** peaks (``datasheet_bandwidth_bytes_per_s``, ``datasheet_fp32_flops_per_s``,
named by ``datasheet_source``): efficiency is reported against both (docs/bounds.md §11). Two more figures feed
the floors: ``l2_bandwidth_bytes_per_s`` (L2→SM, an optimistic figure: see :data:`OPTIMISTIC_L2_BYTES_PER_CLK_PER_SM`)
for the on-chip floor, and ``launch_floor_s`` (the least time any kernel took in the committed measurements;
0 = no launch floor) for the launch floor.

Precision classes (docs/design.md): the ceilings above are the CUDA cores' strict fp32 ones, what every floor uses
today (a strict config also serves a tf32 problem). The tensor cores' compute ceilings are carried beside them for
the families that use them — :meth:`MachineModel.peak_flops_per_s` by arithmetic: ``tf32_peak_flops_per_s``
(measured TF32 GEMM; H200: 389 TFLOP/s, H100: 413.3) with its datasheet figure ``datasheet_tf32_flops_per_s`` (H100 /
H200 SXM: 494.7 TFLOP/s dense), and ``bf16_peak_flops_per_s`` (measured bf16 GEMM; H100: 794.8 TFLOP/s; the H200's
not in its preset yet). 0 = unknown: no floor may be built on it.

The kernels copy global memory to shared memory with ``cp.async``, which needs compute capability 8.0
(Ampere) or newer: presets below it (V100, P100) are *bounds-only* — ``convtune bounds`` and the model
backend work for them, measuring on such a device is refused with :class:`~convtune.errors.UnsupportedDevice`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from convtune.errors import DeviceUnavailable, UnknownMachine, UnsupportedDevice

#: The oldest compute capability the kernels run on (``cp.async``: sm_80, Ampere).
MIN_COMPUTE_CAPABILITY = (8, 0)

#: L2→SM bandwidth, no sound figure exists: NVIDIA publishes no L2 bandwidth for these GPUs, and a
#: microbenchmark figure is a measurement, not a bound. A *high* bandwidth gives a *lower*, hence safe, on-chip
#: floor, so the presets use a deliberately optimistic cap: 2 × 128 B per clock per SM (a load and a store port,
#: each as wide as the SM's 128 B/clk L1/shared-memory datapath, 32 banks × 4 B: shared/reference/kernel-craft.md
#: [CPG]) × the SM count × :data:`OPTIMISTIC_CLOCK_HZ`. It is an assumption chosen to err high, not a measurement.
OPTIMISTIC_L2_BYTES_PER_CLK_PER_SM = 2 * 128
#: 2.0 GHz: above the maximum boost clock of every preset (vendor whitepapers: H100/H200 SXM 1.98 GHz, A100
#: 1.41 GHz, V100 SXM2 1.53 GHz, P100 SXM2 1.48 GHz), so the L2 figure errs high.
OPTIMISTIC_CLOCK_HZ = 2.0e9

#: The H200's launch floor: a time no kernel launch on the project's H200 beats. Measured (benchmarks/results/
#: ceilings_h200/device_ceilings.md, 2026-12-01, `python benchmarks/device_ceilings.py`): an empty kernel of one
#: 32-thread block takes 0.608 µs median, 0.543 µs least, by the CUDA profiler (the clock every kernel table uses);
#: a one-word store the same. The floor is 0.5 µs, below the least measured. (It replaces an assumed 2.0 µs.)
#: Presets without measurements carry 0 (no launch floor).
H200_LAUNCH_FLOOR_S = 0.5e-6
#: Where the H100 preset's ceilings were measured (`python benchmarks/device_ceilings.py` on the device tool's H100
#: 80GB HBM3, 2026-12-05): copy bandwidth, GEMM rates per class, the empty kernel's time.
H100_CEILINGS_SOURCE = "benchmarks/results/igemm_wgmma_h200/six_families_h100/ceilings/device_ceilings.md"
#: The H100's launch floor: its empty kernel took 0.864 µs median, 0.832 µs least by the CUDA profiler (H100_CEILINGS_
#: SOURCE); the floor is 0.8 µs, below the least measured.
H100_LAUNCH_FLOOR_S = 0.8e-6
#: TF32 tensor-core GEMM throughput measured on the project's H200, FLOP/s (docs/design.md, "Measurement protocol";
#: the shared baseline): the compute ceiling of a family that multiplies on the tensor cores in TF32.
H200_TF32_PEAK_FLOPS_PER_S = 389e12
#: The H200 SXM datasheet's dense TF32 tensor-core peak, FLOP/s (989 TFLOP/s with 2:4 sparsity, halved).
H200_DATASHEET_TF32_FLOPS_PER_S = 494.7e12


def optimistic_l2_bandwidth(sm_count: int) -> float:
    """The optimistic L2→SM bandwidth of ``sm_count`` SMs, bytes/s (see :data:`OPTIMISTIC_L2_BYTES_PER_CLK_PER_SM`)."""
    return float(OPTIMISTIC_L2_BYTES_PER_CLK_PER_SM * sm_count * OPTIMISTIC_CLOCK_HZ)


@dataclass(frozen=True, slots=True)
class MachineModel:
    """One GPU model. Sizes in bytes, rates per second."""

    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    smem_per_block_bytes: int          # opt-in maximum dynamic shared memory of one block
    smem_per_sm_bytes: int
    regs_per_sm: int                   # 32-bit registers
    l2_bytes: int
    copy_bandwidth_bytes_per_s: float  # device-to-device copy, bytes read + written over time
    fp32_peak_flops_per_s: float
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    max_regs_per_thread: int = 255
    smem_reserved_per_block_bytes: int = 1024
    ceilings_source: str = "vendor"
    datasheet_bandwidth_bytes_per_s: float = 0.0   # vendor datasheet DRAM bandwidth; 0 = unknown
    datasheet_fp32_flops_per_s: float = 0.0        # vendor datasheet fp32 peak (no tensor cores); 0 = unknown
    datasheet_source: str = ""
    l2_bandwidth_bytes_per_s: float = 0.0          # L2→SM, all SMs together, erring high; 0 = no on-chip floor
    launch_floor_s: float = 0.0                    # least kernel time measured on this GPU; 0 = no launch floor
    tf32_peak_flops_per_s: float = 0.0             # TF32 tensor-core GEMM, FLOP/s, measured; 0 = unknown
    datasheet_tf32_flops_per_s: float = 0.0        # vendor datasheet dense TF32 tensor-core peak; 0 = unknown
    bf16_peak_flops_per_s: float = 0.0             # BF16 tensor-core GEMM (fp32 accumulation), measured; 0 = unknown

    @property
    def arch(self) -> str:
        """NVRTC/nvcc architecture name, e.g. ``sm_90``."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    @property
    def runs_kernels(self) -> bool:
        """Whether convtune's kernels can run on this GPU (compute capability >= :data:`MIN_COMPUTE_CAPABILITY`);
        ``False``: a bounds-only machine."""
        return tuple(self.compute_capability) >= MIN_COMPUTE_CAPABILITY

    def require_kernels(self, field: str = "device") -> MachineModel:
        """``self`` when the kernels run on it; raises :class:`UnsupportedDevice` (one line naming ``field``)
        for a GPU older than sm_80."""
        if not self.runs_kernels:
            need = "sm_{}{}".format(*MIN_COMPUTE_CAPABILITY)
            raise UnsupportedDevice(
                f"{field}: {self.name} is {self.arch}; convtune's kernels need {need}+ (they use cp.async), so "
                "it is bounds-only: `convtune bounds` and `--backend model` work, measuring does not")
        return self

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity where the roofline turns from bandwidth- to compute-bound."""
        return self.fp32_peak_flops_per_s / self.copy_bandwidth_bytes_per_s

    def fast_memory_words(self, scope: str = "block", word_bytes: int = 4) -> int:
        """Fast memory S in words: ``"block"`` = shared memory of one block + the registers of one SM
        split over two blocks (what one output tile can hold), ``"sm"`` = shared memory + registers of
        one SM, ``"l2"`` = the L2 cache."""
        if scope == "block":
            return (self.smem_per_block_bytes + self.regs_per_sm * 4 // 2) // word_bytes
        if scope == "sm":
            return (self.smem_per_sm_bytes + self.regs_per_sm * 4) // word_bytes
        if scope == "l2":
            return self.l2_bytes // word_bytes
        raise ValueError(f"scope={scope!r}: allowed 'block', 'sm', 'l2'")

    def peak_flops_per_s(self, arithmetic: str = "fp32") -> float:
        """The compute ceiling of one kind of arithmetic, FLOP/s (2 per multiply-accumulate): ``"fp32"`` (strict
        FMAs on the CUDA cores: ``fp32_peak_flops_per_s``), ``"tf32"`` (``tf32_peak_flops_per_s``) or ``"bf16"``
        (``bf16_peak_flops_per_s``) on the tensor cores. 0.0 = unknown for this GPU: a floor needs a known ceiling.

        Raises:
            ValueError: another ``arithmetic``.
        """
        peaks = {"fp32": self.fp32_peak_flops_per_s, "tf32": self.tf32_peak_flops_per_s,
                 "bf16": self.bf16_peak_flops_per_s}
        if arithmetic not in peaks:
            raise ValueError(f"arithmetic={arithmetic!r}: allowed {', '.join(map(repr, peaks))}")
        return peaks[arithmetic]

    @property
    def has_datasheet(self) -> bool:
        return self.datasheet_bandwidth_bytes_per_s > 0 and self.datasheet_fp32_flops_per_s > 0

    def datasheet(self) -> MachineModel:
        """This machine with the datasheet peaks as its ceilings (``ceilings_source`` = the datasheet; the TF32
        ceiling the datasheet's, the BF16 one unknown); itself when no datasheet figures are known."""
        if not self.has_datasheet:
            return self
        sheet = self.with_ceilings(self.datasheet_bandwidth_bytes_per_s, self.datasheet_fp32_flops_per_s,
                                   source=self.datasheet_source or "datasheet")
        return replace(sheet, tf32_peak_flops_per_s=self.datasheet_tf32_flops_per_s, bf16_peak_flops_per_s=0.0)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MachineModel:
        """A machine from :func:`dataclasses.asdict` output. Fields it lacks (a table written before they
        existed) come from the preset of the same name, else the defaults."""
        m = dict(d)
        m["compute_capability"] = tuple(m["compute_capability"])
        base = next((p for p in PRESETS.values() if p.name == m.get("name")), None)
        if base is not None:
            for key in ("datasheet_bandwidth_bytes_per_s", "datasheet_fp32_flops_per_s", "datasheet_source",
                        "l2_bandwidth_bytes_per_s", "launch_floor_s", "tf32_peak_flops_per_s",
                        "datasheet_tf32_flops_per_s", "bf16_peak_flops_per_s"):
                m.setdefault(key, getattr(base, key))
        return cls(**m)

    def with_ceilings(self, copy_bandwidth_bytes_per_s: float, fp32_peak_flops_per_s: float,
                      source: str = "measured") -> MachineModel:
        return replace(self, copy_bandwidth_bytes_per_s=copy_bandwidth_bytes_per_s,
                       fp32_peak_flops_per_s=fp32_peak_flops_per_s, ceilings_source=source)

    @classmethod
    def preset(cls, name: str) -> MachineModel:
        """A preset by name (case-insensitive): h200, h100, a100, v100, p100."""
        try:
            return PRESETS[name.lower()]
        except KeyError:
            raise UnknownMachine(f"machine {name!r} is unknown: allowed {preset_help()}") from None

    @classmethod
    def from_device(cls, device_id: int = 0) -> MachineModel:
        """Query the CUDA device through CuPy (imported here, lazily).

        Capacities are read from the device. The ceilings come from the matching preset when the
        device name matches one (e.g. "NVIDIA H200"), else from the device's clocks and memory bus
        (a theoretical figure, flagged ``ceilings_source="device-theoretical"``).
        """
        try:
            import cupy
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise DeviceUnavailable("CuPy is not installed: pip install 'convtune[cuda]'") from exc
        try:
            props: dict[str, Any] = cupy.cuda.runtime.getDeviceProperties(device_id)
        except Exception as exc:  # pragma: no cover - depends on the machine
            raise DeviceUnavailable(f"no CUDA device {device_id}: {exc}") from exc
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        cc = (int(props["major"]), int(props["minor"]))
        base = next((p for key, p in PRESETS.items() if key in name.lower()), None)
        if base is not None:
            bandwidth, peak, source = (base.copy_bandwidth_bytes_per_s, base.fp32_peak_flops_per_s,
                                       base.ceilings_source)
        else:
            # theoretical: 2 transfers/clock (DDR) × bus bytes; 128 fp32 lanes/SM × 2 flop × clock
            bandwidth = 2.0 * props["memoryClockRate"] * 1e3 * props["memoryBusWidth"] / 8
            peak = 2.0 * 128 * props["multiProcessorCount"] * props["clockRate"] * 1e3
            source = "device-theoretical"
        extras: dict[str, Any] = {
            "datasheet_bandwidth_bytes_per_s": base.datasheet_bandwidth_bytes_per_s if base else bandwidth,
            "datasheet_fp32_flops_per_s": base.datasheet_fp32_flops_per_s if base else peak,
            "datasheet_source": base.datasheet_source if base else "device-theoretical (clocks and bus width)",
            "l2_bandwidth_bytes_per_s": optimistic_l2_bandwidth(int(props["multiProcessorCount"])),
            "launch_floor_s": base.launch_floor_s if base else 0.0,
            "tf32_peak_flops_per_s": base.tf32_peak_flops_per_s if base else 0.0,
            "datasheet_tf32_flops_per_s": base.datasheet_tf32_flops_per_s if base else 0.0,
            "bf16_peak_flops_per_s": base.bf16_peak_flops_per_s if base else 0.0,
        }
        return cls(
            name=name, compute_capability=cc, sm_count=int(props["multiProcessorCount"]),
            smem_per_block_bytes=int(props["sharedMemPerBlockOptin"]),
            smem_per_sm_bytes=int(props["sharedMemPerMultiprocessor"]),
            regs_per_sm=int(props["regsPerMultiprocessor"]), l2_bytes=int(props["l2CacheSize"]),
            copy_bandwidth_bytes_per_s=bandwidth, fp32_peak_flops_per_s=peak,
            max_threads_per_block=int(props["maxThreadsPerBlock"]),
            max_threads_per_sm=int(props["maxThreadsPerMultiProcessor"]),
            max_blocks_per_sm=int(props.get("maxBlocksPerMultiProcessor", 32)),
            ceilings_source=source, **extras,
        )


# Datasheets (peak DRAM bandwidth, peak fp32 without tensor cores): "NVIDIA H200 Tensor Core GPU" datasheet (H200 SXM:
# 4.8 TB/s HBM3e, 67 TFLOP/s FP32; TF32 tensor core 989 TFLOP/s with sparsity, 494.7 dense); "NVIDIA H100 Tensor Core
# GPU" datasheet (H100 SXM5: 3.35 TB/s, 67 TFLOP/s); "NVIDIA A100 Tensor Core GPU" datasheet (A100 SXM4 80GB: 2,039
# GB/s, 19.5 TFLOP/s); "NVIDIA Tesla V100 GPU Accelerator" datasheet (V100 SXM2: 900 GB/s, 15.7 TFLOP/s); "NVIDIA
# Tesla P100" datasheet (P100 SXM2: 732 GB/s, 10.6 TFLOP/s).
PRESETS: dict[str, MachineModel] = {
    # Measured on the project's H200 (docs/design.md): copy 4.19 TB/s, SGEMM (no TF32) 50.9 TFLOP/s, TF32 GEMM
    # 389 TFLOP/s (the shared baseline's measurement); BF16 not measured yet.
    "h200": MachineModel("NVIDIA H200", (9, 0), 132, 232_448, 233_472, 65_536, 62_914_560,
                         4.19e12, 50.9e12, ceilings_source="measured (H200, docs/design.md)",
                         datasheet_bandwidth_bytes_per_s=4.8e12, datasheet_fp32_flops_per_s=67e12,
                         datasheet_source="datasheet (NVIDIA H200 SXM)",
                         l2_bandwidth_bytes_per_s=optimistic_l2_bandwidth(132), launch_floor_s=H200_LAUNCH_FLOOR_S,
                         tf32_peak_flops_per_s=H200_TF32_PEAK_FLOPS_PER_S,
                         datasheet_tf32_flops_per_s=H200_DATASHEET_TF32_FLOPS_PER_S),
    # Measured on the device tool's H100 80GB HBM3 (H100_CEILINGS_SOURCE): copy 3.04 TB/s, SGEMM 51.7 TFLOP/s, TF32
    # GEMM 413.3, bf16 794.8 TFLOP/s, an empty kernel 0.832 µs least. Until 2026-12-05 this preset carried the
    # datasheet's 3.35 TB/s and 66.9 TFLOP/s as its ceilings, which the models (fitted against measured H200 ceilings)
    # read as a 31% faster CUDA-core issue rate: the untuned op's stems on an H100 ran 0.38–0.45× cuDNN TF32.
    "h100": MachineModel("NVIDIA H100", (9, 0), 132, 232_448, 233_472, 65_536, 52_428_800, 3.04e12, 51.7e12,
                         ceilings_source=f"measured (H100, {H100_CEILINGS_SOURCE})",
                         datasheet_bandwidth_bytes_per_s=3.35e12, datasheet_fp32_flops_per_s=67e12,
                         datasheet_source="datasheet (NVIDIA H100 SXM5)",
                         l2_bandwidth_bytes_per_s=optimistic_l2_bandwidth(132), launch_floor_s=H100_LAUNCH_FLOOR_S,
                         tf32_peak_flops_per_s=413.3e12, datasheet_tf32_flops_per_s=494.7e12,
                         bf16_peak_flops_per_s=794.8e12),
    # Vendor data below: A100 SXM4 80 GB, V100 SXM2, P100 SXM2.
    "a100": MachineModel("NVIDIA A100", (8, 0), 108, 166_912, 167_936, 65_536, 41_943_040, 2.039e12, 19.5e12,
                         datasheet_bandwidth_bytes_per_s=2.039e12, datasheet_fp32_flops_per_s=19.5e12,
                         datasheet_source="datasheet (NVIDIA A100 SXM4 80GB)",
                         l2_bandwidth_bytes_per_s=optimistic_l2_bandwidth(108)),
    "v100": MachineModel("Tesla V100", (7, 0), 80, 98_304, 98_304, 65_536, 6_291_456, 0.9e12, 15.7e12,
                         datasheet_bandwidth_bytes_per_s=0.9e12, datasheet_fp32_flops_per_s=15.7e12,
                         datasheet_source="datasheet (NVIDIA Tesla V100 SXM2)",
                         l2_bandwidth_bytes_per_s=optimistic_l2_bandwidth(80)),
    "p100": MachineModel("Tesla P100", (6, 0), 56, 49_152, 65_536, 65_536, 4_194_304, 0.732e12, 10.6e12,
                         smem_reserved_per_block_bytes=0,
                         datasheet_bandwidth_bytes_per_s=0.732e12, datasheet_fp32_flops_per_s=10.6e12,
                         datasheet_source="datasheet (NVIDIA Tesla P100 SXM2)",
                         l2_bandwidth_bytes_per_s=optimistic_l2_bandwidth(56)),
}


def preset_help() -> str:
    """The preset names, sorted, for help texts and errors, bounds-only ones marked:
    ``"a100, h100, h200, p100 (bounds only), v100 (bounds only)"``."""
    return ", ".join(name + ("" if PRESETS[name].runs_kernels else " (bounds only)") for name in sorted(PRESETS))

"""CupyBenchmarker: compile, verify against the float64 reference, and time on the current GPU.

Protocol (docs/design.md): fresh normal inputs per problem (never zeros); the output is poisoned with
NaN before the one verification launch; relative error ‖y − ref‖/‖ref‖ ≤ the plan's tolerance (the
family launcher's ``tolerance(plan)``: 1e-5 direct, scaled with m for Winograd); then
:func:`convtune.kernels.timing.time_launches` over rotating buffer sets — x, the filter operand and y each — of
more than 2× L2 in all, or with an L2 flush before each timed launch where 16 sets do not reach it. A CUDA fault raises
:class:`ContextLost`: the context is unusable afterwards, so the worker process running this exits.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from convtune.errors import CompileError, ConvtuneError
from convtune.kernels import storage_arrays as storage
from convtune.kernels.compile import cupy_module
from convtune.kernels.devices import kernel_machine
from convtune.kernels.registry import KernelSpec, get_spec
from convtune.kernels.timing import L2Flusher, rotation, time_launches
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import OK, DeviceInfo, TrialResult


class ContextLost(ConvtuneError, RuntimeError):
    """A kernel faulted; the CUDA context of this process can no longer be used."""


def measure_ceilings(device_id: int = 0) -> tuple[float, float]:
    """(copy bytes/s counting read + write, SGEMM fp32 flop/s) measured on the device now."""
    cp = cupy_module()
    with cp.cuda.Device(device_id):
        src = cp.empty(256 << 20, dtype=cp.float32)  # 1 GiB
        dst = cp.empty_like(src)
        copy = time_launches(lambda _i: cp.copyto(dst, src), warmup=2, reps=10)
        n = 8192
        a = cp.random.standard_normal((n, n), dtype=cp.float32)
        b = cp.random.standard_normal((n, n), dtype=cp.float32)
        gemm = time_launches(lambda _i: cp.matmul(a, b), warmup=2, reps=5)
        return 2 * src.nbytes / (copy.median_ms * 1e-3), 2 * n**3 / (gemm.median_ms * 1e-3)


class CupyBenchmarker:
    backend = "gpu"

    def __init__(self, device_id: int = 0, reps: int = 20, measure_device_ceilings: bool = True) -> None:
        # the probe first: no CuPy, no device or a GPU below sm_80 is one typed error, before any CUDA work
        machine = kernel_machine(device_id)
        cp = cupy_module()
        self.cp = cp
        self.device_id = device_id
        cp.cuda.Device(device_id).use()
        # parallel nvcc pre-compilation (prefetch) fills this cubin cache; load_kernel reads it
        os.environ.setdefault("CONVTUNE_CUBIN_DIR", str(Path.home() / ".cache" / "convtune" / "cubins"))
        if measure_device_ceilings:
            bandwidth, peak = measure_ceilings(device_id)
            machine = machine.with_ceilings(bandwidth, peak, "measured by convtune on this device")
        self.machine = machine
        self.reps = reps
        self._inputs: dict[str, dict[str, Any]] = {}
        self._flush = L2Flusher(machine.l2_bytes)  # one scratch buffer for every problem that needs a flush

    def device(self) -> DeviceInfo:
        rt = self.cp.cuda.runtime
        return DeviceInfo(self.machine.name, "{}.{}".format(*self.machine.compute_capability), self.machine.sm_count,
                          _version(rt.driverGetVersion()), _version(rt.runtimeGetVersion()), self.machine)

    def kernel_version(self, spec: KernelSpec) -> str:
        return spec.source_sha256()

    def available(self, problem: ConvProblem) -> set[str] | None:
        return None

    def prefetch(self, problem: ConvProblem, plans: list[Any]) -> dict[str, float]:
        """Compile ``plans`` with nvcc in parallel into the cubin cache (no-op without nvcc).

        Returns nvcc seconds per config key (0.0 for ones already cached).
        """
        from convtune.kernels.compile import CompileError, nvcc_available, precompile, source_hash

        if not nvcc_available():
            return {}
        texts = {pl.config.key(): pl.source() for pl in plans}
        done = precompile(list(texts.values()), self.machine.arch, Path(os.environ["CONVTUNE_CUBIN_DIR"]),
                          jobs=os.cpu_count() or 8)
        out = {}
        for key, text in texts.items():
            r = done[source_hash(text)]
            out[key] = 0.0 if isinstance(r, CompileError) else r.compile_s
        return out

    def _buffers(self, problem: ConvProblem) -> dict[str, Any]:
        key = problem.key()
        if key not in self._inputs:
            from convtune.kernels.reference import conv2d_reference_gpu

            self._inputs.clear()  # one problem at a time keeps memory bounded
            cp = self.cp
            rng = cp.random.default_rng()
            # every operand of a launch rotates (x, the filter operand, y); the filter operand's bytes are taken as
            # w's, a lower estimate of packed or transformed ones, so the rotation errs towards more sets / a flush
            rot = rotation(problem.operand_bytes, self.machine.l2_bytes)
            sets = rot.sets
            dtype = problem.dtype   # 16-bit problems: inputs rounded to the dtype, the reference on those values
            xs = [storage.to_storage(rng.standard_normal((problem.N, problem.C, problem.H, problem.W),
                                                         dtype=cp.float32), dtype) for _ in range(sets)]
            w = storage.to_storage(rng.standard_normal((problem.K, problem.C // problem.groups, problem.R, problem.S),
                                                       dtype=cp.float32), dtype)
            ws = [w] + [w.copy() for _ in range(sets - 1)]
            ys = [storage.empty((problem.N, problem.K, problem.P, problem.Q), dtype) for _ in range(sets)]
            x_ref, pad_w = storage.to_float32(xs[0], dtype), problem.pad_w
            if problem.causal:  # the causal padding is on the left only: pad explicitly, none in the reference
                x_ref, pad_w = cp.pad(x_ref, ((0, 0), (0, 0), (0, 0), (problem.pad_w, 0))), 0
            ref = conv2d_reference_gpu(x_ref, storage.to_float32(w, dtype), stride=(problem.stride_h, problem.stride_w),
                                       padding=(problem.pad_h, pad_w), dilation=(problem.dil_h, problem.dil_w),
                                       groups=problem.groups)
            del x_ref
            self._inputs[key] = {"xs": xs, "w": w, "ws": ws, "filters": {}, "ys": ys, "ref": ref, "sets": sets,
                                 "flush": self._flush if rot.flush else None}
        return self._inputs[key]

    @staticmethod
    def _launcher(plan: Any) -> Any:
        return get_spec(plan.config.family, plan.config.direction).launcher

    def _filters(self, buf: dict[str, Any], plan: Any) -> list[Any]:
        """The plan's filter operand (packed or Winograd-transformed weights) of every buffer set, shared by plans
        with equal keys: set ``i`` is prepared from its own copy of w, so filters rotate with x and y."""
        launcher = self._launcher(plan)
        key = launcher.filters_key(plan)
        if key not in buf["filters"]:
            buf["filters"][key] = [launcher.prepare_filters(plan, w) for w in buf["ws"]]
        return buf["filters"][key]

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        from convtune.kernels.reference import relative_error

        cp = self.cp
        launcher = self._launcher(plan)
        try:
            kernel = launcher.compile_plan(plan)
        except CompileError as exc:
            return TrialResult("compile_error", error=str(exc)[-2000:], smem_bytes=plan.smem_bytes)
        res = kernel.resources
        common = {"num_regs": res.num_regs, "local_bytes": res.local_bytes, "smem_bytes": plan.smem_bytes,
                  "compile_s": kernel.compile_s}
        buf = self._buffers(problem)
        try:
            filters = self._filters(buf, plan)
            storage.poison(buf["ys"][0], problem.dtype)
            launcher.launch(plan, kernel, buf["xs"][0], filters[0], buf["ys"][0])
            cp.cuda.get_current_stream().synchronize()
            err = relative_error(storage.to_float32(buf["ys"][0], problem.dtype), buf["ref"])
            tolerance = launcher.tolerance(plan)
            if not err <= tolerance:
                return TrialResult("wrong", rel_error=err, error=f"relative error {err:.3e} > {tolerance:g}", **common)
            timing = time_launches(lambda i: launcher.launch(plan, kernel, buf["xs"][i], filters[i], buf["ys"][i]),
                                   sets=buf["sets"], warmup=3, reps=self.reps, flush=buf["flush"])
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError, ConvtuneError) as exc:
            raise ContextLost(f"{plan.config.key()}: {exc}") from exc
        return TrialResult(OK, timing.median_ms, timing.p10_ms, timing.p90_ms, timing.min_ms, timing.reps,
                           timing.sets, err, **common)

    def retime(self, problem: ConvProblem, plans: list[Any], rounds: int = 5, hot: bool = False) -> list[TrialResult]:
        """Interleave the plans (A B C A B C ...) so drift hits all alike; median of per-round medians. ``hot``:
        buffer set 0 only and no flush, back to back (operands that fit stay in L2), instead of the rotation."""
        buf = self._buffers(problem)
        sets, flush = (1, None) if hot else (buf["sets"], buf["flush"])
        kernels = [self._launcher(pl).compile_plan(pl) for pl in plans]
        samples: list[list[float]] = [[] for _ in plans]
        filters = [self._filters(buf, pl) for pl in plans]
        for _ in range(rounds):
            for i, (pl, kernel) in enumerate(zip(plans, kernels, strict=True)):
                launcher = self._launcher(pl)

                def launch(j: int, pl: Any = pl, k: Any = kernel, la: Any = launcher, f: Any = filters[i]) -> None:
                    la.launch(pl, k, buf["xs"][j], f[j], buf["ys"][j])

                t = time_launches(launch, sets=sets, warmup=1, reps=10, flush=flush)
                samples[i].append(t.median_ms)
        return [TrialResult(OK, statistics.median(s), min(s), max(s), min(s), 10 * rounds, sets) for s in samples]

    def close(self) -> None:
        self._inputs.clear()
        self._flush.release()


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def plan_for(problem: ConvProblem, config_key: str, machine: MachineModel) -> Any:
    """Rebuild a plan from a config key (used by the worker process)."""
    from convtune.kernels.config import parse_config_key

    config = parse_config_key(config_key)
    return get_spec(config.family, config.direction).plan(problem, config, machine)

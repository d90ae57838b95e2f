"""Trials in a child process: a fault or a hang kills only the child, which is restarted.

:class:`SubprocessBenchmarker` implements the benchmarker protocol by forwarding each call over a pipe
to a child process (``spawn`` start method, so the child has a fresh CUDA context) that builds the real
benchmarker from ``"module:factory"``. If the child dies (illegal address, ``ContextLost``, a kill) the
call returns a ``crashed`` result; if it does not answer within ``timeout_s`` it is killed and the call
returns ``timeout``. Either way the next call starts a new child and the study goes on.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import traceback
from multiprocessing.connection import Connection
from typing import Any

from convtune.errors import ConvtuneError, DeviceUnavailable, UnsupportedDevice
from convtune.kernels.registry import KernelSpec
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import DeviceInfo, TrialResult

DEFAULT_FACTORY = "convtune.tuner.gpu:CupyBenchmarker"


def _build(factory: str, kwargs: dict[str, Any]) -> Any:
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)(**kwargs)


def _child_main(conn: Connection, factory: str, kwargs: dict[str, Any]) -> None:
    # Ctrl-C reaches the whole process group: the parent handles it (one line, then close() stops this
    # child); here it would only print a second traceback and lose the trial in flight
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from convtune.tuner.gpu import ContextLost, plan_for

    try:
        bench = _build(factory, kwargs)
        conn.send(("ready", bench.device().to_dict()))
    except Exception as exc:  # report why the worker cannot start, then stop
        # the kind lets the parent raise the same typed error (no CuPy, no GPU, a GPU below sm_80)
        kind = ("unsupported" if isinstance(exc, UnsupportedDevice) else
                "device" if isinstance(exc, DeviceUnavailable) else "other")
        conn.send(("error", (kind, f"{type(exc).__name__}: {exc}", str(exc))))
        return
    machine = bench.device().machine
    while True:
        try:
            cmd, payload = conn.recv()
        except EOFError:
            return
        try:
            if cmd == "stop":
                bench.close()
                conn.send(("ok", None))
                return
            if cmd == "measure":
                problem = ConvProblem(**payload["problem"])
                result = bench.measure(problem, plan_for(problem, payload["config"], machine)).to_dict()
            elif cmd == "retime":
                problem = ConvProblem(**payload["problem"])
                plans = [plan_for(problem, key, machine) for key in payload["configs"]]
                timed = bench.retime(problem, plans, payload["rounds"], payload.get("hot", False))
                result = [r.to_dict() for r in timed]
            elif cmd == "prefetch":
                problem = ConvProblem(**payload["problem"])
                plans = [plan_for(problem, key, machine) for key in payload["configs"]]
                result = bench.prefetch(problem, plans) if hasattr(bench, "prefetch") else {}
            elif cmd == "available":
                found = bench.available(ConvProblem(**payload["problem"]))
                result = sorted(found) if found is not None else None
            elif cmd == "kernel_version":
                from convtune.kernels.registry import get_spec

                result = bench.kernel_version(get_spec(*payload["kind"].split(".")))
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", result))
        except ContextLost as exc:
            conn.send(("ok", TrialResult("launch_error", error=str(exc)[-2000:]).to_dict()))
            os._exit(3)  # the CUDA context is gone: let the parent start a fresh process
        except Exception as exc:
            conn.send(("exception", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"))


class WorkerDied(ConvtuneError, RuntimeError):
    """The trial worker process could not start, or died while answering a call."""


class SubprocessBenchmarker:
    """The benchmarker protocol, served by a restartable child process."""

    def __init__(self, factory: str = DEFAULT_FACTORY, factory_kwargs: dict[str, Any] | None = None,
                 timeout_s: float = 120.0, start_timeout_s: float = 300.0, backend: str = "gpu") -> None:
        self.factory = factory
        self.factory_kwargs = factory_kwargs or {}
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.backend = backend
        self.restarts = 0
        self._ctx = multiprocessing.get_context("spawn")
        self._proc: Any = None
        self._conn: Connection | None = None
        self._device: DeviceInfo | None = None
        self._start()

    # ---- process management ---------------------------------------------------------------------
    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_child_main, args=(child, self.factory, self.factory_kwargs),
                                       daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(self.start_timeout_s):
            self._kill()
            raise WorkerDied(f"trial worker did not start within {self.start_timeout_s:g} s")
        try:
            kind, payload = parent.recv()
        except (EOFError, OSError):
            self._kill()
            raise WorkerDied("trial worker exited while starting") from None
        if kind != "ready":
            self._kill()
            why, text, message = payload
            if why == "unsupported":  # the child's typed error, so the CLI prints one line
                raise UnsupportedDevice(message)
            if why == "device":
                raise DeviceUnavailable(message)
            raise WorkerDied(f"trial worker failed to start: {text}")
        self._device = DeviceInfo.from_dict(payload)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(timeout=10)
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn = None, None

    def _ensure(self) -> None:
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            self.restarts += 1
            self._start()

    def _call(self, cmd: str, payload: Any, timeout_s: float | None = None) -> Any:
        self._ensure()
        assert self._conn is not None
        limit = timeout_s or self.timeout_s
        try:
            self._conn.send((cmd, payload))
            answered = self._conn.poll(limit)
            if answered:
                kind, result = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
            self._kill()
            raise WorkerDied(f"trial worker died during {cmd}: {type(exc).__name__}") from exc
        if not answered:  # outside the try: TimeoutError is an OSError and must not read as a death
            self._kill()
            raise TimeoutError(f"{cmd} did not finish within {limit:g} s")
        if kind == "exception":
            raise RuntimeError(f"trial worker raised: {result}")
        return result

    # ---- benchmarker protocol -------------------------------------------------------------------
    def device(self) -> DeviceInfo:
        assert self._device is not None
        return self._device

    def kernel_version(self, spec: KernelSpec) -> str:
        return self._call("kernel_version", {"kind": spec.kind})

    def available(self, problem: ConvProblem) -> set[str] | None:
        found = self._call("available", {"problem": problem.to_dict()})
        return set(found) if found is not None else None

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        try:
            return TrialResult.from_dict(self._call("measure", {"problem": problem.to_dict(),
                                                                "config": plan.config.key()}))
        except TimeoutError as exc:
            return TrialResult("timeout", error=str(exc))
        except WorkerDied as exc:
            return TrialResult("crashed", error=str(exc))

    def prefetch(self, problem: ConvProblem, plans: list[Any]) -> dict[str, float]:
        """Ask the child to compile ``plans`` ahead (parallel nvcc); nvcc seconds per config key."""
        try:
            return self._call("prefetch", {"problem": problem.to_dict(), "configs": [p.config.key() for p in plans]},
                              timeout_s=max(self.timeout_s, 30.0 * (1 + len(plans) // 8)))
        except (TimeoutError, WorkerDied):
            return {}

    def retime(self, problem: ConvProblem, plans: list[Any], rounds: int = 5, hot: bool = False) -> list[TrialResult]:
        rows = self._call("retime", {"problem": problem.to_dict(), "configs": [p.config.key() for p in plans],
                                     "rounds": rounds, "hot": hot}, timeout_s=self.timeout_s * max(1, len(plans)))
        return [TrialResult.from_dict(r) for r in rows]

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            try:
                self._conn.send(("stop", None))
                self._conn.poll(10)
            except (BrokenPipeError, OSError):
                pass
        self._kill()

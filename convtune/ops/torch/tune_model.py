"""Whole-model tuning: ``tune(model, example_inputs, budget_s=...)`` tunes every distinct convolution of a model.

1. One forward pass (no grad) with a pre-hook on every ``nn.Conv2d`` (converted or not) records each call's input
   shape; each becomes a :class:`~convtune.problem.ConvProblem` (dense groups = 1, depthwise groups = C) when
   convtune runs it (float32; the other layers stay PyTorch's and are listed as such). A dense layer's problem is
   of the precision class its calls will run in (:func:`convtune.ops.torch.dense.math_of`: ``tf32`` while
   PyTorch lets cuDNN convolutions use TF32, its default; else strict), so the tensor-core families are tuned
   for it; depthwise layers are strict (no tensor-core family runs them; the depthwise ops ask the strict class).
2. Each distinct problem is tuned once (a progress bar over them): on the local GPU by
   :func:`convtune.tuner.tune.tune` with the GPU benchmarker in a subprocess, heaviest first (layers × floor), the
   time budget split evenly, results stored in the tuning database (the resolver's: ``db``, else
   ``$CONVTUNE_DATABASE_URL``, else the default file); or, with ``url``, queued on a running service as one batch
   (``POST /v1/batches``, the problems' keys, an API key from ``api_key`` or ``$CONVTUNE_API_KEY``) and polled
   (``GET /v1/batches/{id}``) until it ends; each GPU-measured best (``GET /v1/configs/best?backend=...``) is then
   served to this process's ops (:func:`convtune.ops.resolver.remember`; replayed or predicted results are shown,
   never served).
3. The resolver's caches are cleared, so the next call of every op runs the tuned configs.
4. A per-layer table (shape, family, tuned ms, floor ms, efficiency = floor / tuned, share of the model's
   convolution time = the layer's tuned time / the sum over layers) is printed and returned.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from convtune.errors import ConvtuneError, InvalidInput
from convtune.ops import resolver
from convtune.ops.conv2d import TORCH_DTYPES
from convtune.problem import ConvProblem
from convtune.vocabulary import FINAL_BATCH_STATUSES as FINAL_BATCH_STATUSES
from convtune.vocabulary import FINAL_JOB_STATUSES as FINAL_JOB_STATUSES

API_KEY_ENV = "CONVTUNE_API_KEY"

Transport = Callable[[str, str, Any], Any]   # (method, path with query, JSON body or None) -> JSON answer


class ServiceError(ConvtuneError, RuntimeError):
    """The tuning service refused a request or could not be reached (the status and detail are in the message)."""


@dataclass(frozen=True, slots=True)
class Layer:
    """One convolution call of the model's forward pass."""

    name: str
    input_shape: tuple[int, ...]
    kind: str                        # "dense", "depthwise", or "pytorch" (convtune does not run it)
    problem: ConvProblem | None
    reason: str = ""                 # why PyTorch runs it


@dataclass(frozen=True, slots=True)
class ProblemResult:
    """The tuning outcome of one distinct problem."""

    problem: ConvProblem
    config: str | None
    time_ms: float | None
    floor_ms: float | None
    efficiency: float | None
    source: str                      # "gpu" (tuned here), "service", "service (replay)", "model", ...
    note: str = ""
    pytorch_ms: float | None = None  # PyTorch's own convolution (cuDNN) on this GPU, same protocol (.baseline)

    @property
    def vs_pytorch(self) -> float | None:
        """PyTorch's time / the tuned time (> 1: convtune is faster), where both were measured."""
        return self.pytorch_ms / self.time_ms if self.pytorch_ms and self.time_ms else None

    @property
    def family(self) -> str | None:
        return self.config.split(".", 1)[0] if self.config else None


@dataclass
class ModelTuning:
    """Per-layer results of :func:`tune`."""

    layers: list[Layer]
    results: dict[str, ProblemResult] = field(default_factory=dict)
    elapsed_s: float = 0.0
    kept_pytorch: list[str] = field(default_factory=list)   # modules turned back to nn.Conv2d (keep_faster)

    def result(self, layer: Layer) -> ProblemResult | None:
        return self.results.get(layer.problem.key()) if layer.problem is not None else None

    @property
    def conv_time_ms(self) -> float:
        """Σ over layers of the tuned time (layers convtune does not run, or without a result, count 0)."""
        return sum(r.time_ms for layer in self.layers if (r := self.result(layer)) and r.time_ms)

    def pytorch_pair_ms(self) -> tuple[float, float] | None:
        """(Σ PyTorch ms, Σ tuned ms) over the layers where both were measured; None where none was."""
        pairs = [(r.pytorch_ms, r.time_ms) for layer in self.layers
                 if (r := self.result(layer)) and r.pytorch_ms and r.time_ms]
        return (sum(p for p, _ in pairs), sum(t for _, t in pairs)) if pairs else None

    def rows(self) -> list[dict[str, Any]]:
        total = self.conv_time_ms
        rows = []
        for layer in self.layers:
            r = self.result(layer)
            t = r.time_ms if r else None
            rows.append({"layer": layer.name, "shape": layer.problem.key() if layer.problem else
                         f"x{tuple(layer.input_shape)}", "kind": layer.kind, "family": (r.family if r else None)
                         or ("PyTorch" if layer.kind == "pytorch" else None), "config": r.config if r else None,
                         "tuned_ms": t, "floor_ms": r.floor_ms if r else None,
                         "efficiency": r.efficiency if r else None,
                         "share": t / total if t and total > 0 else None, "source": r.source if r else None,
                         "pytorch_ms": r.pytorch_ms if r else None, "vs_pytorch": r.vs_pytorch if r else None,
                         "note": layer.reason or (r.note if r else "")})
        return rows

    def table(self) -> str:
        """The per-layer markdown table."""
        def num(v: float | None, fmt: str) -> str:
            return "—" if v is None or not math.isfinite(v) else format(v, fmt)

        lines = ["| layer | shape | family | tuned ms | floor ms | efficiency | share | PyTorch ms | × PyTorch "
                 "| note |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for row in self.rows():
            share = num(100 * row["share"], ".1f") + "%" if row["share"] is not None else "—"
            note = row["note"] or row["source"] or ""
            if row["vs_pytorch"] is not None and row["vs_pytorch"] < 1:
                kept = row["layer"] in self.kept_pytorch
                note = ("slower than PyTorch: PyTorch's kept" if kept else "slower than PyTorch") + (
                    f"; {note}" if note else "")
            lines.append(f"| {row['layer']} | {row['shape']} | {row['family'] or '—'} | {num(row['tuned_ms'], '.4g')} "
                         f"| {num(row['floor_ms'], '.4g')} | {num(row['efficiency'], '.3f')} | {share} "
                         f"| {num(row['pytorch_ms'], '.4g')} | {num(row['vs_pytorch'], '.2f')} | {note} |")
        lines.append(f"\nconvolution time of the model (Σ tuned ms over layers): {self.conv_time_ms:.4f} ms; "
                     f"{len(self.results)} distinct problems; {self.elapsed_s:.0f} s")
        pair = self.pytorch_pair_ms()
        if pair is not None:
            lines.append(f"PyTorch's own convolutions (cuDNN, same protocol) on the layers measured both ways: "
                         f"{pair[0]:.4f} ms against {pair[1]:.4f} ms tuned: {pair[0] / pair[1]:.2f}×")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        pair = self.pytorch_pair_ms()
        return {"rows": self.rows(), "conv_time_ms": self.conv_time_ms, "elapsed_s": self.elapsed_s,
                "kept_pytorch": list(self.kept_pytorch),
                "pytorch_ms": pair[0] if pair else None, "vs_pytorch": pair[0] / pair[1] if pair else None,
                "problems": {k: {"config": r.config, "time_ms": r.time_ms, "floor_ms": r.floor_ms,
                                 "efficiency": r.efficiency, "source": r.source, "note": r.note,
                                 "pytorch_ms": r.pytorch_ms}
                             for k, r in self.results.items()}}


# ---- 1. the model's convolutions ----------------------------------------------------------------------------


def layer_of(name: str, module: Any, input_shape: tuple[int, ...], dtype: Any, math: str | None = None) -> Layer:
    """The :class:`Layer` of one ``nn.Conv2d`` call with an input of this shape and dtype; ``math`` of a dense
    layer's problem (None: PyTorch's flags now, :func:`convtune.ops.torch.dense.cudnn_conv_tf32`)."""
    from convtune.kernels.registry import specs_for
    from convtune.ops.torch.modules import _padding, support

    kind = support(module)
    if kind is None:
        return Layer(name, input_shape, "pytorch", None, "configuration convtune does not run (groups, padding "
                                                          "mode, asymmetric 'same')")
    if str(dtype) not in TORCH_DTYPES:
        return Layer(name, input_shape, "pytorch", None, f"{dtype}: the tuner measures float32, float16 and bfloat16")
    if len(input_shape) != 4:
        return Layer(name, input_shape, "pytorch", None, "unbatched input")
    n, c, h, w = input_shape
    (r, s), (sh, sw), (dh, dw) = module.kernel_size, module.stride, module.dilation
    ph, pw = _padding(module)  # type: ignore[misc]
    groups = 1 if kind == "dense" else c
    storage = TORCH_DTYPES[str(dtype)]
    if kind != "dense" or storage != "float32":
        math = "ieee"
    elif math is None:
        from convtune.ops.torch.dense import cudnn_conv_tf32

        math = "tf32" if cudnn_conv_tf32() else "ieee"
    try:
        problem = ConvProblem(N=n, C=c, H=h, W=w, K=module.out_channels, R=r, S=s, stride_h=sh, stride_w=sw,
                              pad_h=ph, pad_w=pw, dil_h=dh, dil_w=dw, groups=groups, dtype=storage, math=math)
    except ConvtuneError as exc:
        return Layer(name, input_shape, "pytorch", None, str(exc))
    if not specs_for(problem):
        return Layer(name, input_shape, "pytorch", None, "no kernel family runs this shape")
    return Layer(name, input_shape, kind, problem)


def collect_layers(model: Any, example_inputs: Any) -> list[Layer]:
    """Every ``nn.Conv2d`` call of one forward pass of ``model(*example_inputs)`` (no grad), in call order."""
    import torch

    inputs = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    seen: list[Layer] = []
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Conv2d):
            def hook(mod: Any, args: tuple[Any, ...], _name: str = name or "(model)") -> None:
                x = args[0]
                dtype = x.dtype   # inside torch.autocast a float32 convolution runs in the autocast dtype
                if dtype == torch.float32 and x.is_cuda and torch.is_autocast_enabled("cuda"):
                    dtype = torch.get_autocast_dtype("cuda")
                seen.append(layer_of(_name, mod, tuple(x.shape), dtype))

            handles.append(module.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return seen


def distinct_problems(layers: Sequence[Layer]) -> list[ConvProblem]:
    """The distinct problems of the layers convtune runs, in first-call order."""
    out: dict[str, ConvProblem] = {}
    for layer in layers:
        if layer.problem is not None:
            out.setdefault(layer.problem.key(), layer.problem)
    return list(out.values())


def _bar(items: Sequence[Any], progress: bool, desc: str) -> Any:
    if not progress:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="shape", file=sys.stderr)


# ---- 2a. local tuning ---------------------------------------------------------------------------------------
#: Search seconds a problem gets at least while the model's wall-clock budget lasts (one trial or two).
MIN_SEARCH_S = 0.5


def search_allowance(remaining_s: float, problems_left: int, overhead_s: float) -> float:
    """Search seconds for the next problem: an even share of what is left of the model's wall-clock budget, less
    the per-problem overhead the tuner does not charge to its own ``budget_s`` (pruning, compiling the first
    candidates; ``overhead_s``: the typical one so far, :func:`typical_overhead_s`). Where the share is below
    :data:`MIN_SEARCH_S` but what is left still covers one overhead and that minimum, the problem gets the minimum
    (the problems come heaviest first, so the budget runs out on the light ones); else 0: not tuned."""
    share = remaining_s / max(1, problems_left) - overhead_s
    if share >= MIN_SEARCH_S:
        return share
    return MIN_SEARCH_S if remaining_s >= overhead_s + MIN_SEARCH_S else 0.0


def typical_overhead_s(overheads_s: Sequence[float]) -> float:
    """The overhead to expect of the next problem: the median of those seen (0 before the first). Not the largest:
    the first problem's carries one-time costs (the trial worker's first kernels, CUDA module loads), and charging
    it to every later problem left 21 of ResNet-50's 23 convolutions untuned with half of a 270 s budget unspent
    (H200, unified_v3/r50_tf32)."""
    return statistics.median(overheads_s) if overheads_s else 0.0


def heaviest_first(problems: Sequence[ConvProblem], layer_counts: dict[str, int], machine: Any) -> list[ConvProblem]:
    """``problems`` ordered by the time they can cost the model, most first: layers using the problem × its floor
    (the lowest over the families that run it, on ``machine``'s ceilings; FLOPs where no family does or no machine
    is known), ties (launch-bound floors) by layers × MACs. Stable: equal weights keep the layers' order."""
    from convtune.kernels.registry import specs_for
    from convtune.tuner.efficiency import floor_time_s

    def floor_s(problem: ConvProblem) -> float:
        specs = specs_for(problem) if machine is not None else []
        return min((floor_time_s(problem, machine, spec) for spec in specs), default=2.0 * problem.macs * 1e-15)

    def weight(p: ConvProblem) -> tuple[float, float]:   # equal floors (launch-bound): the more work first
        n = layer_counts.get(p.key(), 1)
        return (-n * floor_s(p), -n * p.macs)

    return sorted(problems, key=weight)


def tune_problems(problems: list[ConvProblem], budget_s: float, budget_trials: int = 200, patience: int = 60,
                  db: str | None = None, benchmarker: Any = None, device_index: int = 0,
                  progress: bool = True, clock: Any = time.monotonic,
                  layer_counts: dict[str, int] | None = None) -> dict[str, ProblemResult]:
    """Tune ``problems`` on the local GPU within ``budget_s`` seconds of wall-clock time in all, heaviest first
    (:func:`heaviest_first`, ``layer_counts``: layers per problem key), each an even share of what is left less the
    overhead its tuner does not count as search (:func:`search_allowance`); a problem the budget no longer reaches is
    not tuned (its ops run the model's choice, the note says why). Results are stored in ``db``, else the resolver's
    database, else the default file, which the resolver then reads; one :class:`ProblemResult` per problem key."""
    from convtune.storage.migrate import upgrade
    from convtune.storage.session import default_database_url, make_engine
    from convtune.tuner.tune import tune as tune_problem

    url = db or resolver.database_url() or default_database_url()
    engine = make_engine(url)
    upgrade(engine)
    own = benchmarker is None
    if own:
        from convtune.tuner.trial_process import SubprocessBenchmarker

        benchmarker = SubprocessBenchmarker(factory_kwargs={"device_id": device_index})
    deadline = clock() + budget_s
    overheads_s: list[float] = []
    results: dict[str, ProblemResult] = {}
    machine = _machine_of(benchmarker)
    ahead = PruneAhead(benchmarker, machine)
    try:
        ordered = heaviest_first(problems, layer_counts or {}, machine)
        ahead.submit(ordered[0] if ordered else None)
        for i, problem in enumerate(_bar(ordered, progress, "tuning layers")):
            allowance = search_allowance(deadline - clock(), len(ordered) - i, typical_overhead_s(overheads_s))
            if allowance <= 0:
                results[problem.key()] = ProblemResult(problem, None, None, None, None, "model",
                                                       f"not tuned: the model's budget ({budget_s:g} s) ran out")
                continue
            started = clock()
            pruned = ahead.take(problem)
            # the next layer's pruning runs while this one's trials do
            ahead.submit(ordered[i + 1] if i + 1 < len(ordered) else None)
            try:
                r = tune_problem(problem, benchmarker, engine, budget_s=allowance, budget_trials=budget_trials,
                                 patience=patience, pruned=pruned)
                overheads_s.append(max(0.0, clock() - started - r.search_s))
                source = "model" if r.predicted else benchmarker.backend
                results[problem.key()] = ProblemResult(problem, r.best_config, r.time_ms, r.floor_ms, r.efficiency,
                                                       source, r.stop_reason)
            except ConvtuneError as exc:
                results[problem.key()] = ProblemResult(problem, None, None, None, None, "error", str(exc)[:200])
    finally:
        ahead.close()
        if own:
            benchmarker.close()
        engine.dispose()
    if url != resolver.database_url():
        resolver.use_database(url)   # serve from where the results went
    return results


class PruneAhead:
    """Prunes the next problem on a background thread while the GPU measures the current one's trials (pruning is
    CPU work: 1–6 s a ResNet-50 layer on a 2-core host, which a whole-model budget otherwise spends with the GPU
    idle). Only where the tuner would prune the same space: a machine model and a benchmarker that can measure any
    config (``available`` None, asked here on the calling thread: a trial worker's pipe is not shared with the
    pruning thread). A pruning that fails is left to the tuner to do again."""

    def __init__(self, benchmarker: Any, machine: Any) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._benchmarker, self._machine = benchmarker, machine
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="convtune-prune") if machine else None
        self._futures: dict[str, Any] = {}

    def submit(self, problem: ConvProblem | None) -> None:
        """Start pruning ``problem`` (None, one already started, or one the tuner prunes its own way: nothing)."""
        from convtune.kernels.registry import specs_for
        from convtune.tuner.prune import prune

        if self._pool is None or problem is None or problem.key() in self._futures:
            return
        if self._benchmarker.available(problem) is None:
            self._futures[problem.key()] = self._pool.submit(prune, problem, self._machine, specs_for(problem))

    def take(self, problem: ConvProblem) -> Any:
        """The problem's pruning (waiting for it if it is still running), or None."""
        future = self._futures.pop(problem.key(), None)
        if future is None:
            return None
        try:
            return future.result()
        except Exception:  # the tuner prunes again and reports its own error
            return None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)   # a running pruning ends on its own


def _machine_of(benchmarker: Any) -> Any:
    """The benchmarker's machine model (its ceilings weigh the problems), or None where it has none."""
    device = getattr(benchmarker, "device", None)
    return getattr(device(), "machine", None) if callable(device) else None


# ---- 2b. a running service ----------------------------------------------------------------------------------
def http_transport(url: str, api_key: str | None, timeout_s: float = 30.0) -> Transport:
    """JSON over HTTP to a convtune service at ``url`` (``X-API-Key`` when a key is given)."""
    base = url.rstrip("/")

    def call(method: str, path: str, body: Any) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if api_key:
            headers["X-API-Key"] = api_key
        request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            if exc.code == 404:
                return None
            raise ServiceError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServiceError(f"{method} {base}{path}: {exc}") from None

    return call


def _tune_remote(problems: list[ConvProblem], budget_s: float, budget_trials: int, transport: Transport,
                 device_name: str | None, poll_s: float, timeout_s: float | None,
                 progress: bool) -> dict[str, ProblemResult]:
    body: dict[str, Any] = {"problems": [{"key": p.key()} for p in problems], "name": "convtune.ops.torch.tune",
                            "budget_s": max(1.0, budget_s / max(1, len(problems))), "budget_trials": budget_trials}
    batch = transport("POST", "/v1/batches", body)
    if not isinstance(batch, dict) or "id" not in batch:
        raise ServiceError(f"POST /v1/batches answered {batch!r}")
    skipped = {s["key"]: s["reason"] for s in batch.get("skipped", [])}
    start = time.monotonic()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(batch.get("jobs", [])), desc=f"batch {batch['id']}", unit="shape", file=sys.stderr)
    try:
        while batch.get("status") not in FINAL_BATCH_STATUSES:
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                raise ServiceError(f"batch {batch['id']} did not finish within {timeout_s:g} s "
                                   f"(status {batch.get('status')})")
            time.sleep(poll_s)
            batch = transport("GET", f"/v1/batches/{batch['id']}", None)
            if bar is not None:
                bar.n = sum(job["status"] in FINAL_JOB_STATUSES for job in batch.get("jobs", []))
                bar.refresh()
    finally:
        if bar is not None:
            bar.close()
    backend = batch.get("backend", "gpu")
    by_key = {p.key(): p for p in problems}
    results: dict[str, ProblemResult] = {}
    for job in batch.get("jobs", []):
        key = job["problem"]["key"]
        problem = by_key.get(key) or ConvProblem.parse(key)
        # the batch's backend rows only (a service that stores one best row per backend answers with that one)
        query = urllib.parse.urlencode({"problem": key, "backend": backend,
                                        **({"device": job["device_name"]} if job.get("device_name") else {})})
        best = transport("GET", f"/v1/configs/best?{query}", None) if job["status"] == "finished" else None
        config = best["config"]["key"] if best else None
        measured = (best is not None and best.get("backend", backend) == "gpu"
                    and not best.get("provisional", True))
        if measured and best is not None and config is not None and (device_name is None
                                                                     or best["device"] == device_name):
            resolver.remember(problem, best["device"], config)
        provisional = ", provisional" if best is not None and best.get("provisional", True) else ""
        source = "service" if measured else f"service ({backend}{provisional})"
        results[key] = ProblemResult(problem, config, best["time_ms"] if best else job.get("best_time_ms"),
                                     best["floor_ms"] if best else job.get("floor_ms"),
                                     best["efficiency"] if best else job.get("efficiency"), source,
                                     job.get("error") or ("" if best else job["status"]))
    for key, reason in skipped.items():
        results[key] = ProblemResult(by_key.get(key) or ConvProblem.parse(key), None, None, None, None, "skipped",
                                     reason)
    return results


# ---- the entry point ----------------------------------------------------------------------------------------
def tune(model: Any, example_inputs: Any, budget_s: float = 600.0, url: str | None = None, *,
         budget_trials: int = 200, patience: int = 60, db: str | None = None, api_key: str | None = None,
         benchmarker: Any = None, transport: Transport | None = None, poll_s: float = 5.0,
         timeout_s: float | None = None, progress: bool = True, show: bool = True,
         out: TextIO | None = None, baseline: bool = True,
         baseline_ms: Callable[[ConvProblem, int], float | None] | None = None,
         keep_faster: bool = False) -> ModelTuning:
    """Tune every distinct convolution of ``model`` for ``example_inputs`` (module docstring).

    Args:
        model: a module (on the GPU that will run it; converted or not).
        example_inputs: one tensor or a tuple of the forward's positional arguments.
        budget_s: wall-clock tuning time for the whole model (local tuning: the distinct problems heaviest first,
            each an even share of what is left, pruning and compiling included; a problem it no longer reaches keeps
            the model's choice).
        url: a running convtune service to queue the problems on instead of tuning here.
        budget_trials, patience: per problem (the tuner's).
        db: the tuning database for local tuning (default: the resolver's, else the default file).
        api_key: for ``url`` (default ``$CONVTUNE_API_KEY``).
        benchmarker: local tuning's benchmarker (default: the GPU benchmarker in a subprocess on the model's
            device); transport: the service client (default: JSON over HTTP to ``url``).
        poll_s, timeout_s: how often, and how long at most, to poll the service's batch.
        progress: show a progress bar over the problems (tqdm, on stderr).
        show, out: print the table (to ``out``, default stdout).
        baseline: also time PyTorch's own convolution (cuDNN, ``cudnn.benchmark`` on, same protocol as the tuner:
            :func:`convtune.ops.baseline.pytorch_ms`) of every tuned problem on the model's GPU, for the table's
            "PyTorch ms" and "× PyTorch" columns (layers slower than PyTorch are flagged); ``baseline_ms(problem,
            device_index)`` replaces that timing (tests).
        keep_faster: with ``baseline``, turn every converted module (:class:`~convtune.ops.torch.Conv2d`,
            :class:`~convtune.ops.torch.DepthwiseConv2d`) whose tuned time is slower than PyTorch's back into
            ``nn.Conv2d`` (:func:`keep_pytorch_where_faster`), so this model runs PyTorch's convolution there; the
            table says so. For this model object only: a model converted again later runs convtune there again.

    Returns:
        The per-layer :class:`ModelTuning`; its ``table()`` is what was printed.

    Raises:
        InvalidInput: a budget ≤ 0.
        ServiceError: the service refused the batch or could not be reached.

    Example:
        >>> model = convtune.ops.torch.convert(torchvision.models.resnet50().cuda().eval())   # doctest: +SKIP
        >>> convtune.ops.torch.tune(model, torch.randn(32, 3, 224, 224, device="cuda"), budget_s=600)  # doctest: +SKIP
    """
    if not budget_s > 0:
        raise InvalidInput("budget_s", f"{budget_s!r} must be > 0")
    start = time.perf_counter()
    layers = collect_layers(model, example_inputs)
    problems = distinct_problems(layers)
    device_index = _device_index(model, example_inputs)
    if not problems:
        results: dict[str, ProblemResult] = {}
    elif url is not None or transport is not None:
        if transport is None:
            transport = http_transport(url or "", api_key or os.environ.get(API_KEY_ENV))
        results = _tune_remote(problems, budget_s, budget_trials, transport, _device_name(device_index), poll_s,
                               timeout_s, progress)
    else:
        counts: dict[str, int] = {}
        for layer in layers:
            if layer.problem is not None:
                counts[layer.problem.key()] = counts.get(layer.problem.key(), 0) + 1
        results = tune_problems(problems, budget_s, budget_trials, patience, db, benchmarker, device_index, progress,
                                layer_counts=counts)
    if baseline:
        results = with_pytorch_times(results, device_index, baseline_ms)
    resolver.clear_cache()
    tuning = ModelTuning(layers, results, time.perf_counter() - start)
    if baseline and keep_faster:
        tuning.kept_pytorch = keep_pytorch_where_faster(model, tuning)
    if show:
        print(tuning.table(), file=out or sys.stdout)
    return tuning


def keep_pytorch_where_faster(model: Any, tuning: ModelTuning) -> list[str]:
    """Turn each converted module of ``model`` whose problem PyTorch ran faster than the tuned config
    (:attr:`ProblemResult.vs_pytorch` < 1) back into ``nn.Conv2d``; the modules' names (as the table lists them).
    Unconverted modules and layers without both times are left as they are."""
    from convtune.ops.torch.modules import revert_module

    kept = []
    for layer in tuning.layers:
        r = tuning.result(layer)
        if r is None or r.vs_pytorch is None or r.vs_pytorch >= 1 or layer.name in kept:
            continue
        module = model if layer.name == "(model)" else model.get_submodule(layer.name)
        if revert_module(module):
            kept.append(layer.name)
    return kept


def with_pytorch_times(results: dict[str, ProblemResult], device_index: int,
                       measure: Callable[[ConvProblem, int], float | None] | None = None) -> dict[str, ProblemResult]:
    """``results`` with PyTorch's own time of each problem that has a tuned time (``measure``, default
    :func:`convtune.ops.baseline.pytorch_ms`); a problem it cannot time (no CUDA, a causal 1-D problem, no CuPy for
    the events) keeps None."""
    if measure is None:
        from convtune.ops.baseline import pytorch_ms

        measure = pytorch_ms
    timed = {}
    for key, r in results.items():
        ms = None
        if r.time_ms is not None:
            try:
                ms = measure(r.problem, device_index)
            except ConvtuneError:
                ms = None
        timed[key] = replace(r, pytorch_ms=ms)
    return timed


def _device_index(model: Any, example_inputs: Any) -> int:
    inputs = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    for t in inputs:
        device = getattr(t, "device", None)
        if device is not None and device.type == "cuda":
            return int(device.index or 0)
    return 0


def _device_name(device_index: int) -> str | None:
    """The local GPU's name (what the service's best rows must be measured on to be served), if there is one."""
    try:
        from convtune.kernels.devices import device_machine

        return device_machine(device_index).name
    except ConvtuneError:
        return None

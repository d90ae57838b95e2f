"""``convtune.ops.torch.tune(model, inputs)`` on the CPU: one forward pass collects every convolution call, distinct
problems are tuned once (here by the model benchmarker, whose predictions are shown but never served to the ops),
the per-layer table; with a service (a fake transport speaking the REST API's JSON) GPU-measured results are
served to this process's ops, replayed ones are not; ``convtune tune-model`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("convtune.ops.torch")
nn = torch.nn

from convtune.errors import InvalidInput  # noqa: E402
from convtune.machine import MachineModel  # noqa: E402
from convtune.ops import resolver  # noqa: E402
from convtune.ops.torch import tune_model  # noqa: E402
from convtune.problem import ConvProblem  # noqa: E402

H200 = MachineModel.preset("h200")


class Tiny(nn.Module):
    """Two calls of one dense conv (one problem), a depthwise conv, a grouped conv PyTorch keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.body = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)
        self.grouped = nn.Conv2d(8, 8, 1, groups=2)

    def forward(self, x):
        x = self.body(self.body(self.stem(x)))
        return self.grouped(self.dw(x))


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(resolver.DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    resolver.use_database(None)
    resolver.forget_remembered()
    yield
    resolver.use_database(None)
    resolver.forget_remembered()


def test_collect_layers_and_distinct_problems() -> None:
    layers = tune_model.collect_layers(Tiny(), torch.randn(2, 3, 12, 12))
    assert [(layer.name, layer.kind) for layer in layers] == [("stem", "dense"), ("body", "dense"), ("body", "dense"),
                                                              ("dw", "depthwise"), ("grouped", "pytorch")]
    assert layers[3].problem == ConvProblem.parse("N=2 C=8 H=12 W=12 K=8 R=3 S=3 stride=2 pad=1 groups=8")
    assert "groups" in layers[4].reason
    problems = tune_model.distinct_problems(layers)
    assert [p.key() for p in problems] == [layers[0].problem.key(), layers[1].problem.key(), layers[3].problem.key()]
    half = tune_model.collect_layers(Tiny().to(torch.bfloat16), torch.randn(2, 3, 12, 12, dtype=torch.bfloat16))
    # 16-bit dense layers are the bfloat16 class's problems (igemm_half for C a multiple of 8; the wgmma family takes
    # any C, the stem's 3 too), 16-bit depthwise layers the 16-bit depthwise kernels' (the float32 twin's
    # configurations their plans accept), the grouped one: its groups say why
    assert [(layer.name, layer.kind) for layer in half] == [("stem", "dense"), ("body", "dense"), ("body", "dense"),
                                                            ("dw", "depthwise"), ("grouped", "pytorch")]
    assert half[1].problem == ConvProblem.parse("N=2 C=8 H=12 W=12 K=8 R=3 S=3 pad=1 dtype=bfloat16")
    assert half[3].problem == layers[3].problem.replace(dtype="bfloat16")
    assert half[0].problem is not None and half[0].problem.C == 3 and "groups" in half[4].reason


def test_local_tuning_prints_the_per_layer_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from convtune.tuner.benchmark import ModelBenchmarker

    db = f"sqlite:///{tmp_path / 'tune.db'}"
    result = ct.tune(Tiny(), torch.randn(2, 3, 12, 12), budget_s=30, budget_trials=4, db=db,
                     benchmarker=ModelBenchmarker(H200), progress=False)
    printed = capsys.readouterr().out
    assert printed.strip() == result.table().strip()
    rows = result.rows()
    assert [r["layer"] for r in rows] == ["stem", "body", "body", "dw", "grouped"]
    assert rows[-1]["family"] == "PyTorch" and rows[-1]["tuned_ms"] is None
    assert all(r["tuned_ms"] > 0 and r["floor_ms"] > 0 and r["efficiency"] > 0 for r in rows[:4])
    assert rows[3]["family"].startswith("depthwise2d")
    assert sum(r["share"] for r in rows[:4]) == pytest.approx(1.0)
    assert rows[1]["share"] == rows[2]["share"]                          # the same problem twice
    assert result.conv_time_ms == pytest.approx(sum(r["tuned_ms"] for r in rows[:4]))
    assert {r.source for r in result.results.values()} == {"model"}
    assert resolver.database_url() == db                                 # the ops read where the results went
    # predictions are stored but never served: the resolver gives the model's choice, not the "database"'s
    problem = rows and result.layers[0].problem
    found = resolver.resolve(problem, H200, ["direct", "winograd", "winograd_unfused"], lambda: "model-choice")
    assert found.source == "model"
    json.dumps(result.to_dict())


class FakeService:
    """The REST API's answers for one batch: POST /v1/batches, GET /v1/batches/{id}, GET /v1/configs/best."""

    def __init__(self, backend: str = "gpu", device: str = H200.name) -> None:
        self.backend, self.device = backend, device
        self.requests: list[tuple[str, str, object]] = []
        self.polls = 0
        self.jobs: list[dict] = []

    def __call__(self, method: str, path: str, body: object) -> object:
        self.requests.append((method, path, body))
        if method == "POST" and path == "/v1/batches":
            self.jobs = [{"id": i + 1, "problem": {"id": i + 1, "key": p["key"]}, "status": "queued",
                          "device_name": self.device, "best_time_ms": None, "floor_ms": None, "efficiency": None,
                          "error": None} for i, p in enumerate(body["problems"])]
            return {"id": 7, "status": "queued", "backend": self.backend, "jobs": self.jobs, "skipped": []}
        if method == "GET" and path == "/v1/batches/7":
            self.polls += 1
            if self.polls >= 2:
                for job in self.jobs:
                    job.update(status="finished", best_time_ms=0.05, floor_ms=0.01, efficiency=0.2)
            done = all(j["status"] == "finished" for j in self.jobs)
            return {"id": 7, "status": "finished" if done else "running", "backend": self.backend, "jobs": self.jobs}
        if method == "GET" and path.startswith("/v1/configs/best?"):
            from urllib.parse import parse_qs, urlsplit

            query = parse_qs(urlsplit(path).query)
            key = query["problem"][0]
            assert query["backend"] == [self.backend]          # only the batch's backend's rows are asked for
            problem = ConvProblem.parse(key)
            config = ("depthwise2d_fast.fwd band_h=1 rows_per_thread=1 outputs_per_thread=1 planes=1 threads=32"
                      if problem.groups > 1 else "direct.fwd tile_h=4 tile_w=16 tile_k=8 chunk_c=8 thread_h=1 "
                                                 "thread_w=4 thread_k=4 stages=2 vec=1 splits=1")
            return {"device": self.device, "config": {"key": config}, "time_ms": 0.04, "floor_ms": 0.01,
                    "efficiency": 0.25, "provisional": self.backend == "model", "backend": self.backend}
        raise AssertionError(f"unexpected request {method} {path}")


def test_service_tuning_serves_gpu_results_to_the_ops(capsys: pytest.CaptureFixture[str]) -> None:
    service = FakeService("gpu")
    result = ct.tune(Tiny(), torch.randn(2, 3, 12, 12), budget_s=90, transport=service, poll_s=0, progress=False)
    method, path, body = service.requests[0]
    assert (method, path) == ("POST", "/v1/batches") and len(body["problems"]) == 3
    assert body["budget_s"] == pytest.approx(30.0)
    assert {r.source for r in result.results.values()} == {"service"}
    assert all(r["tuned_ms"] == 0.04 for r in result.rows()[:4])
    dense = result.layers[0].problem
    found = resolver.resolve(dense, H200, ["direct", "winograd", "winograd_unfused"], lambda: "model-choice")
    assert found.source == "service" and found.config.family == "direct"
    assert "| stem |" in capsys.readouterr().out


def test_replayed_service_results_are_shown_not_served() -> None:
    result = ct.tune(Tiny(), torch.randn(2, 3, 12, 12), budget_s=90, transport=FakeService("replay"), poll_s=0,
                     progress=False, show=False)
    assert {r.source for r in result.results.values()} == {"service (replay)"}
    dense = result.layers[0].problem
    assert resolver.resolve(dense, H200, ["direct"], lambda: "model-choice").source == "model"


def test_bad_budgets_and_an_unreachable_service() -> None:
    with pytest.raises(InvalidInput) as exc:
        ct.tune(Tiny(), torch.randn(1, 3, 8, 8), budget_s=0)
    assert exc.value.field == "budget_s"
    with pytest.raises(tune_model.ServiceError):
        ct.tune(Tiny(), torch.randn(1, 3, 8, 8), budget_s=10, url="http://127.0.0.1:9", progress=False, show=False)


def test_cli_tune_model(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``convtune tune-model module:callable --input-shape ...`` with the model backend (no GPU)."""
    from convtune.cli import main

    module = tmp_path / "tiny_models.py"
    module.write_text("import torch.nn as nn\n\ndef make():\n    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), "
                      "nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1, groups=4))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    db = f"sqlite:///{tmp_path / 'main.db'}"
    status = main(["tune-model", "tiny_models:make", "--input-shape", "2,3,10,10", "--device", "cpu", "--backend",
                   "model", "--budget-s", "20", "--budget-trials", "3", "--db", db, "--json", "--no-progress"])
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["layer"] for r in report["rows"]] == ["0", "2"] and report["conv_time_ms"] > 0
    assert main(["tune-model", "tiny_models:nothing", "--input-shape", "2,3,10,10", "--device", "cpu"]) == 2
    assert "tiny_models:nothing" in capsys.readouterr().err
    assert main(["tune-model", "tiny_models:make", "--input-shape", "2,x", "--device", "cpu"]) == 2


def test_search_allowance_shares_what_is_left_less_the_overhead() -> None:
    assert tune_model.search_allowance(100.0, 4, 5.0) == pytest.approx(20.0)
    assert tune_model.search_allowance(100.0, 4, 0.0) == pytest.approx(25.0)
    # a share below MIN_SEARCH_S: the minimum while what is left covers an overhead and it, else nothing
    assert tune_model.search_allowance(10.0, 4, 2.4) == tune_model.MIN_SEARCH_S
    assert tune_model.search_allowance(2.5, 4, 2.4) == 0.0
    assert tune_model.search_allowance(-1.0, 2, 0.0) == 0.0


def test_typical_overhead_is_the_median_not_the_first_problems_startup() -> None:
    """H200 ResNet-50 TF32 (unified_v3/r50_tf32): the largest overhead (the first problem's) charged to every later
    problem left 21 of 23 convolutions untuned with 127 s of a 270 s budget unspent."""
    assert tune_model.typical_overhead_s([]) == 0.0
    assert tune_model.typical_overhead_s([12.0, 1.0, 2.0]) == 2.0
    remaining, left = 240.0, 21
    assert tune_model.search_allowance(remaining, left, max(12.0, 1.0)) == tune_model.MIN_SEARCH_S   # was 0: skipped
    assert tune_model.search_allowance(remaining, left, tune_model.typical_overhead_s([12.0, 1.0])) > 4.0


def test_problems_are_tuned_heaviest_first() -> None:
    """Layers × floor: the problem most of the model's time can go to is tuned first, so a budget that runs out
    leaves the light ones on the model's choice; equal weights keep the layers' order."""
    big = ConvProblem.parse("N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1")
    small = ConvProblem.parse("N=1 C=8 H=12 W=12 K=8 R=3 S=3 pad=1")
    medium = ConvProblem.parse("N=8 C=64 H=28 W=28 K=64 R=3 S=3 pad=1")
    ordered = tune_model.heaviest_first([small, medium, big], {}, H200)
    assert ordered == [big, medium, small]
    # many layers of a light problem outweigh one layer of a slightly heavier one
    assert tune_model.heaviest_first([small, medium], {small.key(): 10_000}, H200)[0] == small
    twins = [small, small.replace(N=1)]
    assert tune_model.heaviest_first(twins, {}, None) == twins            # no machine: by FLOPs, stable


def test_local_tuning_keeps_the_models_wall_clock_budget(tmp_path: Path) -> None:
    """Measured on the H200 (a 190 s ResNet-50 budget took 320 s: pruning and compiling are not the tuner's search
    time): the model's budget is wall-clock, so once pruning/compiling eat it the rest keep the model's choice."""
    from convtune.tuner.benchmark import ModelBenchmarker

    ticks = iter(range(0, 10_000, 10))        # every clock read advances 10 s: each problem "costs" 20 s of overhead
    problems = [ConvProblem.parse(f"N=1 C=8 H=12 W=12 K={k} R=3 S=3 pad=1") for k in (8, 16, 24)]
    results = tune_model.tune_problems(problems, budget_s=45, budget_trials=3, db=f"sqlite:///{tmp_path / 'b.db'}",
                                       benchmarker=ModelBenchmarker(H200), progress=False,
                                       clock=lambda: float(next(ticks)))
    heaviest, *rest = (results[p.key()] for p in reversed(problems))   # K = 24 first: the most work
    assert heaviest.config is not None and heaviest.time_ms > 0
    assert rest and all(r.config is None and "budget (45 s) ran out" in r.note for r in rest)


def test_a_slow_first_problem_does_not_starve_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The H200 ResNet-50 TF32 run's pattern (unified_v3/r50_tf32: 23 problems, the first carrying ~12 s of one-time
    cost, the others ~1 s of pruning and compiling, a 270 s budget): every problem is tuned, within the budget plus
    one overhead. A stand-in tuner spends its allowance and the overhead on a scripted clock."""
    from types import SimpleNamespace

    from convtune.tuner import tune as tuner
    from convtune.tuner.benchmark import ModelBenchmarker

    now = [0.0]
    allowances: list[float] = []

    def fake_tune(problem: ConvProblem, benchmarker: object, engine: object, *, budget_s: float,
                  **kwargs: object) -> SimpleNamespace:
        allowances.append(budget_s)
        now[0] += budget_s + (12.0 if len(allowances) == 1 else 1.0)
        return SimpleNamespace(best_config=f"config-{len(allowances)}", time_ms=1.0, floor_ms=0.5, efficiency=0.5,
                               predicted=False, stop_reason="budget", search_s=budget_s)

    monkeypatch.setattr(tuner, "tune", fake_tune)
    problems = [ConvProblem.parse(f"N=8 C={8 * (i + 1)} H=14 W=14 K=64 R=3 S=3 pad=1") for i in range(23)]
    results = tune_model.tune_problems(problems, budget_s=270, budget_trials=3, db=f"sqlite:///{tmp_path / 'c.db'}",
                                       benchmarker=ModelBenchmarker(H200), progress=False, clock=lambda: now[0])
    assert all(r.config is not None for r in results.values()), [r.note for r in results.values() if r.config is None]
    assert len(allowances) == 23 and min(allowances) >= tune_model.MIN_SEARCH_S
    assert now[0] <= 270 + 12


def test_the_next_layer_is_pruned_while_this_one_tunes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole-model tuning hands each problem's tuner a pruning made ahead: the first on the way in, every later
    one on the background thread while the layer before it was tuned."""
    import threading

    from convtune.tuner import prune as prune_module
    from convtune.tuner import tune as tuner
    from convtune.tuner.benchmark import ModelBenchmarker

    pruned_on: dict[str, str] = {}
    real_prune = prune_module.prune

    def spy_prune(problem: ConvProblem, *args: object, **kwargs: object) -> object:
        pruned_on[problem.key()] = threading.current_thread().name
        return real_prune(problem, *args, **kwargs)

    monkeypatch.setattr(prune_module, "prune", spy_prune)
    handed: list[object] = []
    real_tune = tuner.tune
    monkeypatch.setattr(tuner, "tune", lambda *a, **k: handed.append(k.get("pruned")) or real_tune(*a, **k))
    problems = [ConvProblem.parse(f"N=1 C=8 H=12 W=12 K={k} R=3 S=3 pad=1") for k in (8, 16, 24)]
    results = tune_model.tune_problems(problems, budget_s=600, budget_trials=2, db=f"sqlite:///{tmp_path / 'p.db'}",
                                       benchmarker=ModelBenchmarker(H200), progress=False)
    assert all(r.config is not None for r in results.values())
    assert len(handed) == 3 and all(p is not None and p.survivors for p in handed)
    assert sorted(pruned_on) == sorted(p.key() for p in problems)
    assert all(name.startswith("convtune-prune") for name in pruned_on.values())


def test_the_table_reads_each_layer_against_pytorchs_own_convolution(tmp_path: Path) -> None:
    """``baseline_ms`` stands in for timing PyTorch's convolution on the GPU: a layer slower than PyTorch is flagged,
    the Σ line compares the layers measured both ways, and a problem that was not timed shows a dash."""
    from convtune.tuner.benchmark import ModelBenchmarker

    asked: list[tuple[str, int]] = []

    def pytorch_ms(problem: ConvProblem, device_index: int) -> float | None:
        asked.append((problem.key(), device_index))
        return None if problem.groups > 1 else (0.5 if problem.C == 3 else 1e-6)   # the stem wins, body loses

    result = ct.tune(Tiny(), torch.randn(2, 3, 12, 12), budget_s=30, budget_trials=4,
                     db=f"sqlite:///{tmp_path / 'tune.db'}", benchmarker=ModelBenchmarker(H200), progress=False,
                     show=False, baseline_ms=pytorch_ms)
    assert sorted(asked) == sorted((k, 0) for k in result.results)       # every tuned problem once, on the device
    rows = result.rows()
    stem, body, dw = rows[0], rows[1], rows[3]
    assert stem["pytorch_ms"] == 0.5 and stem["vs_pytorch"] == pytest.approx(0.5 / stem["tuned_ms"])
    assert body["vs_pytorch"] < 1 and dw["pytorch_ms"] is None and dw["vs_pytorch"] is None
    table = result.table().splitlines()
    assert "| PyTorch ms | × PyTorch |" in table[0]
    assert "slower than PyTorch" in table[3] and "slower than PyTorch" not in table[2]   # body, stem
    pytorch, tuned = result.pytorch_pair_ms()
    assert pytorch == pytest.approx(0.5 + 2e-6)                          # body's two calls count twice, dw not at all
    assert tuned == pytest.approx(stem["tuned_ms"] + 2 * body["tuned_ms"])
    assert f"{pytorch / tuned:.2f}×" in table[-1]
    summary = json.loads(json.dumps(result.to_dict()))
    assert summary["vs_pytorch"] == pytest.approx(pytorch / tuned)


def test_no_baseline_leaves_the_columns_empty(tmp_path: Path) -> None:
    from convtune.tuner.benchmark import ModelBenchmarker

    def never(problem: ConvProblem, device_index: int) -> float:
        raise AssertionError("baseline=False times nothing")

    result = ct.tune(Tiny(), torch.randn(2, 3, 12, 12), budget_s=30, budget_trials=4,
                     db=f"sqlite:///{tmp_path / 'tune.db'}", benchmarker=ModelBenchmarker(H200), progress=False,
                     show=False, baseline=False, baseline_ms=never)
    assert all(r["pytorch_ms"] is None for r in result.rows()) and result.pytorch_pair_ms() is None
    assert "PyTorch's own convolutions" not in result.table()


def test_keep_faster_turns_the_slower_converted_layers_back_to_pytorch(tmp_path: Path) -> None:
    """The body conv (one problem, two calls) measured slower than PyTorch: its module becomes ``nn.Conv2d`` again
    with the same state_dict; the stem (faster) and the depthwise conv (not timed) stay convtune's."""
    from convtune.ops.torch.modules import Conv2d, DepthwiseConv2d
    from convtune.tuner.benchmark import ModelBenchmarker

    model = ct.convert(Tiny())
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def pytorch_ms(problem: ConvProblem, device_index: int) -> float | None:
        return None if problem.groups > 1 else (0.5 if problem.C == 3 else 1e-6)

    result = ct.tune(model, torch.randn(2, 3, 12, 12), budget_s=30, budget_trials=4,
                     db=f"sqlite:///{tmp_path / 'tune.db'}", benchmarker=ModelBenchmarker(H200), progress=False,
                     show=False, baseline_ms=pytorch_ms, keep_faster=True)
    assert result.kept_pytorch == ["body"]
    assert type(model.body) is nn.Conv2d and type(model.stem) is Conv2d and type(model.dw) is DepthwiseConv2d
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    lines = result.table().splitlines()
    assert lines[3].count("PyTorch's kept") == 1 and "PyTorch's kept" not in lines[2]
    assert result.to_dict()["kept_pytorch"] == ["body"]


def test_keep_faster_needs_the_baseline(tmp_path: Path) -> None:
    from convtune.tuner.benchmark import ModelBenchmarker

    model = ct.convert(Tiny())
    result = ct.tune(model, torch.randn(2, 3, 12, 12), budget_s=30, budget_trials=4,
                     db=f"sqlite:///{tmp_path / 'tune.db'}", benchmarker=ModelBenchmarker(H200), progress=False,
                     show=False, baseline=False, keep_faster=True)
    assert result.kept_pytorch == [] and len(ct.converted(model)) == 3

"""The precision class of the ops, on the CPU (tensors "on device 0", launches recorded: tests/fake_gpu.py):
``convtune.conv2d(math=None)`` is strict, ``math="tf32"`` a problem of its own; ``convtune.ops.torch.conv2d`` and
``ct.Conv2d`` read PyTorch's TF32 flag for convolutions at every call (legacy ``allow_tf32`` and the torch ≥ 2.9
``conv.fp32_precision``), strict and tf32 calls never share a prepared launch, and with a database a tf32 call
runs the fastest of the tf32 and strict rows while a strict call never runs a tf32 row; 16-bit dense calls keep
running ``F.conv2d``; ``ct.tune`` records dense layers in the class they will run in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from best_rows import GPU_CONFIG, GPU_MS, TF32_CONFIG, strict_and_tf32  # noqa: E402
from fake_gpu import install_fake_gpu  # noqa: E402

import convtune  # noqa: E402
from convtune.errors import InvalidInput  # noqa: E402
from convtune.ops import conv2d as ops  # noqa: E402
from convtune.ops import resolver  # noqa: E402
from convtune.problem import ConvProblem  # noqa: E402

ct = pytest.importorskip("convtune.ops.torch")
dense = pytest.importorskip("convtune.ops.torch.dense")
tune_model = pytest.importorskip("convtune.ops.torch.tune_model")

DIRECT = ("direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 thread_k=8 stages=2 vec=1 "
          "splits=1")
# best_rows.PROBLEM's tensors: N=2 C=16 H=14 W=14 K=24 R=3 S=3 pad=1
X_SHAPE, W_SHAPE = (2, 16, 14, 14), (24, 16, 3, 3)


@pytest.fixture(autouse=True)
def _flags() -> Any:
    """PyTorch's TF32 flags as they were (the legacy setter resets the convolution and RNN flags both)."""
    saved = torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture
def rec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.delenv(resolver.DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    recorder = install_fake_gpu(monkeypatch)
    yield recorder
    resolver.set_lookup(None)
    resolver.use_database(None)
    ops.clear_caches()


@pytest.fixture
def problems(monkeypatch: pytest.MonkeyPatch) -> list[ConvProblem]:
    """Every problem the ops resolve a config for (one per prepared signature)."""
    seen: list[ConvProblem] = []
    real = ops.resolve_config

    def spy(problem: ConvProblem, *args: Any, **kwargs: Any) -> Any:
        seen.append(problem)
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(ops, "resolve_config", spy)
    return seen


def _prepared_configs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The config key of every plan the ops prepare, in order."""
    keys: list[str] = []
    real = ops.prepare_plan
    monkeypatch.setattr(ops, "prepare_plan", lambda pl, device: keys.append(pl.config.key()) or real(pl, device))
    return keys


# ---- convtune.conv2d: math=None is strict -----------------------------------------------------------------------
def test_plain_conv2d_is_strict_unless_asked(rec: Any, problems: list[ConvProblem]) -> None:
    x, w = torch.randn(*X_SHAPE), torch.randn(*W_SHAPE)
    torch.backends.cudnn.allow_tf32 = True                  # the plain function ignores PyTorch's flags
    convtune.conv2d(x, w, padding=1)
    convtune.conv2d(x, w, padding=1, math="ieee")
    assert [p.math for p in problems] == ["ieee"]            # None and "ieee": one signature
    convtune.conv2d(x, w, padding=1, math="tf32")
    convtune.conv2d(x, w, padding=1, math="tf32")
    assert [p.precision for p in problems] == ["float32", "tf32"]
    assert problems[1] == problems[0].replace(math="tf32")


@pytest.mark.parametrize("math", ["fp16", "TF32", 1, ["tf32"]], ids=repr)
def test_plain_conv2d_names_a_bad_math(rec: Any, math: Any) -> None:
    with pytest.raises(InvalidInput) as exc:
        convtune.conv2d(torch.randn(*X_SHAPE), torch.randn(*W_SHAPE), padding=1, math=math)
    assert exc.value.field == "math" and "'ieee', 'tf32'" in str(exc.value)


def test_plain_conv2d_with_a_config_checks_it_in_the_class(rec: Any, problems: list[ConvProblem]) -> None:
    y = convtune.conv2d(torch.randn(*X_SHAPE), torch.randn(*W_SHAPE), padding=1, config=DIRECT, math="tf32")
    assert y.shape == (2, 24, 14, 14) and problems[-1].math == "tf32"   # a strict family runs a tf32 request


# ---- convtune.ops.torch: the class from the tensors and PyTorch's flags -----------------------------------------
def test_the_flag_is_read_at_every_call(rec: Any, problems: list[ConvProblem], monkeypatch: pytest.MonkeyPatch) -> None:
    prepares = _prepared_configs(monkeypatch)
    x, w = torch.randn(*X_SHAPE), torch.randn(*W_SHAPE)
    torch.backends.cudnn.allow_tf32 = True
    ct.conv2d(x, w, None, padding=1)
    torch.backends.cudnn.allow_tf32 = False
    ct.conv2d(x, w, None, padding=1)
    assert [p.math for p in problems] == ["tf32", "ieee"] and len(prepares) == 2
    for flag in (True, False, True, False):                 # both entries are kept: no new preparation
        torch.backends.cudnn.allow_tf32 = flag
        ct.conv2d(x, w, None, padding=1)
    assert len(problems) == 2 and len(prepares) == 2
    assert sum(c.name == "direct_fwd" or c.name.startswith("winograd") for c in rec.launches()) >= 6


def test_the_new_precision_api_is_read_too(rec: Any, problems: list[ConvProblem]) -> None:
    if getattr(torch._C, "_get_fp32_precision_getter", None) is None:
        pytest.skip("this torch has no fp32_precision API (torch < 2.9)")
    x, w = torch.randn(*X_SHAPE), torch.randn(*W_SHAPE)
    torch.backends.cudnn.conv.fp32_precision = "ieee"       # a mix with the legacy flag: allow_tf32 would raise
    assert dense.math_of(x) == "ieee"
    ct.conv2d(x, w, None, padding=1)
    torch.backends.cudnn.conv.fp32_precision = "tf32"
    assert dense.math_of(x) == "tf32"
    ct.conv2d(x, w, None, padding=1)
    assert [p.math for p in problems] == ["ieee", "tf32"]


def test_the_modules_and_the_autograd_path_follow_the_flag(rec: Any, problems: list[ConvProblem]) -> None:
    m = ct.Conv2d(16, 24, 3, padding=1)
    x = torch.randn(*X_SHAPE)
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        m(x)
    torch.backends.cudnn.allow_tf32 = True
    m(x)                                                     # weights require grad: the autograd.Function path
    assert [p.math for p in problems] == ["ieee", "tf32"]


def test_the_op_reads_the_flag_when_it_runs_not_when_it_is_traced(rec: Any, problems: list[ConvProblem]) -> None:
    torch._dynamo.reset()
    x, w = torch.randn(*X_SHAPE), torch.randn(*W_SHAPE)
    compiled = torch.compile(lambda a, b: ct.conv2d(a, b, None, padding=1), fullgraph=True, backend="aot_eager")
    torch.backends.cudnn.allow_tf32 = True
    compiled(x, w)
    torch.backends.cudnn.allow_tf32 = False
    compiled(x, w)
    assert [p.math for p in problems] == ["tf32", "ieee"]


def test_16_bit_dense_calls_keep_running_pytorchs_convolution(rec: Any, problems: list[ConvProblem]) -> None:
    torch.backends.cudnn.allow_tf32 = True
    for dtype in (torch.bfloat16, torch.float16):
        x, w = torch.randn(1, 4, 8, 8, dtype=dtype), torch.randn(6, 4, 3, 3, dtype=dtype)
        assert dense.math_of(x) == "ieee"                    # their class is their dtype
        y = ct.conv2d(x, w, None, padding=1)
        assert y.dtype == dtype and torch.equal(y, F.conv2d(x, w, None, 1, 1))
    assert problems == [] and rec.launches() == []


def test_cpu_float32_runs_pytorch_in_both_classes() -> None:
    x, w = torch.randn(1, 3, 9, 9), torch.randn(4, 3, 3, 3)
    for flag in (True, False):
        torch.backends.cudnn.allow_tf32 = flag
        assert dense.math_of(x) == ("tf32" if flag else "ieee")
        assert torch.allclose(ct.conv2d(x, w, None, padding=1), F.conv2d(x, w, None, 1, 1))


# ---- the serving rule reaches the ops ---------------------------------------------------------------------------
def test_a_tf32_call_runs_the_tf32_row_a_strict_call_never_does(rec: Any, sqlite_url: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    strict_and_tf32(sqlite_url, migrate=False)               # the tf32 row is the faster
    resolver.set_lookup(True)
    resolver.use_database(sqlite_url)
    prepares = _prepared_configs(monkeypatch)
    x, w = torch.randn(*X_SHAPE), torch.randn(*W_SHAPE)
    torch.backends.cudnn.allow_tf32 = False
    ct.conv2d(x, w, None, padding=1)
    torch.backends.cudnn.allow_tf32 = True
    ct.conv2d(x, w, None, padding=1)
    convtune.conv2d(x, w, padding=1)                         # the plain function (a signature of its own): strict
    assert prepares == [GPU_CONFIG.key(), TF32_CONFIG.key(), GPU_CONFIG.key()]


def test_a_tf32_call_runs_a_faster_strict_row(rec: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    strict_and_tf32(sqlite_url, tf32_ms=3 * GPU_MS, migrate=False)
    resolver.set_lookup(True)
    resolver.use_database(sqlite_url)
    prepares = _prepared_configs(monkeypatch)
    torch.backends.cudnn.allow_tf32 = True
    ct.conv2d(torch.randn(*X_SHAPE), torch.randn(*W_SHAPE), None, padding=1)
    assert prepares == [GPU_CONFIG.key()]


# ---- ct.tune: layers in the class they will run in ---------------------------------------------------------------
def test_tune_records_dense_layers_in_their_class() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1, groups=8))
    x = torch.randn(1, 3, 10, 10)
    torch.backends.cudnn.allow_tf32 = True
    dense_layer, depthwise_layer = tune_model.collect_layers(model, x)
    assert dense_layer.problem.math == "tf32" and depthwise_layer.problem.math == "ieee"
    torch.backends.cudnn.allow_tf32 = False
    assert [layer.problem.math for layer in tune_model.collect_layers(model, x)] == ["ieee", "ieee"]
    forced = tune_model.layer_of("l", model[0], (1, 3, 10, 10), torch.float32, math="tf32")
    assert forced.problem is not None and forced.problem.precision == "tf32"


def test_the_autograd_path_launches_the_signature_runner(rec: Any, problems: list[ConvProblem],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradients needed: the kernels run through the runner kept per signature (made at most once, on the first
    call), and the gradients are PyTorch's of the same convolution."""
    lookups: list[int] = []
    real = dense.kernel_runner
    monkeypatch.setattr(dense, "kernel_runner", lambda *a, **k: lookups.append(1) or real(*a, **k))
    x = torch.randn(*X_SHAPE, requires_grad=True)
    w, b = torch.randn(*W_SHAPE, requires_grad=True), torch.randn(W_SHAPE[0], requires_grad=True)
    torch.backends.cudnn.allow_tf32 = False
    for _ in range(3):
        y = ct.conv2d(x, w, b, padding=1)
    assert len(lookups) <= 1 and len(problems) == 1
    assert sum(c.name != "dw_reduce" for c in rec.launches()) >= 3
    assert y.grad_fn is not None
    dy = torch.randn_like(y)
    y.backward(dy)
    ref = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    F.conv2d(*ref, padding=1).backward(dy)
    for got, want in zip((x, w, b), ref, strict=True):
        assert got.grad is not None and want.grad is not None
        assert torch.allclose(got.grad, want.grad, rtol=1e-5, atol=1e-5)

"""Direct forward kernel on the CPU: config keys, plan() rules, patch pitch, the config space, model_best,
and the operator API's error paths (no GPU, no CuPy needed)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import convtune
from convtune.errors import DeviceUnavailable, InvalidConfig, InvalidInput, InvalidProblem
from convtune.kernels import compile as compile_mod
from convtune.kernels.config import KernelConfig, parse_config_key
from convtune.kernels.direct.launcher import DirectFwdConfig, patch_pitch
from convtune.kernels.direct.space import enumerate_plans, model_best, plan
from convtune.machine import MachineModel
from convtune.ops import conv2d
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
PUBLIC_SUITE = Path(__file__).resolve().parents[3] / "benchmarks" / "suites" / "public.json"
PUBLIC_CONV2D = json.loads(PUBLIC_SUITE.read_text())["conv2d"]
PROBLEM = ConvProblem.parse("N=2 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
HAVE_CUPY = importlib.util.find_spec("cupy") is not None


# ---- config keys -------------------------------------------------------------------------------------------
config_values = st.builds(DirectFwdConfig, **{f.name: st.integers(1, 4096) for f in fields(DirectFwdConfig)})


@settings(max_examples=100, derandomize=True)
@given(config=config_values)
def test_key_round_trip(config: DirectFwdConfig) -> None:
    key = config.key()
    assert key.startswith("direct.fwd ")
    back = parse_config_key(key)
    assert back == config and isinstance(back, DirectFwdConfig)
    assert back.key() == key and hash(back) == hash(config)
    assert str(config) == key


def test_key_lists_every_field_in_order() -> None:
    config = DirectFwdConfig()
    assert config.key() == "direct.fwd " + " ".join(f"{f.name}={getattr(config, f.name)}" for f in fields(config))
    assert config.kind == "direct.fwd"
    assert config.to_dict()["tile_k"] == config.tile_k


def test_parse_partial_key_uses_defaults() -> None:
    assert parse_config_key("direct.fwd tile_h=8 vec=4") == DirectFwdConfig(tile_h=8, vec=4)


@pytest.mark.parametrize(("text", "field"), [
    ("direct.fwd tile_h=8 bogus=3", "bogus"),
    ("direct.fwd tile_h=eight", "tile_h"),
    ("direct.fwd tile_k=1.5", "tile_k"),
    ("direct.fwd stages=0", "stages"),
    ("direct.fwd splits=-2", "splits"),
    ("direct.fwd chunk_c", "chunk_c"),
    ("nosuch.fwd tile_h=8", "kind"),
])
def test_parse_config_key_errors_name_the_field(text: str, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        parse_config_key(text)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "4", None])
def test_config_rejects_non_positive_or_non_int_values(value: object) -> None:
    with pytest.raises(InvalidConfig) as info:
        DirectFwdConfig(thread_w=value)  # type: ignore[arg-type]
    assert info.value.field == "thread_w"


def test_config_is_registered_and_frozen() -> None:
    config = DirectFwdConfig()
    assert isinstance(config, KernelConfig)
    with pytest.raises(AttributeError):
        config.tile_h = 2  # type: ignore[misc]


# ---- plan() rules ------------------------------------------------------------------------------------------
BASE = DirectFwdConfig(tile_h=4, tile_w=32, tile_k=64, chunk_c=8, thread_h=1, thread_w=4, thread_k=8)


def test_base_config_is_valid() -> None:
    pl = plan(PROBLEM, BASE, H200)
    assert pl.config.threads == 4 * 8 * 8
    assert pl.grid == (1, 14 * 2, 2)
    assert pl.kp == 64 and pl.chunks_per_split == 8
    in_stage = -(-8 * pl.patch_h * pl.patch_pitch // 4) * 4  # padded to 16 bytes (weight slice alignment)
    assert pl.smem_bytes == 4 * BASE.stages * (in_stage + 8 * 9 * 64)


@pytest.mark.parametrize(("problem", "config", "field"), [
    (ConvProblem.parse("N=1 C=8 H=16 W=16 K=8 R=3 S=3 groups=2"), BASE, "groups"),
    (replace(PROBLEM, dtype="float16"), BASE, "dtype"),
    (PROBLEM, replace(BASE, thread_h=3), "thread_h"),
    (PROBLEM, replace(BASE, tile_w=32, thread_w=3), "thread_w"),
    (PROBLEM, replace(BASE, thread_k=6, tile_k=48), "thread_k"),       # not a multiple of 4
    (PROBLEM, replace(BASE, thread_k=8, tile_k=36), "thread_k"),       # does not divide tile_k
    (PROBLEM, replace(BASE, tile_h=1, tile_w=4, tile_k=16, thread_w=4, thread_k=8), "threads"),   # 2 threads
    (PROBLEM, replace(BASE, tile_h=16, tile_w=64, tile_k=128, thread_w=1, thread_k=4), "threads"),  # 32768
    (PROBLEM, replace(BASE, tile_h=3, tile_w=4, thread_w=1, tile_k=16, thread_k=4), "threads"),  # 48
    (PROBLEM, replace(BASE, tile_h=1, tile_w=16, thread_w=4, tile_k=96, thread_k=12), "tile_k"),  # 32 % 24
    (PROBLEM, replace(BASE, stages=5), "stages"),
    (PROBLEM, replace(BASE, vec=2), "vec"),
    (ConvProblem.parse("N=1 C=16 H=30 W=30 K=64 R=3 S=3 pad=1"), replace(BASE, vec=4), "vec"),
    (ConvProblem.parse("N=1 C=20 H=16 W=16 K=64 R=3 S=3 pad=1"), replace(BASE, chunk_c=8, splits=4), "splits"),
    (PROBLEM, replace(BASE, tile_h=16, tile_w=64, thread_h=2, thread_w=8, tile_k=64, thread_k=8, chunk_c=64,
                      stages=4), "chunk_c"),                            # shared memory over the H200's limit
    (ConvProblem.parse("N=1 C=4 H=32 W=32 K=64 R=3 S=3 pad=1"),
     DirectFwdConfig(tile_h=16, tile_w=16, tile_k=64, chunk_c=1, thread_h=8, thread_w=8, thread_k=8), "thread_k"),
    (ConvProblem.parse("N=1 C=1 H=1024 W=1024 K=8 R=1 S=1"),
     DirectFwdConfig(tile_h=1, tile_w=4, tile_k=128, chunk_c=1, thread_h=1, thread_w=1, thread_k=4), "tile_w"),
    (ConvProblem.parse("N=65536 C=1 H=1 W=1 K=8 R=1 S=1"),
     DirectFwdConfig(tile_h=1, tile_w=4, tile_k=32, chunk_c=1, thread_h=1, thread_w=1, thread_k=4), "splits"),
], ids=["groups", "dtype", "thread_h", "thread_w", "thread_k_mult4", "thread_k_divides", "threads_few",
        "threads_many", "threads_not_warp_multiple", "tile_k_vs_threads", "stages", "vec_width", "vec4_W",
        "splits_gt_chunks", "smem", "registers", "grid_y", "grid_z"])
def test_plan_rejects_with_the_field(problem: ConvProblem, config: DirectFwdConfig, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(problem, config, H200)
    assert info.value.field == field, str(info.value)


def test_rule_examples_break_one_rule_only() -> None:
    """The examples above fail for the intended reason: the rule's numbers are in the message."""
    with pytest.raises(InvalidConfig, match="48 threads"):
        plan(PROBLEM, replace(BASE, tile_h=3, tile_w=4, thread_w=1, tile_k=16, thread_k=4))
    with pytest.raises(InvalidConfig, match="tile_k/4=24"):
        plan(PROBLEM, replace(BASE, tile_h=1, tile_w=16, thread_w=4, tile_k=96, thread_k=12))
    with pytest.raises(InvalidConfig, match="registers per thread"):
        plan(ConvProblem.parse("N=1 C=4 H=32 W=32 K=64 R=3 S=3 pad=1"),
             DirectFwdConfig(tile_h=16, tile_w=16, tile_k=64, chunk_c=1, thread_h=8, thread_w=8, thread_k=8), H200)
    with pytest.raises(InvalidConfig, match="grid's y limit"):
        plan(ConvProblem.parse("N=1 C=1 H=1024 W=1024 K=8 R=1 S=1"),
             DirectFwdConfig(tile_h=1, tile_w=4, tile_k=128, chunk_c=1, thread_h=1, thread_w=1, thread_k=4))
    with pytest.raises(InvalidConfig, match="grid's z limit"):
        plan(ConvProblem.parse("N=65536 C=1 H=1 W=1 K=8 R=1 S=1"),
             DirectFwdConfig(tile_h=1, tile_w=4, tile_k=32, chunk_c=1, thread_h=1, thread_w=1, thread_k=4))
    # thread_k=12 is fine on its own (a multiple of 4 dividing tile_k) and 32 threads are a warp
    assert replace(BASE, tile_h=1, tile_w=16, thread_w=4, tile_k=96, thread_k=12).threads == 32
    with pytest.raises(InvalidConfig, match="exceeds the 3 channel chunks"):
        plan(ConvProblem.parse("N=1 C=20 H=16 W=16 K=64 R=3 S=3 pad=1"), replace(BASE, chunk_c=8, splits=4))


def test_machine_limits_apply_only_with_a_machine() -> None:
    big = replace(BASE, tile_h=16, tile_w=64, thread_h=2, thread_w=8, chunk_c=64, stages=4)
    pl = plan(PROBLEM, big)  # no machine: no shared-memory or register limit, min_blocks 1
    assert pl.smem_bytes > H200.smem_per_block_bytes
    assert pl.min_blocks == 1
    assert plan(PROBLEM, BASE, H200).smem_bytes > 49152
    with pytest.raises(InvalidConfig, match=r"shared memory exceed the 49152 B per block of Tesla P100") as info:
        plan(PROBLEM, BASE, MachineModel.preset("p100"))
    assert info.value.field == "chunk_c"


def test_vec4_accepted_when_W_is_a_multiple_of_4() -> None:
    pl = plan(PROBLEM, replace(BASE, vec=4), H200)
    assert pl.patch_pitch % 4 == 0


def test_min_blocks_within_machine_limits() -> None:
    pl = plan(PROBLEM, BASE, H200)
    assert 1 <= pl.min_blocks <= 4
    assert pl.min_blocks * BASE.threads <= H200.max_threads_per_sm


# ---- patch pitch -------------------------------------------------------------------------------------------
@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(th=st.sampled_from([1, 2, 4, 8, 16]), tw=st.sampled_from([4, 8, 16, 32, 64]), py=st.sampled_from([1, 2]),
       px=st.sampled_from([1, 2, 4, 8]), tk=st.sampled_from([16, 32, 64, 128]), kx=st.sampled_from([4, 8]),
       vec=st.sampled_from([1, 4]), stride_h=st.integers(1, 3), stride_w=st.integers(1, 3),
       rs=st.sampled_from([1, 3, 5, 7]), dil=st.integers(1, 2))
def test_patch_pitch_properties(th: int, tw: int, py: int, px: int, tk: int, kx: int, vec: int, stride_h: int,
                                stride_w: int, rs: int, dil: int) -> None:
    if th % py or tw % px:
        return
    problem = ConvProblem(N=1, C=4, H=64, W=64, K=8, R=rs, S=rs, stride_h=stride_h, stride_w=stride_w,
                          dil_h=dil, dil_w=dil)
    config = DirectFwdConfig(tile_h=th, tile_w=tw, tile_k=tk, thread_h=py, thread_w=px, thread_k=kx, vec=vec)
    patch_w = (tw - 1) * stride_w + (rs - 1) * dil + 1
    pitch = patch_pitch(problem, config, patch_w)
    assert pitch >= patch_w
    if vec == 4:
        assert pitch % 4 == 0
        assert pitch >= patch_w + 3  # an aligned-down 16-byte segment span still fits the row
    need = patch_w + (3 if vec == 4 else 0)
    assert pitch <= need + 36


def test_patch_pitch_in_plan_matches_helper() -> None:
    for config in (BASE, replace(BASE, vec=4)):
        pl = plan(PROBLEM, config, H200)
        assert pl.patch_pitch == patch_pitch(PROBLEM, config, pl.patch_w)
        assert pl.patch_w == (config.tile_w - 1) + 2 + 1 and pl.patch_h == config.tile_h + 2


# ---- the config space --------------------------------------------------------------------------------------
SPACE_PROBLEMS = [
    "N=1 C=3 H=9 W=12 K=5 R=3 S=3 pad=1",
    "N=2 C=16 H=14 W=14 K=32 R=1 S=1",
    "N=1 C=8 H=20 W=20 K=24 R=5 S=5 stride=2 pad=2 dilation=1",
    "N=1 C=12 H=15 W=16 K=16 R=3 S=3 pad=2 dilation=2",
]


@pytest.mark.parametrize("text", SPACE_PROBLEMS)
@pytest.mark.parametrize("machine_name", ["h200", "p100"])
def test_enumerate_plans_yields_only_valid_plans(text: str, machine_name: str) -> None:
    problem, machine = ConvProblem.parse(text), MachineModel.preset(machine_name)
    plans = list(enumerate_plans(problem, machine))
    assert plans, f"no plan for {text}"
    keys = [pl.config.key() for pl in plans]
    assert len(set(keys)) == len(keys)
    for pl in plans:
        c = pl.config
        assert pl.problem == problem
        assert plan(problem, c, machine) == pl
        assert pl.smem_bytes <= machine.smem_per_block_bytes
        assert 64 <= c.threads <= 512 and c.threads % 32 == 0
        assert c.threads % (c.tile_k // 4) == 0
        assert c.accumulators <= 64
        assert c.splits <= -(-problem.C // c.chunk_c)
        assert c.vec == 1 or problem.W % 4 == 0
        assert pl.regs_estimate <= machine.max_regs_per_thread


def test_enumerate_plans_skips_unsupported_problems() -> None:
    assert list(enumerate_plans(ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 groups=2"), H200)) == []
    assert list(enumerate_plans(replace(PROBLEM, dtype="float16"), H200)) == []
    with pytest.raises(InvalidConfig) as info:
        model_best(ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 groups=8"), H200)
    assert info.value.field == "problem"


def _check_model_best(spec: dict[str, object]) -> None:
    problem = ConvProblem.from_mapping(spec)
    best = model_best(problem, H200)
    assert isinstance(best, DirectFwdConfig)
    pl = plan(problem, best, H200)
    assert pl.smem_bytes <= H200.smem_per_block_bytes


@pytest.mark.parametrize("spec", [PUBLIC_CONV2D[i] for i in (0, 10, 11)], ids=lambda s: s["name"])
def test_model_best_for_some_public_problems(spec: dict[str, object]) -> None:
    _check_model_best(spec)


@pytest.mark.slow
def test_model_best_for_every_public_conv2d_problem() -> None:
    for spec in PUBLIC_CONV2D:
        _check_model_best(spec)


# ---- operator API error paths ------------------------------------------------------------------------------
X, W = (1, 3, 8, 8), (4, 3, 3, 3)


def test_problem_for_builds_the_problem() -> None:
    p = conv2d.problem_for((2, 3, 9, 10), (4, 3, 3, 1), stride=(2, 1), padding=[1, 0], dilation=2)
    assert p == ConvProblem(N=2, C=3, H=9, W=10, K=4, R=3, S=1, stride_h=2, stride_w=1, pad_h=1, pad_w=0,
                            dil_h=2, dil_w=2)


@pytest.mark.parametrize(("x", "w", "kwargs", "field"), [
    ((3, 8, 8), W, {}, "x"),
    ((1, 1, 3, 8, 8), W, {}, "x"),
    (X, (4, 3, 3), {}, "w"),
    (X, (4, 5, 3, 3), {}, "w"),
    (X, W, {"stride": "2"}, "stride"),
    (X, W, {"stride": 1.0}, "stride"),
    (X, W, {"stride": True}, "stride"),
    (X, W, {"stride": (1, 2, 3)}, "stride"),
    (X, W, {"padding": 1.5}, "padding"),
    (X, W, {"padding": (1,)}, "padding"),
    (X, W, {"padding": None}, "padding"),
    (X, W, {"dilation": [1, "2"]}, "dilation"),
    (X, W, {"dilation": {"h": 1}}, "dilation"),
])
def test_problem_for_rejects_bad_input(x: tuple[int, ...], w: tuple[int, ...], kwargs: dict[str, object],
                                       field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        conv2d.problem_for(x, w, **kwargs)
    assert info.value.field == field, str(info.value)


@pytest.mark.parametrize(("x", "w", "kwargs", "field"), [
    (X, W, {"stride": 0}, "stride_h"),
    (X, W, {"stride": (1, 0)}, "stride_w"),
    (X, W, {"padding": -1}, "pad_h"),
    (X, W, {"padding": (0, -2)}, "pad_w"),
    (X, W, {"dilation": (0, 1)}, "dil_h"),
    ((1, 3, 2, 8), W, {}, "H"),
    ((1, 3, 8, 2), W, {}, "W"),
    ((0, 3, 8, 8), W, {}, "N"),
    (X, (0, 3, 3, 3), {}, "K"),
])
def test_problem_for_rejects_invalid_problems(x: tuple[int, ...], w: tuple[int, ...], kwargs: dict[str, object],
                                              field: str) -> None:
    with pytest.raises(InvalidProblem) as info:
        conv2d.problem_for(x, w, **kwargs)
    assert info.value.field == field, str(info.value)


def _no_cupy() -> None:
    raise DeviceUnavailable("CuPy is not installed (test)")


def test_conv2d_without_cupy_raises_device_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_mod, "cupy_module", _no_cupy)
    monkeypatch.setattr(conv2d, "cupy_module", _no_cupy)  # ops binds the name at import
    x, w = np.zeros(X, np.float32), np.zeros(W, np.float32)
    with pytest.raises(DeviceUnavailable):
        convtune.conv2d(x, w, padding=1)
    with pytest.raises(DeviceUnavailable):
        conv2d.conv2d(x, w, config="direct.fwd tile_h=4")


@pytest.mark.skipif(HAVE_CUPY, reason="CuPy is installed here: the real missing-CuPy path cannot be exercised")
def test_conv2d_on_a_machine_without_cupy() -> None:
    x, w = np.zeros(X, np.float32), np.zeros(W, np.float32)
    with pytest.raises(DeviceUnavailable, match="CuPy"):
        convtune.conv2d(x, w)
    with pytest.raises(DeviceUnavailable):
        compile_mod.load_kernel("extern \"C\" __global__ void k() {}", "k")

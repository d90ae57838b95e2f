"""The kernel registry: every row points at a real source, entry, config class and working callables."""

from __future__ import annotations

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.compile import kernel_path
from convtune.kernels.registry import REGISTRY, get_spec, model_fastest, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")

DENSE = ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1")
DEPTHWISE_2D = ConvProblem.parse("N=1 C=8 H=12 W=12 K=8 R=3 S=3 pad=1 groups=8")
CAUSAL_1D = ConvProblem.depthwise1d(B=2, C=3, L=48, K=4)
POINTWISE = ConvProblem.parse("N=2 C=8 H=12 W=12 K=16 R=1 S=1")
DENSE_5X5 = ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=5 S=5 pad=2")
DENSE_TF32 = DENSE.replace(math="tf32")


def sample_problem(family: str) -> ConvProblem:
    """A small problem the family runs (the depthwise families take depthwise problems only, pointwise 1×1)."""
    if family in ("pointwise", "pointwise_sliced"):
        return POINTWISE
    if family in ("igemm_1x1", "igemm_wgmma_1x1", "igemm_wgmma_1x1_resident"):
        return POINTWISE.replace(math="tf32")
    if family in ("igemm_half", "igemm_wgmma_half"):
        return DENSE.replace(dtype="bfloat16")
    if family in ("igemm_wgmma_n96", "igemm_wgmma_half_n96"):   # K that a 96- or 192-wide tile pads less
        return DENSE_TF32.replace(K=192) if family == "igemm_wgmma_n96" else DENSE.replace(K=192, dtype="bfloat16")
    if family == "igemm_wgmma_half_1x1_tma":   # C a multiple of 64 (a TMA box of channel rows stays in one image)
        return POINTWISE.replace(C=64, dtype="bfloat16")
    if family == "igemm_wgmma_1x1_tma":        # C a multiple of 32 (its TF32 boxes' 32 channel rows)
        return POINTWISE.replace(C=32, math="tf32")
    if family in ("igemm_half_1x1", "igemm_wgmma_half_1x1", "igemm_wgmma_half_1x1_resident",
                  "igemm_wgmma_half_1x1_pingpong"):
        return POINTWISE.replace(dtype="bfloat16")
    if family.startswith("igemm") or family == "winograd_unfused_tf32":
        return DENSE_TF32
    if family.startswith("depthwise1d_"):
        return CAUSAL_1D
    if family in ("winograd_unfused_large", "winograd_unfused_3xtf32"):
        return DENSE_5X5
    if family == "winograd_unfused_1d":
        return DENSE.replace(R=1, S=7, pad_h=0, pad_w=3)
    if family == "direct_half":
        return DENSE.replace(C=3, dtype="bfloat16")
    return DEPTHWISE_2D if family.startswith("depthwise2d_") else DENSE


@pytest.fixture
def every_family(monkeypatch: pytest.MonkeyPatch) -> None:
    """Experimental families (convtune.kernels.experimental) enabled: their rows are checked like the others."""
    monkeypatch.setenv(experimental.ENV, "all")


@pytest.mark.parametrize("key", list(REGISTRY), ids=lambda k: ".".join(k))
def test_row_is_complete(key: tuple[str, str], every_family: None) -> None:
    spec = REGISTRY[key]
    assert (spec.family, spec.direction) == key
    source = kernel_path(spec.source)
    assert source.is_file(), f"{source} missing"
    assert spec.config_class.family == spec.family and spec.config_class.direction == spec.direction
    problem = sample_problem(spec.family)
    assert spec.supports(problem)
    machine = MachineModel.preset("h200")
    first = next(iter(spec.enumerate_plans(problem, machine)))
    again = spec.plan(problem, first.config, machine)
    assert again.config == first.config
    assert spec.predict_s(first, machine) > 0
    assert spec.traffic_words(first) >= problem.compulsory_elements - problem.weight_elements


def test_unknown_family_names_the_allowed_ones() -> None:
    with pytest.raises(InvalidConfig, match=r"direct\.fwd"):
        get_spec("fft")


def test_specs_for_filters_unsupported_problems() -> None:
    assert [s.family for s in specs_for(DEPTHWISE_2D)] == ["depthwise2d_tiled", "depthwise2d_fast",
                                                           "depthwise2d_packed"]
    wide = DEPTHWISE_2D.replace(H=56, W=56)  # the packed kernel takes images up to 32 wide
    assert [s.family for s in specs_for(wide)] == ["depthwise2d_tiled", "depthwise2d_fast"]
    assert [s.family for s in specs_for(CAUSAL_1D)] == ["depthwise1d_naive", "depthwise1d_coalesced",
                                                         "depthwise1d_shared", "depthwise1d_warp", "depthwise1d_fast"]
    grouped = ConvProblem.parse("N=1 C=8 H=12 W=12 K=8 R=3 S=3 pad=1 groups=2")
    assert specs_for(grouped) == []
    # 16-bit depthwise: the kernels with 16-bit storage only (the tiled 2-D and the simple 1-D variants are fp32)
    assert [s.family for s in specs_for(DEPTHWISE_2D.replace(dtype="float16"))] == ["depthwise2d_fast",
                                                                                  "depthwise2d_packed"]
    assert [s.family for s in specs_for(CAUSAL_1D.replace(dtype="bfloat16"))] == ["depthwise1d_fast"]
    dense = ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1")
    assert [s.family for s in specs_for(dense, families=["direct"])] == ["direct"]
    assert [s.family for s in specs_for(dense)] == ["direct", "winograd", "winograd_unfused", "igemm_simt",
                                                    "winograd_unfused_3xtf32"]
    assert specs_for(dense, families=["fft"]) == []
    strided = ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 stride=2 pad=1")
    assert [s.family for s in specs_for(strided)] == ["direct", "igemm_simt"]
    pointwise = ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=1 S=1")
    assert [s.family for s in specs_for(pointwise)] == ["direct", "pointwise", "igemm_simt", "pointwise_sliced"]
    assert [s.family for s in specs_for(pointwise.replace(pad_h=1, pad_w=1))] == ["direct", "igemm_simt"]


@pytest.mark.parametrize("key", list(REGISTRY), ids=lambda k: ".".join(k))
def test_launcher_protocol(key: tuple[str, str], every_family: None) -> None:
    """Every family's launcher module offers what the GPU benchmarker and conv2d call."""
    spec = REGISTRY[key]
    for name in ("compile_plan", "prepare_filters", "filters_key", "launch", "tolerance"):
        assert callable(getattr(spec.launcher, name)), f"{spec.kind}: launcher lacks {name}"
    problem = sample_problem(spec.family)
    first = next(iter(spec.enumerate_plans(problem, MachineModel.preset("h200"))))
    # strict fp32 families hold 1e-4; the TF32 class (11 significant bits per operand) and the 16-bit ones their own
    gates = {"tf32": 5e-3, "bfloat16": 1.5e-2, "float16": 2e-3}
    assert 0 < spec.launcher.tolerance(first) <= gates.get(problem.precision, 1e-4)
    hash(spec.launcher.filters_key(first))


def _exhaustive(problem: ConvProblem, machine: MachineModel) -> tuple[float, object]:
    """model_fastest without floors: every plan of every family the untuned choice takes, by (choice_s, key)."""
    best = min(((spec.choice_s(pl, machine), pl.config.key(), spec.predict_s(pl, machine), pl.config)
                for spec in specs_for(problem) if spec.chosen_for(problem)
                for pl in spec.enumerate_plans(problem, machine)),
               key=lambda c: c[:2])
    return best[2], best[3]


@pytest.mark.parametrize("spec", [
    "N=2 C=16 H=9 W=9 K=24 R=3 S=3 pad=1",                      # launch-bound: direct wins, nothing skipped
    "N=1 C=512 H=1 W=1 K=512 R=3 S=3 pad=1 math=tf32",           # padding-dominated
    "N=4 C=3 H=32 W=32 K=16 R=5 S=5 stride=2 pad=2",
    "N=8 C=32 H=7 W=7 K=96 R=1 S=1 stride=2 math=tf32",
])
def test_model_fastest_is_the_exhaustive_choice(spec: str) -> None:
    problem = ConvProblem.parse(spec)
    assert model_fastest(problem, H200, specs_for(problem)) == _exhaustive(problem, H200)


@pytest.mark.parametrize("preset", ["h100", "h200"])
def test_tf32_untuned_choice_leaves_the_strict_direct_kernel_out(preset: str) -> None:
    """Under TF32 the untuned choice does not run the strict-fp32 direct kernel where a TF32 family has a plan (its
    model chose it on the MobileNetV2 stem, 2.6× slower there than the tuned TF32 config); in strict fp32 it still
    does, and with no other family to run a TF32 problem it is the answer."""
    machine = MachineModel.preset(preset)
    stem = ConvProblem.parse("N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 math=tf32")
    direct = get_spec("direct")
    assert direct.supports(stem) and not direct.chosen_for(stem) and direct.chosen_for(stem.replace(math="ieee"))
    best = model_fastest(stem, machine, specs_for(stem))
    assert best is not None and best[1].family != "direct"
    alone = model_fastest(stem, machine, [direct])       # nothing else runs it: the family left out is the answer
    assert alone is not None and alone[1].family == "direct"
    small = ConvProblem.parse("N=2 C=16 H=9 W=9 K=24 R=3 S=3 pad=1")
    assert model_fastest(small, machine, specs_for(small))[1].family == "direct"   # strict fp32: unchanged


@pytest.mark.parametrize("spec", ["N=1 C=256 H=56 W=56 K=256 R=3 S=3 pad=1 math=tf32",    # below wgmma's choice
                                  "N=32 C=128 H=28 W=28 K=128 R=3 S=3 pad=1"])             # below Winograd's
def test_model_fastest_skips_a_family_whose_floor_is_above_the_best(spec: str) -> None:
    """The direct family's space is never enumerated where its floor (below every plan: test_direct_model_floor)
    is above another family's choice; the answer is the other families' best."""
    import dataclasses

    problem = ConvProblem.parse(spec)

    def never(*_: object) -> list[object]:
        raise AssertionError("the direct family's space was enumerated")

    direct = get_spec("direct")
    specs = [dataclasses.replace(s, enumerate_plans=never) if s is direct else s for s in specs_for(problem)]
    others = [s for s in specs if s.family != "direct"]
    best = model_fastest(problem, H200, specs)
    assert best == model_fastest(problem, H200, others)
    assert direct.choice_floor_s(problem, H200) > min(
        s.choice_s(pl, H200) for s in others for pl in s.enumerate_plans(problem, H200))

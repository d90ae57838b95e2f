"""The provisional answer ranks the families the untuned choice considers, as ``registry.model_fastest`` does: under
TF32 the strict direct kernel is left out where a TF32 family has a plan, and is the answer where none has."""

from __future__ import annotations

from convtune.api.provisional import rank
from convtune.kernels.registry import get_spec, model_fastest, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H100 = MachineModel.preset("h100")
STEM = ConvProblem.parse("N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 math=tf32")


def test_rank_leaves_the_strict_direct_kernel_out_under_tf32_as_the_untuned_choice_does() -> None:
    best, ranked, complete = rank(STEM, H100, specs_for(STEM))
    assert complete and ranked > 0 and best is not None
    assert best[2].family != "direct" and best[2] == model_fastest(STEM, H100, specs_for(STEM))[1]


def test_rank_falls_back_to_the_families_left_out_where_nothing_else_runs() -> None:
    direct = get_spec("direct")
    best, _, complete = rank(STEM, H100, [direct])
    assert complete and best is not None and best[2].family == "direct"
    assert best[2] == model_fastest(STEM, H100, [direct])[1]

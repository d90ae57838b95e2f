"""The direct model's DRAM-floor tie-break (``model.TIE_BREAK_FRACTION``): plans whose on-chip time stays under the
DRAM floor no longer predict the same time, so the untuned choice ranks them by their on-chip time instead of the
config key's order. The case is the one that showed it: the MobileNetV2 stem b64 in TF32 on the H100 (measured
ceilings), where the key order had picked a vec=4, tile_h=1 config that ran 2.2× the H200 choice's time."""

from __future__ import annotations

import pytest

from convtune.kernels.config import parse_config_key
from convtune.kernels.direct import model as direct_model
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H100 = MachineModel.preset("h100")
STEM = ConvProblem.parse("N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 math=tf32")
MEASURED_GOOD = ("direct.fwd tile_h=16 tile_w=8 tile_k=32 chunk_c=3 thread_h=1 thread_w=8 thread_k=8 stages=2 vec=1 "
                 "splits=1")       # the H200's untuned choice: 123.7 µs (calls_v3)
MEASURED_SLOW = ("direct.fwd tile_h=1 tile_w=16 tile_k=32 chunk_c=3 thread_h=1 thread_w=2 thread_k=4 stages=2 vec=4 "
                 "splits=1")       # the key order's pick on the H100 model before the tie-break (not measured;
#                                    its chunk_c=1 stages=3 sibling, the datasheet preset's pick, ran 270.9 µs)


def test_dram_bound_plans_rank_by_their_on_chip_time() -> None:
    direct = get_spec("direct")
    good, slow = (direct.plan(STEM, parse_config_key(k), H100) for k in (MEASURED_GOOD, MEASURED_SLOW))
    a, b = direct_model.predict(good, H100), direct_model.predict(slow, H100)
    assert a.bound_by == b.bound_by == "dram" and a.dram_s == b.dram_s    # both at the DRAM floor
    assert max(a.issue_s, a.l2_s) < max(b.issue_s, b.l2_s)
    assert direct.predict_s(good, H100) < direct.predict_s(slow, H100)
    # the tie-break moves no prediction by more than its fraction of the on-chip time
    base = a.dram_s + direct_model.LAUNCH_OVERHEAD_S
    assert direct.predict_s(good, H100) == pytest.approx(base + direct_model.TIE_BREAK_FRACTION * max(a.issue_s,
                                                                                                      a.l2_s))


def test_the_untuned_tf32_choice_on_the_h100_keeps_the_h200s_stem_configs() -> None:
    """With the H100 preset's measured ceilings the untuned choice of the three stems that ran 0.38–0.45× cuDNN TF32
    through the op on the H100 (datasheet ceilings) is the config the H200 chose (1.35–1.71× there)."""
    from convtune.ops.conv2d import model_choice

    h200 = MachineModel.preset("h200")
    for text in ("N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 math=tf32",       # mobilenetv2 stem b64
                 "N=16 C=3 H=224 W=224 K=64 R=11 S=11 stride=4 pad=2 math=tf32",     # alexnet conv1 b16
                 "N=4 C=3 H=224 W=224 K=13 R=3 S=3 stride=2 pad=1 math=tf32"):       # enet initial b4
        problem = ConvProblem.parse(text)
        assert model_choice(problem, H100).key() == model_choice(problem, h200).key(), text

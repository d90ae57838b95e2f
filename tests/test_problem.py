"""ConvProblem: shapes and counts against independent formulas and brute force; every invalid input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convtune.errors import InvalidProblem
from convtune.problem import MAX_ELEMENTS, ConvProblem

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "suites" / "public.json"
BASE = {"N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3}


# ---- independent oracles ------------------------------------------------------------------------------
def out_size(extent: int, taps: int, stride: int, pad_lo: int, pad_hi: int, dil: int) -> int:
    """Number of window positions o ≥ 0 whose last tap o·stride + dil·(taps−1) lies in the padded extent."""
    padded = pad_lo + extent + pad_hi
    count = 0
    while count * stride + dil * (taps - 1) <= padded - 1:
        count += 1
    return count


def axis_reads(extent: int, out: int, taps: int, stride: int, pad: int, dil: int) -> list[tuple[int, int]]:
    """(window, tap) pairs along one axis whose input index is a real element, by enumeration."""
    return [(o, t) for o in range(out) for t in range(taps) if 0 <= o * stride - pad + t * dil < extent]


def brute_used_elements(p: ConvProblem) -> set[tuple[int, int]]:
    """Every (row, col) of one input plane that some window reads at some tap."""
    used = set()
    for oh in range(p.P):
        for ow in range(p.Q):
            for r in range(p.R):
                for s in range(p.S):
                    i = oh * p.stride_h - p.pad_h + r * p.dil_h
                    j = ow * p.stride_w - p.pad_w + s * p.dil_w
                    if 0 <= i < p.H and 0 <= j < p.W:
                        used.add((i, j))
    return used


def brute_macs_nonpad(p: ConvProblem) -> int:
    taps = 0
    for oh in range(p.P):
        for ow in range(p.Q):
            for r in range(p.R):
                for s in range(p.S):
                    i = oh * p.stride_h - p.pad_h + r * p.dil_h
                    j = ow * p.stride_w - p.pad_w + s * p.dil_w
                    taps += 0 <= i < p.H and 0 <= j < p.W
    return p.N * p.K * (p.C // p.groups) * taps


@st.composite
def problems(draw: st.DrawFn) -> ConvProblem:
    """Small valid 2-D problems, including stride > kernel, dilation and padding beyond the kernel."""
    R, S = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ph, pw = draw(st.integers(0, 7)), draw(st.integers(0, 7))
    H = max(1, dh * (R - 1) + 1 - 2 * ph) + draw(st.integers(0, 9))
    W = max(1, dw * (S - 1) + 1 - 2 * pw) + draw(st.integers(0, 9))
    groups = draw(st.integers(1, 3))
    C = groups * draw(st.integers(1, 3))
    K = groups * draw(st.integers(1, 3))
    return ConvProblem(N=draw(st.integers(1, 3)), C=C, H=H, W=W, K=K, R=R, S=S, stride_h=sh, stride_w=sw,
                       pad_h=ph, pad_w=pw, dil_h=dh, dil_w=dw, groups=groups,
                       dtype=draw(st.sampled_from(["float32", "float16", "bfloat16"])))


causal_problems = st.builds(ConvProblem.depthwise1d, B=st.integers(1, 3), C=st.integers(1, 4),
                            L=st.integers(1, 12), K=st.integers(1, 16), dilation=st.integers(1, 4))


def invalid(match: str | None = None, **changes: Any) -> InvalidProblem:
    with pytest.raises(InvalidProblem) as info:
        ConvProblem(**{**BASE, **changes})
    return info.value


# ---- shapes and counts ---------------------------------------------------------------------------------
@given(problems())
def test_output_shape_matches_formula_and_enumeration(p: ConvProblem) -> None:
    formula_p = (p.H + 2 * p.pad_h - p.dil_h * (p.R - 1) - 1) // p.stride_h + 1
    formula_q = (p.W + 2 * p.pad_w - p.dil_w * (p.S - 1) - 1) // p.stride_w + 1
    assert (formula_p, formula_q) == (p.P, p.Q)
    assert out_size(p.H, p.R, p.stride_h, p.pad_h, p.pad_h, p.dil_h) == p.P
    assert out_size(p.W, p.S, p.stride_w, p.pad_w, p.pad_w, p.dil_w) == p.Q
    assert p.output_elements == p.N * p.K * p.P * p.Q


@given(problems())
def test_macs_and_element_counts(p: ConvProblem) -> None:
    assert p.macs == p.N * p.K * p.P * p.Q * (p.C // p.groups) * p.R * p.S
    assert p.flops == 2 * p.macs
    assert p.reduction_length == (p.C // p.groups) * p.R * p.S
    assert p.input_elements == p.N * p.C * p.H * p.W
    assert p.weight_elements == p.K * (p.C // p.groups) * p.R * p.S


@given(problems())
def test_macs_nonpad_matches_brute_force(p: ConvProblem) -> None:
    assert p.macs_nonpad == brute_macs_nonpad(p)
    assert 0 <= p.macs_nonpad <= p.macs


@given(problems())
def test_used_inputs_match_brute_force(p: ConvProblem) -> None:
    used = brute_used_elements(p)
    rows = {o * p.stride_h - p.pad_h + t * p.dil_h for o, t in axis_reads(p.H, p.P, p.R, p.stride_h, p.pad_h, p.dil_h)}
    cols = {o * p.stride_w - p.pad_w + t * p.dil_w for o, t in axis_reads(p.W, p.Q, p.S, p.stride_w, p.pad_w, p.dil_w)}
    assert p.used_rows == len(rows)
    assert p.used_cols == len(cols)
    assert p.input_elements_used == p.N * p.C * len(used)
    assert p.input_elements_used <= p.input_elements
    # weights that only meet padding are not compulsory (brute force: tests/bounds/test_bounds_padding.py)
    taps = {(r, s) for oh in range(p.P) for ow in range(p.Q) for r in range(p.R) for s in range(p.S)
            if 0 <= oh * p.stride_h - p.pad_h + r * p.dil_h < p.H
            and 0 <= ow * p.stride_w - p.pad_w + s * p.dil_w < p.W}
    assert p.weight_elements_used == p.K * (p.C // p.groups) * len(taps) <= p.weight_elements
    assert p.compulsory_elements == p.input_elements_used + p.weight_elements_used + p.output_elements
    assert p.compulsory_bytes == p.compulsory_elements * p.itemsize_bytes


@pytest.mark.parametrize(
    ("spec", "rows", "cols"),
    [
        pytest.param(dict(H=10, W=10, R=1, S=1, stride=3), 4, 4, id="1x1-stride3-skips-rows"),
        pytest.param(dict(H=10, W=7, R=2, S=2, stride=3), 6, 4, id="stride-gt-kernel"),
        pytest.param(dict(H=1, W=1, R=1, S=1, stride=3, pad=5), 0, 0, id="windows-only-in-padding"),
        pytest.param(dict(H=9, W=9, R=3, S=3, dilation=4), 3, 3, id="dilated-one-window"),
        pytest.param(dict(H=9, W=9, R=3, S=3, dilation=3), 9, 9, id="dilated-windows-interleave"),
        pytest.param(dict(H=9, W=9, R=2, S=2, dilation=2, stride=4), 4, 4, id="dilated-strided-gaps"),
        pytest.param(dict(H=5, W=5, R=3, S=3, pad=4), 5, 5, id="pad-beyond-kernel"),
    ],
)
def test_used_rows_cols_known_cases(spec: dict[str, int], rows: int, cols: int) -> None:
    p = ConvProblem.from_mapping({"N": 2, "C": 3, "K": 1, **spec})
    assert (p.used_rows, p.used_cols) == (rows, cols)
    assert p.input_elements_used == 2 * 3 * rows * cols == 2 * 3 * len(brute_used_elements(p))


def test_known_figures_vgg_and_resnet_stem() -> None:
    vgg = ConvProblem.parse("N=1 C=64 H=224 W=224 K=64 R=3 S=3 stride=1 pad=1")
    assert (vgg.P, vgg.Q) == (224, 224)
    assert vgg.macs == 224 * 224 * 64 * 64 * 9 == 1_849_688_064
    # padding taps: the border rows/cols each lose one of three taps
    assert vgg.macs_nonpad == 64 * 64 * (3 * 224 - 2) ** 2
    assert vgg.input_elements_used == vgg.input_elements
    stem = ConvProblem.parse("N=32 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3")
    assert (stem.P, stem.Q) == (112, 112)
    assert stem.reuse_factor == pytest.approx(3.5 * 3.5)


# ---- 1-D causal ------------------------------------------------------------------------------------------
@given(causal_problems)
def test_causal_1d_shapes_and_counts(p: ConvProblem) -> None:
    B, C, L, K, dil = p.N, p.C, p.W, p.S, p.dil_w
    assert p.causal and p.is_depthwise
    assert (p.H, p.R, p.K, p.groups, p.pad_w, p.pad_h) == (1, 1, C, C, dil * (K - 1), 0)
    assert (p.P, p.Q) == (1, L)
    assert out_size(L, K, 1, dil * (K - 1), 0, dil) == p.Q
    assert p.macs == B * C * L * K
    # y[t] reads x[t − j·dil] for j = 0..K−1: only non-negative indices are real
    assert p.macs_nonpad == B * C * sum(1 for t in range(L) for j in range(K) if t - j * dil >= 0)
    assert p.macs_nonpad == brute_macs_nonpad(p)
    assert p.used_cols == L and p.used_rows == 1
    assert p.input_elements_used == B * C * L
    assert p.output_elements == B * C * L
    assert p.weight_elements == C * K


def test_causal_kernel_longer_than_sequence() -> None:
    p = ConvProblem.depthwise1d(B=2, C=3, L=4, K=9)
    assert (p.P, p.Q) == (1, 4)
    assert p.macs == 2 * 3 * 4 * 9
    assert p.macs_nonpad == 2 * 3 * (1 + 2 + 3 + 4)
    assert ConvProblem.parse(p.key()) == p


def test_causal_from_mapping_and_parse_agree() -> None:
    a = ConvProblem.from_mapping({"B": 4, "C": 8, "L": 16, "K": 3, "dilation": 2})
    b = ConvProblem.parse("B=4 C=8 L=16 K=3 dilation=2")
    c = ConvProblem.depthwise1d(4, 8, 16, 3, dilation=2)
    assert a == b == c
    assert ConvProblem.from_mapping({"B": 4, "C": 8, "L": 16, "K": 3, "causal": True}).causal


# ---- identity ---------------------------------------------------------------------------------------------
@given(problems())
def test_key_round_trips(p: ConvProblem) -> None:
    q = ConvProblem.parse(p.key())
    assert q == p and hash(q) == hash(p) and q.key() == p.key() and str(p) == p.key()
    assert ConvProblem(**p.to_dict()) == p
    assert ConvProblem.from_mapping(p.to_dict()) == p
    assert json.loads(json.dumps(p.to_dict())) == p.to_dict()


@given(causal_problems)
def test_causal_key_round_trips(p: ConvProblem) -> None:
    assert ConvProblem.parse(p.key()) == p
    assert ConvProblem(**p.to_dict()) == p


def test_equal_problems_hash_equal_across_spellings() -> None:
    spellings = [
        ConvProblem(N=1, C=64, H=56, W=56, K=64, R=3, S=3, stride_h=2, stride_w=2, pad_h=1, pad_w=1),
        ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 stride=2 pad=1"),
        ConvProblem.parse("N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride_h=2,stride_w=2,padding=1,dilation=1,groups=1"),
        ConvProblem.from_mapping({"name": "x", "N": 1, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3,
                                  "stride": 2, "pad_h": 1, "pad_w": 1, "dtype": "float32"}),
    ]
    assert len(set(spellings)) == 1
    assert len({hash(p) for p in spellings}) == 1
    assert {p: "cached" for p in spellings} == {spellings[0]: "cached"}
    assert spellings[0] != spellings[0].replace(dtype="float16")
    assert spellings[0] != spellings[0].replace(pad_w=0)


def test_per_axis_keys_override_shorthand() -> None:
    p = ConvProblem.from_mapping({**BASE, "stride": 2, "stride_w": 1, "pad": 1, "pad_h": 0})
    assert (p.stride_h, p.stride_w, p.pad_h, p.pad_w) == (2, 1, 0, 1)
    assert ConvProblem.parse(p.key()) == p


def test_problem_is_frozen_and_replace_revalidates() -> None:
    p = ConvProblem(**BASE)
    with pytest.raises(AttributeError):
        p.N = 2  # type: ignore[misc]
    assert p.replace(N=2).N == 2
    with pytest.raises(InvalidProblem):
        p.replace(N=0)


# ---- public suite ---------------------------------------------------------------------------------------
def _suite_entries() -> list[Any]:
    suite = json.loads(SUITE.read_text())
    return [pytest.param(kind, entry, id=f"{kind}-{entry['name']}")
            for kind in ("conv2d", "depthwise2d", "depthwise1d_causal") for entry in suite[kind]]


@pytest.mark.parametrize(("kind", "entry"), _suite_entries())
def test_public_suite_entries_build(kind: str, entry: dict[str, Any]) -> None:
    p = ConvProblem.from_mapping(entry)
    assert ConvProblem.parse(p.key()) == p
    if kind == "depthwise1d_causal":
        assert p.causal and p.is_depthwise
        assert (entry["B"], entry["C"], entry["L"], entry["K"], entry["L"]) == (p.N, p.C, p.W, p.S, p.Q)
        return
    assert not p.causal
    assert tuple(entry[k] for k in "NCHWKRS") == (p.N, p.C, p.H, p.W, p.K, p.R, p.S)
    assert (p.H + 2 * entry["pad"] - p.R) // entry["stride"] + 1 == p.P
    assert p.is_depthwise == (kind == "depthwise2d")
    if kind == "depthwise2d":
        assert p.groups == p.C == p.K


def test_public_suite_has_all_three_families() -> None:
    suite = json.loads(SUITE.read_text())
    assert all(len(suite[kind]) >= 4 for kind in ("conv2d", "depthwise2d", "depthwise1d_causal"))


# ---- invalid inputs: every path raises InvalidProblem naming the field and the allowed range -------------
POSITIVE = ("N", "C", "H", "W", "K", "R", "S", "stride_h", "stride_w", "dil_h", "dil_w", "groups")


@pytest.mark.parametrize("value", [0, -1])
@pytest.mark.parametrize("name", POSITIVE)
def test_non_positive_sizes(name: str, value: int) -> None:
    err = invalid(**{name: value})
    assert err.field == name
    assert f"{name}={value}" in str(err) and "must be an integer >= 1" in str(err)


@pytest.mark.parametrize("name", ["pad_h", "pad_w"])
def test_negative_padding(name: str) -> None:
    err = invalid(**{name: -1})
    assert err.field == name and "must be an integer >= 0" in str(err)


@pytest.mark.parametrize("value", [True, False, 2.0, "3", None, 3 + 0j], ids=repr)
@pytest.mark.parametrize("name", [*POSITIVE, "pad_h", "pad_w"])
def test_non_integer_sizes(name: str, value: Any) -> None:
    err = invalid(**{name: value})
    assert err.field == name
    assert "must be an integer >=" in str(err)


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"stride": 1.5}, "stride_h"), ({"pad": "1"}, "pad_h"), ({"dilation": True}, "dil_h"), ({"N": 2.0}, "N")],
    ids=["stride-float", "pad-string", "dilation-bool", "N-float"],
)
def test_non_integer_sizes_from_mapping(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidProblem, match="must be an integer") as info:
        ConvProblem.from_mapping({**BASE, **spec})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("changes", "field", "needle"),
    [
        ({"H": 2, "R": 5}, "H", "H + 2·pad_h = 2 >= dil_h·(R−1)+1 = 5"),
        ({"H": 4, "R": 3, "dil_h": 2}, "H", ">= dil_h·(R−1)+1 = 5"),
        ({"W": 2, "S": 5, "pad_w": 1}, "W", "W + 2·pad_w = 4 >= dil_w·(S−1)+1 = 5"),
    ],
    ids=["H-too-small", "H-too-small-dilated", "W-too-small-padded"],
)
def test_empty_output(changes: dict[str, int], field: str, needle: str) -> None:
    err = invalid(**changes)
    assert err.field == field and "empty" in str(err) and needle in str(err)


def test_smallest_nonempty_output_is_valid() -> None:
    assert ConvProblem(**{**BASE, "H": 5, "R": 3, "dil_h": 2}).P == 1
    assert ConvProblem(**{**BASE, "H": 1, "R": 3, "pad_h": 1}).P == 1


@pytest.mark.parametrize(
    ("changes", "needle"),
    [({"C": 6, "K": 4, "groups": 4}, "must divide C=6"), ({"C": 4, "K": 6, "groups": 4}, "must divide K=6")],
    ids=["C", "K"],
)
def test_groups_must_divide_channels(changes: dict[str, int], needle: str) -> None:
    err = invalid(**changes)
    assert err.field == "groups" and needle in str(err)


@pytest.mark.parametrize(
    ("shape", "field"),
    [
        pytest.param(dict(N=1, C=1, H=2**16, W=2**15, K=1, R=1, S=1), "input", id="input"),
        pytest.param(dict(N=1, C=2**15, H=1, W=1, K=2**16, R=1, S=1), "weight", id="weight"),
        pytest.param(dict(N=1, C=1, H=2**16, W=2**14, K=2, R=1, S=1), "output", id="output"),
        pytest.param(dict(N=1, C=1, H=2**16, W=2**15 - 1, K=1, R=1, S=1, pad_h=2**10), "output",
                     id="output-via-padding"),
    ],
)
def test_element_counts_over_int32(shape: dict[str, int], field: str) -> None:
    with pytest.raises(InvalidProblem) as info:
        ConvProblem(**shape)
    assert info.value.field == field
    assert f"must be <= {MAX_ELEMENTS}" in str(info.value)


def test_element_count_at_int32_limit_is_valid() -> None:
    p = ConvProblem(N=1, C=1, H=1, W=MAX_ELEMENTS, K=1, R=1, S=1)
    assert p.input_elements == p.output_elements == MAX_ELEMENTS


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [("dtype", "float64", "['bfloat16', 'float16', 'float32']"), ("dtype", "fp32", "allowed"),
     ("layout", "NHWC", "allowed ['NCHW']")],
)
def test_unknown_dtype_and_layout(name: str, value: str, allowed: str) -> None:
    err = invalid(**{name: value})
    assert err.field == name and allowed in str(err)
    with pytest.raises(InvalidProblem) as info:
        ConvProblem.parse(f"N=1 C=4 H=8 W=8 K=4 R=3 S=3 {name}={value}")
    assert info.value.field == name


def test_causal_must_be_bool() -> None:
    err = invalid(causal=1)
    assert err.field == "causal" and "must be a bool" in str(err)


@pytest.mark.parametrize(
    ("spec", "field"),
    [({**BASE, "bogus": 1}, "bogus"), ({**BASE, "L": 4}, "N"), ({"B": 1, "C": 2, "L": 3, "K": 2, "H": 1}, "H"),
     ({**BASE, "_derived": (1, 1)}, "_derived")],
    ids=["2d-unknown", "2d-key-in-1d-spec", "1d-unknown", "private-field"],
)
def test_unknown_keys(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidProblem, match="unknown field; allowed: ") as info:
        ConvProblem.from_mapping(spec)
    assert info.value.field == field


def test_unknown_key_in_text() -> None:
    with pytest.raises(InvalidProblem, match="unknown field") as info:
        ConvProblem.parse("N=1 C=4 H=8 W=8 K=4 R=3 S=3 T=2")
    assert info.value.field == "T" and "stride" in str(info.value)


@pytest.mark.parametrize("text", ["N=1 N=2 C=4 H=8 W=8 K=4 R=3 S=3", "N=1 C=4 H=8 W=8 K=4 R=3 S=3 stride=1 stride=2",
                                  "B=1 C=2 L=8 K=3 dtype=float32 dtype=float16"])
def test_duplicate_keys(text: str) -> None:
    with pytest.raises(InvalidProblem, match="given twice") as info:
        ConvProblem.parse(text)
    assert info.value.field in ("N", "stride", "dtype")


@pytest.mark.parametrize("missing", list("NCHWKRS"))
def test_missing_required_2d_keys(missing: str) -> None:
    spec = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(InvalidProblem, match=r"is required \(N, C, H, W, K, R, S\)") as info:
        ConvProblem.from_mapping(spec)
    assert info.value.field == missing


@pytest.mark.parametrize("missing", list("BCLK"))
def test_missing_required_1d_keys(missing: str) -> None:
    spec = {k: v for k, v in {"B": 1, "C": 2, "L": 8, "K": 3}.items() if k != missing}
    with pytest.raises(InvalidProblem, match=r"is required for a 1-D causal depthwise problem \(B, C, L, K\)") as info:
        ConvProblem.from_mapping(spec)
    assert info.value.field == missing


@pytest.mark.parametrize(
    ("text", "field", "needle"),
    [
        ("N1 C=4 H=8 W=8 K=4 R=3 S=3", "N1", "expected name=value"),
        ("N=one C=4 H=8 W=8 K=4 R=3 S=3", "N", "'one' is not an integer"),
        ("N=1.5 C=4 H=8 W=8 K=4 R=3 S=3", "N", "'1.5' is not an integer"),
        ("N= C=4 H=8 W=8 K=4 R=3 S=3", "N", "'' is not an integer"),
        ("N=1 C=4 H=8 W=8 K=4 R=3 S=-3", "S", "must be an integer >= 1"),
        ("", "problem", "empty"),
        ("  , ", "problem", "empty"),
    ],
    ids=["no-equals", "word", "float", "empty-value", "negative", "empty", "only-separators"],
)
def test_malformed_text(text: str, field: str, needle: str) -> None:
    with pytest.raises(InvalidProblem) as info:
        ConvProblem.parse(text)
    assert info.value.field == field and needle in str(info.value)


# ---- causal constraints ----------------------------------------------------------------------------------
CAUSAL = dict(N=2, C=4, H=1, W=16, K=4, R=1, S=3, pad_w=2, groups=4, causal=True)


def test_causal_base_is_valid() -> None:
    assert ConvProblem(**CAUSAL) == ConvProblem.depthwise1d(2, 4, 16, 3)


@pytest.mark.parametrize(
    ("changes", "field", "allowed"),
    [
        ({"H": 2}, "H", "must be 1"),
        ({"R": 2, "H": 2}, "H", "must be 1"),
        ({"R": 2}, "R", "must be 1"),
        ({"groups": 2}, "groups", "must be C=4 (depthwise)"),
        ({"K": 8}, "K", "must be C=4 (depthwise)"),
        ({"stride_w": 2}, "stride_w", "must be 1"),
        ({"stride_h": 2}, "stride_h", "must be 1"),
        ({"pad_w": 1}, "pad_w", "must be dil_w·(S−1) = 2"),
        ({"dil_w": 2}, "pad_w", "must be dil_w·(S−1) = 4"),
        ({"pad_h": 1}, "pad_h", "must be 0"),
        ({"dil_h": 2}, "dil_h", "must be 1"),
    ],
    ids=["H", "H-first", "R", "groups", "K", "stride_w", "stride_h", "pad_w", "pad_w-dilated", "pad_h", "dil_h"],
)
def test_causal_constraints(changes: dict[str, int], field: str, allowed: str) -> None:
    with pytest.raises(InvalidProblem) as info:
        ConvProblem(**{**CAUSAL, **changes})
    err = info.value
    assert err.field == field
    assert f"{field}={changes.get(field, CAUSAL.get(field))}" in str(err)
    assert "causal 1-D depthwise" in str(err) and allowed in str(err)


def test_causal_2d_spelling_round_trips() -> None:
    # the 2-D spelling of a causal problem must have the same key as the 1-D one (dil_h is not free)
    p = ConvProblem.parse("N=2 C=4 H=1 W=16 K=4 R=1 S=3 pad_w=4 dil_w=2 groups=4 causal")
    assert p == ConvProblem.depthwise1d(2, 4, 16, 3, dilation=2)
    assert ConvProblem.parse(p.key()) == p
    with pytest.raises(InvalidProblem) as info:
        ConvProblem.parse("N=2 C=4 H=1 W=16 K=4 R=1 S=3 pad_w=4 dilation=2 groups=4 causal")
    assert info.value.field == "dil_h"


@pytest.mark.parametrize("name", ["B", "C", "L", "K", "dilation"])
@pytest.mark.parametrize("value", [0, -2, 1.0, True])
def test_depthwise1d_invalid_sizes(name: str, value: Any) -> None:
    args = {"B": 1, "C": 2, "L": 8, "K": 3, "dilation": 1, name: value}
    with pytest.raises(InvalidProblem, match="must be an integer >= 1") as info:
        ConvProblem.depthwise1d(**args)
    assert info.value.field == name
    with pytest.raises(InvalidProblem) as info:
        ConvProblem.from_mapping(args)
    assert info.value.field == name


def test_1d_spec_must_be_causal() -> None:
    with pytest.raises(InvalidProblem, match="causal: must be true") as info:
        ConvProblem.from_mapping({"B": 1, "C": 2, "L": 8, "K": 3, "causal": False})
    assert info.value.field == "causal"


def test_1d_spec_rejects_unknown_dtype() -> None:
    with pytest.raises(InvalidProblem, match="allowed") as info:
        ConvProblem.parse("B=1 C=2 L=8 K=3 dtype=int8")
    assert info.value.field == "dtype"


def test_invalid_problem_is_value_error_with_detail() -> None:
    err = invalid(N=0)
    assert isinstance(err, ValueError)
    assert err.detail == "N=0 is out of range: must be an integer >= 1"
    assert str(err) == "N: N=0 is out of range: must be an integer >= 1"


# ---- precision classes: math = "ieee" (strict fp32) or "tf32" ------------------------------------------------
PRE_LAYOUT_BEST = Path(__file__).resolve().parent / "data" / "pre_layout" / "best_configs.json"


def test_math_defaults_to_ieee_and_gives_the_precision_class() -> None:
    assert ConvProblem(**BASE).math == "ieee" and ConvProblem(**BASE).precision == "float32"
    assert ConvProblem(**BASE, math="tf32").precision == "tf32"
    assert ConvProblem(**BASE, dtype="bfloat16").precision == "bfloat16"
    assert ConvProblem(**BASE, dtype="float16").precision == "float16"
    assert ConvProblem.depthwise1d(2, 4, 16, 3).precision == "float32"


@pytest.mark.parametrize("value", ["fp32", "TF32", "", "highest"])
def test_unknown_math_names_the_field_and_the_allowed_values(value: str) -> None:
    err = invalid(math=value)
    assert err.field == "math" and "allowed ['ieee', 'tf32']" in str(err)
    with pytest.raises(InvalidProblem) as info:
        ConvProblem.parse(f"N=1 C=4 H=8 W=8 K=4 R=3 S=3 math={value}")
    assert info.value.field == "math"


@pytest.mark.parametrize("value", [1, None, ["tf32"], True], ids=repr)
def test_math_must_be_a_string(value: Any) -> None:
    err = invalid(math=value)
    assert err.field == "math" and "must be a string" in str(err)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tf32_needs_float32(dtype: str) -> None:
    err = invalid(math="tf32", dtype=dtype)
    assert err.field == "math" and "needs dtype='float32'" in str(err) and dtype in str(err)
    assert ConvProblem(**BASE, dtype=dtype, math="ieee").precision == dtype


def test_causal_problems_take_math_only_as_ieee() -> None:
    spec = {"B": 2, "C": 4, "L": 16, "K": 3}
    assert ConvProblem.from_mapping({**spec, "math": "ieee"}) == ConvProblem.from_mapping(spec)
    with pytest.raises(InvalidProblem) as info:
        ConvProblem.from_mapping({**spec, "math": "tf32"})
    assert info.value.field == "math" and "must be 'ieee'" in str(info.value)
    with pytest.raises(InvalidProblem) as info:
        ConvProblem.parse("B=2 C=4 L=16 K=3 math=tf32")
    assert info.value.field == "math"
    with pytest.raises(InvalidProblem) as info:  # the same problem spelled with the 2-D fields
        ConvProblem.depthwise1d(2, 4, 16, 3).replace(math="tf32")
    assert info.value.field == "math" and "causal" in str(info.value)


def test_tf32_key_parse_and_dict_round_trips() -> None:
    p = ConvProblem.parse("N=2 C=16 H=14 W=14 K=24 R=3 S=3 pad=1 math=tf32")
    assert p.math == "tf32" and p.key().endswith(" dtype=float32 math=tf32")
    assert ConvProblem.parse(p.key()) == p and ConvProblem.parse(p.key()).key() == p.key()
    assert p.to_dict()["math"] == "tf32"
    assert ConvProblem(**p.to_dict()) == p and ConvProblem.from_mapping(p.to_dict()) == p
    assert ConvProblem(**json.loads(json.dumps(p.to_dict()))) == p
    assert ConvProblem.from_mapping({"N": 2, "C": 16, "H": 14, "W": 14, "K": 24, "R": 3, "S": 3, "pad": 1,
                                     "math": "tf32"}) == p
    strict = p.replace(math="ieee")
    assert strict != p and hash(strict) != hash(p) and strict.key() != p.key()
    assert {strict: 1, p: 2}[p] == 2


@given(problems())
def test_tf32_round_trips_for_every_float32_shape(p: ConvProblem) -> None:
    if p.dtype != "float32":
        return
    t = p.replace(math="tf32")
    assert ConvProblem.parse(t.key()) == t and ConvProblem(**t.to_dict()) == t
    assert t.key() == p.key() + " math=tf32"
    # the same bytes and FLOPs: a precision class changes the arithmetic, not the data
    assert (t.compulsory_bytes, t.flops, t.macs_nonpad) == (p.compulsory_bytes, p.flops, p.macs_nonpad)


def test_strict_keys_are_the_ones_stored_before_precision_classes() -> None:
    """Every problem key the pre-layout database stored (tests/data/pre_layout) parses to a strict problem whose
    key is byte for byte the stored one, so stored measurements and best rows keep their keys."""
    keys = {row["problem_key"] for row in json.loads(PRE_LAYOUT_BEST.read_text())}
    assert "N=1 C=16 H=8 W=8 K=16 R=3 S=3 stride=1 pad=1 dilation=1 dtype=float32" in keys and len(keys) == 4
    for key in keys:
        p = ConvProblem.parse(key)
        assert p.math == "ieee" and p.key() == key and "math" not in key
        assert p.precision == p.dtype
        spec = {k: v for k, v in p.to_dict().items() if k != "math"}  # a spec stored before the field existed
        assert ConvProblem(**spec) == p


def test_serving_keys_let_strict_rows_serve_tf32_never_the_reverse() -> None:
    strict = ConvProblem.parse("N=1 C=16 H=8 W=8 K=16 R=3 S=3 pad=1")
    tf32 = strict.replace(math="tf32")
    assert tf32.serving_keys() == (tf32.key(), strict.key())
    assert strict.serving_keys() == (strict.key(),)
    for dtype in ("float16", "bfloat16"):
        half = strict.replace(dtype=dtype)
        assert half.serving_keys() == (half.key(),)
    causal = ConvProblem.depthwise1d(2, 4, 16, 3)
    assert causal.serving_keys() == (causal.key(),)

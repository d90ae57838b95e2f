"""``convtune`` command line: the bounds sub-command, its JSON, suites, error paths and speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from convtune.cli import build_parser, main
from convtune.machine import MachineModel

REPO = Path(__file__).resolve().parents[2]
PUBLIC_SUITE = REPO / "benchmarks" / "suites" / "public.json"
VGG = ["N=1", "C=64", "H=56", "W=56", "K=64", "R=3", "S=3", "stride=1", "pad=1"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# ---- happy paths ------------------------------------------------------------------------------------
def test_text_report_for_a_3x3_layer(capsys):
    rc, out, err = run(capsys, "bounds", *VGG, "--smem-kib", "48")
    assert rc == 0 and err == ""
    for needle in ("MACs", "115,605,504", "compulsory", "1,753,088 B", "direct.literature", "direct.safe",
                   "INVALID", "binding term: compulsory", "tile", "xy/(R·z)", "floor time", "F(2×2,3×3)",
                   "F(4×4,3×3)", "S = 12,288 words", "--smem-kib 48"):
        assert needle in out, needle


def test_json_report(capsys):
    rc, out, _ = run(capsys, "bounds", *VGG, "--json")
    assert rc == 0
    r = json.loads(out)
    s = MachineModel.preset("h200").fast_memory_words("block")
    assert r["fast_memory_words"] == s and "per-block" in r["fast_memory_source"]
    assert r["macs"] == 115_605_504 and r["compulsory_bytes"] == 1_753_088
    assert set(r["bounds"]) == {"direct.literature", "direct.safe"}
    assert r["reported"]["valid"] and r["reported"]["binding_term"] in r["reported"]["terms"]
    assert r["reported"]["words"] >= r["compulsory_words"]
    assert r["tile"]["algorithm"] == "direct" and r["tile"]["footprint_words"] <= s
    assert r["floor_time"]["time_s"] > 0 and r["floor_time"]["binding"] in ("compute", "memory")
    assert [w["shape"]["m"] for w in r["winograd"]] == [2, 4]
    for w in r["winograd"]:
        assert w["fused"]["words"] >= w["cdag"]["words"] and w["floor_time"]["time_s"] > 0
    choice = r["family_choice"]
    assert choice["favoured"] == "winograd" and choice["variant"] == "F(4x4,3x3)"
    assert [f["floor_ms"] for f in choice["floors"]] == sorted(f["floor_ms"] for f in choice["floors"])
    assert {f["algorithm"] for f in choice["floors"]} == {"direct", "winograd"}


def test_json_machine_and_smem(capsys):
    rc, out, _ = run(capsys, "bounds", *VGG, "--json", "--machine", "A100", "--smem-kib", "100")
    r = json.loads(out)
    assert rc == 0 and r["machine"]["name"] == "NVIDIA A100"
    assert r["fast_memory_words"] == 100 * 1024 // 4 and r["fast_memory_source"] == "--smem-kib 100"


def test_depthwise_and_causal_problems(capsys):
    rc, out, _ = run(capsys, "bounds", "N=32", "C=144", "H=56", "W=56", "K=144", "R=3", "S=3", "pad=1",
                     "groups=144", "--json")
    r = json.loads(out)
    assert rc == 0 and set(r["bounds"]) == {"depthwise"} and r["winograd"] == []
    assert r["reported"]["words"] == r["compulsory_words"] and r["floor_time"]["binding"] == "memory"
    assert r["tile"]["algorithm"] == "depthwise" and r["tile"]["ratio_to_bound"] >= 1
    rc, out, _ = run(capsys, "bounds", "B=64", "C=768", "L=1024", "K=4")
    assert rc == 0 and "depthwise1d_causal" in out and "halo-tiled traffic" in out and "winograd" not in out


def test_strided_layer_has_no_winograd(capsys):
    rc, out, _ = run(capsys, "bounds", "N=1", "C=3", "H=224", "W=224", "K=64", "R=7", "S=7", "stride=2", "pad=3",
                     "--json")
    r = json.loads(out)
    assert rc == 0 and r["winograd"] == [] and r["family_choice"]["favoured"] == "direct"
    rc, out, _ = run(capsys, "bounds", "N=1", "C=3", "H=224", "W=224", "K=64", "R=7", "S=7", "stride=2", "pad=3")
    assert rc == 0 and "the bound favours direct" in out


def test_suite_table_and_json(capsys):
    names = [e["name"] for fam in ("conv2d", "depthwise2d", "depthwise1d_causal")
             for e in json.loads(PUBLIC_SUITE.read_text())[fam]]
    rc, out, err = run(capsys, "bounds", "--suite", str(PUBLIC_SUITE))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert "name" in lines[0] and "floor µs" in lines[0]
    for name in names:
        assert any(line.startswith(name) for line in lines), name
    rc, out, _ = run(capsys, "bounds", "--suite", str(PUBLIC_SUITE), "--json")
    reports = json.loads(out)
    assert rc == 0 and [r["name"] for r in reports] == names
    assert {r["family"] for r in reports} == {"conv2d", "depthwise2d", "depthwise1d_causal"}
    assert all(r["reported"]["words"] >= r["compulsory_words"] for r in reports)


def test_bounds_imports_nothing_heavy():
    """``convtune bounds`` stays fast (it ran the suite in ~1 s) because it imports no database, tuner, service
    or GPU library; checked by what a fresh process imported, not by a wall clock."""
    code = ("import contextlib, io, json, sys\n"
            "from convtune.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['bounds', '--suite', {str(PUBLIC_SUITE)!r}])\n"
            "heavy = ('optuna', 'sqlalchemy', 'alembic', 'torch', 'cupy', 'fastapi', 'uvicorn', 'tqdm', 'matplotlib')\n"
            "print(json.dumps([rc, sorted(m for m in heavy if m in sys.modules)]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [0, []]


# ---- errors: one line on stderr naming the field, exit status 2 ---------------------------------------
def assert_one_line_error(capsys, argv: list[str], field: str) -> str:
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("convtune: error: "), err
    assert field in lines[0], (field, err)
    return lines[0]


@pytest.mark.parametrize(("tokens", "field"), [
    (["N=0", "C=64", "H=56", "W=56", "K=64", "R=3", "S=3"], "N"),
    (["N=1", "C=abc", "H=56", "W=56", "K=64", "R=3", "S=3"], "C"),
    (["N=1", "C=64", "H=56", "W=56", "K=64", "R=3"], "S"),
    (["N=1", "C=64", "H=56", "W=56", "K=64", "R=3", "S=3", "X=1"], "X"),
    (["N=1", "C=64", "H=56", "W=56", "K=64", "R=3", "S=3", "bogus"], "bogus"),
    (["N=1", "C=6", "H=56", "W=56", "K=64", "R=3", "S=3", "groups=4"], "groups"),
    (["N=1", "C=64", "H=2", "W=56", "K=64", "R=5", "S=3"], "H"),
    (["N=1", "C=64", "H=56", "W=56", "K=64", "R=3", "S=3", "stride=0"], "stride_h"),
    (["N=1", "C=64", "H=56", "W=56", "K=64", "R=3", "S=3", "dtype=int8"], "dtype"),
    (["N=1", "N=2", "C=64", "H=56", "W=56", "K=64", "R=3", "S=3"], "N"),
    (["B=1", "C=4", "L=16"], "K"),
])
def test_invalid_problem(capsys, tokens, field):
    assert_one_line_error(capsys, ["bounds", *tokens], field)


def test_unknown_machine(capsys):
    line = assert_one_line_error(capsys, ["bounds", *VGG, "--machine", "tpu"], "--machine")
    assert "h200" in line


@pytest.mark.parametrize("kib", ["0", "-4", "0.01"])
def test_bad_smem(capsys, kib):
    assert_one_line_error(capsys, ["bounds", *VGG, "--smem-kib", kib], "--smem-kib")


def test_missing_problem_and_both_inputs(capsys):
    assert_one_line_error(capsys, ["bounds"], "problem")
    assert_one_line_error(capsys, ["bounds", *VGG, "--suite", str(PUBLIC_SUITE)], "--suite")


def test_missing_suite_file(capsys, tmp_path):
    assert_one_line_error(capsys, ["bounds", "--suite", str(tmp_path / "nope.json")], "--suite")


@pytest.mark.parametrize(("content", "field"), [
    ("{not json", "--suite"),
    ("[1, 2]", "--suite"),
    ("{}", "--suite"),
    ('{"conv2d": {"name": "x"}}', "conv2d"),
    ('{"conv2d": [3]}', "conv2d[0]"),
    ('{"conv2d": [{"N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3}]}', "conv2d[0].name"),
    ('{"conv2d": [{"name": "bad", "N": 1, "C": 0, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3}]}', "C"),
    ('{"depthwise1d_causal": [{"name": "d", "B": 1, "C": 4, "L": 8, "K": 2, "Z": 1}]}', "Z"),
    ("\u00ff\u00fe", "--suite"),
])
def test_bad_suite_files(capsys, tmp_path, content, field):
    path = tmp_path / "suite.json"
    path.write_text(content, encoding="latin-1" if content.startswith("\u00ff") else "utf-8")
    line = assert_one_line_error(capsys, ["bounds", "--suite", str(path)], field)
    if field == "C":
        assert "conv2d[0] (bad)" in line


def test_argparse_usage_errors_exit_2():
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["bounds", *VGG, "--smem-kib", "lots"])
    assert info.value.code == 2


def test_parser_has_subcommands():
    parser = build_parser()
    args = parser.parse_args(["bounds", *VGG])
    assert args.command == "bounds" and callable(args.func) and args.machine == "h200"

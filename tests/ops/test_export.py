"""``convtune export`` and ``CONVTUNE_CONFIGS``: the round trip (export from a database, then a fresh process with
the file and no database resolves the same configs), the file's schema, bad files (typed errors naming the file
and field), stale kernel versions (skipped with one warning), and ``--source`` without a GPU."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from best_rows import GPU_CONFIG, PROBLEM, REPLAY_CONFIG, replay_and_gpu, store, url_text

from convtune.cli import main
from convtune.kernels.registry import REGISTRY
from convtune.kernels.winograd.launcher import WinogradFwdConfig
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig
from convtune.machine import MachineModel
from convtune.ops import export, resolver
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
FAMILIES = ("direct", "winograd", "winograd_unfused")
PROBLEM2 = ConvProblem.parse("N=1 C=16 H=14 W=14 K=24 R=3 S=3 pad=1")
MODEL_CHOICE = WinogradFwdConfig(tile_k=32)
ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in (resolver.DATABASE_URL_ENV, resolver.LOOKUP_ENV, resolver.CONFIGS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    resolver.use_configs_file(None)
    resolver.use_database(None)
    yield
    resolver.use_configs_file(None)
    resolver.use_database(None)


@pytest.fixture
def tuned_db(db_url: Any) -> str:
    """Two problems measured on the GPU, and a faster replayed row of the first (SQLite, and PostgreSQL where
    configured)."""
    url = url_text(db_url)
    replay_and_gpu(url)
    store(url, WinogradUnfusedConfig(), "gpu", 0.030, problem=PROBLEM2)
    return url


def _export(db: str, out: Path, *extra: str) -> dict[str, Any]:
    rc, stdout, stderr = _run(["export", "--db", db, "--out", str(out), *extra])
    assert rc == 0, stderr
    assert str(out) in stdout
    return json.loads(out.read_text())


_RESOLVE_SCRIPT = """
import json, sys
from convtune.ops import resolver
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.kernels.winograd.launcher import WinogradFwdConfig
answers = {}
for key in sys.argv[1:]:
    found = resolver.resolve(ConvProblem.parse(key), MachineModel.preset("h200"),
                             ("direct", "winograd", "winograd_unfused"), lambda: WinogradFwdConfig(tile_k=32))
    answers[key] = [found.config.key(), found.source]
print(json.dumps(answers))
"""


def test_round_trip_a_fresh_process_resolves_the_same_configs_without_a_database(tuned_db: str,
                                                                                   tmp_path: Path) -> None:
    out = tmp_path / "h200.json"
    doc = _export(tuned_db, out, "--device", H200.name)
    assert doc["schema"] == export.SCHEMA and doc["schema_version"] == export.SCHEMA_VERSION
    # in this process, from the database
    from_db = {p.key(): resolver.resolve(p, H200, FAMILIES, lambda: MODEL_CHOICE, url=tuned_db)
               for p in (PROBLEM, PROBLEM2)}
    assert {k: (r.config.key(), r.source) for k, r in from_db.items()} == {
        PROBLEM.key(): (GPU_CONFIG.key(), "database"), PROBLEM2.key(): (WinogradUnfusedConfig().key(), "database")}
    # a fresh process: the file, and a database URL that names no database
    missing = tmp_path / "nowhere" / "none.db"
    env = {**os.environ, resolver.CONFIGS_ENV: str(out), resolver.DATABASE_URL_ENV: f"sqlite:///{missing}",
           "XDG_DATA_HOME": str(tmp_path / "xdg2"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-W", "error", "-c", _RESOLVE_SCRIPT, PROBLEM.key(), PROBLEM2.key()],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    answers = json.loads(proc.stdout)
    assert answers == {k: [r.config.key(), "file"] for k, r in from_db.items()}
    assert not missing.exists() and not missing.parent.exists()


def test_the_file_carries_every_field_and_flags_non_gpu_rows(tuned_db: str, tmp_path: Path) -> None:
    doc = _export(tuned_db, tmp_path / "all.json", "--backend", "all")
    assert doc["filters"] == {"device": None, "backend": None}
    assert doc["kernel_versions"]["direct"] == resolver.kernel_shas()["direct"]
    rows = {(e["problem"], e["backend"]): e for e in doc["entries"]}
    gpu, replay = rows[(PROBLEM.key(), "gpu")], rows[(PROBLEM.key(), "replay")]
    assert set(gpu) == {"problem", "device", "compute_capability", "scope", "config", "family", "time_ms",
                        "floor_ms", "efficiency", "kernel_version", "backend", "measured", "provisional"}
    assert (gpu["config"], gpu["time_ms"], gpu["floor_ms"], gpu["kernel_version"], gpu["measured"]) == (
        GPU_CONFIG.key(), 0.050, 0.001, resolver.kernel_shas()["direct"], True)
    assert (replay["config"], replay["measured"], replay["device"]) == (REPLAY_CONFIG.key(), False, H200.name)
    # the default export holds the GPU rows only
    gpu_only = _export(tuned_db, tmp_path / "gpu.json")
    assert {e["backend"] for e in gpu_only["entries"]} == {"gpu"} and len(gpu_only["entries"]) == 2
    # a replay row in the file never serves an op
    loaded = export.load(tmp_path / "all.json")
    assert loaded.lookup(PROBLEM.key(), H200.name, resolver.kernel_shas(), ["direct"]) == GPU_CONFIG.key()
    assert _run(["export", "--db", tuned_db, "--out", str(tmp_path / "none.json"), "--device", "NVIDIA A100"])[0] == 1


def _write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _doc(**entry: Any) -> dict[str, Any]:
    base = {"problem": PROBLEM.key(), "device": H200.name, "scope": "*", "config": GPU_CONFIG.key(),
            "time_ms": 0.05, "floor_ms": 0.001, "kernel_version": resolver.kernel_shas()["direct"], "backend": "gpu",
            "measured": True}
    return {"schema": export.SCHEMA, "schema_version": 1, "entries": [{**base, **entry}]}


@pytest.mark.parametrize(("doc", "field"), [
    pytest.param("{not json", "file", id="not-json"),
    pytest.param([], "file", id="not-an-object"),
    pytest.param({"schema": "other", "schema_version": 1, "entries": []}, "schema", id="schema"),
    pytest.param({"schema": export.SCHEMA, "entries": []}, "schema_version", id="no-version"),
    pytest.param({"schema": export.SCHEMA, "schema_version": 99, "entries": []}, "schema_version", id="newer"),
    pytest.param({"schema": export.SCHEMA, "schema_version": 1, "entries": {}}, "entries", id="entries"),
    pytest.param(_doc(time_ms="fast"), "entries[0].time_ms", id="time-type"),
    pytest.param(_doc(time_ms=-1.0), "entries[0].time_ms", id="time-negative"),
    pytest.param(_doc(config="direct.fwd tile_h=x"), "entries[0].config", id="config"),
    pytest.param(_doc(backend="cpu"), "entries[0].backend", id="backend"),
    pytest.param(_doc(measured="yes"), "entries[0].measured", id="measured"),
    pytest.param({"schema": export.SCHEMA, "schema_version": 1, "entries": [{"config": GPU_CONFIG.key()}]},
                 "entries[0].time_ms", id="missing"),
])
def test_a_bad_file_is_a_typed_error_naming_the_file_and_field(tmp_path: Path, doc: Any, field: str) -> None:
    path = _write(tmp_path / "bad.json", doc)
    with pytest.raises(export.ConfigFileError) as info:
        export.load(path)
    assert (info.value.path, info.value.json_field) == (str(path), field)
    assert str(path) in str(info.value) and field in str(info.value)
    # the ops see it too, at their first lookup (not a silent model choice)
    resolver.use_configs_file(path)
    with pytest.raises(export.ConfigFileError, match=r"bad\.json"):
        resolver.resolve(PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE)


def test_a_missing_file_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(resolver.CONFIGS_ENV, str(tmp_path / "gone.json"))
    with pytest.raises(export.ConfigFileError, match=r"CONVTUNE_CONFIGS file .*gone\.json: file"):
        resolver.resolve(PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE)


def test_stale_entries_are_skipped_with_one_warning(tmp_path: Path) -> None:
    doc = _doc(kernel_version="f" * 64)
    doc["entries"].append({**doc["entries"][0], "problem": PROBLEM2.key()})  # two stale entries
    resolver.use_configs_file(_write(tmp_path / "stale.json", doc))
    with pytest.warns(export.StaleConfigWarning, match="2 measured entries") as caught:
        first = resolver.resolve(PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = resolver.resolve(PROBLEM2, H200, FAMILIES, lambda: MODEL_CHOICE)  # loaded once: no new warning
    assert len(caught) == 1 and first.source == second.source == "model"


def test_the_file_serves_before_the_database_and_lookups_off_turns_it_off(tuned_db: str, tmp_path: Path) -> None:
    doc = _doc(config=REPLAY_CONFIG.key(), time_ms=0.02)  # a GPU entry of another config than the database's
    resolver.use_configs_file(_write(tmp_path / "one.json", doc))
    found = resolver.resolve(PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE, url=tuned_db)
    assert (found.config.key(), found.source) == (REPLAY_CONFIG.key(), "file")
    other = resolver.resolve(PROBLEM2, H200, FAMILIES, lambda: MODEL_CHOICE, url=tuned_db)  # not in the file
    assert other.source == "database"
    assert resolver.resolve(PROBLEM, H200, ("winograd",), lambda: MODEL_CHOICE).source == "model"  # family filter
    resolver.set_lookup(False)
    try:
        assert resolver.resolve(PROBLEM, H200, FAMILIES, lambda: MODEL_CHOICE, url=tuned_db).source == "model"
    finally:
        resolver.set_lookup(None)


# ---- --source ------------------------------------------------------------------------------------------------
def test_source_prints_the_cuda_text_and_launches_without_a_gpu() -> None:
    unfused = WinogradUnfusedConfig()
    rc, out, err = _run(["export", "--source", *PROBLEM.key().split(), *unfused.key().split()])
    assert rc == 0, err
    assert out.startswith(f"// convtune export --source: {unfused.key()}")
    for entry in ("winograd_input", "winograd_gemm", "winograd_output"):  # three launches, three entries
        assert f"// ==== entry {entry}: SHA-256 " in out and f"{entry}<<<grid(" in out
    assert 'extern "C"' in out and "#include" not in out  # self-contained: includes inlined
    rc, out, _ = _run(["export", "--source", *PROBLEM.key().split(), *GPU_CONFIG.key().split(), "--json"])
    d = json.loads(out)
    launch = [s for s in d["steps"] if "entry" in s]
    assert rc == 0 and [s["entry"] for s in launch] == ["direct_fwd"]
    assert launch[0]["block"][0] == GPU_CONFIG.threads and launch[0]["dynamic_smem_bytes"] > 0
    assert d["nvrtc_options"] == ["-std=c++17"] and d["template_args"][:3] == [4, 32, 64]
    import hashlib

    assert hashlib.sha256(d["kernels"][0]["source"].encode()).hexdigest() == launch[0]["source_sha256"]


@pytest.mark.parametrize("argv", [
    pytest.param(["export"], id="no-out"),
    pytest.param(["export", "--source", *PROBLEM.key().split()], id="no-config"),
    pytest.param(["export", "--source", *PROBLEM.key().split(), "direct.fwd", "thread_k=3"], id="invalid-config"),
])
def test_bad_export_arguments_are_one_line_and_exit_2(argv: list[str]) -> None:
    rc, out, err = _run(argv)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("convtune: error: ")


_SAMPLES = [PROBLEM, ConvProblem.parse("N=1 C=32 H=16 W=16 K=32 R=3 S=3 pad=1 groups=32"),
            ConvProblem.parse("N=1 C=32 H=64 W=64 K=32 R=3 S=3 pad=1 groups=32"),
            ConvProblem.parse("B=4 C=64 L=256 K=4"), ConvProblem.parse("N=2 C=32 H=14 W=14 K=64 R=1 S=1"),
            PROBLEM.replace(math="tf32"), ConvProblem.parse("N=2 C=32 H=14 W=14 K=64 R=1 S=1 math=tf32"),
            ConvProblem.parse("N=1 C=32 H=16 W=16 K=32 R=3 S=3 pad=1 dtype=bfloat16"),
            ConvProblem.parse("N=2 C=32 H=16 W=16 K=64 R=1 S=1 dtype=bfloat16"),
            ConvProblem.parse("N=2 C=64 H=16 W=16 K=64 R=1 S=1 dtype=bfloat16"),
            ConvProblem.parse("N=2 C=16 H=14 W=14 K=32 R=5 S=5 pad=2"),
            ConvProblem.parse("N=2 C=3 H=16 W=16 K=8 R=3 S=3 stride=2 pad=1 dtype=bfloat16"),
            ConvProblem.parse("N=2 C=16 H=17 W=17 K=32 R=1 S=7 pad_h=0 pad_w=3"),
            ConvProblem.parse("N=1 C=32 H=16 W=16 K=192 R=3 S=3 pad=1 math=tf32"),   # the 96/192-column tiles
            ConvProblem.parse("N=1 C=32 H=16 W=16 K=192 R=3 S=3 pad=1 dtype=bfloat16")]


@pytest.mark.parametrize("family", sorted(f for f, d in REGISTRY if d == "fwd"))
def test_source_of_every_family_needs_no_gpu(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from convtune.kernels import experimental

    monkeypatch.setenv(experimental.ENV, "all")   # experimental families describe like the others

    from convtune.kernels.describe import describe
    from convtune.kernels.registry import get_spec

    spec = get_spec(family)
    problem, plan = next((p, pl) for p in _SAMPLES if spec.supports(p) for pl in spec.enumerate_plans(p, H200))
    src = describe(problem, plan.config, H200)  # no CuPy here: a real compile would raise DeviceUnavailable
    launches = [s for s in src.steps if "entry" in s]
    texts = {k.source_sha256: k for k in src.kernels}
    assert launches and {s["source_sha256"] for s in launches} <= set(texts)
    for k in src.kernels:
        assert hashlib.sha256(k.source.encode()).hexdigest() == k.source_sha256
        assert re.search(rf"\b{k.entry}\s*\(", k.source), k.entry  # the entry is defined in its text
    assert all(min(s["grid"]) >= 1 and 1 <= s["block"][0] <= 1024 for s in launches)


def test_the_file_serves_by_precision_class(tmp_path: Path) -> None:
    """A file's faster tf32 entry serves the tf32 problem and never the strict one; a strict entry serves both."""
    from best_rows import TF32_CONFIG, TF32_PROBLEM

    doc = _doc()
    doc["entries"].append({**doc["entries"][0], "problem": TF32_PROBLEM.key(), "config": TF32_CONFIG.key(),
                           "time_ms": 0.02})
    path = _write(tmp_path / "classes.json", doc)
    loaded = export.load(path)
    shas = resolver.kernel_shas()
    assert loaded.lookup(PROBLEM.serving_keys(), H200.name, shas, ["direct"]) == GPU_CONFIG.key()
    assert loaded.lookup(TF32_PROBLEM.serving_keys(), H200.name, shas, ["direct"]) == TF32_CONFIG.key()
    resolver.use_configs_file(path)
    strict = resolver.resolve(PROBLEM, H200, ("direct",), lambda: MODEL_CHOICE)
    tf32 = resolver.resolve(TF32_PROBLEM, H200, ("direct",), lambda: MODEL_CHOICE)
    assert (strict.config, strict.source) == (GPU_CONFIG, "file")
    assert (tf32.config, tf32.source) == (TF32_CONFIG, "file")
    doc["entries"][1]["time_ms"] = 0.09                            # now the strict entry is the faster one
    loaded = export.load(_write(tmp_path / "slow_tf32.json", doc))
    assert loaded.lookup(TF32_PROBLEM.serving_keys(), H200.name, shas, ["direct"]) == GPU_CONFIG.key()
    del doc["entries"][0]                                          # a tf32 entry alone: never for strict
    loaded = export.load(_write(tmp_path / "tf32_only.json", doc))
    assert loaded.lookup(PROBLEM.serving_keys(), H200.name, shas, ["direct"]) is None

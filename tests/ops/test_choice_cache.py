"""The untuned choice's cross-process cache (:mod:`convtune.ops.choice_cache`) without a GPU: a second process (the
in-memory caches cleared) gets the stored choice without searching; a changed machine, code fingerprint or family
calibration misses; a damaged file or a stale key is recomputed; ``off`` writes nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from convtune.machine import MachineModel
from convtune.ops import choice_cache
from convtune.ops import conv2d as ops
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
PROBLEM = ConvProblem.parse("N=1 C=64 H=14 W=14 K=64 R=3 S=3 pad=1 math=tf32")


@pytest.fixture
def cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache" / "model_choices.json"
    monkeypatch.setenv(choice_cache.ENV, str(path))
    _new_process()
    yield path
    _new_process()


def _new_process() -> None:
    ops.forget_model_choices()
    choice_cache.forget()


def _searches(monkeypatch: pytest.MonkeyPatch) -> list[ConvProblem]:
    """Record every search the choice runs."""
    calls: list[ConvProblem] = []
    real = ops.model_fastest

    def counted(problem, machine, specs):
        calls.append(problem)
        return real(problem, machine, specs)

    monkeypatch.setattr(ops, "model_fastest", counted)
    return calls


def test_a_second_process_reads_the_choice_without_searching(cache_file: Path, monkeypatch) -> None:
    searches = _searches(monkeypatch)
    first = ops.model_choice(PROBLEM, H200)
    assert len(searches) == 1 and cache_file.is_file()
    stored = json.loads(cache_file.read_text())["choices"]
    assert list(stored.values()) == [first.key()] and PROBLEM.key() in next(iter(stored))
    _new_process()
    assert ops.model_choice(PROBLEM, H200) == first and len(searches) == 1
    other = PROBLEM.replace(K=96)                       # another problem: searched, and stored beside the first
    ops.model_choice(other, H200)
    assert len(searches) == 2 and len(json.loads(cache_file.read_text())["choices"]) == 2


def test_another_machine_code_or_calibration_misses(cache_file: Path, monkeypatch) -> None:
    searches = _searches(monkeypatch)
    ops.model_choice(PROBLEM, H200)
    _new_process()
    slower = dataclasses.replace(H200, copy_bandwidth_bytes_per_s=H200.copy_bandwidth_bytes_per_s / 2)
    ops.model_choice(PROBLEM, slower)
    assert len(searches) == 2
    _new_process()
    real = choice_cache.code_fingerprint()
    monkeypatch.setattr(choice_cache, "code_fingerprint", lambda: "edited-models")
    ops.model_choice(PROBLEM, H200)
    assert len(searches) == 3
    assert {k.split("|")[0] for k in json.loads(cache_file.read_text())["choices"]} == {real, "edited-models"}
    specs = ops._specs(PROBLEM, "auto")
    recalibrated = [dataclasses.replace(specs[0], choice_scale=specs[0].choice_scale * 2), *specs[1:]]
    assert choice_cache.entry_key(PROBLEM, H200, recalibrated) != choice_cache.entry_key(PROBLEM, H200, specs)


def test_a_damaged_file_or_a_stale_key_is_recomputed(cache_file: Path, monkeypatch) -> None:
    searches = _searches(monkeypatch)
    cache_file.parent.mkdir(parents=True)
    cache_file.write_text("{not json")
    first = ops.model_choice(PROBLEM, H200)
    assert len(searches) == 1 and json.loads(cache_file.read_text())["choices"]   # rewritten whole
    key = choice_cache.entry_key(PROBLEM, H200, ops._specs(PROBLEM, "auto"))
    cache_file.write_text(json.dumps({"choices": {key: "no_such_family.fwd tile=1"}}))
    _new_process()
    assert ops.model_choice(PROBLEM, H200) == first and len(searches) == 2


def test_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(choice_cache.ENV, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _new_process()
    try:
        assert choice_cache.cache_path() is None
        ops.model_choice(PROBLEM, H200)
        assert not any(tmp_path.rglob("*.json"))
    finally:
        _new_process()
    monkeypatch.delenv(choice_cache.ENV)
    assert choice_cache.cache_path() == tmp_path / "convtune" / "model_choices.json"


def test_the_fingerprint_changes_with_any_source_file(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "model.py").write_text("SCALE = 1.0\n")
    (tmp_path / "kernels" / "k.cu").write_text("// kernel\n")
    (tmp_path / "notes.txt").write_text("not a source")
    before = choice_cache.source_fingerprint(tmp_path)
    (tmp_path / "notes.txt").write_text("still not a source")
    assert choice_cache.source_fingerprint(tmp_path) == before
    for name, text in (("kernels/model.py", "SCALE = 0.5\n"), ("kernels/k.cu", "// edited\n")):
        (tmp_path / name).write_text(text)
        after = choice_cache.source_fingerprint(tmp_path)
        assert after != before and len(after) == 20
        before = after
    assert choice_cache.code_fingerprint() == choice_cache.source_fingerprint(Path(ops.__file__).resolve().parents[1])


def test_the_choice_follows_the_experimental_families_enabled_now(cache_file: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Enabling an experimental family or field mid-process (``CONVTUNE_EXPERIMENTAL`` is read at each call) changes
    the choice where the models prefer it: the in-process cache is per set of enabled names."""
    from convtune.kernels import experimental

    resnet_128 = ConvProblem.parse("N=32 C=128 H=28 W=28 K=128 R=3 S=3 pad=1")   # the model takes passes here
    monkeypatch.delenv(experimental.ENV, raising=False)
    assert ops.model_choice(resnet_128, H200).images_per_pass == 0
    monkeypatch.setenv(experimental.ENV, "winograd_passes")
    assert ops.model_choice(resnet_128, H200).images_per_pass > 0
    monkeypatch.delenv(experimental.ENV)
    assert ops.model_choice(resnet_128, H200).images_per_pass == 0

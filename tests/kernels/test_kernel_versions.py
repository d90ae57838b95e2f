"""Kernel versions are a function of the sources' contents alone: the layout redesign (issue 16) moved the
``.cu`` files and every family's version stayed what ``tests/data/pre_layout/kernel_versions.json`` recorded
before the move, so stored measurements and Optuna studies stay valid. Moving a file again changes nothing
either: sources and includes are found by file name, never by folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from convtune.errors import CompileError
from convtune.kernels import compile as kc
from convtune.kernels.registry import REGISTRY

PRE_LAYOUT = json.loads((Path(__file__).parents[1] / "data" / "pre_layout" / "kernel_versions.json").read_text())
#: Families and sources added after the move: no stored data predates them.
ADDED_FAMILIES = {"igemm.fwd", "igemm_nhwc.fwd", "igemm_1x1.fwd", "igemm_half.fwd", "igemm_half_1x1.fwd",
                  "igemm_simt.fwd", "igemm_wgmma.fwd", "igemm_wgmma_half.fwd",
                  "igemm_wgmma_half_1x1.fwd", "igemm_wgmma_1x1.fwd", "winograd_unfused_tf32.fwd",
                  "winograd_unfused_large.fwd", "igemm_wgmma_half_1x1_resident.fwd",
                  "direct_half.fwd", "igemm_wgmma_1x1_resident.fwd", "igemm_wgmma_half_1x1_pingpong.fwd",
                  "pointwise_sliced.fwd", "winograd_unfused_1d.fwd",
                  "igemm_wgmma_half_1x1_tma.fwd", "igemm_wgmma_1x1_tma.fwd", "igemm_wgmma_n96.fwd",
                  "igemm_wgmma_half_n96.fwd", "winograd_unfused_3xtf32.fwd"}
ADDED_SOURCES = {"igemm_fwd.cu", "igemm_half.cu", "igemm_half_1x1.cu", "igemm_simt_fwd.cu", "igemm_wgmma_fwd.cu",
                 "igemm_wgmma_half_1x1.cu", "winograd_unfused_tf32.cu", "winograd_unfused_r.cu",
                 "igemm_wgmma_half_1x1_resident.cu", "direct_half_fwd.cu",
                 "igemm_wgmma_1x1_resident.cu", "igemm_wgmma_half_1x1_pingpong.cu",
                 "pointwise_sliced_fwd.cu", "bias_act.cu", "winograd_unfused_1d.cu",
                 "igemm_wgmma_half_1x1_tma.cu", "igemm_wgmma_1x1_tma.cu", "igemm_wgmma_n96.cu",
                 "winograd_unfused_r_3xtf32.cu"}

#: Families whose kernel source changed on purpose after the move (tests/data/kernel_changes.json: a new kernel
#: version; stored rows of the old one are no longer current), and their source files.
CHANGES = json.loads((Path(__file__).parents[1] / "data" / "kernel_changes.json").read_text())["changes"]
CHANGED_FAMILIES = {c["family"] for c in CHANGES}
CHANGED_SOURCES = {c["source"] for c in CHANGES}


def test_every_registered_family_keeps_its_version() -> None:
    now = {f"{family}.{direction}": spec.source_sha256() for (family, direction), spec in REGISTRY.items()}
    assert set(now) - set(PRE_LAYOUT["registry"]) == ADDED_FAMILIES
    kept = {k: v for k, v in PRE_LAYOUT["registry"].items() if k not in CHANGED_FAMILIES}
    assert {k: now.get(k) for k in kept} == kept
    for change in CHANGES:   # each entry records the move it made: from the stored version to today's source
        assert PRE_LAYOUT["registry"][change["family"]] == change["previous_sha256"] != now[change["family"]]
        assert now[change["family"]] == change["sha256"], f"{change['family']} changed again: record it"


def test_every_source_file_keeps_its_expanded_text_hash() -> None:
    now = {path.name: kc.source_hash(kc.kernel_text(path.name)) for path in sorted(kc.KERNELS_DIR.rglob("*.cu"))}
    assert set(now) - set(PRE_LAYOUT["sources"]) == ADDED_SOURCES
    kept = {k: v for k, v in PRE_LAYOUT["sources"].items() if k not in CHANGED_SOURCES}
    assert {k: now.get(k) for k in kept} == kept
    assert all(now[k] != PRE_LAYOUT["sources"][k] for k in CHANGED_SOURCES)


def test_a_flattened_copy_of_the_sources_gives_the_same_versions(tmp_path: Path) -> None:
    """Every source and include copied into ONE folder (another layout altogether): same texts, same hashes."""
    flat = tmp_path / "flat"
    flat.mkdir()
    for path in kc.KERNELS_DIR.rglob("*.cu*"):
        shutil.copy(path, flat / path.name)
    index = kc._index((flat,))
    for name, sha in PRE_LAYOUT["sources"].items():
        text = index[name].read_text()
        expanded = _expand_in(index, text)
        expected = kc.source_hash(kc.kernel_text(name)) if name in CHANGED_SOURCES else sha
        assert kc.source_hash(expanded) == expected, name


def _expand_in(index: dict[str, Path], text: str) -> str:
    """:func:`~convtune.kernels.compile.expand_includes` against another index (the flattened copy)."""
    seen: set[Path] = set()

    def expand(body: str) -> str:
        def repl(match) -> str:  # type: ignore[no-untyped-def]
            path = index[Path(match.group(1)).name]
            if path in seen:
                return ""
            seen.add(path)
            return f"// ---- {match.group(1)} ----\n" + expand(path.read_text().replace("#pragma once", ""))

        return kc._INCLUDE.sub(repl, body)

    return expand(text)


def test_two_sources_of_one_name_are_refused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.cuh").write_text("// one of two\n")
    with pytest.raises(CompileError, match=r"two kernel sources are called same\.cuh"):
        kc._index((tmp_path,))


def test_an_unknown_include_names_what_is_missing() -> None:
    with pytest.raises(CompileError, match=r"nowhere\.cuh"):
        kc.expand_includes('#include "nowhere.cuh"\n')

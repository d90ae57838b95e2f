"""The package's import graph, read statically: no cycles between modules, and no arrow the wrong way.

Every ``import`` and ``from ... import`` of every module under ``convtune/`` counts — at module level and
inside functions (a lazy import still ties the two modules together) — except those under
``if TYPE_CHECKING:``, which never run. ``from pkg import name`` is an edge to ``pkg.name`` when that is a
module, else to ``pkg``; ``import a.b.c`` is an edge to ``a.b.c``. Only edges between convtune modules count.

The layers (what may not import what):

- ``convtune.bounds`` imports only ``convtune.problem``, ``convtune.machine``, ``convtune.errors``,
  ``convtune.vocabulary`` and itself;
- ``convtune.kernels`` imports no ``tuner``, ``storage``, ``api``, ``service``, ``cli``, ``ops``, ``analysis``;
- ``convtune.storage`` imports no ``api``, ``tuner``, ``service``, ``cli``, ``ops``;
- ``convtune.tuner`` imports no ``api``, ``service``, ``cli``;
- ``convtune.vocabulary`` imports nothing of convtune.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "convtune"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

Graph = Mapping[str, Mapping[str, int]]  # module -> {imported module: line of the first such import}


@dataclass(frozen=True)
class Rule:
    """Modules in ``layer`` (the package or its submodules) may not import ``forbidden`` ones; or, with
    ``only``, may import no convtune module but those (and their own layer)."""

    layer: str
    forbidden: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None

    def violated_by(self, target: str) -> bool:
        if _within(target, self.layer):
            return False
        if self.only is not None:
            return not any(_within(target, allowed) for allowed in self.only)
        return any(_within(target, f) for f in self.forbidden)


def _layers(*names: str) -> tuple[str, ...]:
    return tuple(f"{PACKAGE}.{n}" for n in names)


RULES = (
    Rule(f"{PACKAGE}.bounds", only=_layers("problem", "machine", "errors", "vocabulary")),
    Rule(f"{PACKAGE}.kernels", forbidden=_layers("tuner", "storage", "api", "service", "cli", "ops", "analysis")),
    Rule(f"{PACKAGE}.storage", forbidden=_layers("api", "tuner", "service", "cli", "ops")),
    Rule(f"{PACKAGE}.tuner", forbidden=_layers("api", "service", "cli")),
    Rule(f"{PACKAGE}.vocabulary", only=()),
)


#: Cycles accepted for now (none). The test fails on any cycle not listed here and on a listed one that is gone.
KNOWN_CYCLES: tuple[tuple[str, ...], ...] = ()


def _within(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


# ---- reading the graph ---------------------------------------------------------------------------------------
def package_modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """``dotted name -> file`` of every module of the package (a package is its ``__init__.py``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((package, *parts))] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: Iterable[str]) -> None:
        self.module, self.is_package, self.known = module, is_package, set(known)
        self.edges: dict[str, int] = {}

    def _add(self, target: str, line: int) -> None:
        if target in self.known and target != self.module:
            self.edges.setdefault(target, line)

    def _deepest_known(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in self.known:
                return ".".join(parts[:n])
        return None

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # never runs: only its else branch counts
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            target = self._deepest_known(alias.name)
            if target is not None:
                self._add(target, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".")
            if not self.is_package:
                base = base[:-1]
            base = base[:len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            if sub in self.known:
                self._add(sub, node.lineno)
            else:
                target = self._deepest_known(source)
                if target is not None:
                    self._add(target, node.lineno)


def imports_of(source: str, module: str, known: Iterable[str], *, is_package: bool = False) -> dict[str, int]:
    """The convtune modules ``source`` (the text of ``module``) imports, each with the line of its first import."""
    visitor = _Imports(module, is_package, known)
    visitor.visit(ast.parse(source))
    return visitor.edges


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, dict[str, int]]:
    modules = package_modules(root, package)
    return {name: imports_of(path.read_text(encoding="utf-8"), name, modules, is_package=path.name == "__init__.py")
            for name, path in modules.items()}


# ---- checking it ---------------------------------------------------------------------------------------------
def find_cycles(graph: Graph) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) for each strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(start: str) -> None:  # Tarjan, iterative (the graph has a few hundred modules)
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return [_cycle_in(graph, set(c), c[0]) for c in sorted(components)]


def _cycle_in(graph: Graph, members: set[str], start: str) -> list[str]:
    """A shortest path ``start -> ... -> start`` inside one strongly connected component."""
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph.get(node, {})):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in parent:
                    parent[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"{start} is in no cycle")  # pragma: no cover - a component always has one


def wrong_way(graph: Graph, rules: Iterable[Rule] = RULES) -> list[str]:
    """``"a (line n) -> b: <layer> may not import it"`` for each edge a rule forbids."""
    found = []
    for rule in rules:
        for module in sorted(m for m in graph if _within(m, rule.layer)):
            for target, line in sorted(graph[module].items()):
                if (target.startswith(PACKAGE + ".") or target == PACKAGE) and rule.violated_by(target):
                    found.append(f"{module} (line {line}) -> {target}: {rule.layer} may not import it")
    return found


def _describe(cycle: list[str], graph: Graph) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[-1]}"


# ---- the package -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return import_graph()


def test_the_graph_is_read(graph: dict[str, dict[str, int]]) -> None:
    """Not vacuous: the package's modules are found and their known imports are edges."""
    assert len(graph) > 50
    assert "convtune.storage.queries.results" in graph["convtune.storage.queries.jobs"]
    assert "convtune.vocabulary" in graph["convtune.storage.models"]
    assert "convtune.ops.conv2d" in graph["convtune"]  # the lazy import in a function counts


def test_no_import_cycle(graph: dict[str, dict[str, int]]) -> None:
    cycles = find_cycles(graph)
    new = [c for c in cycles if tuple(c) not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(_describe(c, graph) for c in new)
    gone = [c for c in KNOWN_CYCLES if list(c) not in cycles]
    assert not gone, f"no longer a cycle (remove it from KNOWN_CYCLES): {gone}"


def test_no_import_goes_the_wrong_way(graph: dict[str, dict[str, int]]) -> None:
    found = wrong_way(graph)
    assert not found, "imports against the layering:\n" + "\n".join(found)


# ---- the checker itself --------------------------------------------------------------------------------------
def test_the_checker_finds_a_cycle_and_names_it() -> None:
    graph = {"convtune.a": {"convtune.b": 1}, "convtune.b": {"convtune.c": 2}, "convtune.c": {"convtune.a": 3},
             "convtune.d": {"convtune.a": 4}, "convtune.e": {}}
    assert find_cycles(graph) == [["convtune.a", "convtune.b", "convtune.c", "convtune.a"]]
    assert _describe(find_cycles(graph)[0], graph) == ("convtune.a (line 1) -> convtune.b (line 2) -> convtune.c "
                                                       "(line 3) -> convtune.a")
    assert find_cycles({"convtune.a": {"convtune.b": 1}, "convtune.b": {}}) == []
    two = find_cycles({"x": {"y": 1}, "y": {"x": 1}, "p": {"q": 1}, "q": {"r": 1}, "r": {"q": 1}})
    assert two == [["q", "r", "q"], ["x", "y", "x"]]


def test_the_checker_finds_wrong_way_arrows() -> None:
    graph = {
        "convtune.bounds.tiles": {"convtune.problem": 1, "convtune.bounds.direct": 2, "convtune.kernels.config": 3},
        "convtune.kernels.direct.spec": {"convtune.tuner.prune": 5, "convtune.bounds": 6},
        "convtune.storage.models": {"convtune.vocabulary": 7, "convtune.api.schemas": 8},
        "convtune.tuner.tune": {"convtune.storage.queries": 9, "convtune.service.runner": 10},
        "convtune.vocabulary": {"convtune.errors": 11},
        "convtune.api.main": {"convtune.service.runner": 12},
    }
    assert wrong_way(graph) == [
        "convtune.bounds.tiles (line 3) -> convtune.kernels.config: convtune.bounds may not import it",
        "convtune.kernels.direct.spec (line 5) -> convtune.tuner.prune: convtune.kernels may not import it",
        "convtune.storage.models (line 8) -> convtune.api.schemas: convtune.storage may not import it",
        "convtune.tuner.tune (line 10) -> convtune.service.runner: convtune.tuner may not import it",
        "convtune.vocabulary (line 11) -> convtune.errors: convtune.vocabulary may not import it",
    ]


def test_the_reader_counts_lazy_imports_and_skips_type_checking() -> None:
    known = {"convtune", "convtune.storage", "convtune.storage.queries", "convtune.storage.models",
             "convtune.tuner", "convtune.tuner.tune", "convtune.api.schemas", "convtune.errors",
             "convtune.kernels", "convtune.kernels.config"}
    source = """
from typing import TYPE_CHECKING
import json
import convtune.storage.models
from convtune import errors
from convtune.storage import queries as repo, session_scope
from . import config
if TYPE_CHECKING:
    from convtune.api.schemas import JobOut
else:
    import convtune.tuner
def later():
    from convtune.tuner.tune import tune
    return tune
"""
    edges = imports_of(source, "convtune.kernels.describe", known)
    assert edges == {"convtune.storage.models": 4, "convtune.errors": 5, "convtune.storage.queries": 6,
                     "convtune.storage": 6, "convtune.kernels.config": 7, "convtune.tuner": 11,
                     "convtune.tuner.tune": 13}
    assert imports_of("from .. import errors\nfrom . import config\n", "convtune.kernels", known,
                      is_package=True) == {"convtune.errors": 1, "convtune.kernels.config": 2}

"""The benchmark suites shipped with the package (``public``: the layers the README's figures are measured on).

A suite is a JSON object with lists of problems under ``"dense"``, ``"depthwise"``, ... (see
:func:`convtune.cli.suite_entries`). ``benchmarks/suites/*.json`` in a source checkout are links to these files,
so scripts that name them keep working. Example::

    from convtune import suites
    path = suites.path("public")          # a Traversable inside the installed package
    data = json.loads(path.read_text())
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable


def names() -> list[str]:
    """The packaged suites' names (file names without ``.json``), sorted."""
    return sorted(p.name.removesuffix(".json") for p in files(__name__).iterdir() if p.name.endswith(".json"))


def path(name: str) -> Traversable:
    """The packaged suite ``name`` (e.g. ``"public"``); :class:`KeyError` for an unknown name."""
    if name not in names():
        raise KeyError(f"no packaged suite named {name!r} (packaged: {', '.join(names())})")
    return files(__name__) / f"{name}.json"

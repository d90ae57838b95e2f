"""KernelConfig: the frozen, hashable tuning point of one kernel family and direction.

Every family defines a subclass with its own integer fields. A config's canonical ``key()`` is
``"<family>.<direction> name=value ..."`` in field order; it is the cache, database and API key, and
:func:`parse_config_key` turns it back into the config object through the registry of subclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from convtune.errors import InvalidConfig

_CONFIG_CLASSES: dict[str, type[KernelConfig]] = {}


@dataclass(frozen=True, slots=True)
class KernelConfig:
    """Base class; subclasses add integer fields (≥ 1, or ≥ ``metadata["min"]``) and set ``family`` and
    ``direction``."""

    family: ClassVar[str] = ""
    direction: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # no zero-argument super(): slots=True dataclasses are rebuilt, which breaks its class cell
        if cls.family and cls.direction:
            _CONFIG_CLASSES[f"{cls.family}.{cls.direction}"] = cls

    def __post_init__(self) -> None:
        for name, low in _field_minimums(type(self)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidConfig(name, f"{value!r} must be an integer >= {low}")

    @property
    def kind(self) -> str:
        return f"{self.family}.{self.direction}"

    def key(self) -> str:
        """``"<family>.<direction> name=value ..."``; a field added to a family after its configs were stored
        (``metadata["key_omits_default"]``) is left out at its default, so the keys stored before stay the same."""
        omitted = _key_omitted_defaults(type(self))
        return " ".join([self.kind] + [f"{name}={getattr(self, name)}" for name, _ in _field_minimums(type(self))
                                       if name not in omitted or getattr(self, name) != omitted[name]])

    def __str__(self) -> str:
        return self.key()

    def to_dict(self) -> dict[str, int]:
        # the fields are ints: no deep copy (``dataclasses.asdict`` was 6 s of 128k pruning decisions' storing)
        return {name: getattr(self, name) for name, _ in _field_minimums(type(self))}


_FIELD_MINIMUMS: dict[type, tuple[tuple[str, int], ...]] = {}


def _field_minimums(cls: type[KernelConfig]) -> tuple[tuple[str, int], ...]:
    """(name, smallest allowed value) of each field of a config class, in order: ``metadata["min"]``, else 1 (a
    switch says 0: ``field(default=0, metadata={"min": 0})``). Cached per class: every plan a search scores builds
    a config, and ``dataclasses.fields`` was a fifth of the untuned choice's host time."""
    found = _FIELD_MINIMUMS.get(cls)
    if found is None:
        found = _FIELD_MINIMUMS[cls] = tuple((f.name, f.metadata.get("min", 1)) for f in fields(cls))
    return found


_KEY_OMITTED: dict[type, dict[str, Any]] = {}


def _key_omitted_defaults(cls: type[KernelConfig]) -> dict[str, Any]:
    """{name: default} of the fields :meth:`KernelConfig.key` leaves out at their default (cached per class)."""
    found = _KEY_OMITTED.get(cls)
    if found is None:
        found = _KEY_OMITTED[cls] = {f.name: f.default for f in fields(cls) if f.metadata.get("key_omits_default")}
    return found


def config_class(kind: str) -> type[KernelConfig]:
    """The config class registered for ``"family.direction"``."""
    try:
        return _CONFIG_CLASSES[kind]
    except KeyError:
        raise InvalidConfig("kind", f"{kind!r} is unknown: allowed {sorted(_CONFIG_CLASSES)}") from None


def parse_config_key(text: str) -> KernelConfig:
    """Inverse of :meth:`KernelConfig.key`: ``"direct.fwd tile_h=8 ..."`` -> a config object."""
    head, *tokens = text.split()
    cls = config_class(head)
    values: dict[str, int] = {}
    for token in tokens:
        name, sep, raw = token.partition("=")
        if not sep:
            raise InvalidConfig(token, "expected name=value")
        try:
            values[name] = int(raw)
        except ValueError:
            raise InvalidConfig(name, f"{raw!r} is not an integer") from None
    allowed = {f.name for f in fields(cls)}
    for name in values:
        if name not in allowed:
            raise InvalidConfig(name, f"unknown field of {head}; allowed: {', '.join(sorted(allowed))}")
    try:
        return cls(**values)
    except TypeError as exc:
        raise InvalidConfig(head, str(exc)) from None

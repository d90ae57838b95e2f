"""A kernel family's search space declared once, as data (after Kernel Tuner's ``tune_params`` + restrictions).

A :class:`SearchSpace` is the values each tunable parameter may take (``name -> tuple of values``, in the
order the enumeration walks them; the values may depend on the problem) plus named :class:`Rule` s:

* ``rules`` are the kernel's validity rules: :meth:`SearchSpace.check` (called by the family's ``plan()``)
  refuses a config breaking one with :class:`~convtune.errors.InvalidConfig` naming the rule's field;
* ``prune`` are rules of the search only (tiles no larger than the extent they cover, thread counts worth
  timing): the enumeration leaves such configs out, ``plan()`` still accepts them.

:meth:`SearchSpace.grid_size` is the product of the value counts; :meth:`SearchSpace.configs` is the
product of the values filtered by every rule, each rule checked as soon as the parameters it reads are
bound (so a rule on the outer parameters prunes whole sub-grids). Limits of the derived launch geometry
(shared memory, registers, grid extents) stay in ``plan()``: they need the plan, not only the config.

Example::

    space = SearchSpace(
        values={"tile": (16, 32, 64), "thread": (1, 2, 4)},
        rules=(Rule("thread_divides_tile", ("tile", "thread"), lambda v: v["tile"] % v["thread"] == 0,
                    "thread={thread} must divide tile={tile}"),),
    )
    space.grid_size()        # 9
    list(space.configs())    # [{'tile': 16, 'thread': 1}, ...]
    space.check({"tile": 16, "thread": 3})   # InvalidConfig("thread", "thread=3 must divide tile=16")
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from convtune.errors import InvalidConfig

Values = Mapping[str, int]


@dataclass(frozen=True)
class Rule:
    """A named constraint on some parameters (and, through a closure, on the problem or machine).

    Rules are checked in order (validity rules, then pruning rules), so ``ok`` may assume that every earlier
    rule reading only parameters among its own ``fields`` holds (e.g. a divisor is not zero).
    ``fields`` are the parameters ``ok`` reads (none: a rule on the problem alone, e.g. groups=1);
    ``field`` is the name :class:`InvalidConfig` reports (default: the last of ``fields``; it may be a derived
    quantity such as ``threads``); ``message`` is a ``str.format`` template over the values, or a function of them.
    """

    name: str
    fields: tuple[str, ...]
    ok: Callable[[Values], bool]
    message: str | Callable[[Values], str]
    field: str = ""

    @property
    def reported_field(self) -> str:
        return self.field or (self.fields[-1] if self.fields else "problem")

    def describe(self, values: Values) -> str:
        return self.message(values) if callable(self.message) else self.message.format_map(values)

    def error(self, values: Values) -> InvalidConfig:
        return InvalidConfig(self.reported_field, self.describe(values))


@dataclass(frozen=True)
class SearchSpace:
    """Parameter values + validity rules + search-only pruning rules of one family for one problem."""

    values: Mapping[str, tuple[int, ...]]
    rules: tuple[Rule, ...] = ()
    prune: tuple[Rule, ...] = ()
    _stages: tuple[tuple[Rule, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = list(self.values)
        stages: list[list[Rule]] = [[] for _ in range(len(names) + 1)]
        for rule in (*self.rules, *self.prune):
            unknown = [f for f in rule.fields if f not in self.values]
            if unknown:
                raise ValueError(f"rule {rule.name!r} reads unknown parameters {unknown}")
            # stage 0: rules on the problem alone; stage i: rules whose last-bound parameter is names[i - 1]
            stages[max((names.index(f) + 1 for f in rule.fields), default=0)].append(rule)
        object.__setattr__(self, "_stages", tuple(tuple(s) for s in stages))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.values)

    def grid_size(self) -> int:
        """Size of the raw parameter grid: every combination, before any rule."""
        return math.prod(len(v) for v in self.values.values())

    def configs(self) -> Iterator[dict[str, int]]:
        """Every combination of the values (lexicographic in declaration order) that breaks no rule."""
        stages = self._stages
        if not all(rule.ok({}) for rule in stages[0]):
            return
        partial: list[dict[str, int]] = [{}]
        for depth, (name, values) in enumerate(self.values.items(), start=1):
            checks = stages[depth]
            grown: list[dict[str, int]] = []
            for a in partial:
                for x in values:
                    v = {**a, name: x}
                    if all(rule.ok(v) for rule in checks):
                        grown.append(v)
            partial = grown
        yield from partial

    def values_of(self, config: Any) -> dict[str, int]:
        """The parameter values of ``config`` (a mapping, or an object with one attribute per parameter)."""
        if isinstance(config, Mapping):
            return {name: config[name] for name in self.values}
        return {name: getattr(config, name) for name in self.values}

    def violation(self, config: Any, prune: bool = False) -> Rule | None:
        """The first validity rule (with ``prune``: then pruning rule) ``config`` breaks, or None."""
        v = self.values_of(config)
        return next((rule for rule in (*self.rules, *(self.prune if prune else ())) if not rule.ok(v)), None)

    def check(self, config: Any) -> None:
        """Refuse ``config`` if it breaks a validity rule (the first one, in declaration order).

        Raises:
            InvalidConfig: naming the rule's field, with its message.
        """
        rule = self.violation(config)
        if rule is not None:
            raise rule.error(self.values_of(config))


def split_rules(length: int, chunk: str = "chunk_c", extent: str = "C", unit: str = "channel",
                empty: str = "channels") -> tuple[Rule, Rule]:
    """The rules of a reduction over ``length`` elements in chunks of the field ``chunk``, split across ``splits``
    blocks: no more splits than chunks, and no split left without a chunk (5 chunks in 4 splits of 2). ``extent``,
    ``unit`` and ``empty`` word the messages (the reduction's name, its chunks' noun, what an empty split lacks)."""

    def chunks(v: Values) -> int:
        return -(-length // v[chunk])

    def splits_used(v: Values) -> int:  # splits of ⌈chunks/splits⌉ chunks each that hold an element
        return -(-chunks(v) // -(-chunks(v) // v["splits"]))

    return (
        Rule("splits_chunks", (chunk, "splits"), lambda v: v["splits"] <= chunks(v),
             lambda v: f"splits={v['splits']} exceeds the {chunks(v)} {unit} chunks of {extent}={length}"),
        Rule("splits_nonempty", (chunk, "splits"), lambda v: splits_used(v) == v["splits"],
             lambda v: f"splits={v['splits']} leaves a split without {empty} ({chunks(v)} chunks of "
                       f"{chunk}={v[chunk]}); use splits={splits_used(v)}"),
    )


def channel_split_rules(channels: int) -> tuple[Rule, Rule]:
    """:func:`split_rules` of a reduction over ``channels`` input channels in chunks of ``chunk_c``."""
    return split_rules(channels)


def pow2_at_least(n: int) -> int:
    """The least power of two ≥ n (1 for n ≤ 1): the extent a tile may reach in the spaces' pruning rules."""
    return 1 << max(0, (n - 1).bit_length())


def pixel_gemm_prune_rules(problem: Any, machine: Any | None) -> tuple[Rule, ...]:
    """The pruning rules of a GEMM over every output pixel (M = N·P·Q) × output channel (K) with a split reduction
    (the pointwise and igemm_simt spaces): tiles no larger than the next power of two of M and of K (at least 32);
    with ``machine``, no split of a grid that already has two blocks per SM."""
    p = problem
    m = p.N * p.P * p.Q
    max_m, max_n = max(32, pow2_at_least(m)), max(32, pow2_at_least(p.K))
    rules = [
        Rule("tile_m_extent", ("tile_m",), lambda v: v["tile_m"] <= max_m, f"tile_m={{tile_m}} exceeds {max_m}"),
        Rule("tile_n_extent", ("tile_n",), lambda v: v["tile_n"] <= max_n, f"tile_n={{tile_n}} exceeds {max_n}"),
    ]
    if machine is not None:
        sm_count = machine.sm_count

        def tiles(v: Values) -> int:
            return -(-m // v["tile_m"]) * -(-p.K // v["tile_n"])

        rules.append(Rule("split_needed", ("tile_m", "tile_n", "splits"),
                          lambda v: v["splits"] == 1 or tiles(v) < 2 * sm_count,
                          lambda v: f"{tiles(v)} tiles fill the GPU already: a split only adds atomics",
                          field="splits"))
    return tuple(rules)

"""SearchSpace: grid size, staged enumeration (= product filtered by every rule), violation and check."""

from __future__ import annotations

import itertools

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.search_space import Rule, SearchSpace

DIVIDES = Rule("thread_divides_tile", ("tile", "thread"), lambda v: v["tile"] % v["thread"] == 0,
               "thread={thread} must divide tile={tile}")
SMALL = Rule("small_tile", ("tile",), lambda v: v["tile"] <= 32, "tile={tile}: searched up to 32")
VALUES = {"tile": (16, 32, 64), "thread": (1, 2, 3, 4), "stages": (1, 2)}


def test_grid_size_is_the_product_of_the_value_counts() -> None:
    assert SearchSpace(VALUES).grid_size() == 3 * 4 * 2
    assert SearchSpace({"a": ()}).grid_size() == 0


def test_configs_are_the_product_filtered_by_rules_and_prune_in_declaration_order() -> None:
    space = SearchSpace(VALUES, rules=(DIVIDES,), prune=(SMALL,))
    expected = [dict(zip(VALUES, combo, strict=True)) for combo in itertools.product(*VALUES.values())]
    expected = [v for v in expected if DIVIDES.ok(v) and SMALL.ok(v)]
    assert list(space.configs()) == expected
    assert all(space.violation(v, prune=True) is None for v in space.configs())


def test_a_failing_problem_rule_empties_the_space() -> None:
    never = Rule("groups", (), lambda v: False, "groups=2: supported 1", field="groups")
    space = SearchSpace(VALUES, rules=(never,))
    assert list(space.configs()) == []
    assert space.grid_size() == 24
    with pytest.raises(InvalidConfig) as err:
        space.check({"tile": 16, "thread": 1, "stages": 1})
    assert err.value.field == "groups"


def test_check_names_the_field_of_the_first_broken_rule_and_ignores_prune() -> None:
    space = SearchSpace(VALUES, rules=(DIVIDES,), prune=(SMALL,))
    with pytest.raises(InvalidConfig) as err:
        space.check({"tile": 64, "thread": 3, "stages": 1})
    assert err.value.field == "thread" and err.value.detail == "thread=3 must divide tile=64"
    space.check({"tile": 64, "thread": 4, "stages": 1})  # pruned from the search, still valid
    assert space.violation({"tile": 64, "thread": 4, "stages": 1}, prune=True) is SMALL
    assert space.violation({"tile": 64, "thread": 4, "stages": 1}) is None


def test_check_reads_attributes_and_reports_a_derived_field() -> None:
    class Config:
        tile, thread, stages = 32, 2, 1

    rule = Rule("threads", ("tile", "thread"), lambda v: v["tile"] // v["thread"] >= 32,
                lambda v: f"{v['tile'] // v['thread']} threads: at least 32", field="threads")
    with pytest.raises(InvalidConfig) as err:
        SearchSpace(VALUES, rules=(rule,)).check(Config())
    assert (err.value.field, err.value.detail) == ("threads", "16 threads: at least 32")


def test_a_rule_on_an_unknown_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        SearchSpace(VALUES, rules=(Rule("x", ("nope",), lambda v: True, ""),))

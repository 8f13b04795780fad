"""The size budget of agent answers: compact JSON, rounded floats, cut to fit and saying so."""

from __future__ import annotations

import json

import pytest

from neuron_explorer.agents.budget import (
    DEFAULT_MAX_CHARS,
    NESTED_LIST_ITEMS,
    BudgetError,
    check_max_chars,
    fit,
    round_float,
)


def _rows(n: int, width: int = 40) -> list[dict]:
    return [{"name": f"kernel_{i}_" + "x" * width, "total_ns": 10**12 + i, "pct": 100 / (i + 3)} for i in range(n)]


def test_a_small_answer_is_compact_json_with_floats_rounded_and_integers_exact() -> None:
    text = fit({"wall_ns": 1733240000123456789, "pct": 33.333333333, "tiny": 2.8e-07, "ok": True, "x": None}, 16_000)

    assert text == '{"wall_ns":1733240000123456789,"pct":33.33,"tiny":2.8e-07,"ok":true,"x":null}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.0, 0.0), (1234.5678, 1235.0), (-0.000123456, -0.0001235), (float("nan"), None), (float("inf"), None)],
)
def test_floats_keep_four_significant_digits(value: float, expected: float | None) -> None:
    assert round_float(value) == expected


def test_a_long_list_is_cut_to_fit_and_the_note_names_the_next_offset() -> None:
    answer = {"trace": "t", "total_rows": 500, "offset": 20, "rows": _rows(500)}

    text = fit(answer, 4_000, "narrow with a filter", offset=20, pages=("rows",))
    doc = json.loads(text)

    assert len(text) <= 4_000
    shown = len(doc["rows"])
    assert 0 < shown < 500 and doc["rows"] == json.loads(fit({"rows": _rows(500)}, 10**6))["rows"][:shown]
    assert doc["truncated"] is True
    assert doc["truncation"]["lists"]["rows"] == {"shown": shown, "total": 500}
    assert doc["truncation"]["next_offset"] == 20 + shown
    assert f"offset={20 + shown}" in doc["truncation"]["how_to_page"]
    assert "narrow with a filter" in doc["truncation"]["how_to_page"]


def test_the_next_offset_is_where_every_paged_list_goes_on_and_other_lists_do_not_count() -> None:
    answer = {"steps": _rows(300), "attribution": _rows(900), "skipped": _rows(5000)}

    doc = json.loads(fit(answer, 6_000, offset=0, pages=("steps", "attribution")))

    lists = doc["truncation"]["lists"]
    paged = [lists[p]["shown"] for p in ("steps", "attribution") if p in lists]
    assert paged and doc["truncation"]["next_offset"] == min(paged)


def test_long_lists_inside_list_items_are_shortened_before_items_are_dropped() -> None:
    findings = [{"rule_id": f"r{i}", "event_ids": list(range(10**6, 10**6 + 2000))} for i in range(5)]

    doc = json.loads(fit({"findings": findings}, 3_000))

    assert [f["rule_id"] for f in doc["findings"]] == ["r0", "r1", "r2", "r3", "r4"]
    assert all(len(f["event_ids"]) == NESTED_LIST_ITEMS for f in doc["findings"])
    assert doc["truncation"]["nested_lists"]["findings[].event_ids"]["longest"] == 2000


def test_one_huge_string_is_cut_and_marked() -> None:
    text = fit({"code": "y" * 100_000, "line": 3}, 2_000)
    doc = json.loads(text)

    assert len(text) <= 2_000
    assert doc["line"] == 3 and "chars cut]" in doc["code"]
    assert doc["truncation"]["strings_cut"] == 1


def test_every_budget_is_honoured_even_the_smallest() -> None:
    answer = {"rows": _rows(2000), "blob": "z" * 50_000, "nested": [{"ids": list(range(500))}] * 20}
    for max_chars in (1_000, 1_500, 5_000, DEFAULT_MAX_CHARS, 100_000):
        assert len(fit(answer, max_chars)) <= max_chars


@pytest.mark.parametrize("bad", [0, 999, 1_000_001, "many", 12.5, True])
def test_max_chars_outside_the_range_is_refused(bad) -> None:
    with pytest.raises(BudgetError, match="max_chars"):
        check_max_chars(bad)

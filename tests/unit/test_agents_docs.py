"""The documents the MCP server serves as resources, and their generated stand-ins."""

from __future__ import annotations

import pytest

from neuron_explorer.agents.docs import (
    DOCS,
    DocNotFoundError,
    doc_text,
    find_doc,
    generated_rules_md,
    generated_schema_md,
)
from neuron_explorer.analyzers.rules import all_rules
from neuron_explorer.trace.schema import COLUMNS


def test_the_generated_schema_lists_every_column_with_its_unit_and_meaning() -> None:
    text = generated_schema_md()

    for column in COLUMNS:
        assert f"| {column.name} | " in text
    assert "| dur_ns | int64 | ns | Duration" in text


def test_the_generated_rules_doc_lists_every_registered_rule_with_its_thresholds() -> None:
    text = generated_rules_md()

    for rule in all_rules().values():
        assert f"## {rule.id}: " in text
        for name in rule.thresholds:
            assert f"{name} = " in text


@pytest.mark.parametrize("name", ["schema.md", "rules.md"])
def test_schema_and_rules_are_served_whether_or_not_the_docs_are_installed(name: str) -> None:
    text = doc_text(name)

    path = find_doc(name)
    assert text == (
        path.read_text(encoding="utf-8")
        if path
        else (generated_schema_md() if name == "schema.md" else generated_rules_md())
    )
    assert text.startswith("#")


def test_the_agents_guide_is_served_from_the_docs_folder() -> None:
    assert "agents.md" in DOCS
    assert "## Reading the Parquet metrics directly" in doc_text("agents.md")


def test_an_unknown_document_is_refused_by_name() -> None:
    with pytest.raises(DocNotFoundError, match=r"documents: schema\.md, rules\.md, agents\.md"):
        doc_text("../../etc/passwd")

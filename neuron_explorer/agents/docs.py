"""The documents the MCP server offers as resources: docs/schema.md, docs/rules.md, docs/agents.md,
docs/perf.md.

They are read from the package (``neuron_explorer/docs/``, in an installed wheel) or from the
``docs/`` folder of a source checkout. Where an install lacks one, schema.md and rules.md are
generated from their sources of truth (``trace.schema.COLUMNS`` and the rule registry), so an
agent always gets the columns and the rules, only without the prose.
"""

from __future__ import annotations

from pathlib import Path

DOCS: dict[str, str] = {
    "schema.md": "Trace schema: every column of a trace, its type, unit and meaning",
    "rules.md": "Rules: what each rule detects, its threshold, evidence and fix",
    "agents.md": "Guide for agents: the tools, SQL, and the Parquet metrics files",
    "diff.md": "Diff: how two traces are compared per step, the confidence and the CI gate",
    "perf.md": "Performance models: the FLOP and byte formulas, the roofline, the device peak table and its sources",
}


class DocNotFoundError(LookupError):
    """The document is neither installed nor generatable."""


def find_doc(name: str) -> Path | None:
    """A doc shipped inside the package or beside it in a source checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "docs" / name, package.parent / "docs" / name):
        if candidate.is_file():
            return candidate
    return None


def doc_text(name: str) -> str:
    """The markdown of ``name`` (one of ``DOCS``), read or, for schema/rules, generated."""
    if name not in DOCS:
        raise DocNotFoundError(f"no document {name!r}; documents: {', '.join(DOCS)}")
    path = find_doc(name)
    if path is not None:
        return path.read_text(encoding="utf-8")
    if name == "schema.md":
        return generated_schema_md()
    if name == "rules.md":
        return generated_rules_md()
    raise DocNotFoundError(f"docs/{name} is not installed with this copy of neuron-explorer")


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def generated_schema_md() -> str:
    from neuron_explorer.trace.schema import COLUMNS, SCHEMA_VERSION

    lines = [
        f"# Trace schema {SCHEMA_VERSION} (generated from neuron_explorer.trace.schema)",
        "",
        "One row per event. Times are int64 nanoseconds.",
        "",
        "| column | type | unit | meaning |",
        "|---|---|---|---|",
    ]
    lines += [f"| {c.name} | {_cell(c.type)} | {_cell(c.unit)} | {_cell(c.description)} |" for c in COLUMNS]
    return "\n".join(lines) + "\n"


def generated_rules_md() -> str:
    from neuron_explorer.analyzers.rules import all_rules

    lines = ["# Rules (generated from the rule registry)", ""]
    for r in all_rules().values():
        lines += [f"## {r.id}: {r.title}", "", f"Family: {r.family}. Default severity: {r.severity}."]
        if r.thresholds:
            lines.append(
                "Thresholds: " + ", ".join(f"{n} = {v:g} {u}".rstrip() for n, (v, u) in r.thresholds.items()) + "."
            )
        if r.needs:
            lines.append(f"Needs: {r.needs}.")
        if r.doc:
            lines += ["", r.doc]
        lines.append("")
    return "\n".join(lines)

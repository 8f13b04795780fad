"""The agent interface: an MCP server over traces, a read-only SQL sandbox, confined source access.

``catalog`` owns the served traces and their lazily computed analyses, ``views`` the JSON
answers the tools give, ``tables`` the tables SQL sees and their self-description, ``sql`` the
locked-down DuckDB, ``sql_process`` the worker process that holds its time and memory limits, ``source`` which source files may be shown, and ``server`` the MCP wiring
(``neuron-explorer mcp``). The ``mcp`` SDK is imported only by ``server``.

Imports ``reports/``, ``analyzers/``, ``collectors/`` and ``trace/``; never ``tui/`` or
``cli/`` (``cli/mcp`` starts the server).
"""

from __future__ import annotations

from neuron_explorer.agents.catalog import ServedTrace, TraceCatalog
from neuron_explorer.agents.source import SourceAccess, SourceAccessError
from neuron_explorer.agents.sql import SqlError, SqlTimeoutError
from neuron_explorer.agents.sql_process import SqlSandbox

__all__ = [
    "ServedTrace",
    "SourceAccess",
    "SourceAccessError",
    "SqlError",
    "SqlSandbox",
    "SqlTimeoutError",
    "TraceCatalog",
]

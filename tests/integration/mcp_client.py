"""A real MCP client session with a `neuron-explorer mcp` subprocess, usable from plain sync tests.

The official SDK's ``stdio_client`` starts the server as a subprocess and ``ClientSession``
speaks the protocol over its stdin/stdout. Both are async context managers that must be
entered and left in one task, so they run inside an anyio blocking portal (an event loop in a
thread); tests call ``server.call(...)`` synchronously and one server serves a whole module.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.stdio import get_default_environment
from mcp.types import CallToolResult, InitializeResult

from tests.conftest import REPO

#: Generous: the first call of a tool on a trace computes its analysis on a shared, slow CI box.
CALL_TIMEOUT_S = 120.0


class McpServer:
    """``with McpServer("trace.json", "--source-root", d) as server: server.data("list_traces")``."""

    def __init__(self, *args: str, cwd: str | None = None) -> None:
        self.args = ["-m", "neuron_explorer", "mcp", *map(str, args)]
        self.cwd = cwd
        # The server's stderr (its log) needs a real file descriptor; closed in __exit__.
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.init: InitializeResult | None = None

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        # The server runs this checkout's code: `python -m` puts its working directory first on
        # sys.path, so a server started elsewhere (`cwd`) gets the checkout on PYTHONPATH.
        env = {**get_default_environment(), "PYTHONPATH": str(REPO)}
        params = StdioServerParameters(command=sys.executable, args=self.args, cwd=self.cwd or str(REPO), env=env)
        async with (
            stdio_client(params, errlog=self.stderr) as (read, write),
            ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_S) as session,
        ):
            self.init = await session.initialize()
            yield session

    def __enter__(self) -> McpServer:
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        try:
            self._session_cm = self.portal.wrap_async_context_manager(self._connect())
            self.session = self._session_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._session_cm.__exit__(*exc)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self.stderr.close()

    def server_log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def run(self, coroutine_fn: Any, *args: Any) -> Any:
        return self.portal.call(coroutine_fn, *args)

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return self.portal.call(self.session.call_tool, tool, arguments or {})

    def text(self, tool: str, arguments: dict[str, Any] | None = None) -> str:
        """A successful call's answer as sent: one JSON text block, and no second (structured) copy."""
        result = self.call(tool, arguments)
        text = result.content[0].text if result.content else ""
        assert not result.is_error, f"{tool}({arguments}) failed: {text}\n{self.server_log()[-2000:]}"
        assert len(result.content) == 1 and result.structured_content is None, "an answer is sent once"
        return text

    def data(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """A successful call's answer, parsed."""
        return json.loads(self.text(tool, arguments))

    def error(self, tool: str, arguments: dict[str, Any] | None = None) -> str:
        """A call that must fail as a tool error; its message."""
        result = self.call(tool, arguments)
        text = " ".join(c.text for c in result.content if hasattr(c, "text"))
        assert result.is_error, f"{tool}({arguments}) should have failed but returned: {text[:500]}"
        return text

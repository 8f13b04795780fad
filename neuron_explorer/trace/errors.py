"""The typed errors of Neuron Explorer.

Library code raises these; only ``cli.main`` turns them into one line on stderr and an exit
code. Each error names the file it concerns, so the message alone tells the user what to fix.
"""

from __future__ import annotations

from pathlib import Path

from neuron_explorer.trace.printable import printable


class NeuronExplorerError(Exception):
    """Base class of every error the tool reports to a user."""

    def __init__(self, message: str, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.message = message
        super().__init__(f"{printable(self.path)}: {message}" if self.path else message)


class TraceNotFoundError(NeuronExplorerError):
    """The trace file or run directory does not exist."""


class TraceFormatError(NeuronExplorerError):
    """The input is not a readable trace: corrupt, truncated, empty or of the wrong kind."""


class SchemaVersionError(TraceFormatError):
    """The Parquet trace was written by a newer, incompatible schema version."""


class CollectorError(NeuronExplorerError):
    """Capturing a profile or writing its trace failed."""


class AnalysisError(NeuronExplorerError):
    """An analyzer could not run on the given trace."""

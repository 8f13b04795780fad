"""The trace data model, the ground floor: schema, ``Trace``, errors, paths and what every layer
reads of a trace (frames, units, repairs, line coverage).

Opening any supported input (Kineto JSON, a run directory, a Neuron export) is the collectors'
work: ``neuron_explorer.collectors.load`` (re-exported as ``neuron_explorer.load``). This
package imports nothing else of ``neuron_explorer``: every other package stands on it
(tests/unit/test_layers.py).
"""

from __future__ import annotations

from neuron_explorer.trace.errors import (
    AnalysisError,
    CollectorError,
    NeuronExplorerError,
    SchemaVersionError,
    TraceFormatError,
    TraceNotFoundError,
)
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import COLUMNS, EVENTS_SCHEMA, SCHEMA_VERSION, Kind, Precision

__all__ = [
    "COLUMNS",
    "EVENTS_SCHEMA",
    "SCHEMA_VERSION",
    "AnalysisError",
    "CollectorError",
    "Kind",
    "NeuronExplorerError",
    "Precision",
    "SchemaVersionError",
    "Trace",
    "TraceFormatError",
    "TraceNotFoundError",
]

"""What a node of the dependency graph is: its kind (``nodes["node_kind"]``) and its category
(``nodes["cat"]``, a code into ``CATEGORIES``).

The graph's builder (``build``), the collectives across ranks (``collectives``), the replay
(``replay``) and the critical path (``critical``) all read these codes; they live here, below
all of them, so that none imports another for them. Imports nothing.
"""

from __future__ import annotations

#: node categories (the attribution's, ``analyzers/attribution/__init__.py``), as ``nodes["cat"]`` codes
CATEGORIES = (
    "compute",
    "communication",
    "copy",
    "host_blocked",
    "host_launch",
    "host_python",
    "data_loading",
    "untraced",
)
COMPUTE, COMMUNICATION, COPY, HOST_BLOCKED, HOST_LAUNCH, HOST_PYTHON, DATA_LOADING, UNTRACED = range(8)
#: ``nodes["node_kind"]``: a host segment, device work, a collective's arrival on its stream
#: (zero length, before the transfer), and a collective instance's join across ranks
SEGMENT, DEVICE, ARRIVAL, JOIN = range(4)

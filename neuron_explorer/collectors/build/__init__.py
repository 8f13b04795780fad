"""The one builder every reader hands its rows to: ``RawEvents`` -> ``Trace``, with the user-code
policy and the source attribution it applies.

A reader fills ``raw_events.RawEvents`` and calls ``normalize.build_trace`` (the in-memory
build); the out-of-core build (``collectors.kineto.spooled``) runs the same steps from here on
batches. The steps, one module each: ``event_kinds`` (kind and device type of each event),
``nesting`` (the call tree, nearest marked ancestors), ``event_links`` (launch, op and forward
links by key and flow), ``steps`` (the step of each event, the trailing partial step demoted,
``step_tail``), ``event_columns`` (the columns of each event's own arguments, the schema table),
``source_map`` (which files are user code) and ``source_attribution`` (the src_* columns),
``graph_replay`` (CUDA/HIP graph work to its capture-time lines); ``deferred`` is the trace whose
wide text columns are gathered when written, ``_conversion`` the memory settings of a build,
``input_limits`` the bounds every JSON reader reads its file within (inflation, one string's
length, a byte order mark dropped).

Imports only ``trace/``, ``version``, ``environment`` and ``parallel``: nothing here knows a
reader (``kineto/``, ``lines/``, ``neuron/``, ``capture/`` import it, never the reverse).
"""

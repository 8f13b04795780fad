"""Kineto / Chrome trace JSON import: decode, check, spool out of core, run directories.

``kineto_json`` imports a file (``import_kineto_json``): ``json_depth`` and ``kineto_checks``
check it, the events are decoded into ``RawEvents`` columns (``kineto_columns``, typed
arguments by ``kineto_args``, columns an export of ours carried by ``kineto_carry``), chunk
by chunk (``chunk_decode``; in parallel for large files: ``parallel_decode``,
``_decode_worker``), and built by ``collectors.build``; past ``spooled.spool_events()`` events
they are built out of core instead (``spooled``, with ``spool_store``, ``spool_tree``,
``spool_links``, ``spool_assembly``).
``run_dir`` imports (or converts) a run directory of per-rank traces.

Imports ``collectors/build/`` and the layers below it (``trace/``, ``version``,
``environment``, ``parallel``); never ``lines/``, ``neuron/`` or ``capture/``.
"""

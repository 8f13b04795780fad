"""The exit statuses of every ``neuron-explorer`` command (docs/cli.md, "Exit codes").

Only ``cli.main`` chooses them; a command's ``run`` returns one. This module imports nothing,
so the commands and the dispatcher (``cli/__init__.py``, which re-exports them) share it.
"""

EXIT_OK = 0
EXIT_FINDINGS = 1  # analyze --fail-on matched; diff --fail-on-regression found one
EXIT_USAGE = 2
EXIT_INPUT = 3  # a bad or missing input file
EXIT_INTERRUPTED = 130
#: The reader of our output went away (``analyze ... | head``): 128 + SIGPIPE, the status a shell
#: reports for ``cat`` in the same place; nothing is printed.
EXIT_BROKEN_PIPE = 141

"""The package's version, in a module of its own so that every layer can read it.

``neuron_explorer/__init__.py`` re-exports it, and ``pyproject.toml`` reads it from here
(``version = { attr = "neuron_explorer.version.__version__" }``). A module inside the package
that took it from the package face would import the layer above itself (the face imports
``collectors/``). This module imports nothing.
"""

__version__ = "0.1.0"

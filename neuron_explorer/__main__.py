"""``python -m neuron_explorer``: the same as the ``neuron-explorer`` command."""

from neuron_explorer.cli import entry_point

entry_point()

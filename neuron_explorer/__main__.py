"""``python -m neuron_explorer``: the same as the ``neuron-explorer`` command."""

from neuron_explorer.cli import entry_point

if __name__ == "__main__":  # not when a multiprocessing "spawn" child re-imports __main__
    entry_point()

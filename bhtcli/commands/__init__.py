"""One module per command: take a pair, return a result object."""

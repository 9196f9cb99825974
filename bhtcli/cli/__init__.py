"""The command-line skin: the only modules that import click, rich or matplotlib."""

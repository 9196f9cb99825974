"""Run the `bht` command line in-process, as the tests do: (exit status, stdout, stderr)."""
import io
import sys

import pytest

from bhtcli.cli.main import main


def run(capsys, *args, stdin=None, monkeypatch=None):
    """`bht ARGS`; `stdin` (text) becomes standard input's bytes (needs `monkeypatch`)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(stdin.encode())})())
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err

"""Notes and warnings written while the live progress line is shown go above it, on a line of
their own, not onto the progress line's text (the line is erased first, then redrawn)."""
import io
import re

from rich.console import Console

from bhtcli.cli import render
from bhtcli.cli.progress import Reporter


def terminal():
    buf = io.StringIO()
    return buf, Console(file=buf, force_terminal=True, width=100, color_system=None)


def test_a_note_during_progress_gets_its_own_line():
    buf, console = terminal()
    with Reporter(console=console) as progress:
        assert progress.enabled
        progress("dequantizing token_embd.weight", 10, 100)
        progress._progress.refresh()
        render.stderr_line("Note: read token_embd.weight as the head")
        progress._progress.refresh()
    out = buf.getvalue()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", out)
    lines = [line.strip() for line in plain.replace("\r", "\n").split("\n")]
    assert "Note: read token_embd.weight as the head" in lines
    # rich erased the live line before writing the note (cursor up / erase line sequences)
    before = out[:out.index("Note:")]
    assert "\x1b[2K" in before
    assert not render.LIVE


def test_without_a_live_line_notes_go_straight_to_stderr(capsys):
    render.stderr_line("Note: plain")
    assert capsys.readouterr().err == "Note: plain\n"


def test_a_disabled_reporter_registers_no_live_console(capsys):
    buf, console = terminal()
    with Reporter(quiet=True, console=console):
        assert not render.LIVE
        render.stderr_line("Warning: w")
    assert capsys.readouterr().err == "Warning: w\n"


def test_dequantizing_a_gguf_tensor_reports_its_rows():
    """A long load says which tensor it dequantizes and how far it is (rows done / total)."""
    import os

    from bhtcli.errors import phases_to
    from bhtcli.io.load import read_array
    seen = []
    path = os.path.join(os.path.dirname(__file__), "data", "real_blocks.gguf")
    with phases_to(lambda message, step, total: seen.append((message, step, total))):
        a = read_array(f"{path}:s1.blk.0.attn_q.weight")
    assert seen and all(total == a.shape[0] for _, _, total in seen)
    assert seen[0][1] == 0 and "dequantizing" in seen[0][0] and "s1.blk.0.attn_q.weight" in seen[0][0]
    assert f"of {a.shape[0]:,} rows" in seen[0][0]


def test_the_progress_line_shows_the_phases_of_the_loaders():
    from bhtcli.errors import phase
    buf, console = terminal()
    with Reporter(console=console) as progress:
        phase("dequantizing X: 10 of 100 rows", 10, 100)
        progress._progress.refresh()
    assert "dequantizing X: 10 of 100 rows" in buf.getvalue()
    phase("after the block: told to nobody")    # no display installed: no error

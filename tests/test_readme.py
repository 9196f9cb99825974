"""Every `$ bht ...` command shown in README.md and docs/*.md prints what the page says it prints.

Fields that change from run to run (wall time) and solver bookkeeping that can differ with
BLAS threading (iterations, passes, KKT residual) are masked. docs/cli.md and docs/json.md are
generated and checked by their own tests.
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MASKS = [r"\d+\.\d+ s\b", r"\d+ iterations", r"[\d,]+ passes", r"[\d,]+ evaluations", r"KKT residual\s+\S+",
         r'"seconds": [0-9.e-]+', r'"search_seconds": [0-9.e-]+', r'"pass_seconds": [0-9.e-]+']
GENERATED = {"cli.md", "json.md"}


def checked_pages():
    """README.md and the hand-written pages of docs/ (relative paths)."""
    pages = [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in GENERATED)
    return [p.relative_to(ROOT).as_posix() for p in pages]


def page_commands(page):
    text = (ROOT / page).read_text()
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.S)
    cases = []
    for block in blocks:
        lines = block.rstrip("\n").split("\n")
        if not lines[0].startswith("$ bht "):
            continue
        cases.append((lines[0][2:], "\n".join(lines[1:])))
    return cases


def readme_commands():
    return [(page, command, expected) for page in checked_pages()
            for command, expected in page_commands(page)]


def mask(text):
    for pattern in MASKS:
        text = re.sub(pattern, "<masked>", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def test_readme_has_commands():
    commands = {c.split()[1] for c, _ in page_commands("README.md")}
    assert {"design", "bound", "sample", "decide", "simulate", "shift"} <= commands


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert "make demo" in text and "make test" in text


def test_doc_links_resolve():
    """Every relative link of a checked page points at a file of the repository."""
    for page in checked_pages():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / page).read_text()):
            if "://" in target:
                continue
            assert (ROOT / page).parent.joinpath(target).resolve().exists(), f"{page}: {target}"


@pytest.mark.slow
@pytest.mark.parametrize("page,command,expected", readme_commands())
def test_readme_output_is_real(page, command, expected):
    bht = os.path.join(os.path.dirname(sys.executable), "bht")
    args = shlex.split(command)[1:]
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    p = subprocess.run([bht, *args], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    assert mask(p.stdout) == mask(expected), f"{page}: stale output; run examples/refresh_readme.py"

"""Every `$ bht ...` command shown in README.md prints what the README says it prints.

Fields that change from run to run (wall time) and solver bookkeeping that can differ with
BLAS threading (iterations, passes, KKT residual) are masked.
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
         r'"seconds": [0-9.e-]+', r'"search_seconds": [0-9.e-]+']


def readme_commands():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```console\n(.*?)```", text, flags=re.S)
    cases = []
    for block in blocks:
        lines = block.rstrip("\n").split("\n")
        if not lines[0].startswith("$ bht "):
            continue
        cases.append((lines[0][2:], "\n".join(lines[1:])))
    return cases


def mask(text):
    for pattern in MASKS:
        text = re.sub(pattern, "<masked>", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def test_readme_has_commands():
    assert len(readme_commands()) >= 3


@pytest.mark.parametrize("command,expected", readme_commands())
def test_readme_output_is_real(command, expected):
    bht = os.path.join(os.path.dirname(sys.executable), "bht")
    args = shlex.split(command)[1:]
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    p = subprocess.run([bht, *args], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    assert mask(p.stdout) == mask(expected)

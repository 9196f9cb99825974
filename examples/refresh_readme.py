"""Rerun every `$ bht ...` block of README.md and docs/*.md and paste its real output (what
tests/test_readme.py checks). Run from the project root: .venv/bin/python examples/refresh_readme.py
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
bht = os.path.join(os.path.dirname(sys.executable), "bht")
env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
GENERATED = {"cli.md", "json.md"}     # generated pages have their own refresh and test


def refresh(match):
    command = match.group(1)
    p = subprocess.run([bht, *shlex.split(command)[1:]], capture_output=True, text=True, cwd=root, env=env)
    if p.returncode != 0:
        sys.exit(f"{command} failed: {p.stderr}")
    out = "\n".join(line.rstrip() for line in p.stdout.strip("\n").splitlines())
    return f"```console\n$ {command}\n{out}\n```"


pages = [root / "README.md"] + sorted(p for p in (root / "docs").glob("*.md") if p.name not in GENERATED)
for page in pages:
    text = page.read_text()
    new = re.sub(r"```console\n\$ (bht [^\n]*)\n.*?```", refresh, text, flags=re.S)
    if new != text:
        page.write_text(new)
        print(f"refreshed {page.relative_to(root)}")

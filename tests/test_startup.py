"""A fast start: the command line's modules load neither numpy, scipy, rich nor ml_dtypes
until a command needs them, and the bundled example's design needs no scipy at all (module
checks in a fresh interpreter, not timings; benchmarks/bench_startup.py measures the time)."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "scipy", "rich", "ml_dtypes", "cvxpy", "matplotlib", "distributed", "safetensors")


def _loaded(code: str) -> set:
    probe = code + f"\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_importing_the_package_and_the_cli_loads_nothing_heavy():
    assert _loaded("import bhtcli") == set()
    assert _loaded("import bhtcli.cli.main") == set()
    assert _loaded("from bhtcli import design, bound, sweep") == set()


def test_version_and_help_load_nothing_heavy():
    for args in (["-V"], ["--help"], ["design", "--help"], ["sweep", "--help"]):
        code = (f"import sys\nfrom bhtcli.cli.main import main\nsys.argv = ['bht'] + {args!r}\n"
                "try:\n    main()\nexcept SystemExit:\n    pass")
        assert _loaded(code) - {"rich"} == set(), args    # rich may render help in the future


@pytest.mark.slow
def test_the_bundled_design_needs_no_scipy_and_no_ml_dtypes():
    code = ("import sys\nfrom bhtcli.cli.main import main\n"
            "sys.argv = ['bht', 'design', 'examples/A.npy', 'examples/B.npy', '--energy', '1']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass")
    loaded = _loaded(code)
    assert "numpy" in loaded
    assert not loaded & {"scipy", "ml_dtypes", "cvxpy", "matplotlib", "distributed"}

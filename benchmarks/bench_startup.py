"""Start-up cost of the command line against `python -c "import numpy"`, measured in the same
run (median wall time of several runs each; the target is <= 3x for -V, --help and
completion), and the bundled example's `bht design` wall time (target <= 0.5 s).

    .venv/bin/python benchmarks/bench_startup.py [--repeats 7]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BHT = [sys.executable, "-m", "bhtcli"]


def wall(cmd, env=None, repeats=7) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    r = parser.parse_args().repeats
    numpy = wall([sys.executable, "-c", "import numpy"], repeats=r)
    complete = dict(os.environ, _BHT_COMPLETE="bash_complete", COMP_WORDS="bht des", COMP_CWORD="1")
    rows = [("bht -V", wall(BHT + ["-V"], repeats=r)),
            ("bht --help", wall(BHT + ["--help"], repeats=r)),
            ("bht design --help", wall(BHT + ["design", "--help"], repeats=r)),
            ("completion (TAB)", wall(BHT, env=complete, repeats=r)),
            ("bht design examples/A.npy examples/B.npy -E 1",
             wall(BHT + ["design", "examples/A.npy", "examples/B.npy", "--energy", "1"], repeats=r))]
    print(f"python -c 'import numpy': {numpy:.3f} s (median of {r})")
    print(f"{'command':48s} {'seconds':>8s} {'x numpy':>8s}")
    for name, t in rows:
        print(f"{name:48s} {t:8.3f} {t / numpy:8.2f}")


if __name__ == "__main__":
    main()

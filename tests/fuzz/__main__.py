"""The hostile-file campaign: `make fuzz` (PYTHONPATH=tests python -m fuzz).

    python -m fuzz [--cases 10000] [--seed 35] [--jobs 2] [--cli-every 20] [--timeout 60]
                   [--memory-mb 1024] [--keep DIR] [--report FILE]

Exit status 0 when no case ended in a traceback, a hang, an out-of-memory exit, a crash or an
unexpected CLI exit; 1 otherwise (the failing cases are listed, and written under --keep).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .campaign import campaign, report_markdown


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cli-every", type=int, default=20,
                        help="every Nth case runs through the real bht command line (0: none)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it is a hang")
    parser.add_argument("--memory-mb", type=int, default=1024,
                        help="address space a forked loader may add to its parent's")
    parser.add_argument("--keep", help="write every failing case's files under this folder")
    parser.add_argument("--report", help="also write the report (markdown) to this file")
    args = parser.parse_args(argv)
    start = time.monotonic()

    def progress(done):
        if done % 500 == 0:
            print(f"  {done:,}/{args.cases:,} cases, {time.monotonic() - start:.0f} s", file=sys.stderr)
    results = campaign(args.cases, args.seed, jobs=args.jobs, cli_every=args.cli_every,
                       timeout=args.timeout, memory=args.memory_mb << 20, progress=progress)
    wall = time.monotonic() - start
    command = "python -m fuzz " + " ".join(argv if argv is not None else sys.argv[1:])
    text, failures = report_markdown(results, command.strip(), wall)
    print(text)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            fh.write(text)
    if args.keep and failures:
        for case, verdict in failures:
            folder = os.path.join(args.keep, f"case-{verdict['index']}")
            from .run import write_case
            write_case(case, folder)
            with open(os.path.join(folder, "verdict.json"), "w") as fh:
                json.dump({"spec": case.spec, "entry": case.entry, "note": case.note, **verdict}, fh, indent=1)
            if case.stdin:
                with open(os.path.join(folder, "stdin.bin"), "wb") as fh:
                    fh.write(case.stdin)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

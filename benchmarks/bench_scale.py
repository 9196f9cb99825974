"""Benchmark: `bht design` at vocabulary scale, wall time and peak memory.

Run:  .venv/bin/python benchmarks/bench_scale.py                 (30k x 384 and 50k x 1,024)
      .venv/bin/python benchmarks/bench_scale.py --sizes 50000x1024 --dtypes float32
      .venv/bin/python benchmarks/bench_scale.py --sizes 150000x4096 --dtypes float32
      .venv/bin/python benchmarks/bench_scale.py --sizes 150000x4096 --dtypes float64   (alone)
      .venv/bin/python benchmarks/bench_scale.py --sizes 50000x1024 --dtypes float32 --paths
                       (one design, a 4-budget curve and --queries, in pass-times, in one run)

For each size the two matrices are written to disk under a temporary folder (deleted after)
as float32 ``.safetensors`` files (``--format npy`` for .npy), the way a checkpoint holds an
output layer, block by block so that the benchmark itself never holds them in memory:

- A: rows g_i * s_i / sqrt(d) with g_i ~ N(0, I_d) and log s_i ~ N(0, 0.25^2), i.e. row norms
  around 1 (0.6 .. 1.6), like the rows of an LM head or a tied embedding;
- B = A + 0.01 * N(0, 1/d) per entry (row norms of A - B ~ 0.01: the size of an int8
  per-row round-trip's error on such rows).

Each run is ``bht design A B --energy E --json [--dtype T] [--starts S]`` in a child process,
started through a small Python wrapper that waits for it and reports
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (peak resident set, like /usr/bin/time -v;
it counts the pages of the memory-mapped files that were touched) and, sampled every 0.1 s
from /proc, the peak anonymous memory (RssAnon: the memory bht allocated itself, which
cannot be dropped the way file pages can).

The table has one row per size, dtype and searched configuration: wall time, passes over A
and B (``solver.passes``), the pass-time (one forward product of the stacked 2n x d matrix with a d x 32 block plus the
backward one, timed in a separate process on the same files before the runs: the definition
``solver.pass_seconds`` had until the runs timed their own first passes, kept so that the
ratios compare with earlier measurements), the run's own ``solver.pass_seconds`` (its first
forward and backward product, timed as they ran), wall over pass-time (the cost in
pass-times), H², and the H² of a 128-start run
(``--starts 128``: a fixed number of starts runs the full multistart search, the method before
the sketched search became the default at this size) on the same pair as the quality reference.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BHT = ROOT / ".venv" / "bin" / "bht"
# the console script of this checkout's venv, else this interpreter running the package
BHT_CMD = [str(BHT)] if BHT.exists() else [sys.executable, "-m", "bhtcli"]
ROWS = 8192

# Runs `bht ...` (argv[1:]), samples RssAnon of the child, prints JSON on the last line.
# The child writes to files, not pipes: its JSON (the query has d numbers) can exceed a pipe's
# buffer, and a child blocked on a full pipe would never exit while the wrapper polls.
WRAPPER = r"""
import json, resource, subprocess, sys, tempfile, time
out_f, err_f = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
t0 = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=out_f, stderr=err_f, text=True)
peak_anon = 0
while child.poll() is None:
    try:
        for line in open(f"/proc/{child.pid}/status"):
            if line.startswith("RssAnon:"):
                peak_anon = max(peak_anon, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.1)
wall = time.perf_counter() - t0
out_f.seek(0); err_f.seek(0)
out, err = out_f.read(), err_f.read()
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": child.returncode, "wall": wall, "maxrss_kib": usage.ru_maxrss,
                  "peak_anon_kib": peak_anon, "user": usage.ru_utime, "sys": usage.ru_stime,
                  "stdout": out, "stderr": err[-2000:]}))
"""


def write_pair(folder: Path, n: int, d: int, fmt: str, seed: int = 0):
    """A and B as float32 files (see the module docstring), written ROWS rows at a time."""
    rng = np.random.default_rng(seed)
    paths = [folder / f"{name}.{fmt}" for name in ("A", "B")]
    sinks = [_open_sink(p, n, d, fmt) for p in paths]
    for s in range(0, n, ROWS):
        m = min(ROWS, n - s)
        scale = np.exp(0.25 * rng.standard_normal((m, 1))) / np.sqrt(d)
        a = (rng.standard_normal((m, d)) * scale).astype(np.float32)
        b = (a + 0.01 / np.sqrt(d) * rng.standard_normal((m, d))).astype(np.float32)
        for sink, block in zip(sinks, (a, b)):
            sink(s, block)
    for sink in sinks:
        sink(None, None)
    return [str(p) for p in paths]


def _open_sink(path: Path, n: int, d: int, fmt: str):
    if fmt == "npy":
        arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))

        def sink(start, block):
            if block is None:
                arr.flush()
            else:
                arr[start:start + block.shape[0]] = block
        return sink
    # safetensors: 8-byte length, JSON header padded to 8 bytes, then the raw little-endian rows
    header = json.dumps({"weight": {"dtype": "F32", "shape": [n, d],
                                    "data_offsets": [0, 4 * n * d]}}).encode()
    header += b" " * (-len(header) % 8)
    fh = open(path, "wb")
    fh.write(struct.pack("<Q", len(header)) + header)

    def sink(start, block):
        if block is None:
            fh.close()
        else:
            fh.write(block.astype("<f4").tobytes())
    return sink


def supports_dtype() -> bool:
    helptext = subprocess.run([*BHT_CMD, "design", "--help"], capture_output=True, text=True).stdout
    return "--dtype" in helptext


PASS_TIME = r"""
import sys
from bhtcli.io.load import load_pair
from bhtcli.models import softmax
A, B = load_pair(sys.argv[1], sys.argv[2], dtype=None)
pair = softmax.SoftmaxPair(A, B, dtype=sys.argv[3])
measure = getattr(softmax, "measure_pass_seconds", softmax.pass_seconds)
times = []
for _ in range(3):              # each call times once above 0.5 s: three calls, the fastest
    pair._pass_seconds = None
    times.append(measure(pair))
print(min(times))
"""


def reference_pass_seconds(a: str, b: str, dtype: str | None) -> float:
    """The pass-time of the pair in a process of its own: one forward product with a d x 32
    block plus the backward one, the fastest of 3 (outside every timed run)."""
    python = ROOT / ".venv" / "bin" / "python"
    python = str(python) if BHT.exists() and python.exists() else sys.executable
    out = subprocess.run([python, "-c", PASS_TIME, a, b, dtype or "float64"], capture_output=True,
                         text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def run_design(a: str, b: str, energy: float, dtype: str | None, starts: int | None,
               extra=()) -> dict:
    cmd = [*BHT_CMD, "design", a, b, "--energy", str(energy), "--json", *extra]
    if dtype:
        cmd += ["--dtype", dtype]
    if starts:
        cmd += ["--starts", str(starts)]
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], capture_output=True, text=True)
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    info["command"] = "bht " + " ".join(cmd[len(BHT_CMD):])
    return info


def paths_table(a: str, b: str, label: str, energy: float, dtype: str | None, tp: float) -> None:
    """One design at `energy`, the 4-budget curve E/4, E/2, 3E/4, E, `--queries N` (N: 1.3x
    the single design's predicted count, so that the budget found is below E) and, the curve's
    peer, one design per budget of the curve, each a whole `bht design` process; wall time in
    pass-times and its ratio to the single design's."""
    budgets = [f"{energy * k / 4:g}" for k in (1, 2, 3, 4)]
    runs = [("design", energy, ()),
            ("curve", ",".join(budgets), ()),
            ("queries", energy, None),
            ("designs alone", budgets, ())]     # the peer of the curve: one run per budget
    base, costs = None, {}
    for name, e, extra in runs:
        if extra is None:
            extra = ("--queries", str(int(1.3 * base["samples"]["predicted"])))
        info = (run_design(a, b, e, dtype, None, extra) if isinstance(e, (int, float, str))
                else _separate_designs(a, b, e, dtype))
        print(info["command"], file=sys.stderr)
        if info["code"] != 0:
            print(f"| {label} | {name} | failed (exit {info['code']}) | | | | | | |", flush=True)
            print(info["stderr"], file=sys.stderr)
            return
        r = json.loads(info["stdout"])
        designs = r.get("designs", [r])
        own = designs[0]["solver"]["pass_seconds"]
        cost = info["wall"] / tp
        if base is None:
            base, base_cost = r, cost
        costs[name] = cost
        passes = designs[-1]["solver"]["passes"]
        # the searches' own share (a --queries result reports its last trial's search only)
        search = sum(d["solver"]["search_seconds"] or 0.0 for d in designs) / tp
        search_text = "" if name == "queries" else f"{search:.0f}"
        h2 = ", ".join(f"{d['hellinger_squared']:.4g}" for d in designs)
        if name == "queries":
            search = r["energy_search"]
            h2 += f" at E = {r['energy']:.6g} ({len(search['rungs'])} trials, {r['samples']['predicted']:,} queries)"
        print(f"| {label} | {name} | {info['wall']:.1f} | {tp:.3f} | {own:.3f} | {cost:.0f} | {cost / base_cost:.2f}x "
              f"| {search_text} | {passes} | {h2} |", flush=True)
    print(f"{label}: the curve costs {costs['curve'] / costs['designs alone']:.2f}x its budgets' separate "
          f"designs ({costs['curve'] / costs['design']:.2f}x the design at E = {energy:g})", flush=True)


def _separate_designs(a: str, b: str, energies, dtype: str | None) -> dict:
    """One `bht design` process per budget, as run_design reports one run: walls summed, the
    results gathered as a curve's `designs`."""
    runs = [run_design(a, b, e, dtype, None, ()) for e in energies]
    for info in runs:
        print(info["command"], file=sys.stderr)
    bad = [info for info in runs if info["code"] != 0]
    if bad:
        return bad[0]
    designs = [json.loads(info["stdout"]) for info in runs]
    return {"code": 0, "wall": sum(info["wall"] for info in runs), "stdout": json.dumps({"designs": designs}),
            "command": f"{len(runs)} separate runs", "stderr": ""}


HEADER = ("| n x d | dtype | run | wall s | passes | pass-time s | own pass_seconds | wall / pass-time | H² "
          "| H² of {ref} full starts | H² ratio | starts | peak anon GB |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="bht design at vocabulary scale")
    parser.add_argument("--sizes", default="30000x384,50000x1024",
                        help="comma-separated n x d (e.g. 150000x4096)")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--energy", type=float, default=10.0)
    parser.add_argument("--starts", type=int, default=None, help="default: bht's own (adaptive)")
    parser.add_argument("--search", action="append", default=None, metavar="OPTIONS",
                        help="extra `bht design` options of a run to time (repeatable, one run "
                             "each; e.g. --search '' --search '--search-space sketch'); "
                             "default: one run with bht's defaults")
    parser.add_argument("--reference-starts", type=int, default=128,
                        help="starts of the quality reference run (0: no reference)")
    parser.add_argument("--format", choices=("safetensors", "npy"), default="safetensors")
    parser.add_argument("--tmp", default=None, help="folder for the matrices (default: system temp)")
    parser.add_argument("--paths", action="store_true",
                        help="instead: one design, a 4-budget curve (E/4 .. E) and --queries, "
                             "each in pass-times and against the single design")
    args = parser.parse_args(argv)
    searches = args.search or [""]
    dtype_ok = supports_dtype()
    if not dtype_ok:
        print("note: this bht has no --dtype option; every run computes in float64 "
              "(the float32 rows are skipped)", file=sys.stderr)
    print(f"load average: {os.getloadavg()}", file=sys.stderr)
    if args.paths:
        print("| n x d, dtype | run | wall s | pass-time s | own pass_seconds | wall / pass-time "
              "| against one design | search pass-times | passes (last budget) | H² |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    else:
        print(HEADER.format(ref=args.reference_starts or "no"))
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes.split(","):
        n, d = (int(v) for v in size.lower().split("x"))
        folder = Path(tempfile.mkdtemp(prefix="bht-scale-", dir=args.tmp))
        try:
            t0 = time.perf_counter()
            a, b = write_pair(folder, n, d, args.format)
            print(f"{n} x {d}: wrote 2 x {4 * n * d / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)
            for dtype in args.dtypes.split(","):
                if dtype == "float32" and not dtype_ok:
                    continue
                dt = dtype if dtype_ok else None
                tp = reference_pass_seconds(a, b, dt)
                print(f"pass-time {tp:.4f} s (d x 32 forward and back, its own process)",
                      file=sys.stderr)
                if args.paths:
                    paths_table(a, b, f"{n:,} x {d:,}, {dtype}", args.energy, dt, tp)
                    continue
                ref_h2 = None
                if args.reference_starts:
                    ref = run_design(a, b, args.energy, dt, args.reference_starts)
                    print(ref["command"], file=sys.stderr)
                    if ref["code"] == 0:
                        ref_h2 = json.loads(ref["stdout"])["hellinger_squared"]
                for options in searches:
                    info = run_design(a, b, args.energy, dt, args.starts, options.split())
                    print(info["command"], file=sys.stderr)
                    label = options or "default"
                    if info["code"] != 0:
                        print(f"| {n:,} x {d:,} | {dtype} | {label} | failed (exit {info['code']}) "
                              "| | | | | | | | |", flush=True)
                        print(info["stderr"], file=sys.stderr)
                        continue
                    r = json.loads(info["stdout"])
                    v = r["solver"]
                    h2 = r["hellinger_squared"]
                    print(f"| {n:,} x {d:,} | {dtype} | {label} | {info['wall']:.1f} | {v['passes']} "
                          f"| {tp:.3f} | {_fmt(v.get('pass_seconds'), '.3f')} "
                          f"| {info['wall'] / tp:.0f} "
                          f"| {h2:.7f} | {_fmt(ref_h2, '.7f')} "
                          f"| {_fmt(h2 / ref_h2 if ref_h2 else None, '.4f')} | {v['starts']} "
                          f"| {info['peak_anon_kib'] / 2**20:.2f} |", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"load average: {os.getloadavg()}", file=sys.stderr)


def _fmt(value, spec: str) -> str:
    return "" if value is None else format(value, spec)


if __name__ == "__main__":
    main()

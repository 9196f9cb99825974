"""Benchmark: a 200-task `bht sweep` on this machine's local Dask cluster, 1 worker vs 2 workers.

Run:  .venv/bin/python benchmarks/bench_sweep.py
Zoo: 10 checkpoints of a 500 x 32 output layer (a random walk: W_k+1 = W_k + 0.05 N(0, 1/4)),
the 40 first of the 45 pairs, each at E = 0.25, 0.5, 1, 2, 4: 200 tasks of design (32 starts).
Every worker is one single-threaded process with BLAS pinned to one thread (the local cluster's
settings), so the two runs differ only in the number of workers. tasks/s counts the time from
the first task handed to Dask to the last row written; start-up (cluster, imports) is shown apart.
"task (s)" is the mean time of one design inside its worker: when it grows with 2 workers, the
two cores were not free (other processes on the machine).

The same 200 designs are then run without Dask by 1 and 2 plain processes (multiprocessing,
BLAS pinned likewise): the speed-up the machine allowed at that moment, to compare with.
"""
import csv
import json
import multiprocessing
import os
import tempfile
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"            # for the plain processes (the Dask workers set it themselves)

import numpy as np  # noqa: E402

from bhtcli.api import sweep  # noqa: E402


def write_zoo(folder: str, checkpoints: int = 10, n: int = 500, d: int = 32, pairs: int = 40) -> str:
    rng = np.random.default_rng(0)
    W = 0.5 * rng.standard_normal((n, d))
    for k in range(checkpoints):
        np.save(os.path.join(folder, f"ckpt{k}.npy"), W)
        W = W + 0.05 * rng.standard_normal((n, d))
    chosen = [(i, j) for i in range(checkpoints) for j in range(i + 1, checkpoints)][:pairs]
    lines = ["name,a,b,energy"] + [f"{i}-{j}@{e},ckpt{i}.npy,ckpt{j}.npy,{e}"
                                   for i, j in chosen for e in (0.25, 0.5, 1, 2, 4)]
    path = os.path.join(folder, "manifest.csv")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def plain_design(task):
    from bhtcli.api import design
    a, b, energy = task
    return design(np.load(a, mmap_mode="r"), np.load(b, mmap_mode="r"), energy).hellinger_squared


def main():
    print(f"load before: {os.getloadavg()[0]:.2f} (1-minute average, {os.cpu_count()} CPUs)\n")
    print("| workers | tasks | start-up (s) | running (s) | tasks/s | task (s) | total (s) |")
    print("|---|---|---|---|---|---|---|")
    rates, plain = {}, {}
    with tempfile.TemporaryDirectory() as folder:
        manifest = write_zoo(folder)
        for workers in (1, 2):
            out = os.path.join(folder, f"results-{workers}.jsonl")
            t = time.perf_counter()
            r = sweep(manifest, out, workers=workers)
            total = time.perf_counter() - t
            assert r.ok == r.tasks == 200, r
            rates[workers] = r.tasks_per_second
            with open(out) as fh:
                task = np.mean([json.loads(line)["seconds"] for line in fh])
            print(f"| {workers} | {r.ran} | {r.startup_seconds:.1f} | {r.run_seconds:.1f} | "
                  f"{r.tasks_per_second:.2f} | {task:.3f} | {total:.1f} |", flush=True)
        print(f"\nDask, 2 workers / 1 worker: {rates[2] / rates[1]:.2f}x")
        with open(manifest) as fh:
            tasks = [(os.path.join(folder, row["a"]), os.path.join(folder, row["b"]), float(row["energy"]))
                     for row in csv.DictReader(fh)]
        for procs in (1, 2):
            with multiprocessing.get_context("spawn").Pool(procs) as pool:
                pool.map(plain_design, tasks[:procs])            # imports, outside the timing
                t = time.perf_counter()
                pool.map(plain_design, tasks, chunksize=1)
                plain[procs] = len(tasks) / (time.perf_counter() - t)
        print(f"plain processes, no Dask: {plain[1]:.2f} tasks/s (1), {plain[2]:.2f} tasks/s (2), "
              f"{plain[2] / plain[1]:.2f}x")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Running cases: the loaders in forked children (a time and an address-space limit each), and a
share of the cases through the real `bht` command line; every outcome classified.

Outcomes (what the report counts):
    ok          read without complaint (the bytes made a valid input), exit 0
    refused     one InputError (library) / exactly one `Error:` line and exit 2 (CLI)
    traceback   any other exception, or a Python traceback on stderr
    memory      MemoryError, or exit 1 "out of memory"
    hang        still running at the time limit (killed)
    crash       killed by a signal (the address-space limit, a segfault) or no verdict
    other       the CLI exited otherwise (exit 1 without "out of memory", several lines, a
                partial output file left behind)
"""
from __future__ import annotations

import io
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

BAD = ("traceback", "memory", "hang", "crash", "other")
GOOD_B = "good.npy"                  # the partner matrix of `bound`/`design` (4 x 3)


def _address_space() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def write_case(case, folder: str) -> None:
    for rel, data in case.files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)


def _call(case) -> None:
    """What the child runs: the loader of `case.entry` on `case.spec` (cwd: the case folder)."""
    import numpy as np
    import bhtcli
    import bhtcli.api
    from bhtcli.io.checkpoint import checkpoint_softcap
    if case.entry == "stdin":
        bhtcli.load_matrix("-", stdin=io.BytesIO(case.stdin))
    elif case.entry == "stdin_tensors":
        bhtcli.api.list_tensors("-", stdin=io.BytesIO(case.stdin))
    elif case.entry == "tensors":
        bhtcli.api.list_tensors(case.spec)
    elif case.entry == "softcap":
        checkpoint_softcap(case.spec)
        bhtcli.load_matrix(case.spec, dtype=None)
    elif case.entry == "query":
        from bhtcli.io.load import load_query
        load_query(case.spec, 3)
    else:
        from bhtcli.io.shapes import header_shape
        shape = header_shape(case.spec)      # never raises; a shape it gives is the load's
        arr = bhtcli.load_matrix(case.spec, dtype=np.float32 if len(case.spec) % 2 else np.float64)
        float(np.asarray(arr).sum())         # touch every value of a memory map
        if shape is not None and shape != arr.shape:
            raise AssertionError(f"headers say {shape}, the load gives {arr.shape}")


def _child(case, folder: str, memory: int, wfd: int) -> None:
    verdict = {"status": "crash"}
    try:
        os.chdir(folder)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        limit = _address_space() + memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        from bhtcli.errors import InputError
        try:
            _call(case)
            verdict = {"status": "ok"}
        except InputError as exc:
            text = str(exc)
            verdict = {"status": "refused" if "\n" not in text and text else "other",
                       "message": text[:300]}
        except MemoryError as exc:
            verdict = {"status": "memory", "type": "MemoryError", "message": str(exc)[:300]}
        except BaseException as exc:       # noqa: BLE001 - classifying every escape is the point
            frames = traceback.extract_tb(exc.__traceback__)[-3:]
            verdict = {"status": "traceback", "type": type(exc).__name__, "message": str(exc)[:300],
                       "where": [f"{os.path.relpath(f.filename)}:{f.lineno} {f.name}" for f in frames]}
    finally:
        try:
            os.write(wfd, json.dumps(verdict).encode()[:60000])
        finally:
            os._exit(0)


class _Forked:
    def __init__(self, case, folder, memory, timeout):
        self.case, self.folder, self.deadline = case, folder, time.monotonic() + timeout
        rfd, wfd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(rfd)
            _child(case, folder, memory, wfd)
        os.close(wfd)
        self.rfd, self.chunks = rfd, []

    def poll(self):
        """The verdict once the child is done, else None (killed at the deadline: hang)."""
        while select.select([self.rfd], [], [], 0)[0]:
            chunk = os.read(self.rfd, 65536)
            if not chunk:
                break
            self.chunks.append(chunk)
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            if time.monotonic() > self.deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                os.close(self.rfd)
                return {"status": "hang"}
            return None
        while True:
            chunk = os.read(self.rfd, 65536)
            if not chunk:
                break
            self.chunks.append(chunk)
        os.close(self.rfd)
        try:
            return json.loads(b"".join(self.chunks))
        except ValueError:
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            return {"status": "crash", "message": f"signal {sig}" if sig else f"status {status}"}


def cli_args(case, rng) -> list:
    """The command line a CLI case runs (the reader's spec in the place of A or SRC)."""
    spec = case.spec
    choices = [["bound", spec, GOOD_B, "--energy", "1", "--json"],
               ["design", spec, GOOD_B, "-E", "1", "--json", "--starts", "2"],
               ["quantize", spec, "--to", "q8_0", "--out", "q.npy"]]
    if case.entry in ("tensors", "stdin_tensors") or case.reader in ("gguf", "safetensors", "folder",
                                                                     "npz", "npy", "sniffed", "stdin"):
        choices.append(["tensors", spec.split(":")[0] if case.reader != "folder" else "m"])
    return rng.choice(choices)


class _Cli:
    def __init__(self, case, folder, memory, timeout, args):
        self.case, self.folder, self.deadline, self.args = case, folder, time.monotonic() + timeout, args
        import numpy as np
        np.save(os.path.join(folder, GOOD_B), np.arange(12.0).reshape(4, 3) / 7)
        bht = os.path.join(os.path.dirname(sys.executable), "bht")
        command = [bht] if os.path.exists(bht) else [sys.executable, "-m", "bhtcli"]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NO_COLOR="1")

        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(command + args, cwd=folder, env=env, preexec_fn=limit,
                                     stdin=subprocess.PIPE if case.entry.startswith("stdin") else subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.err)
        if case.stdin or case.entry.startswith("stdin"):
            try:
                self.proc.stdin.write(case.stdin)
            except BrokenPipeError:
                pass
            self.proc.stdin.close()

    def poll(self):
        code = self.proc.poll()
        if code is None:
            if time.monotonic() > self.deadline:
                self.proc.kill()
                self.proc.wait()
                return {"status": "hang", "cli": self.args}
            return None
        self.err.seek(0)
        err = self.err.read().decode("utf-8", "replace")
        lines = [line for line in err.splitlines() if not line.startswith("Note:")]
        verdict = {"cli": self.args, "code": code, "message": err[-600:]}
        if "Traceback (most recent call last)" in err:
            verdict["status"] = "traceback"
        elif code == 0:
            verdict["status"] = "ok"
        elif code == 2 and len(lines) == 1 and lines[0].startswith("Error: "):
            verdict["status"] = "refused"
        elif code == 1 and "out of memory" in err:
            verdict["status"] = "memory"
        elif code < 0:
            verdict["status"] = "crash"
        else:
            verdict["status"] = "other"
        if code != 0 and os.path.exists(os.path.join(self.folder, "q.npy")):
            verdict["status"], verdict["message"] = "other", "a failed run left q.npy behind"
        return verdict


def run_cases(cases, jobs: int = 2, timeout: float = 60.0, memory: int = 1 << 30,
              cli_memory: int = 3 << 30, cli_every: int = 0, seed: int = 0, progress=None):
    """Run `cases` (a list of Case), `jobs` at a time; every `cli_every`-th case (0: none)
    through the real command line. Returns a list of (case, verdict)."""
    import random
    root = tempfile.mkdtemp(prefix="bht-fuzz-")
    results, pending, running = [], list(enumerate(cases)), []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                k, case = pending.pop(0)
                folder = os.path.join(root, str(k))
                os.makedirs(folder)
                write_case(case, folder)
                pick = random.Random(f"{seed}:cli:{k}")
                if cli_every and pick.randrange(cli_every) == 0:
                    args = cli_args(case, pick)
                    running.append((k, case, folder, _Cli(case, folder, cli_memory, timeout, args)))
                else:
                    running.append((k, case, folder, _Forked(case, folder, memory, timeout)))
            still = []
            for k, case, folder, handle in running:
                verdict = handle.poll()
                if verdict is None:
                    still.append((k, case, folder, handle))
                    continue
                verdict["index"] = k
                results.append((case, verdict))
                shutil.rmtree(folder, ignore_errors=True)
                if progress:
                    progress(len(results))
            if len(still) == len(running):
                time.sleep(0.002)
            running = still
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results.sort(key=lambda cv: cv[1]["index"])
    return results

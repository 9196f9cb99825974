"""A campaign: cases made from one seed, run, and counted per reader."""
from __future__ import annotations

from collections import Counter

from .cases import READERS, make_case
from .run import BAD, run_cases

COLUMNS = ("ok", "refused", "traceback", "memory", "hang", "crash", "other")


def warm() -> None:
    """Import every module a loader may need before forking, so each child starts warm."""
    import gguf.constants, gguf.quants  # noqa: F401,E401
    import ml_dtypes, safetensors, safetensors.numpy  # noqa: F401,E401
    import bhtcli, bhtcli.api, bhtcli.io.load, bhtcli.io.checkpoint  # noqa: F401,E401
    import bhtcli.io.gguf_file, bhtcli.io.hf_folder, bhtcli.commands.tensors  # noqa: F401,E401
    bhtcli.load_matrix                                       # resolve the lazy public names
    bhtcli.api.list_tensors


def campaign(cases: int, seed: int, jobs: int = 2, cli_every: int = 20, timeout: float = 60.0,
             memory: int = 1 << 30, progress=None):
    """(case, verdict) for cases 0 .. cases-1 of `seed`."""
    warm()
    made = [make_case(seed, k) for k in range(cases)]
    return run_cases(made, jobs=jobs, timeout=timeout, memory=memory, cli_every=cli_every,
                     seed=seed, progress=progress)


def tally(results) -> dict:
    """{reader: Counter of outcomes} plus the CLI's share under the key 'cli'."""
    table = {reader: Counter() for reader in READERS}
    for case, verdict in results:
        table[case.reader][verdict["status"]] += 1
        table[case.reader]["cli" if "cli" in verdict else "in-process"] += 1
    return table


def failures_of(results):
    return [(case, verdict) for case, verdict in results if verdict["status"] in BAD]


def report_markdown(results, command: str, wall: float):
    """(the report as markdown, the failing (case, verdict) pairs)."""
    table = tally(results)
    lines = [f"`{command}`: {len(results):,} cases in {wall:,.0f} s", "",
             "| reader | cases | in-process | CLI | " + " | ".join(COLUMNS) + " |",
             "|---|" + "---:|" * (3 + len(COLUMNS))]
    total = Counter()
    for reader in READERS:
        row = table[reader]
        n = row["in-process"] + row["cli"]
        total.update(row)
        total["cases"] += n
        lines.append(f"| {reader} | {n:,} | {row['in-process']:,} | {row['cli']:,} | "
                     + " | ".join(f"{row[c]:,}" for c in COLUMNS) + " |")
    lines.append(f"| **all** | {total['cases']:,} | {total['in-process']:,} | {total['cli']:,} | "
                 + " | ".join(f"{total[c]:,}" for c in COLUMNS) + " |")
    failures = failures_of(results)
    if failures:
        lines += ["", f"{len(failures)} failing cases (first 30):", ""]
        for case, verdict in failures[:30]:
            where = "; ".join(verdict.get("where", []))
            lines.append(f"- case {verdict['index']} ({case.reader}, {case.entry}, {case.note}, "
                         f"spec {case.spec!r}{', cli ' + ' '.join(verdict['cli']) if 'cli' in verdict else ''}): "
                         f"{verdict['status']} {verdict.get('type', '')} "
                         f"{verdict.get('message', '')[:200]!r} {where}")
    return "\n".join(lines) + "\n", failures

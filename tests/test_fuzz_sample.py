"""A seeded sample of the hostile-file campaign (`make fuzz` runs 10,000 cases): 495 cases of
every reader through the loaders in forked children, a few through the real command line; and
the harness itself telling a traceback, a hang and an exhausted memory apart."""
import time

import pytest

from fuzz.campaign import COLUMNS, campaign, failures_of, report_markdown, tally
from fuzz.cases import READERS, Case, make_case
from fuzz.run import run_cases

SAMPLE = 495          # 55 per reader
SEED = 2035


@pytest.mark.slow
def test_seeded_sample_has_no_traceback_hang_or_memory_exit():
    results = campaign(SAMPLE, SEED, jobs=2, cli_every=90, timeout=120)
    text, failures = report_markdown(results, f"sample of {SAMPLE}", 0.0)
    assert not failures, text
    table = tally(results)
    for reader in READERS:          # every reader saw valid inputs and refused damaged ones
        row = table[reader]
        assert row["ok"] > 0 and row["refused"] > 0, (reader, dict(row))
    assert sum(table[r]["cli"] for r in READERS) >= 3, text
    assert sum(table[r][c] for r in READERS for c in COLUMNS) == SAMPLE


def test_cases_are_reproducible_from_the_seed():
    for k in (0, 7, 123):
        a, b = make_case(SEED, k), make_case(SEED, k)
        assert (a.files, a.spec, a.entry, a.stdin) == (b.files, b.spec, b.entry, b.stdin)
    assert make_case(SEED, 5).files != make_case(SEED + 1, 5).files


def _json_case():
    return Case("json", {"x.json": b"[[1, 2], [3, 4]]"}, "x.json")


def test_harness_reports_a_traceback(monkeypatch):
    def broken(data, label):
        raise KeyError("planted")
    monkeypatch.setattr("bhtcli.io.load._parse_json", broken)
    (case, verdict), = run_cases([_json_case()], jobs=1, timeout=120)
    assert verdict["status"] == "traceback" and verdict["type"] == "KeyError"
    assert failures_of([(case, verdict)])


@pytest.mark.slow
def test_harness_reports_a_hang(monkeypatch):
    monkeypatch.setattr("bhtcli.io.load._parse_json", lambda data, label: time.sleep(600))
    (_, verdict), = run_cases([_json_case()], jobs=1, timeout=2)
    assert verdict["status"] == "hang"


@pytest.mark.parametrize("size", [1 << 31])
def test_harness_reports_exhausted_memory(monkeypatch, size):
    monkeypatch.setattr("bhtcli.io.load._parse_json", lambda data, label: bytearray(size))
    (_, verdict), = run_cases([_json_case()], jobs=1, timeout=120, memory=256 << 20)
    assert verdict["status"] == "memory"

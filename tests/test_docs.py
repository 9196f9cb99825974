"""docs/cli.md and docs/json.md are generated (python -m bhtcli.cli.docs, make docs) and must be
current; the declared JSON schema must match what the commands really write, both ways."""
import importlib
import json
import os

import numpy as np
import pytest

from bhtcli.cli.docs import stale
from bhtcli.cli.main import main
from bhtcli.schema import SCHEMA, accepts, key_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")


def test_generated_docs_are_current():
    assert stale() == [], "run `make docs` (python -m bhtcli.cli.docs) and commit docs/"


def run_json(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([*args, "--json"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, 1), out
    return json.loads(out)


def _sweep(capsys, tmp_path):
    driver = importlib.import_module("bhtcli.sweep.driver")   # bhtcli.sweep is the function
    from bhtcli.sweep.task import run_task
    tmp_path.mkdir()
    np.save(tmp_path / "A.npy", np.load(os.path.join(EX, "A.npy")))
    np.save(tmp_path / "B.npy", np.load(os.path.join(EX, "B.npy")))
    manifest = tmp_path / "m.csv"
    np.save(tmp_path / "short.npy", np.zeros((3, 2)))       # fails at run time: shapes differ
    manifest.write_text("a,b,energy\nA.npy,B.npy,1\nA.npy,short.npy,1\n")

    def engine(tasks, on_done, **kwargs):
        for t in tasks:
            on_done(t, run_task(t, kwargs["design"]))
        return {"engine": "test", "workers": 1, "startup_seconds": 0.0, "run_seconds": 0.0}
    original = driver.sweep
    driver.sweep = lambda *a, **k: original(*a, engine=engine, **k)
    try:
        return run_json(capsys, "sweep", str(manifest), "--out", str(tmp_path / "r.jsonl"))
    finally:
        driver.sweep = original




def _tiny_builds(tmp_path):
    """Two tiny llama GGUF builds and a prompt file for `bht prompts`."""
    from tiny_llama import write_tiny
    a, b, f = tmp_path / "tA.gguf", tmp_path / "tB.gguf", tmp_path / "prompts.txt"
    write_tiny(a, seed=0)
    write_tiny(b, seed=1)
    f.write_text("Beautiful is better than\nErrors should never pass\nSparse is better than\n")
    return str(a), str(b), str(f)


def _softcapped_gguf(tmp_path):
    import gguf
    path = str(tmp_path / "g.gguf")
    writer = gguf.GGUFWriter(path, "gemma2")
    writer.add_float32("gemma2.final_logit_softcapping", 30.0)
    writer.add_tensor("token_embd.weight", np.load(os.path.join(EX, "A.npy")).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.slow
def test_schema_matches_real_outputs(capsys, tmp_path):
    A, B, LA, LB = (os.path.join(EX, f) for f in ("A.npy", "B.npy", "leverage_A.npy", "leverage_B.npy"))
    C = os.path.join(EX, "C.npy")
    lev = ["--model", "leverage", "-E", "4", "--floor", "1"]
    rng = np.random.default_rng(0)
    H, V, names = str(tmp_path / "H.npy"), str(tmp_path / "V.npy"), str(tmp_path / "names.txt")
    np.save(H, 0.3 * rng.standard_normal((20, 8)))
    np.save(V, rng.standard_normal((8, 2)))
    (tmp_path / "names.txt").write_text("".join(f"prompt {i}\n" for i in range(20)))
    g = _softcapped_gguf(tmp_path)
    g8 = str(tmp_path / "g8.gguf")
    run_json(capsys, "quantize", g, "--to", "q8_0", "--out", g8)
    tiny = _tiny_builds(tmp_path)
    tiny_answers = str(tmp_path / "tokens.txt")
    (tmp_path / "tokens.txt").write_text("300\n301\n302\n")
    runs = {
        "design": [["design", A, B, "-E", "1"], ["design", LA, LB, *lev],
                   ["design", A, A, "--link-b", "taylor:4", "-E", "0.5"],
                   ["design", A, B, "--candidates", H, "--names", names, "--top", "3"],
                   ["design", A, B, "--subspace", V, "-E", "1"],
                   ["design", A, B, "-E", "2", "--queries", "20"],
                   ["design", A, B, C, "-E", "1", "--schedule"],
                   ["design", A, B, C, "-E", "1", "--candidates", H, "--top", "2", "--schedule"],
                   ["design", A, B, C, "-E", "1", "--links", "exp,softcap:5,exp"]],
        "design --energy E1,E2,...": [["design", A, B, "-E", "0.5,1,2"], ["design", LA, LB, "--model", "leverage",
                                                                           "-E", "2,4", "--floor", "1"]],
        "rank": [["rank", A, B, H, "-E", "1", "--top", "2"], ["rank", A, B, C, H, "-E", "1", "--top", "2"],
                 ["rank", A, B, C, H, "-E", "1", "--top", "2", "--links", "exp,softcap:5,exp"]],
        "bound": [["bound", A, B, "-E", "1"], ["bound", LA, LB, *lev], ["bound", A, B, C, "-E", "1"],
                  ["bound", A, B, C, "-E", "1", "--links", "exp,softcap:5,exp"],
                  ["bound", A, B, "-E", "1", "--certificate", "exact"]],
        "decide": [["decide", A, B, "-x", os.path.join(EX, "x.npy"), os.path.join(EX, "answers.txt")],
                   ["decide", A, B, C, "-x", os.path.join(EX, "x.npy"), os.path.join(EX, "answers.txt")],
                   ["decide", *tiny[:2], tiny_answers, "--prompt", "Beautiful is better than"]],
        "simulate": [["simulate", A, B, "-E", "1", "--trials", "200", "--plot", str(tmp_path / "p.png")],
                     ["simulate", LA, LB, *lev, "--trials", "200", "--policy", "sprt"],
                     ["simulate", A, B, C, "-E", "1", "--trials", "200", "--schedule"],
                     ["simulate", A, B, C, "-E", "1", "--trials", "200", "--policy", "fixed",
                      "--links", "exp,softcap:5,exp"]],
        "shift": [["shift", os.path.join(EX, "shift_A.npy"), "--data", os.path.join(EX, "shift_data.npz"),
                   "--lr", "10", "--out", str(tmp_path / "B.npy"), "-E", "1"]],
        "tensors": [["tensors", g], ["tensors", os.path.join(EX, "shift_data.npz")], ["tensors", g, g8]],
        "quantize": [["quantize", A, "--to", "bf16", "--out", str(tmp_path / "A_bf16.npy")],
                     ["quantize", g, "--to", "q4_0", "--out", str(tmp_path / "g4.gguf")]],
        "prompts": [["prompts", *tiny[:2], "--prompts", tiny[2]],
                    ["prompts", *tiny[:2], "--prompts", tiny[2], "--temperature", "0",
                     "--min-margin", "1"],
                    ["prompts", *tiny[:2], "--prompts", tiny[2], "--search", "80"]],
        "sample --prompt": [["sample", tiny[0], "--prompt", "Beautiful is better than", "-n", "5"]],
    }
    seen = {command: {} for command in SCHEMA}
    for command, invocations in runs.items():
        for args in invocations:
            seen[command].update({k: v for k, v in key_paths(run_json(capsys, *args)).items()
                                  if v is not None or k not in seen[command]})
    seen["sweep"] = key_paths(_sweep(capsys, tmp_path / "sweep"))
    for command, (_, declared) in SCHEMA.items():
        produced = seen[command]
        undeclared = sorted(set(produced) - set(declared))
        assert not undeclared, f"{command}: keys missing from bhtcli/schema.py: {undeclared}"
        never = sorted(set(declared) - set(produced))
        assert not never, f"{command}: declared keys no run produced: {never}"
        wrong = {k: v for k, v in produced.items() if not accepts(declared[k][0], v)}
        assert not wrong, f"{command}: values of another type than declared: {wrong}"


def test_every_command_has_a_schema_and_the_header_first(capsys):
    from bhtcli.cli.main import cli
    from bhtcli.results import HEADER
    # sample writes JSON with --prompt only; design has two shapes (one budget, a budget curve)
    assert set(cli.commands) == {command.split()[0] for command in SCHEMA}
    r = run_json(capsys, "bound", os.path.join(EX, "A.npy"), os.path.join(EX, "B.npy"), "-E", "1")
    assert tuple(r)[:5] == HEADER


def test_schema_declares_every_field_of_the_result_classes():
    """Each result dataclass's JSON fields are the schema's top-level keys for its command (the
    header aside), so a field added to a result without a schema line fails here."""
    import dataclasses

    import bhtcli.results as results
    for command, (classes, declared) in SCHEMA.items():
        top = {k for k in declared if "." not in k and "[]" not in k}
        for name in classes:
            cls = getattr(results, name)
            if not dataclasses.is_dataclass(cls) or name == "BudgetCurveResult":
                continue
            fields = {f.name for f in dataclasses.fields(cls) if f.metadata.get("json", True)}
            assert fields <= top, f"{command}: {name} fields not in the schema: {sorted(fields - top)}"
    curve = SCHEMA["design --energy E1,E2,..."][1]
    assert {k for k in curve if "." not in k and "[]" not in k} == {
        "model", "n", "d", "target_error", "floor", "energies", "designs", "seconds", "run"}


def test_every_cited_maths_section_exists():
    """Code and docs cite docs/maths.md by section ("docs/maths.md §4.9", "maths.md §2 and §5"):
    every number so cited is a heading of docs/maths.md, so a renumbering cannot leave a
    citation pointing at the wrong derivation."""
    import re
    import subprocess
    from pathlib import Path
    root = Path(ROOT)
    maths = (root / "docs" / "maths.md").read_text()
    headings = set(re.findall(r"^##+ (\d+(?:\.\d+)?)\.? ", maths, flags=re.M))
    files = subprocess.run(["git", "ls-files", "*.py", "*.md"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.split()
    cited = re.compile(r"maths(?:\.md)?\]?\(?[\w./]*\)?,? *((?:§[\d.]+(?:[–-][\d.]+)?(?:,? (?:and )?)?)+)")
    bad = []
    for name in files:
        if name == "CHANGELOG.md" or name.startswith("docs/drafts/"):
            continue   # history cites the old numbers on purpose
        text = (root / name).read_text(errors="replace")
        for m in cited.finditer(text):
            for num in re.findall(r"§?(\d+(?:\.\d+)?)", m.group(1)):
                if num.rstrip(".") not in headings:
                    bad.append(f"{name}: {m.group(0)}")
    internal = [m for m in re.findall(r"§(\d+(?:\.\d+)?)", maths) if m not in headings]
    assert not bad and not internal, (bad, internal)

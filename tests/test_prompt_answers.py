"""`sample --prompt` and `decide --prompt`: tokens drawn by the engine, decided as decide does."""
import json

import numpy as np
import pytest

from bhtcli import api
from bhtcli.commands.decide import decide_laws
from bhtcli.maths.laws import floored_tilt
from cli_run import run
from tiny_llama import write_tiny

PROMPT = "Beautiful is better than"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    d = tmp_path_factory.mktemp("pa")
    a, b = d / "A.gguf", d / "B.gguf"
    write_tiny(a, seed=0)
    write_tiny(b, seed=1)
    return str(a), str(b)


def test_sample_and_decide_each_build(builds, tmp_path, capsys):
    a, b = builds
    for truth, path in (("A", a), ("B", b)):
        code, out, err = run(capsys, "sample", path, "--prompt", PROMPT, "-n", "40", "--seed", "1")
        assert code == 0 and err == ""
        f = tmp_path / f"{truth}.txt"
        f.write_text(out)
        code, out, err = run(capsys, "decide", a, b, str(f), "--prompt", PROMPT, "--json")
        assert code == 0, err
        r = json.loads(out)
        assert r["decision"] == truth and r["model"] == "causal-lm" and r["d"] is None


@pytest.mark.slow
def test_token_strings_decide_as_ids(builds, tmp_path, capsys):
    a, b = builds
    ids = api.sample(a, count=20, prompt=PROMPT, seed=4)
    text = api.sample(a, count=20, prompt=PROMPT, seed=4, text=True)
    (tmp_path / "ids.txt").write_text("\n".join(map(str, ids)) + "\n")
    (tmp_path / "text.txt").write_text("\n".join(text) + "\n")
    r1 = api.decide(a, b, answers=str(tmp_path / "ids.txt"), prompt=PROMPT)
    r2 = api.decide(a, b, answers=str(tmp_path / "text.txt"), prompt=PROMPT)
    assert r1.to_dict()["llr"] == r2.to_dict()["llr"]


def test_outside_a_support_decides_at_once():
    la = np.array([np.log(0.5), np.log(0.5), -np.inf])
    lb = np.log(np.array([0.4, 0.3, 0.3]))
    with np.errstate(divide="ignore"):
        r = decide_laws(la, lb, np.array([0, 2, 1]), 0.05, floored_tilt(la, lb), "causal-lm", 3, None, 0.0)
    assert r.decision == "B" and r.samples_used == 2


def test_bad_answers(builds, tmp_path, capsys):
    a, b = builds
    f = tmp_path / "bad.txt"
    f.write_text("\u2581more\nnot-a-token\n")
    code, out, err = run(capsys, "decide", a, b, str(f), "--prompt", PROMPT)
    assert code == 2 and err.startswith("Error: ") and "line 2: 'not-a-token' is not a token" in err
    f.write_text("99999\n")
    code, out, err = run(capsys, "decide", a, b, str(f), "--prompt", PROMPT)
    assert code == 2 and "outside the vocabulary" in err
    code, out, err = run(capsys, "sample", a, "--prompt", "  ", "-n", "3")
    assert code == 2 and err.startswith("Error: --prompt is empty")
    code, out, err = run(capsys, "sample", a, "--prompt", PROMPT, "-n", "3", "--min-p", "2")
    assert code == 2 and "--min-p" in err

"""`sample --prompt` and `decide --prompt`: tokens drawn by the engine, decided as decide does."""
import json

import numpy as np
import pytest

from bhtcli import api
from bhtcli.commands.decide import decide_laws
from bhtcli.errors import InputError
from bhtcli.maths.laws import floored_tilt
from cli_run import run
from tiny_llama import three_builds as tiny_three_builds
from tiny_llama import two_builds

PROMPT = "Beautiful is better than"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    return two_builds(tmp_path_factory.mktemp("pa"))


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


def test_sample_json_is_the_same_draw_with_the_engine_record(builds, tmp_path, capsys):
    """sample --prompt --json: the ids printed without --json for the same seed, their pieces and
    token strings, the prompt's ids, and the engine's record in run.engine; decide --prompt
    --json carries the same record there."""
    from bhtcli.schema import SCHEMA, accepts, key_paths
    a, b = builds
    args = ("sample", a, "--prompt", PROMPT, "-n", "25", "--seed", "5", "--temperature", "0.8",
            "--top-k", "40")
    code, plain, err = run(capsys, *args)
    assert code == 0 and err == ""
    code, out, err = run(capsys, *args, "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    assert r["token_ids"] == [int(v) for v in plain.split()]
    assert r["count"] == 25 and r["seed"] == 5 and r["build"] == a and r["prompt"] == PROMPT
    assert r["sampler"] == {"temperature": 0.8, "top_k": 40, "top_p": 1.0, "min_p": 0.0}
    assert r["prompt_token_ids"][0] == 1                           # the tiny model adds BOS
    assert r["tokens"] == list(api.sample(a, count=25, prompt=PROMPT, seed=5, temperature=0.8,
                                          top_k=40, text=True))
    assert len(r["pieces"]) == 25 and all(isinstance(p, str) for p in r["pieces"])
    engine = r["run"]["engine"]
    assert engine["engine"] == "llama.cpp" and engine["threads"] == 2 and engine["kv_type"] == "f16"
    assert list(r)[:5] == ["model", "n", "d", "energy", "target_error"] and list(r)[-1] == "run"
    assert [i["given"] for i in r["run"]["inputs"]] == [a]
    declared = SCHEMA["sample --prompt"][1]
    produced = key_paths(r)
    assert set(produced) == set(declared)
    assert all(accepts(declared[k][0], v) for k, v in produced.items())
    # --no-hash, and --text changes only the plain lines
    code, out, err = run(capsys, *args, "--json", "--no-hash", "--text")
    r2 = json.loads(out)
    assert code == 0 and r2["token_ids"] == r["token_ids"] and r2["run"]["hashed"] is False
    # decide --prompt --json: the engine's record under run.engine
    f = tmp_path / "drawn.txt"
    f.write_text(plain)
    code, out, err = run(capsys, "decide", a, b, str(f), "--prompt", PROMPT, "--temperature",
                         "0.8", "--top-k", "40", "--json")
    assert code == 0, err
    d = json.loads(out)["run"]["engine"]
    assert d["threads"] == 2 and d["kv_type"] == "f16" and d["engine"] == "llama.cpp"


def test_sample_json_needs_a_prompt(capsys):
    import os
    ex = os.path.join(os.path.dirname(__file__), "..", "examples")
    code, out, err = run(capsys, "sample", os.path.join(ex, "A.npy"), "-x",
                         os.path.join(ex, "x.npy"), "-n", "3", "--json")
    assert code == 2 and err.startswith("Error: --json is for --prompt") and err.count("\n") == 1
    assert json.loads(out)["exit_status"] == 2


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
    # the API takes the answers themselves too: ids (a list, an array, a SampleResult's) or strings
    drawn = api.sample_prompt(a, PROMPT, 20, seed=4, hash_files=False)
    for given in (list(ids), ids, drawn.token_ids, list(text)):
        assert api.decide(a, b, answers=given, prompt=PROMPT).to_dict()["llr"] == r1.to_dict()["llr"]
    with pytest.raises(InputError, match="item 2"):
        api.decide(a, b, answers=[text[0], "no-such-token-string"], prompt=PROMPT)


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
    code, out, err = run(capsys, "sample", a, "--prompt", PROMPT, "-n", "0", "--json")
    assert code == 2 and err.startswith("Error: --count") and err.count("\n") == 1
    assert json.loads(out)["exit_status"] == 2


@pytest.fixture(scope="module")
def three_builds(tmp_path_factory):
    """A, and B and C further and further from it (predicted n about 21 at this prompt)."""
    return [str(p) for p in tiny_three_builds(tmp_path_factory.mktemp("pa3"), (0.05, 0.1))]


def test_k_builds_decide_names_the_build_that_answered(three_builds, tmp_path, capsys):
    for k, path in enumerate(three_builds):
        code, out, err = run(capsys, "sample", path, "--prompt", PROMPT, "-n", "150", "--seed", "7")
        assert code == 0 and err == ""
        f = tmp_path / f"{k}.txt"
        f.write_text(out)
        code, out, err = run(capsys, "decide", *three_builds, str(f), "--prompt", PROMPT, "--json")
        assert code == 0 and err == "", err
        r = json.loads(out)
        assert r["decision_index"] == k and r["fixed_verdict_index"] == k
        assert r["decision"] == f"M{k + 1}" and r["model"] == "causal-lm" and r["d"] is None
        assert r["models"] == three_builds and r["threshold"] == pytest.approx(np.log(2 / 0.05))
    code, out, err = run(capsys, "decide", *three_builds, str(f), "--prompt", PROMPT)
    assert code == 0 and "sequential decision" in out and "M3" in out


@pytest.mark.slow
def test_k_builds_error_rates_on_engine_draws_are_within_the_target(three_builds):
    """Monte Carlo on answers the engine draws: the maximum-likelihood verdict at the
    predicted n and the matrix SPRT (on up to CAP answers) err at most alpha per true build,
    within three standard errors."""
    from bhtcli.commands.decide import decide_steps
    from bhtcli.engine.laws import sampler_laws
    from bhtcli.engine import EngineSettings, Sampler, open_engine
    from bhtcli.maths.kway import kway_counts
    from bhtcli.maths.laws import kway_law
    alpha, trials, cap = 0.05, 400, 200
    engines = [open_engine(p, EngineSettings(sequences=1)) for p in three_builds]
    ids = engines[0].tokenize(PROMPT)
    L = [sampler_laws(e, [ids], Sampler())[0] for e in engines]
    law = kway_law(L)
    n = kway_counts(law, alpha)["predicted"]
    assert 10 <= n <= 40
    lp = np.stack(L, axis=1)                      # n_vocab x K
    priors = np.full(3, 1 / 3)
    slack = 3 * np.sqrt(alpha * (1 - alpha) / trials)
    a = np.log(2 / alpha)
    for k, e in enumerate(engines):
        drawn = np.array(e.draw(ids, Sampler(), trials * cap, seed=11 + k)).reshape(trials, cap)
        totals = lp[drawn[:, :n]].sum(axis=1)                      # trials x K
        fixed_wrong = np.sum(np.argmax(totals, axis=1) != k)
        paths = np.cumsum(lp[drawn], axis=1)                       # trials x cap x K
        top2 = np.sort(paths, axis=2)[:, :, -2:]
        stop = (top2[:, :, 1] - top2[:, :, 0]) >= a
        first = np.argmax(stop, axis=1)
        named = np.where(stop.any(axis=1), np.argmax(paths[np.arange(trials), first], axis=1), -1)
        sprt_wrong = np.sum((named >= 0) & (named != k))
        assert fixed_wrong / trials <= alpha + slack, (k, fixed_wrong)
        assert sprt_wrong / trials <= alpha + slack, (k, sprt_wrong)
        assert np.mean(named == -1) < 0.05                          # CAP answers nearly always decide
        for t in range(20):                                         # decide's rule is this one
            r = decide_steps(lp[drawn[t, :n]], priors, alpha, law, three_builds, "causal-lm",
                             len(L[0]), None, 1, 0.0)
            assert r.fixed_verdict_index == np.argmax(totals[t])
            s = decide_steps(lp[drawn[t]], priors, alpha, law, three_builds, "causal-lm",
                             len(L[0]), None, 1, 0.0)
            assert (s.decision_index if s.decision_index is not None else -1) == named[t]
            assert s.samples_used == (first[t] + 1 if named[t] >= 0 else cap)


def test_k_builds_answers_none_of_them_could_give(three_builds, tmp_path, capsys):
    f = tmp_path / "a.txt"
    f.write_text("\u2581more\n\u2581than\n")
    code, out, err = run(capsys, "decide", *three_builds, str(f), "--prompt", PROMPT,
                         "--top-k", "1")
    assert code == 2 and out == "" and err.startswith("Error: ") and err.count("\n") == 1

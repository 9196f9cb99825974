"""`bht prompts --search`: the prompt search on tiny llama GGUF builds written here -- never
worse than its start, within its pass budget, every found prompt sent as text, the same seed
the same result, its H^2 what a fresh score of the found prompt gives; bad budgets."""
import json

import numpy as np
import pytest

from bhtcli import api
from bhtcli.engine import EngineSettings, open_engine
from bhtcli.maths.laws import hellinger_squared
from bhtcli.maths.sampler import sampler_log_probs
from cli_run import run
from tiny_llama import three_builds

PROMPTS = ["Beautiful is better than", "Simple is better than complex and flat is",
           "Errors should never pass", "the better one", "it is not the one", "which one is more"]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    d = tmp_path_factory.mktemp("search")
    a, b, c = three_builds(d)
    f = d / "prompts.txt"
    f.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    return str(a), str(b), str(c), str(f)


def fresh_h2(paths, ids, sampler=(1.0, 0, 1.0, 0.0)):
    """The bottleneck H^2 of one prompt, scored alone by engines opened here."""
    L = [sampler_log_probs(open_engine(p, EngineSettings(sequences=1)).next_logits([ids]), *sampler)[0]
         for p in paths]
    return min(float(hellinger_squared(L[i], L[j])) for i in range(len(L)) for j in range(i + 1, len(L)))


@pytest.fixture(scope="module")
def searched(builds):
    a, b, _, f = builds
    return api.prompts([a, b], f, top=4, search=400, seed=3, sequences=8)


def test_never_worse_than_its_start_and_within_budget(searched):
    s = searched.search
    assert s["passes"] == s["budget"] == 400
    assert s["start_hellinger_squared"] == max(x["hellinger_squared"] for x in s["starts"])
    assert s["start_hellinger_squared"] == searched.top[0]["hellinger_squared"]
    best = s["found"][0]["hellinger_squared"]
    assert best >= s["start_hellinger_squared"]
    assert [e["hellinger_squared"] for e in s["found"]] == sorted(
        (e["hellinger_squared"] for e in s["found"]), reverse=True)
    passes = [p["passes"] for p in s["history"]]
    values = [p["hellinger_squared"] for p in s["history"]]
    assert passes == sorted(passes) and passes[-1] == s["passes"] and values[-1] == best
    assert s["candidates"] == s["extensions"] + s["substitutions"]
    assert s["report_passes"] == len(s["found"]) * (2 + 2 * 3)   # K builds, each under 3 floor settings


def test_found_prompts_are_text_and_score_as_reported(builds, searched):
    a, b, _, _ = builds
    engine = open_engine(a, EngineSettings(sequences=1))
    for e in searched.search["found"]:
        assert engine.tokenize(e["text"]) == e["token_ids"]
        assert e["hellinger_squared"] == pytest.approx(fresh_h2([a, b], e["token_ids"]), rel=1e-9, abs=1e-15)
        counts = e["samples"]
        assert counts["lower"] <= counts["predicted"] <= counts["upper"]
    assert searched.search["found"][0]["edits"] >= 1        # on these builds the search does find one


def test_the_same_seed_gives_the_same_result(builds, searched):
    a, b, _, f = builds
    again = api.prompts([a, b], f, top=4, search=400, seed=3, sequences=8).search
    other = api.prompts([a, b], f, top=4, search=400, seed=4, sequences=8).search
    keys = ("found", "history", "starts", "passes", "candidates", "rejected_tokenization")
    assert all(again[k] == searched.search[k] for k in keys)
    assert any(other[k] != searched.search[k] for k in keys)


def test_k_builds_budget_and_bottleneck(builds):
    a, b, c, f = builds
    s = api.prompts([a, b, c], f, top=3, search=100, seed=0).search
    assert 100 - 3 < s["passes"] <= 100                    # a candidate costs 3 passes
    best = s["found"][0]
    assert best["hellinger_squared"] >= s["start_hellinger_squared"]
    assert best["hellinger_squared"] == pytest.approx(fresh_h2([a, b, c], best["token_ids"]), rel=1e-9)


def test_truncating_sampler(builds):
    a, b, _, f = builds
    r = api.prompts([a, b], f, top=2, search=60, top_k=5, temperature=0.8)
    best = r.search["found"][0]
    assert best["hellinger_squared"] >= r.search["start_hellinger_squared"]
    assert best["hellinger_squared"] == pytest.approx(
        fresh_h2([a, b], best["token_ids"], (0.8, 5, 1.0, 0.0)), rel=1e-9)


def test_json_and_table(builds, capsys):
    a, b, _, f = builds
    code, out, err = run(capsys, "prompts", a, b, "--prompts", f, "--top", "2", "--search", "40",
                         "--json")
    assert code == 0, err
    s = json.loads(out)["search"]
    assert s["passes"] == 40 and s["found"] and s["history"]
    code, out, err = run(capsys, "prompts", a, b, "--prompts", f, "--top", "2", "--search", "40")
    assert code == 0 and "search: 40 of 40 forward passes" in out and "best H^2" in out


@pytest.mark.parametrize("value, message", [
    ("0", "--search must be at least 6 forward passes"), ("-5", "--search must be at least 6"),
    ("5", "--search must be at least 6"), ("2.5", "'2.5' is not a valid integer"),
    ("many", "'many' is not a valid integer")])
def test_bad_budget(builds, capsys, value, message):
    a, b, _, f = builds
    code, out, err = run(capsys, "prompts", a, b, "--prompts", f, "--search", value)
    assert code == 2 and out == "" and err.startswith("Error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err


def test_bad_budget_through_the_api(builds):
    from bhtcli.errors import InputError
    a, b, _, f = builds
    for value in (0, -1, 2.5, "10", True):
        with pytest.raises(InputError, match="search"):
            api.prompts([a, b], f, search=value)


def test_no_start_left_is_a_note(builds):
    a, b, _, f = builds
    r = api.prompts([a, b], f, top=2, search=60, min_margin=1e30)
    assert r.search is None and any("--search" in n or "search" in n for n in r.notes)

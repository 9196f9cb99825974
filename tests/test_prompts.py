"""`bht prompts` on tiny llama GGUF builds written here: its ranking against H^2 computed from
llama-cpp-python's one-prompt-at-a-time `Llama.eval` logits, the JSON contract, bad input."""
import json

import numpy as np
import pytest

from bhtcli import api
from bhtcli.errors import InputError
from cli_run import run
from tiny_llama import three_builds, weights, vocabulary, write_tiny

PROMPTS = ["Beautiful is better than", "Simple is better than complex and flat is",
           "Errors should never pass", "the a of to and in is it that", "Sparse is better than",
           "Explicit is better than", "Flat is better than nested", "it is not the one",
           "a simple error is never", "which one is more", "this is beautiful and",
           "errors should be", "the better one", "dense is", "one of the", "that was not",
           "have all the errors", "on the flat", "the dense and the sparse", "it can be better"]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    d = tmp_path_factory.mktemp("builds")
    a, b, c = three_builds(d)
    f = d / "prompts.txt"
    f.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    return a, b, c, f


def eval_h2(paths, prompts):
    """H^2 between the raw softmax laws from Llama.eval, one prompt at a time."""
    from llama_cpp import Llama
    L = []
    for p in paths:
        llm = Llama(str(p), n_ctx=64, n_threads=2, verbose=False, flash_attn=False, logits_all=True)
        rows = []
        for text in prompts:
            ids = llm.tokenize(text.encode(), add_bos=True, special=False)
            llm.reset()
            llm.eval(ids)
            z = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            rows.append(z - z.max() - np.log(np.exp(z - z.max()).sum()))
        L.append(np.array(rows))
        llm.close()
    return 0.5 * np.sum((np.exp(L[0] / 2) - np.exp(L[1] / 2)) ** 2, axis=1)


@pytest.mark.slow
def test_ranking_matches_one_prompt_at_a_time_eval(builds):
    a, b, _, f = builds
    r = api.prompts([a, b], f, top=len(PROMPTS), sequences=8)
    ref = eval_h2([a, b], PROMPTS)
    got = {e["index"]: e["hellinger_squared"] for e in r.top}
    assert len(got) == len(PROMPTS)
    np.testing.assert_allclose([got[i] for i in range(len(PROMPTS))], ref, rtol=1e-3, atol=1e-7)
    assert [e["index"] for e in r.top] == list(np.argsort(-ref, kind="stable"))
    assert r.prompts_scored == len(PROMPTS) and r.engine["engine"] == "llama.cpp"


@pytest.mark.slow
def test_counts_are_design_counts(builds):
    from bhtcli.maths.counts import lower_count, upper_count
    a, b, _, f = builds
    r = api.prompts([a, b], f, top=3)
    for e in r.top:
        D = e["bhattacharyya_distance"]
        assert e["samples"]["lower"] == lower_count(D, 0.05)
        assert e["samples"]["upper"] == upper_count(D, 0.05)
        assert e["samples"]["lower"] <= e["samples"]["predicted"] <= e["samples"]["upper"]
        assert D == pytest.approx(-np.log1p(-e["hellinger_squared"]))
        assert e["floor_hellinger_squared"] >= 0


@pytest.mark.slow
def test_k_builds_rank_by_the_closest_pair(builds):
    a, b, c, f = builds
    r3 = api.prompts([a, b, c], f, top=len(PROMPTS))
    r_ab = api.prompts([a, b], f, top=len(PROMPTS))
    ab = {e["index"]: e["hellinger_squared"] for e in r_ab.top}
    for e in r3.top:
        assert e["hellinger_squared"] <= ab[e["index"]] + 1e-12
        assert (e["bottleneck"]["i"], e["bottleneck"]["j"]) in [(0, 1), (0, 2), (1, 2)]


@pytest.mark.slow
@pytest.mark.parametrize("sampler", [{}, {"temperature": 0.8, "top_k": 40, "top_p": 0.95,
                                           "min_p": 0.05}])
def test_k_builds_count_the_maximum_likelihood_verdict(builds, sampler):
    """Three builds: the count is the K-model verdict's (all three errors <= alpha), not the
    closest pair's; checked by a seeded Monte Carlo of the maximum-likelihood verdict drawn
    from the builds' laws (numpy draws, ties split at random)."""
    from bhtcli.engine import EngineSettings, Sampler, open_engine
    from bhtcli.engine.laws import sampler_laws
    a, b, c, f = builds
    r = api.prompts([a, b, c], f, top=2, **sampler)
    rng = np.random.default_rng(11)
    for e in r.top:
        s = e["samples"]
        assert s["method"] == "saddlepoint-copula"
        assert s["lower"] <= s["predicted"] <= s["upper"]
        n = s["predicted"]
        L = np.stack([sampler_laws(open_engine(p, EngineSettings(sequences=1)), [e["token_ids"]],
                                   Sampler(**sampler))[0] for p in (a, b, c)])
        trials, se = 4000, np.sqrt(0.05 * 0.95 / 4000)
        for k in range(3):
            draws = rng.choice(L.shape[1], size=(trials, n), p=np.exp(L[k]))
            with np.errstate(invalid="ignore"):
                ll = L[:, draws].sum(axis=2)                      # (3, trials)
            ll = np.where(np.isnan(ll), -np.inf, ll)
            ll += rng.uniform(0, 1e-9, size=ll.shape)             # ties: at random
            error = np.mean(np.argmax(ll, axis=0) != k)
            assert error <= 0.05 + 3 * se, (k, n, error)


@pytest.mark.slow
def test_min_margin_leaves_out_prompts(builds):
    a, b, _, f = builds
    r = api.prompts([a, b], f, top=5, min_margin=1e12)
    assert r.top == [] and r.excluded == len(PROMPTS)


@pytest.mark.slow
def test_truncating_sampler_and_greedy(builds):
    a, b, _, f = builds
    r = api.prompts([a, b], f, top=20, top_k=3)
    assert all(0 <= e["hellinger_squared"] <= 1 for e in r.top)
    g = api.prompts([a, b], f, top=20, temperature=0)
    border = [e for e in g.top if e["top_tokens"][0]["id"] != e["top_tokens"][1]["id"]]
    assert g.border_prompts == len(border)
    assert all(e["hellinger_squared"] == 1.0 and e["samples"]["predicted"] == 1 for e in border)
    assert all(e["hellinger_squared"] == 0.0 for e in g.top if e not in border)


@pytest.mark.slow
def test_json_and_table(builds, capsys):
    a, b, _, f = builds
    code, out, err = run(capsys, "prompts", str(a), str(b), "--prompts", str(f), "--top", "2", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["model"] == "causal-lm" and len(r["top"]) == 2 and r["engine"]["kv_type"] == "f16"
    assert err.startswith("Note: laws are the engine's raw softmax")
    code, out, err = run(capsys, "prompts", str(a), str(b), "--prompts", str(f), "--top", "2")
    assert code == 0 and "H^2" in out and "Beautiful" in out or "better" in out


@pytest.mark.slow
def test_jsonl_prompts(builds, tmp_path, capsys):
    a, b, _, _ = builds
    f = tmp_path / "p.jsonl"
    f.write_text('{"text": "Beautiful is better than"}\n{"token_ids": [1, 300, 301, 302]}\n')
    code, out, err = run(capsys, "prompts", str(a), str(b), "--prompts", str(f), "--json")
    assert code == 0, err
    ids = sorted(e["token_ids"] for e in json.loads(out)["top"])
    assert [1, 300, 301, 302] in ids


def _error(capsys, *args):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and err.startswith("Error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_bad_input(builds, tmp_path, capsys):
    a, b, _, f = builds
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    assert "is not a GGUF file" in _error(capsys, "prompts", str(a), str(junk), "--prompts", str(f))
    other = tmp_path / "other.gguf"
    write_tiny(other, seed=0, tensors=weights(0, len(vocabulary(4)[0])), extra_tokens=4)
    assert "must share one vocabulary" in _error(capsys, "prompts", str(a), str(other), "--prompts", str(f))
    renamed = tmp_path / "renamed.gguf"
    write_tiny(renamed, seed=0, rename={400: "\u2581zebra"})
    assert "another tokenizer" in _error(capsys, "prompts", str(a), str(renamed), "--prompts", str(f))
    assert "2 to 8" in _error(capsys, "prompts", str(a), "--prompts", str(f))
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": "  "}\n')
    assert "is empty" in _error(capsys, "prompts", str(a), str(b), "--prompts", str(empty))
    long = tmp_path / "long.txt"
    long.write_text("the " * 80 + "\n")
    assert "more than the engine's context of 64" in _error(capsys, "prompts", str(a), str(b), "--prompts", str(long))
    assert "--top-p" in _error(capsys, "prompts", str(a), str(b), "--prompts", str(f), "--top-p", "1.5")
    assert "--temperature" in _error(capsys, "prompts", str(a), str(b), "--prompts", str(f), "--temperature", "-1")
    assert "--prompts" in _error(capsys, "prompts", str(a), str(b), "--prompts", str(tmp_path / "none.txt"))



@pytest.mark.slow
def test_reported_h2_is_each_prompt_decoded_alone_whatever_the_batching(builds):
    """A prompt's logits depend on the prompts decoded beside it (measured on gemma-3: up to
    35% of H^2 at 16 prompts per call), so the reported H^2 and its order are those of each
    prompt decoded alone, as Llama.eval decodes it, for any `sequences`."""
    a, b, _, f = builds
    ref = eval_h2([a, b], PROMPTS)
    for sequences in (1, 8, 16):
        r = api.prompts([a, b], f, top=len(PROMPTS), sequences=sequences)
        got = np.array([e["hellinger_squared"] for e in r.top])
        want = np.array([ref[e["index"]] for e in r.top])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-15)
        assert list(got) == sorted(got, reverse=True)
        assert [e["rank"] for e in r.top] == list(range(1, len(PROMPTS) + 1))

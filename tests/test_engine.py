"""The engine (llama.cpp through llama-cpp-python) against an independent numpy forward pass
of a tiny llama GGUF written here, and the sampler laws against the engine's own draws."""
import numpy as np
import pytest
from scipy import stats

from bhtcli.engine import EngineSettings, Sampler, open_engine
from bhtcli.errors import InputError
from bhtcli.maths.sampler import sampler_log_probs, support
from tiny_llama import forward, write_tiny

PROMPTS = ["Beautiful is better than", "Simple is better than complex and flat is",
           "Errors should never pass", "the a of to and in is it that", "Sparse is better than"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    return path, write_tiny(path, seed=0)


@pytest.fixture(scope="module")
def exact(tiny):
    """float32 everywhere: an F32 KV cache, no flash attention (it rounds queries to F16)."""
    return open_engine(tiny[0], EngineSettings(threads=1, kv_type="f32"))


def test_logits_match_the_numpy_forward_pass(tiny, exact):
    ids = [exact.tokenize(p) for p in PROMPTS]
    assert all(i[0] == 1 for i in ids)                # the BOS the file asks for
    got = exact.next_logits(ids)
    for row, p in zip(got, ids):
        ref = forward(tiny[1], p)
        assert np.max(np.abs(row - ref)) <= 1e-4 * max(1.0, np.max(np.abs(ref)))


def test_tokenizer_round_trip(exact):
    ids = exact.tokenize("Beautiful is better than ugly")
    assert exact.detokenize(ids[1:]).strip() == "Beautiful is better than ugly"
    assert exact.piece(ids[-1]) == " ugly"


def test_batched_scoring_equals_one_prompt_at_a_time(exact):
    ids = [exact.tokenize(p) for p in PROMPTS] * 3
    together = exact.next_logits(ids)
    alone = np.stack([exact.next_logits([i])[0] for i in ids])
    np.testing.assert_allclose(together, alone, atol=1e-4)
    assert exact.calls >= len(ids) + 1


def test_default_settings_are_close_not_equal(tiny, exact):
    """F16 KV cache and flash attention move the logits by about 1e-3 (the engine floor)."""
    fa = open_engine(tiny[0], EngineSettings(kv_type="f16", flash_attn=True))
    ids = [exact.tokenize(p) for p in PROMPTS]
    diff = np.abs(fa.next_logits(ids) - exact.next_logits(ids)).max()
    assert 1e-6 < diff < 5e-2
    assert fa.record()["flash_attn"] is True and fa.record()["kv_type"] == "f16"


SAMPLERS = [Sampler(), Sampler(temperature=0.7), Sampler(top_k=5),
            Sampler(temperature=1.5, top_p=0.6), Sampler(min_p=0.1),
            Sampler(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05)]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: repr(s.to_dict()))
def test_sampler_law_fits_the_engine_draws(exact, sampler):
    ids = exact.tokenize(PROMPTS[0])
    logits = exact.next_logits([ids])
    logp = sampler_log_probs(logits, sampler.temperature, sampler.top_k, sampler.top_p,
                             sampler.min_p)[0]
    draws = np.array(exact.draw(ids, sampler, 6000, seed=7))
    p = np.exp(logp)
    assert np.all(p[draws] > 0), "a draw outside the predicted support"
    counts = np.bincount(draws, minlength=p.size)
    # pool the rare tokens so every cell expects >= 5 draws
    big = p * len(draws) >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(p[big], p[~big].sum()) * len(draws)
    obs, exp = obs[exp > 0], exp[exp > 0]
    if len(obs) > 1:
        assert stats.chisquare(obs, exp).pvalue > 1e-3


def test_greedy_draws_the_top_token(exact):
    ids = exact.tokenize(PROMPTS[1])
    top = int(np.argmax(exact.next_logits([ids])[0]))
    assert exact.draw(ids, Sampler(temperature=0), 5) == [top] * 5
    assert sampler_log_probs(exact.next_logits([ids]), temperature=0)[0, top] == 0.0


def test_support_by_hand():
    z = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    assert support(z, top_k=2).tolist() == [[True, True, False, False]]
    assert support(z, top_p=0.8).tolist() == [[True, True, False, False]]
    assert support(z, top_p=0.81).tolist() == [[True, True, True, False]]
    assert support(z, min_p=0.3).tolist() == [[True, True, True, False]]
    assert support(z, min_p=0.61).tolist() == [[True, False, False, False]]
    lp = sampler_log_probs(z, temperature=0.5, top_k=3)
    w = np.array([0.5, 0.3, 0.15]) ** 2
    np.testing.assert_allclose(np.exp(lp[0, :3]), w / w.sum())
    assert lp[0, 3] == -np.inf


def test_not_a_gguf_file(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(InputError, match="is not a GGUF file"):
        open_engine(bad)
    with pytest.raises(InputError, match="no such file"):
        open_engine(tmp_path / "missing.gguf")


def test_prompt_checks(exact):
    with pytest.raises(InputError, match="is empty"):
        exact.next_logits([[]])
    with pytest.raises(InputError, match="more than the engine's context of 64"):
        exact.next_logits([[1] * 65])
    with pytest.raises(InputError, match="outside the vocabulary"):
        exact.next_logits([[1, 10_000]])


@pytest.mark.parametrize("kwargs", [dict(temperature=-1), dict(top_k=-1), dict(top_p=0),
                                    dict(top_p=1.5), dict(min_p=1), dict(temperature=float("nan"))])
def test_sampler_values_out_of_range(kwargs):
    with pytest.raises(InputError):
        Sampler(**kwargs)



def test_floor_laws_are_the_laws_and_their_largest_setting_distance(tmp_path):
    """engine.laws.floor_laws against the same laws and H^2 computed here one by one."""
    from bhtcli.engine.laws import floor_laws
    paths = []
    for seed in range(2):
        paths.append(tmp_path / f"b{seed}.gguf")
        write_tiny(paths[-1], seed=seed)
    singles = [open_engine(p, EngineSettings(sequences=1)) for p in paths]
    others = [[open_engine(p, EngineSettings(sequences=1, kv_type="f32")),
               open_engine(p, EngineSettings(sequences=1, flash_attn=True))] for p in paths]
    ids = [[1] + list(range(3, 3 + k)) for k in range(1, 9)]
    L, floors = floor_laws(singles, others, ids, Sampler(temperature=0.8, top_k=7))
    assert floors.shape == (2, len(ids))
    for k in range(2):
        mine = sampler_log_probs(singles[k].next_logits(ids), 0.8, 7)
        assert np.array_equal(L[k], mine)
        h2 = [1 - np.sum(np.sqrt(np.exp(mine) * np.exp(sampler_log_probs(f.next_logits(ids), 0.8, 7))),
                         axis=1) for f in others[k]]
        np.testing.assert_allclose(floors[k], np.max(h2, axis=0), atol=1e-9)
    assert np.all(floors > 0)


def test_record_says_which_llama_cpp(exact):
    """A number about a build must say which engine computed it: the library's versions and
    the llama.cpp commit it was built from, not nulls."""
    r = exact.record()
    assert r["engine"] == "llama.cpp" and r["binding_version"]
    for key in ("llama_version", "ggml_version", "ggml_commit"):
        assert isinstance(r[key], str) and r[key], key

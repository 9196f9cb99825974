"""The pieces of examples/llm_audit on a tiny random llama model (no download, a few seconds).

Tokenizer round trip and pre-tokenizer on a toy vocabulary; RMSNorm, rotary embeddings and
grouped-query attention against straightforward loops; the whole forward pass against a loop
implementation, read back from a tiny GGUF file written with gguf.GGUFWriter, batched with
padding against one prompt at a time; the re-encoding; bht's block-form H^2 against a direct
computation; and the prompt search, whose best H^2 never goes down. K = 3 (kway_audit.py): the
pairs' D against the formula and against bht's block form, the counts and the Monte Carlo
against bhtcli.simulate in the block form, the schedule against a brute-force grid, bht's
K-way Monte Carlo against exact enumeration, the head-only design with identical heads, and
the whole K-way run on the tiny model.
"""
import math
import os
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "llm_audit"))

from audit import block_pair, hellinger_direct  # noqa: E402
from gguf_model import load_gguf, reencode  # noqa: E402
from llama import Config, Llama, attention, rms_norm, rope, rope_tables  # noqa: E402
from search import beam_search  # noqa: E402
from tokenizer import BYTE_TO_CHAR, Tokenizer, pre_tokenize  # noqa: E402


# ------------------------------------------------------------------ tokenizer
def toy_tokenizer():
    tokens = [BYTE_TO_CHAR[b] for b in range(256)]
    merges = ["Ġ t", "h e", "Ġt he", "i s", "Ġ is", "Ġ c", "Ġc a", "Ġca t"]
    for m in merges:
        tokens.append(m.replace(" ", ""))
    return Tokenizer(tokens, merges)


def test_tokenizer_merges_and_round_trip():
    tok = toy_tokenizer()
    ids = tok.encode("the cat is the")
    names = [tok.tokens[i] for i in ids]
    assert names == ["t", "he", "Ġcat", "Ġis", "Ġthe"]       # merge ranks: "Ġ t" before "h e"
    for text in ["the cat is the", "Héllo, wörld! 1234 — ok\n\n  tabs\tand  spaces ",
                 "naïve café ü 😀", "it's they'll _under_score x=1.5e-3"]:
        assert tok.decode(tok.encode(text)) == text


def test_pre_tokenizer_splits_digits_then_gpt2_pattern():
    assert pre_tokenize("abc 123") == ["abc", " ", "1", "2", "3"]
    assert pre_tokenize("It's  a test!!") == ["It", "'s", " ", " a", " test", "!!"]
    assert "".join(pre_tokenize("x\t\n y__z?")) == "x\t\n y__z?"


# ------------------------------------------------------------------ layers against loops
def test_rms_norm_against_formula():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 7)), rng.standard_normal(7)
    want = np.array([[x[i, j] / math.sqrt(sum(v * v for v in x[i]) / 7 + 1e-5) * w[j]
                      for j in range(7)] for i in range(3)])
    assert np.allclose(rms_norm(x, w, 1e-5), want, rtol=1e-12)


def test_rope_rotates_adjacent_pairs_and_keeps_relative_position():
    rng = np.random.default_rng(1)
    T, heads, hd, base = 6, 2, 8, 10000.0
    x = rng.standard_normal((T, heads, hd))
    cos, sin = rope_tables(T, hd, base)
    got = rope(x, cos.astype(np.float64), sin.astype(np.float64))
    for t in range(T):
        for i in range(hd // 2):
            z = complex(x[t, 0, 2 * i], x[t, 0, 2 * i + 1]) * np.exp(1j * t * base ** (-2 * i / hd))
            assert abs(got[t, 0, 2 * i] - z.real) < 1e-5 and abs(got[t, 0, 2 * i + 1] - z.imag) < 1e-5
    q, k = rng.standard_normal(hd), rng.standard_normal(hd)        # q.k depends on t - s only
    Q, K = np.tile(q, (T, 1, 1)), np.tile(k, (T, 1, 1))
    rq, rk = rope(Q, cos, sin)[:, 0], rope(K, cos, sin)[:, 0]
    assert abs(rq[4] @ rk[2] - rq[3] @ rk[1]) < 1e-4


def loop_attention(q, k, v):
    B, T, H, hd = q.shape
    g = H // k.shape[2]
    out = np.zeros((B, T, H * hd))
    for b in range(B):
        for h in range(H):
            kv = h // g                                    # query heads 0..g-1 share kv head 0
            for t in range(T):
                s = np.array([q[b, t, h] @ k[b, u, kv] / math.sqrt(hd) for u in range(t + 1)])
                w = np.exp(s - s.max())
                w /= w.sum()
                out[b, t, h * hd:(h + 1) * hd] = sum(w[u] * v[b, u, kv] for u in range(t + 1))
    return out


def test_grouped_causal_attention_against_loop():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 5, 6, 4))
    k, v = rng.standard_normal((2, 5, 2, 4)), rng.standard_normal((2, 5, 2, 4))
    assert np.allclose(attention(q, k, v), loop_attention(q, k, v), atol=1e-10)


# ------------------------------------------------------------------ a tiny GGUF model
D, HEADS, KV, FFN, LAYERS = 32, 4, 2, 64, 2      # rows of 32: the quantization block


@pytest.fixture(scope="module")
def tiny(tiny_file):
    """The tiny model's weights and tokenizer."""
    return load_gguf(tiny_file), toy_tokenizer()


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    """A random llama model in a GGUF file (F32 norms, Q8_0 and Q4_1 matrices)."""
    rng = np.random.default_rng(3)
    tok = toy_tokenizer()
    vocab = len(tok.tokens)
    shapes = {"token_embd.weight": (vocab, D), "output_norm.weight": (D,)}
    for i in range(LAYERS):
        p = f"blk.{i}."
        shapes |= {p + "attn_norm.weight": (D,), p + "ffn_norm.weight": (D,),
                   p + "attn_q.weight": (D, D), p + "attn_k.weight": (D // HEADS * KV, D),
                   p + "attn_v.weight": (D // HEADS * KV, D), p + "attn_output.weight": (D, D),
                   p + "ffn_gate.weight": (FFN, D), p + "ffn_up.weight": (FFN, D),
                   p + "ffn_down.weight": (D, FFN)}
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(LAYERS)
    w.add_embedding_length(D)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_context_length(64)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tok.tokens)
    w.add_token_merges([" ".join(p) for p, _ in sorted(tok.ranks.items(), key=lambda t: t[1])])
    for j, (name, shape) in enumerate(shapes.items()):
        a = rng.standard_normal(shape).astype(np.float32) * (0.3 if len(shape) == 2 else 1.0)
        if len(shape) == 1:
            w.add_tensor(name, 1.0 + 0.1 * a)
        else:
            qt = gguf.GGMLQuantizationType.Q8_0 if j % 2 else gguf.GGMLQuantizationType.Q4_1
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def loop_forward(t, c: Config, ids):
    """The last token's final hidden state, one token and one head at a time, float64."""
    X = [t["token_embd.weight"][i].astype(np.float64) for i in ids]
    hd = c.dim // c.heads
    g = c.heads // c.kv_heads

    def norm(x, w):
        return x / math.sqrt(float(x @ x) / len(x) + c.eps) * w

    def rot(v, pos):
        out = v.copy()
        for i in range(hd // 2):
            a = pos * c.rope_base ** (-2 * i / hd)
            out[2 * i] = v[2 * i] * math.cos(a) - v[2 * i + 1] * math.sin(a)
            out[2 * i + 1] = v[2 * i] * math.sin(a) + v[2 * i + 1] * math.cos(a)
        return out

    for layer in range(c.layers):
        p = f"blk.{layer}."
        n = [norm(x, t[p + "attn_norm.weight"]) for x in X]
        q = [t[p + "attn_q.weight"] @ v for v in n]
        k = [t[p + "attn_k.weight"] @ v for v in n]
        v = [t[p + "attn_v.weight"] @ v for v in n]
        new = []
        for pos in range(len(X)):
            heads = []
            for h in range(c.heads):
                kv = h // g
                qh = rot(q[pos][h * hd:(h + 1) * hd], pos)
                s = np.array([qh @ rot(k[u][kv * hd:(kv + 1) * hd], u) / math.sqrt(hd) for u in range(pos + 1)])
                w = np.exp(s - s.max())
                w /= w.sum()
                heads.append(sum(w[u] * v[u][kv * hd:(kv + 1) * hd] for u in range(pos + 1)))
            x = X[pos] + t[p + "attn_output.weight"] @ np.concatenate(heads)
            m = norm(x, t[p + "ffn_norm.weight"])
            gate, up = t[p + "ffn_gate.weight"] @ m, t[p + "ffn_up.weight"] @ m
            new.append(x + t[p + "ffn_down.weight"] @ (gate / (1 + np.exp(-gate)) * up))
        X = new
    return norm(X[-1], t["output_norm.weight"])


def test_gguf_metadata_and_types(tiny):
    w, tok = tiny
    c = Config.from_meta(w.meta)
    assert (c.layers, c.dim, c.heads, c.kv_heads, c.ffn, c.vocab) == (LAYERS, D, HEADS, KV, FFN, len(tok.tokens))
    assert w.tensors["blk.0.attn_q.weight"].shape == (D, D) and w.tensors["blk.0.attn_q.weight"].dtype == np.float32
    assert {w.types["blk.0.attn_norm.weight"], w.types["token_embd.weight"]} <= {"F32", "Q8_0", "Q4_1"}
    assert w.meta["tokenizer.ggml.tokens"] == tok.tokens


def test_forward_against_loop_and_padding_is_exact(tiny):
    w, tok = tiny
    c = Config.from_meta(w.meta)
    model = Llama(w.tensors, c)
    prompts = [tok.encode("the cat is the"), tok.encode("a"), tok.encode("cat is"),
               tok.encode("the cat is the cat is here, 42")]
    batched = model.hidden(prompts, batch_tokens=1000)
    for p, h in zip(prompts, batched):
        assert np.allclose(h, loop_forward(w.tensors, c, p), atol=2e-4)
        assert np.allclose(h, model.hidden([p])[0], atol=1e-5)       # padding changes nothing


def test_reencode_changes_quantized_tensors_only(tiny):
    w, _ = tiny
    b = reencode(w, "Q8_0")
    for name, t in w.tensors.items():
        if w.types[name] == "F32":
            assert b.tensors[name] is t
        elif w.types[name] == "Q8_0":
            assert np.array_equal(b.tensors[name], t)              # Q8_0 of Q8_0 values: identical
        else:
            assert not np.array_equal(b.tensors[name], t)
            assert np.abs(b.tensors[name] - t).max() <= np.abs(t).max() / 127
    b5 = reencode(w, "Q5_0")
    assert all(b5.types[k] == "Q5_0" for k in w.types if w.types[k] != "F32")


# ------------------------------------------------------------------ the block form
def test_block_form_h2_equals_direct_computation():
    import bhtcli
    rng = np.random.default_rng(4)
    n, d, m = 60, 8, 25
    WA = rng.standard_normal((n, d))
    WB = WA + 0.2 * rng.standard_normal((n, d))
    hA = 2 * rng.standard_normal((m, d))
    hB = hA + 0.3 * rng.standard_normal((m, d))
    Ablk, Bblk = block_pair(WA, WB)
    r = bhtcli.rank(Ablk, Bblk, np.hstack([hA, hB]), top=m)
    for e in r.top:
        i = e["index"]
        a, b = WA @ hA[i], WB @ hB[i]
        p, q = np.exp(a - a.max()), np.exp(b - b.max())
        p, q = p / p.sum(), q / q.sum()
        want = 1 - np.sum(np.sqrt(p * q))
        assert e["hellinger_squared"] == pytest.approx(want, rel=1e-9, abs=1e-14)
        assert hellinger_direct(WA, WB, hA[i], hB[i]) == pytest.approx(want, rel=1e-9)
    h2 = [e["hellinger_squared"] for e in r.top]
    assert h2 == sorted(h2, reverse=True)


# ------------------------------------------------------------------ the search
def test_search_never_lowers_the_best_and_keeps_the_budget():
    rng = np.random.default_rng(5)
    weights = rng.random(50)

    def score(batch):              # a deterministic made-up H^2 of a prompt
        h = [float(np.tanh(weights[np.array(p)].sum() / 20)) * (1 + 0.01 * len(p)) % 1 for p in batch]
        order = np.argsort(h)[::-1][:4]
        return [(int(i), h[i]) for i in order]

    start = [(0.2, [1, 2, 3]), (0.1, [4, 5]), (0.05, [6, 7, 8, 9])]
    res = beam_search(start, score, budget=230, pool=np.arange(50), beam=4, per_round=40,
                      max_len=12, next_tokens=lambda ids: [ids[-1]],
                      roundtrip=lambda ids: 13 not in ids, seed=0)
    best = [h for _, h in res.history]
    assert best == sorted(best) and best[0] == 0.2 and best[-1] >= 0.2
    assert res.scored == 230 and res.history[-1][0] == 230
    assert all(len(ids) <= 12 and 13 not in ids for _, ids in res.beam)
    assert res.beam[0][0] == best[-1]


# ------------------------------------------------------------------ K models (kway_audit.py)
def direct_d(a, b):
    """-log sum sqrt(p q) of softmax(a) and softmax(b), float64, straight from the formula."""
    p, q = np.exp(a - a.max()), np.exp(b - b.max())
    return -math.log(np.sum(np.sqrt(p / p.sum() * q / q.sum())))


def three_laws(seed=6, n=50, d=6, m=7, scale=(0.15, 0.4)):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, d))
    heads = [W, W + scale[0] * rng.standard_normal((n, d)), W + scale[1] * rng.standard_normal((n, d))]
    hA = 1.5 * rng.standard_normal((m, d))
    states = [hA, hA + 0.2 * rng.standard_normal((m, d)), hA + 0.3 * rng.standard_normal((m, d))]
    return heads, states


def test_kway_pair_distances_direct_and_in_the_block_form():
    from bhtcli.models.kway import KModels
    from kway_audit import logits, pair_distances, pairs_of
    heads, states = three_laws()
    L = logits(heads, states)
    D = pair_distances(L)
    assert pairs_of(3) == [(0, 1), (0, 2), (1, 2)]
    for p, (i, j) in enumerate(pairs_of(3)):
        for l in range(L[0].shape[1]):
            assert D[p, l] == pytest.approx(direct_d(L[i][:, l], L[j][:, l]), rel=1e-10)
    # the block form: M_k = W_k in block k of n x 3d, x = [h_A; h_B; h_C]
    n, d = heads[0].shape
    blocks = [np.zeros((n, 3 * d)) for _ in range(3)]
    for k in range(3):
        blocks[k][:, k * d:(k + 1) * d] = heads[k]
    X = np.hstack(states).T
    assert np.allclose(KModels(blocks).pair_distances(X), D, rtol=1e-9, atol=1e-15)
    # the laws as models: L_k with the unit queries
    assert np.allclose(KModels(L).pair_distances(np.eye(L[0].shape[1])), D, rtol=1e-9, atol=1e-15)


def test_kway_counts_and_simulation_agree_with_the_block_form():
    import bhtcli
    from kway_audit import counts, logits, simulate
    heads, states = three_laws(m=1)
    L = logits(heads, states)
    c = counts(L, [1.0])
    n, d = heads[0].shape
    blocks = [np.zeros((n, 3 * d)) for _ in range(3)]
    for k in range(3):
        blocks[k][:, k * d:(k + 1) * d] = heads[k]
    x = np.hstack([s[0] for s in states])
    s = bhtcli.simulate(blocks, float(np.linalg.norm(x)) * (1 + 1e-9), query=x, policy="fixed",
                        trials=2000, seed=1)
    assert (c["lower"], c["predicted"], c["upper"]) == (s.fixed["lower"], s.fixed["predicted"], s.fixed["upper"])
    sim = simulate(L, [1.0], trials=2000, seed=1)
    assert sim["empirical"] == s.fixed["empirical"]          # the same Monte Carlo, seeded alike
    lo, hi = sim["interval"]
    assert lo <= sim["empirical"] <= hi
    assert lo <= c["predicted"] <= hi                          # the prediction inside the interval
    assert c["lower"] <= c["predicted"] <= c["upper"]


def test_schedule_is_bhts_programme_and_beats_a_brute_force_grid():
    from kway_audit import schedule
    # three candidate prompts, each good for a different pair: mixing them pays
    D = np.array([[0.30, 0.02, 0.05],
                  [0.03, 0.25, 0.06],
                  [0.04, 0.05, 0.20]])
    s = schedule(D)
    grid = [(a / 200, b / 200, 1 - (a + b) / 200) for a in range(201) for b in range(201 - a)]
    best = max(min(D @ np.array(w)) for w in grid)
    assert best <= s["bottleneck_d"] + 1e-12 and s["bottleneck_d"] <= best + 2e-3
    w = np.zeros(3)
    w[s["columns"]] = s["weights"]
    assert w.sum() == pytest.approx(1) and (w >= 0).all()
    assert s["bottleneck_d"] > D.min(axis=0).max() * 2          # far better than one prompt
    assert s["bottleneck_d"] == pytest.approx(s["lp_value"], rel=1e-9)
    # one dominant prompt: the schedule is that prompt alone
    s1 = schedule(np.array([[0.3, 0.1], [0.2, 0.05], [0.4, 0.3]]))
    assert s1["columns"] == [0] and s1["weights"] == [1.0]


def test_ml_errors_drawn_answers_match_exact_enumeration():
    """bht's K-way Monte Carlo draws few answers among many categories one by one (inverse
    CDF), many with a multinomial table: both against the exact error of the maximum-likelihood
    test by enumerating every answer sequence."""
    import itertools
    from bhtcli.commands.kway_loop import DRAW_FRACTION, ml_errors_mc
    rng = np.random.default_rng(7)
    for n, c in ((64, 2), (40, 3)):
        lp = rng.standard_normal((3, n)) * np.array([[1.0], [1.3], [0.8]])
        lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
        assert (c * DRAW_FRACTION < n) == (n == 64)               # one case per path
        exact = np.zeros(3)
        for seq in itertools.product(range(n), repeat=c):
            s = lp[:, seq].sum(axis=1)
            ties = s >= s.max() - 1e-9 * max(1.0, abs(s.max()))
            for k in range(3):
                exact[k] += math.exp(s[k]) * (1 - ties[k] / ties.sum())
        trials = 20000
        mc = ml_errors_mc([lp], [c], trials, np.random.default_rng(8))
        se = np.sqrt(exact * (1 - exact) / trials)
        assert np.all(np.abs(mc - exact) <= 4 * se + 1e-12), (n, c, mc, exact)


def test_head_only_design_with_two_identical_heads():
    from kway_audit import head_only_design
    rng = np.random.default_rng(9)
    W = rng.standard_normal((30, 4))
    Wc = W + 0.3 * rng.standard_normal((30, 4))
    h = head_only_design([W, W.copy(), Wc], 2.0)
    assert not h["distinguishable"] and h["bottleneck_d"] == 0.0 and "same softmax model" in h["message"]
    ac, bc = h["pairs"][1], h["pairs"][2]
    assert h["pairs"][0]["identical_heads"] and ac["hellinger_squared"] == bc["hellinger_squared"] > 0
    import bhtcli
    assert ac["hellinger_squared"] == pytest.approx(bhtcli.design(W, Wc, 2.0, dtype="float32",
                                                                  starts=8).hellinger_squared)
    h3 = head_only_design([W, W + 0.2 * rng.standard_normal((30, 4)), Wc], 2.0)
    assert h3["distinguishable"] and h3["bottleneck_d"] > 0


def test_run_kway_on_the_tiny_model(tiny_file, tmp_path):
    from audit import Pair
    from kway_audit import pair_distances, logits, run_kway
    pair = Pair("Q8_0", top=4, jobs=1, third="Q5_0", path=tiny_file)
    texts = ["the cat is the", "a cat", "cat is", "the cat", "is the cat", "the the cat is",
             "cat cat", "hello there, the cat"]
    ids = [pair.tok.encode(t) for t in texts]
    hA, hB = pair.hidden_of("AB", ids)
    pool = np.unique(np.concatenate([np.asarray(i) for i in ids]))
    beam = [ids[0] + [int(pool[1])], ids[2]]          # stands in for the pair search's beam
    heads = [pair.A.head.astype(np.float64), pair.B.head.astype(np.float64), pair.C.head.astype(np.float64)]
    d_ab = pair_distances(logits(heads[:2], [hA, hB]))[0]
    k = run_kway(pair, ids, [hA, hB], beam, budget=24, beam=3, per_round=8, trials=200, seed=0,
                 pool=pool, energy=float(np.median(np.linalg.norm(hA, axis=1))),
                 natural_d_ab=d_ab, natural_top=5, check_ids=ids[0], out_dir=tmp_path)
    kept = [ids[i] for i in np.argsort(-d_ab, kind="stable")[:5]]
    new_beam = [b for b in beam if b not in kept]      # the pair's beam prompts C has not seen
    assert k["search"]["scored"] == 24 and k["forward_passes"]["ABC"] == 24 + len(new_beam)
    assert k["search"]["started_from"] == {"natural": 3, "pair_beam": len(new_beam)}
    nat, srch, sch = k["best_natural"], k["best_searched"], k["schedule"]
    left = np.sort(d_ab)[::-1][5:]                     # the natural prompts C did not see
    assert k["natural"]["scored"] == 5 and k["natural"]["left_out_d_ab_max"] == pytest.approx(left.max())
    assert k["natural"]["exact"] == (nat["bottleneck_d"] > left.max() * 1.01)
    assert nat["token_ids"] in kept
    for rec in (nat, srch):                            # the recorded ids give the recorded D's
        hs = pair.hidden_of("ABC", [rec["token_ids"]])
        D = pair_distances(logits(heads, hs))[:, 0]
        assert [p["bhattacharyya_distance"] for p in rec["pairs"]] == pytest.approx(D, rel=1e-6)
        assert rec["bottleneck_d"] == pytest.approx(D.min(), rel=1e-6)
    best_single = max(nat["bottleneck_d"], srch["bottleneck_d"])
    assert sch["bottleneck_d"] >= best_single * (1 - 1e-9)
    assert sch["gain_exponent"] == pytest.approx(sch["bottleneck_d"] / best_single)
    assert sum(p["weight"] for p in sch["prompts"]) == pytest.approx(1)
    for rec in (nat, srch, sch):
        assert rec["lower"] <= rec["predicted"] <= rec["upper"]
        assert rec["empirical"] is not None and rec["interval"][0] <= rec["empirical"]
    hist = [h for _, h in k["search"]["history"]]
    assert hist == sorted(hist)
    assert set(k["natural"]["bottleneck_pair_counts"]) == {"A-B", "A-C", "B-C"}
    assert sum(k["natural"]["bottleneck_pair_counts"].values()) == 5
    assert k["check"]["token_ids"] == ids[0]
    import csv
    with open(tmp_path / "kway_candidates.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == k["candidates"]["count"] == 5 + len(new_beam) + 24 == sch["candidates"]
    b = [float(r["bottleneck_d"]) for r in rows]
    assert max(b) == pytest.approx(max(nat["bottleneck_d"], srch["bottleneck_d"]), rel=1e-12)
    assert sum(k["candidates"]["bottleneck_pair_counts"].values()) == len(rows)
    assert k["candidates"]["second_over_bottleneck_min"] >= 1

"""The engine floor over every build: when build B's law moves more with the engine settings
than A's, the floor, margin and `--min-margin` are B's -- in the ranking and in the search.

The tiny builds' own floors are small and alike, so build B here runs behind a fake engine: the
real llama.cpp engine of B.gguf whose logits under an F32 KV cache (one of the floor's settings)
are moved by a known amount. It keeps the engine's public interface (`bhtcli.engine`), so
`prompts` and the search see an ordinary build."""
import numpy as np
import pytest

from bhtcli import api
from bhtcli.commands import prompts as prompts_module
from bhtcli.engine import EngineSettings, open_engine
from tiny_llama import write_tiny

PROMPTS = ["Beautiful is better than", "Simple is better than complex and flat is",
           "Errors should never pass", "the better one", "it is not the one", "which one is more"]
SHIFT = 8.0           # added to one logit of B under the F32 KV cache


class ShiftedEngine:
    """The real engine of one build, with its logits under an F32 KV cache moved: +SHIFT on
    one token chosen from the prompt's ids, for every prompt `moved(ids)` selects."""

    def __init__(self, engine, moved):
        self._engine, self._moved = engine, moved

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def next_logits(self, prompts, progress=None):
        z = self._engine.next_logits(prompts, progress)
        for r, ids in enumerate(prompts):
            if self._moved(ids):
                z[r, (7 * sum(ids)) % z.shape[1]] += SHIFT
        return z


def log_softmax(z):
    z = np.asarray(z, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def plain_h2(za, zb):
    """H^2 = 1 - sum sqrt(p q) of the softmax laws, row by row (independent of bhtcli)."""
    return 1 - np.sum(np.exp(0.5 * (log_softmax(za) + log_softmax(zb))), axis=-1)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    d = tmp_path_factory.mktemp("floor")
    a, b = d / "A.gguf", d / "B.gguf"
    ta = write_tiny(a, seed=0)
    rng = np.random.default_rng(5)
    write_tiny(b, tensors={k: v + 0.02 * rng.standard_normal(v.shape).astype(np.float32)
                           for k, v in ta.items()})
    f = d / "prompts.txt"
    f.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    return str(a), str(b), str(f)


def shift_b(monkeypatch, b_path, moved):
    """`prompts` opens build B's F32-KV engine as a ShiftedEngine."""
    def fake_open(path, settings=None):
        engine = open_engine(path, settings)
        if str(path) == b_path and settings is not None and settings.kv_type == "f32":
            return ShiftedEngine(engine, moved)
        return engine
    monkeypatch.setattr(prompts_module, "open_engine", fake_open)


def test_the_floor_is_b_s_when_b_moves_more(builds, monkeypatch):
    a, b, f = builds
    shift_b(monkeypatch, b, lambda ids: True)
    r = api.prompts([a, b], f, top=len(PROMPTS), sequences=1)
    assert len(r.top) == len(PROMPTS)
    one = EngineSettings(sequences=1)
    for e in r.top:
        ids = e["token_ids"]
        z_b = open_engine(b, one).next_logits([ids])[0]
        z_b32 = open_engine(b, EngineSettings(sequences=1, kv_type="f32")).next_logits([ids])[0]
        z_b32[(7 * sum(ids)) % len(z_b32)] += SHIFT
        b_floor = float(plain_h2(z_b, z_b32))                # B, F16 against shifted F32
        assert e["floor_build"] == 1
        assert e["floors"][1] > 100 * e["floors"][0]
        assert e["floor_hellinger_squared"] == e["floors"][1]
        assert e["floor_hellinger_squared"] >= b_floor * (1 - 1e-6)
        # flash attention (the other setting) moves B's law far less than the shift
        assert e["floor_hellinger_squared"] == pytest.approx(b_floor, rel=1e-3)
        assert e["margin"] == pytest.approx(e["hellinger_squared"] / b_floor, rel=1e-3)
        assert e["flagged"]
        assert 0 < e["error_shift"] <= 1


def test_min_margin_uses_b_s_floor(builds, monkeypatch):
    a, b, f = builds
    plain = api.prompts([a, b], f, top=len(PROMPTS), sequences=1)
    assert max(e["floor_hellinger_squared"] for e in plain.top) < 1e-3   # the tiny builds' own
    ok = [e for e in plain.top if e["margin"] is None or e["margin"] >= 10]
    assert ok                                   # without the shift, prompts pass margin 10
    shift_b(monkeypatch, b, lambda ids: True)
    r = api.prompts([a, b], f, top=len(PROMPTS), min_margin=10, sequences=1)
    assert r.top == [] and r.excluded == len(PROMPTS)


def test_min_margin_drops_found_prompts_below_it(builds, monkeypatch):
    """Build B moves under the F32 KV cache at every edited prompt, not at the natural ones:
    with --min-margin every found prompt passes it (the edited ones are dropped); without it
    the found prompts carry B's floor and their flag."""
    a, b, f = builds
    natural = {tuple(open_engine(a, EngineSettings(sequences=1)).tokenize(p)) for p in PROMPTS}
    shift_b(monkeypatch, b, lambda ids: tuple(ids) not in natural)
    free = api.prompts([a, b], f, top=4, search=200, seed=3, sequences=8).search
    edited = [e for e in free["found"] if e["edits"] > 0]
    assert edited, "the search should find edited prompts on these builds"
    assert all(e["floor_build"] == 1 and e["flagged"] for e in edited), \
        [(e["floors"], e["hellinger_squared"]) for e in edited]
    assert free["margin_dropped"] == 0 and free["margin_checked"] == len(free["found"])

    kept = api.prompts([a, b], f, top=4, search=200, seed=3, sequences=8, min_margin=10).search
    assert kept["found"], "the starts pass margin 10"
    assert all(e["margin"] is None or e["margin"] >= 10 for e in kept["found"])
    assert all(e["edits"] == 0 for e in kept["found"])
    assert kept["margin_dropped"] >= len(edited)
    assert kept["passes"] == free["passes"] <= 200             # the budget is the search's
    per_prompt = 2 + 2 * 3                      # K builds alone, each under 3 floor settings
    assert kept["report_passes"] == kept["margin_checked"] * per_prompt
    # independently: each found prompt's floor under B's shifted F32 cache
    for e in kept["found"]:
        ids = e["token_ids"]
        z_b = open_engine(b, EngineSettings(sequences=1)).next_logits([ids])[0]
        z_b32 = open_engine(b, EngineSettings(sequences=1, kv_type="f32")).next_logits([ids])[0]
        assert e["hellinger_squared"] >= 10 * float(plain_h2(z_b, z_b32)) * (1 - 1e-6)


def test_error_shift_bounds_the_exact_total_variation_of_n_answers():
    """Le Cam's bound against the total variation of the n-answer laws, enumerated."""
    import itertools
    from bhtcli.maths.laws import error_shift, setting_floors
    rng = np.random.default_rng(0)
    for _ in range(20):
        p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
        h2 = 1 - np.sum(np.sqrt(p * q))
        for n in (1, 2, 4):
            tv = 0.5 * sum(abs(np.prod(p[list(w)]) - np.prod(q[list(w)]))
                           for w in itertools.product(range(4), repeat=n))
            bound = error_shift(h2, n)
            assert bound == pytest.approx(np.sqrt(1 - (1 - h2) ** (2 * n)), rel=1e-12)
            assert tv <= bound + 1e-12
    assert error_shift(0.0, 5) == 0 and error_shift(1.0, 1) == 1 and error_shift(0.1, None) is None
    # the floor of each build: the largest H^2 over its other settings
    la, lb = np.log([[0.5, 0.5]]), np.log([[0.9, 0.1]])
    f = setting_floors([la, la], [[la, lb], [la]])
    assert f[0, 0] == pytest.approx(1 - np.sqrt(0.45) - np.sqrt(0.05)) and f[1, 0] == 0


def test_equal_laws_are_flagged_and_left_out(tmp_path):
    """Two files of the same weights: H^2 is 0 on every prompt, and so is the floor's share of
    it. Such a prompt cannot tell the builds apart: it is flagged, and --min-margin leaves it out
    (a zero floor does not make a zero H^2 pass)."""
    from bhtcli.maths.laws import clears_floor
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write_tiny(a, seed=4)
    write_tiny(b, seed=4)
    r = api.prompts([a, b], PROMPTS, top=3, hash_files=False, temperature=0.7, top_k=1)
    assert r.top and all(e["hellinger_squared"] == 0 and e["flagged"] for e in r.top)
    kept = api.prompts([a, b], PROMPTS, top=3, hash_files=False, temperature=0.7, top_k=1,
                       min_margin=1.0)
    assert kept.top == [] and kept.excluded == len(PROMPTS)
    assert not clears_floor(0.0, 0.0, 10) and clears_floor(1e-9, 0.0, 10)
    assert clears_floor(1.0, 0.1, 10) and not clears_floor(0.99, 0.1, 10)

"""K >= 3 checkpoints that declare final_logit_softcapping read out with softcap:C when no
--links is given, as a pair's do (models/spec.py: checkpoint_links, one rule for both):
a note per model, the same JSON as the explicit --links, and --links wins."""
import json

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from bhtcli import api
from cli_run import run
from test_checkpoints import hf_folder
from test_gguf import write_gguf


@pytest.fixture
def three(tmp_path):
    """Three checkpoints of 30 x 6 heads: a GGUF file and an HF folder declaring caps 3 and 2,
    and a plain .npy (declares nothing)."""
    rng = np.random.default_rng(21)
    W = rng.standard_normal((30, 6)).astype(np.float32)
    step = lambda: 0.4 * rng.standard_normal(W.shape).astype(np.float32)
    g = write_gguf(tmp_path / "g.gguf", {"token_embd.weight": (W, None)}, "gemma2",
                   {"gemma2.final_logit_softcapping": 3.0})
    f = hf_folder(tmp_path / "f", {"model.embed_tokens.weight": W + step()},
                  {"model_type": "gemma2", "final_logit_softcapping": 2.0})
    p = str(tmp_path / "p.npy")
    np.save(p, (W + step()).astype(np.float64))
    return [g, f, p]


def _strip(d):
    d.pop("run", None), d.pop("seconds", None)
    for key in ("seconds", "pass_seconds", "search_seconds"):
        (d.get("solver") or {}).pop(key, None)
    return d


DECLARED = "softcap:3,softcap:2,exp"


@pytest.mark.parametrize("command", ["design", "bound"])
def test_cli_reads_each_declared_softcap(three, capsys, command):
    code, out, err = run(capsys, command, *three, "-E", "1.5", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["readout"] == {"links": ["softcap:3", "softcap:2", "exp"], "biases": [False] * 3}
    assert f"{three[0]} declares final_logit_softcapping 3: model 1 reads out with softcap:3 " \
           "(set --links to change it)" in err
    assert f"{three[1]} declares final_logit_softcapping 2: model 2 reads out with softcap:2 " \
           "(set --links to change it)" in err
    assert "model 3" not in err
    code, out, err = run(capsys, command, *three, "-E", "1.5", "--json", "--links", DECLARED)
    assert code == 0 and "declares" not in err
    assert _strip(got) == _strip(json.loads(out))
    # --links wins: every model exp is the plain design (no readout key)
    code, out, err = run(capsys, command, *three, "-E", "1.5", "--json", "--links", "exp,exp,exp")
    assert code == 0 and "declares" not in err and "readout" not in json.loads(out)


def test_api_commands_read_them_too(three):
    """rank, decide and simulate of K models take the same read-outs (the JSON's readout),
    and give what the explicit links give, not what plain models give."""
    H = np.random.default_rng(2).standard_normal((8, 6))
    x = H[0]
    answers = [0, 3, 3, 7, 1]
    calls = {
        "rank": lambda **kw: api.rank(three, H, energy=3.0, top=2, **kw),
        "decide": lambda **kw: api.decide(three, x, answers, **kw),
        "simulate": lambda **kw: api.simulate(three, energy=1.0, query=x[None] / np.linalg.norm(x),
                                              trials=200, policy="fixed", **kw),
    }
    for name, call in calls.items():
        implied, explicit, plain = (_strip(call(**kw).to_dict())
                                    for kw in ({}, {"links": DECLARED}, {"links": "exp,exp,exp"}))
        if name != "decide":                  # decide's JSON has no readout key
            assert implied["readout"]["links"] == ["softcap:3", "softcap:2", "exp"], name
        assert implied == explicit and implied != plain, name


def test_biases_alone_keep_the_declared_links(three, tmp_path):
    b = np.random.default_rng(5).standard_normal(30)
    biases = [None, None, b]
    implied = api.bound(three, energy=1.0, biases=biases).to_dict()
    explicit = api.bound(three, energy=1.0, biases=biases, links=DECLARED).to_dict()
    assert implied["readout"] == {"links": ["softcap:3", "softcap:2", "exp"],
                                  "biases": [False, False, True]}
    assert _strip(implied) == _strip(explicit)


def test_the_pair_is_unchanged(three, capsys):
    code, out, err = run(capsys, "bound", three[0], three[1], "-E", "1.5", "--json")
    assert code == 0 and json.loads(out)["readout"]["link_a"] == "softcap:3"
    assert json.loads(out)["readout"]["link_b"] == "softcap:2"
    assert "model A reads out with softcap:3 (set --link-a to change it)" in err
    assert "model B reads out with softcap:2 (set --link-b to change it)" in err


@pytest.mark.slow
def test_simulate_adaptive_reads_the_declared_links(three, capsys):
    """The adaptive rule of K softcapped checkpoints (was refused): their declared links, the
    output of the explicit --links bit for bit, and not that of --links exp,exp,exp."""
    args = ("simulate", *three, "-E", "1", "--policy", "adaptive", "--trials", "200", "--json")
    code, out, err = run(capsys, *args)
    assert code == 0, err
    implied = json.loads(out)
    assert implied["readout"]["links"] == ["softcap:3", "softcap:2", "exp"]
    assert implied["adaptive"]["queries"]
    code, out, err = run(capsys, *args, "--links", DECLARED)
    assert code == 0 and "declares" not in err
    assert _strip(implied) == _strip(json.loads(out))
    code, out, err = run(capsys, *args, "--links", "exp,exp,exp")
    assert code == 0 and "readout" not in json.loads(out)
    assert json.loads(out)["adaptive"] != implied["adaptive"]

"""ModelSpec: the rules about which options go with which model, in one place, and every
entry point (API, CLI, manifest) going through them."""
import dataclasses

import numpy as np
import pytest

from bhtcli import api
from bhtcli.cli.main import main
from bhtcli.errors import InputError, parameter_names
from bhtcli.models.links import Link
from bhtcli.models.spec import ModelSpec

ROOT_A, ROOT_B = "examples/A.npy", "examples/B.npy"
LEV_A, LEV_B = "examples/leverage_A.npy", "examples/leverage_B.npy"


def test_softmax_spec_parses_and_is_frozen():
    spec = ModelSpec.build("softmax", 2, link_b="taylor:4", dtype="float32")
    assert (spec.family, spec.energy, spec.floor, spec.dtype) == ("softmax", 2.0, None, "float32")
    assert spec.link_a == Link("exp") and spec.link_b == Link("taylor", 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.energy = 3.0


def test_leverage_spec_is_a_box():
    spec = ModelSpec.build("leverage", 4, 1)
    assert spec.leverage and spec.box == (4.0, 1.0) and spec.readout_options() == {}


@pytest.mark.parametrize("kwargs,message", [
    (dict(model="softmax", energy=1, floor=1), "floor applies to model leverage only"),
    (dict(model="softmax", energy=0), "energy must be a finite number > 0"),
    (dict(model="softmax", energy=None), "energy is required here"),
    (dict(model="leverage", energy=4), "floor is required: model leverage needs a floor"),
    (dict(model="leverage", energy=1, floor=4), "energy must be a finite number >= floor"),
    (dict(model="leverage", energy=4, floor=0), "floor must be a finite number > 0"),
    (dict(model="leverage", energy=4, floor=1, link_b="poly:2"), "leverage models take neither (drop link_b)"),
    (dict(model="leverage", energy=4, floor=1, bias_a="b.npy"), "(drop bias_a)"),
    (dict(model="leverage", energy=4, floor=1, dtype="float32"), "dtype float32 is for softmax-family models"),
    (dict(model="gauss", energy=1), "model must be one of softmax, leverage"),
    (dict(model="softmax", energy=1, link_a="taylor:3"), "link_a 'taylor:3': K must be even"),
])
def test_rules_in_library_terms(kwargs, message):
    with pytest.raises(InputError) as info:
        ModelSpec.build(kwargs.pop("model"), kwargs.pop("energy", None), kwargs.pop("floor", None), **kwargs)
    assert message in str(info.value)
    assert "--" not in str(info.value)             # the library names its parameters, not flags


def test_a_front_end_names_its_own_options():
    flag = lambda name: "--" + name.replace("_", "-")
    with parameter_names(flag):
        with pytest.raises(InputError, match="--floor applies to --model leverage only"):
            ModelSpec.build("softmax", 1, 1)
        with pytest.raises(InputError, match=r"drop --link-a"):
            ModelSpec.build("leverage", 4, 1, link_a="poly:2")
    with pytest.raises(InputError, match="^floor applies"):      # the context ends with the block
        ModelSpec.build("softmax", 1, 1)


def test_no_budget_for_sample_and_decide():
    assert ModelSpec.build("softmax", need_energy=False).energy is None
    assert ModelSpec.build("leverage", need_energy=False).floor is None


@pytest.mark.parametrize("argv,message", [
    (["sample", LEV_A, "--model", "leverage", "--query", "examples/x.npy", "--count", "2",
      "--link-a", "poly:2"], "Error: links and biases apply to softmax models; leverage models take neither (drop --link-a)"),
    (["decide", LEV_A, LEV_B, "examples/answers.txt", "--model", "leverage", "--query", "examples/x.npy",
      "--bias-b", "examples/x.npy"], "(drop --bias-b)"),
    (["bound", ROOT_A, ROOT_B, "--energy", "1", "--floor", "1"], "Error: --floor applies to --model leverage only"),
    (["simulate", LEV_A, LEV_B, "--model", "leverage", "--energy", "4", "--floor", "1", "--dtype", "float32"],
     "Error: --dtype float32 is for softmax-family models"),
    (["design", LEV_A, LEV_B, "--model", "leverage", "--energy", "4", "--floor", "1", "--method", "ccp"],
     "Error: --method ccp is for softmax models"),
])
def test_every_command_applies_the_same_rules(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_design_accepts_a_spec_or_its_settings():
    spec = ModelSpec.build("leverage", 4, 1)
    by_spec = api.design(LEV_A, LEV_B, model=spec, starts=2).to_dict()
    by_keywords = api.design(LEV_A, LEV_B, 4, model="leverage", floor=1, starts=2).to_dict()
    for r in (by_spec, by_keywords):
        r.pop("seconds"), r["solver"].pop("seconds"), r["solver"].pop("search_seconds")   # timings
    assert by_spec == by_keywords and by_spec["model"] == "leverage"
    with pytest.raises(TypeError, match="give energy in the spec"):
        api.design(LEV_A, LEV_B, 4, model=spec)


def test_manifest_rows_use_the_spec_rules(tmp_path):
    from bhtcli.sweep.manifest import read_manifest
    for name in ("A.npy", "B.npy"):
        np.save(tmp_path / name, np.load(f"examples/{name}"))
    (tmp_path / "m.csv").write_text("a,b,energy,model,floor,dtype\nA.npy,B.npy,4,leverage,1,float32\n"
                                    "A.npy,B.npy,4,leverage,,\nA.npy,B.npy,1,,,float32\n")
    tasks = read_manifest(str(tmp_path / "m.csv")).tasks
    assert "dtype float32 is for softmax-family models" in tasks[0].problem
    assert "floor is required" in tasks[1].problem and "--" not in tasks[1].problem
    assert tasks[2].problem is None

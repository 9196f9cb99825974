"""The floor plan (docs/architecture.md): no import circles, arrows one way between the layers,
pure numerics in maths/, a command line that talks to the library through bhtcli.api only,
and no module importing another's private names. Every import counts, local ones too."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "bhtcli"

# bottom to top; a module may import its own layer and the layers below it
LAYERS = [
    {"bhtcli.errors", "bhtcli.settings"},
    {"bhtcli.maths"},
    {"bhtcli.results", "bhtcli.schema", "bhtcli.io"},
    {"bhtcli.engine"},
    {"bhtcli.models"},
    {"bhtcli.search"},
    {"bhtcli.analysis"},
    {"bhtcli.commands"},
    {"bhtcli.sweep"},
    {"bhtcli.api"},
    {"bhtcli.cli", "bhtcli.__main__"},
]


def _modules():
    mods = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


MODULES = _modules()


def _imports(name, path):
    """(target module, imported names) for every import of a bhtcli module in `path`."""
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.split(".")[0] == "bhtcli"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "bhtcli":
                continue
            names = [a.name for a in node.names]
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            out += [(s, []) for s in subs] + [(base, [n for n in names if f"{base}.{n}" not in MODULES])]
    return out


def _resolve(target):
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target


def _layer(module):
    for i, layer in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in layer):
            return i
    return None


EDGES = {m: {_resolve(t) for t, _ in _imports(m, p)} - {m, None} for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != "bhtcli" and _layer(m) is None] == []


def test_no_import_circles():
    # a package's __init__ re-exports; it is no layer
    edges = {m: {w for w in targets if w != "bhtcli" and MODULES[w].name != "__init__.py"}
             for m, targets in EDGES.items()}
    assert _circles(edges, name=str) == []


def test_arrows_point_down():
    up = [(m, t) for m, targets in EDGES.items() for t in targets
          if t != "bhtcli" and _layer(m) is not None and _layer(t) > _layer(m)]
    assert up == []


def test_maths_is_numpy_and_scipy_only():
    allowed_roots = {"numpy", "scipy", "math", "dataclasses", "__future__", "bhtcli", "typing",
                     "functools", "warnings", "statistics"}   # statistics: the normal quantile
    for name, path in MODULES.items():
        if not name.startswith("bhtcli.maths"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert roots <= allowed_roots, (name, roots)
        bht = {t for t in EDGES[name] if t != "bhtcli"}
        assert all(t.startswith("bhtcli.maths") or t == "bhtcli.settings" for t in bht), (name, bht)


def test_the_command_line_talks_to_the_api_only():
    for name in MODULES:
        if name.startswith("bhtcli.cli"):
            outside = {t for t in EDGES[name] if not t.startswith("bhtcli.cli")} - {"bhtcli.api"}
            assert outside == set(), name


def test_no_module_imports_another_modules_private_names():
    leaks = [(m, t, n) for m, p in MODULES.items() for t, names in _imports(m, p)
             for n in names if n.startswith("_") and not n.startswith("__") and _resolve(t) != m]
    assert leaks == []


@pytest.mark.parametrize("package", ["maths", "analysis", "search", "commands", "models", "io"])
def test_the_library_never_imports_click_or_rich(package):
    for path in (ROOT / package).rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "import click" not in text and "from rich" not in text, path


def _message_strings(path):
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_library_messages_name_parameters_not_flags():
    """Below the CLI a message names `energy`, never `--energy`: errors.parameter_name maps
    names to flags only when the command line calls (schema.py documents the CLI's JSON)."""
    import re
    flags = [(str(p.relative_to(ROOT)), line, text[:60]) for name, p in MODULES.items()
             if not name.startswith("bhtcli.cli") and name != "bhtcli.schema"
             for line, text in _message_strings(p) if re.search(r"--[a-z]", text)]
    assert flags == []


@pytest.mark.parametrize("call", [
    lambda np_, api: api.design(np_.ones((3, 2)), np_.zeros((3, 2)), -1.0),
    lambda np_, api: api.design(np_.eye(3), np_.zeros((3, 3)), 1.0, candidates=np_.eye(3),
                                subspace=np_.eye(3)),
    lambda np_, api: api.design(np_.eye(3), np_.zeros((3, 3)), 1.0, names=["a"]),
    lambda np_, api: api.design(np_.eye(3), np_.zeros((3, 3)), 1.0, method="ccp",
                                candidates=np_.eye(3)),
    lambda np_, api: api.rank(np_.eye(3), np_.zeros((3, 3)), np_.ones((2, 5))),
    lambda np_, api: api.bound(np_.eye(3), np_.zeros((3, 3)), 1.0, model="leverage"),
    lambda np_, api: api.design(np_.eye(3), np_.zeros((3, 3)), "1,2", queries=3),
    lambda np_, api: api.simulate(np_.eye(3), np_.zeros((3, 3)), 1.0, trials=3),
])
def test_library_errors_speak_in_parameter_names(call):
    import numpy as np

    from bhtcli import api
    with pytest.raises(api.BhtError) as info:
        call(np, api)
    assert "--" not in str(info.value), str(info.value)


# ---------------------------------------------------------------- the whole tree's imports
TREE = ROOT.parent
SKIP_DIRS = {".venv", "build", "dist", ".git", "__pycache__", ".hypothesis", ".pytest_cache"}


def _tree_files():
    """Every .py file of the repository (bhtcli/, benchmarks/, tests/, examples/), by path."""
    return sorted(p for p in TREE.rglob("*.py")
                  if not SKIP_DIRS & set(p.relative_to(TREE).parts)
                  and not any(part.endswith(".egg-info") for part in p.relative_to(TREE).parts))


def _tree_edges():
    """path -> the repository files it imports. `bhtcli...` names resolve in the package; any
    other name resolves as the script or test runner would find it: a module or package beside
    the importing file (benchmarks' `from pairs import ...`, tests' helpers, `-m fuzz` from
    tests/). Relative imports resolve in their package. Package __init__ files re-export and
    are no nodes, as in test_no_import_circles."""
    files = set(_tree_files())

    def find(folder, dotted):
        parts = dotted.split(".") if dotted else []
        while parts:
            base = folder.joinpath(*parts)
            for cand in (base.with_suffix(".py"), base / "__init__.py"):
                if cand in files:
                    return cand
            parts = parts[:-1]
        return None

    edges = {}
    for path in files:
        out = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [(a.name, 0) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = [(f"{node.module}.{a.name}" if node.module else a.name, node.level)
                           for a in node.names] + [(node.module or "", node.level)]
            else:
                continue
            for name, level in targets:
                if level:
                    folder = path.parent
                    for _ in range(level - 1):
                        folder = folder.parent
                    hit = find(folder, name)
                elif name.split(".")[0] == "bhtcli":
                    hit = find(TREE, name)
                else:
                    hit = find(path.parent, name)
                if hit is not None and hit != path and hit.name != "__init__.py":
                    out.add(hit)
        edges[path] = out
    return edges


def _circles(edges, name=lambda p: str(p.relative_to(TREE))):
    """The strongly connected components of more than one node (Tarjan), each as the sorted
    names of its nodes."""
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(name(p) for p in comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles_in_the_whole_tree():
    """benchmarks/, tests/ and examples/ included: a benchmark that imports another which
    imports it back is a circle too (its shared part belongs in a module both import, as
    benchmarks/pairs.py)."""
    edges = _tree_edges()
    assert any(p.parts[-2:] == ("benchmarks", "pairs.py") for t in edges.values() for p in t)
    assert _circles(edges) == []


def test_the_whole_tree_circle_check_sees_a_circle():
    a, b = TREE / "benchmarks" / "a.py", TREE / "benchmarks" / "b.py"
    assert _circles({a: {b}, b: {a}}) == [["benchmarks/a.py", "benchmarks/b.py"]]


def test_the_version_lives_in_the_bottom_layer():
    """__version__ lives in settings.py, the bottom layer; the package and api.py re-export it
    (the CLI reads it from api.py, its one door), and pyproject.toml declares the same release."""
    import re
    import bhtcli
    from bhtcli import api, settings
    assert bhtcli.__version__ == api.__version__ == settings.__version__
    pyproject = (TREE / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == settings.__version__
    readers = [(m, t) for m, p in MODULES.items() for t, names in _imports(m, p)
               if "__version__" in names and t != "bhtcli.settings"
               and not (m.startswith("bhtcli.cli") and t == "bhtcli.api")]
    assert readers == [], "import __version__ from bhtcli.settings"


# ---------------------------------------------------------------- the code map is complete
ARCHITECTURE = TREE / "docs" / "architecture.md"


def _documented_modules():
    """The module paths the code map of docs/architecture.md names (`maths/counts.py`, and a
    package as `maths/`)."""
    import re
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Code map", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\s*- `([A-Za-z0-9_/]+(?:\.py|/))`", section, re.M))


def _package_modules():
    out = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if "__pycache__" in rel.parts:
            continue
        out.add(f"{rel.parent.as_posix()}/" if path.name == "__init__.py" and rel.parent.parts
                else rel.as_posix())
    return out


def test_the_code_map_names_every_module():
    documented, actual = _documented_modules(), _package_modules()
    missing, gone = sorted(actual - documented), sorted(documented - actual)
    assert not missing and not gone, (
        "docs/architecture.md's code map and bhtcli/ disagree: "
        + (f"add one line each for {', '.join(missing)}" if missing else "")
        + ("; " if missing and gone else "")
        + (f"remove {', '.join(gone)} (no such module)" if gone else ""))


def test_the_architecture_page_states_the_thread_invariant():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert "only `models/threads.py`" in text and "single_threaded()" in text and "beside(" in text

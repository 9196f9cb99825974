"""Which real prompt makes all-MiniLM-L6-v2's int8 round-trip most detectable?

1. Checks the numpy encoder (encoder.py) against the model's documented sentence
   similarities (the sentence-transformers quick start with all-MiniLM-L6-v2:
   cos("The weather is lovely today.", "It's so sunny outside!") = 0.6660, with "He drove to
   the stadium." 0.1046 and 0.1411, printed to 4 decimals).
2. Takes --sentences real sentences (sentences.py: text that Python ships), replaces each one's
   last word by [MASK] and computes the final hidden state x at the [MASK] position: what
   reaches the output layer when a fill-mask API completes the prompt.
3. Writes, in --out (default examples/reachable_audit/out): H.npy (m x 384 float32, one row
   per prompt), names.txt (the prompts), int8.safetensors (B: A after a per-row int8
   round-trip, as in examples/quantization_audit) and model.safetensors (a link to the
   package's file; A = its embeddings.word_embeddings.weight).
4. Runs the bht commands below (printed before each run; their outputs are saved beside):
   design --candidates (the best prompt, top 10, reachable fraction against the optimum over
   the ball of radius max ||x||), design at the best prompt's own norm (the optimum at the
   same norm), design --subspace (the best query in the span of the prompts' top --rank
   principal directions), rank --out scores.csv (every prompt), and simulate at the best
   prompt's hidden state (predicted against empirical counts, with the plot).

Usage: .venv/bin/python examples/reachable_audit/audit.py [--sentences 2000] [--trials 2000]
(``make reach`` runs setup and this; about 2 minutes of encoder and 3-6 minutes of bht on
the shared 2-core machine with the defaults).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "quantization_audit"))

from encoder import Encoder, model_dir            # noqa: E402
from sentences import masked_prompt, real_sentences  # noqa: E402

DOCUMENTED = (["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."],
              np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]]))
TENSOR = "embeddings.word_embeddings.weight"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def verify(enc: Encoder) -> float:
    texts, want = DOCUMENTED
    e = enc.sentence_embeddings(texts)
    got = e @ e.T
    err = float(np.abs(np.round(got, 4) - want).max())
    print("check: cosine similarities of the documented sentences (model card quick start)")
    for i, j in ((0, 1), (0, 2), (1, 2)):
        print(f"  {texts[i]!r} vs {texts[j]!r}: {got[i, j]:.4f} (documented {want[i, j]:.4f})")
    if err > 1e-4:
        sys.exit(f"the numpy encoder does not reproduce the documented similarities (off by {err:.4f})")
    return err


def _short_path(arg: str) -> str:
    """Paths under the repository are shown relative to it (as in the docs)."""
    root = HERE.parent.parent
    head = arg.split(":")[0]
    if os.path.isabs(head) and Path(head).resolve().is_relative_to(root.resolve()) or \
            (os.path.islink(head) and Path(head).parent.resolve().is_relative_to(root.resolve())):
        return os.path.relpath(Path(head).parent.resolve(), root) + "/" + os.path.basename(arg)
    return arg


def bht(*args, save: Path | None = None) -> str:
    exe = Path(sys.executable).with_name("bht")
    cmd = [str(exe), *map(str, args)]
    shown = " ".join(shlex.quote(_short_path(a)) for a in map(str, args))
    print(f"\n$ bht {shown}", flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, COLUMNS="120"))
    if p.returncode != 0:
        sys.exit(p.stderr.strip())
    say(f"  ({time.perf_counter() - t0:.0f} s)")
    if save is not None:
        save.write_text(p.stdout)
    return p.stdout


def table_of(result: dict, save: Path) -> str:
    """bht's table for a design result given as its JSON (the renderer the CLI uses)."""
    import io
    from rich.console import Console
    from bhtcli.cli.render import render_design_table

    class Result:
        def to_dict(self):
            return result

    buf = io.StringIO()
    render_design_table(Result(), Console(file=buf, width=120, no_color=True, soft_wrap=False))
    save.write_text(buf.getvalue())
    return buf.getvalue()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=2000, help="how many prompts (default 2000)")
    parser.add_argument("--trials", type=int, default=2000, help="Monte Carlo trials of simulate (default 2000)")
    parser.add_argument("--starts", type=int, default=32, help="starts of the searches (default 32)")
    parser.add_argument("--rank", type=int, default=16,
                        help="directions of the subspace design: the top principal directions of H (default 16)")
    parser.add_argument("--out", default=str(HERE / "out"), help="folder for the inputs and outputs")
    parser.add_argument("--plot", default=str(HERE / "out" / "simulate.png"), help="simulate's plot (PNG)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()

    say("loading the encoder")
    enc = Encoder()
    verify(enc)

    t0 = time.perf_counter()
    sentences = real_sentences(args.sentences)
    prompts = [masked_prompt(s) for s in sentences]
    ids = enc.encode(prompts)
    say(f"encoding {len(prompts):,} prompts ({sum(map(len, ids)):,} tokens)")
    states = enc.hidden_states(ids)
    H = np.stack([h[t.index(enc.mask_id)] for h, t in zip(states, ids)]).astype(np.float32)
    t_enc = time.perf_counter() - t0
    norms = np.linalg.norm(H, axis=1)
    print(f"\n{len(prompts):,} prompts, final hidden state at [MASK]: ||x|| {norms.min():.2f} .. "
          f"{norms.max():.2f} (median {np.median(norms):.2f}); encoder {t_enc:.0f} s")
    np.save(out / "H.npy", H)
    (out / "names.txt").write_text("".join(p + "\n" for p in prompts), encoding="utf-8")

    from audit import int8_round_trip            # examples/quantization_audit/audit.py
    from safetensors.numpy import save_file
    link = out / "model.safetensors"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(model_dir() / "model.safetensors")
    save_file({"weight": int8_round_trip(enc.w[TENSOR])}, str(out / "int8.safetensors"))
    A, B = f"{link}:{TENSOR}", str(out / "int8.safetensors")

    common = ["--dtype", "float32", "--starts", args.starts]
    report = bht("design", A, B, "--candidates", out / "H.npy", "--names", out / "names.txt",
                 *common, "--json", save=out / "design_candidates.json")
    r = json.loads(report)
    c = r["candidates"]
    best = c["best_index"]
    np.save(out / "best.npy", H[best].astype(np.float64))
    print(table_of(r, out / "design_candidates.txt"))     # what the same command prints without --json
    norm = float(np.linalg.norm(H[best].astype(np.float64)))
    same = json.loads(bht("design", A, B, "--energy", f"{norm:.6f}", *common, "--json",
                          save=out / "design_same_norm.json"))
    print(f"optimum at the best prompt's own norm {norm:.4g}: H^2 {same['hellinger_squared']:.4g}, "
          f"predicted {same['samples']['predicted']:,} queries; the best prompt reaches "
          f"{100 * r['hellinger_squared'] / same['hellinger_squared']:.2g}% of it")
    # The span of the prompts' hidden states: the best query inside it is a target for prompt search.
    _, _, vt = np.linalg.svd(H.astype(np.float64), full_matrices=False)
    np.save(out / "V.npy", vt[:args.rank].T)
    sub = json.loads(bht("design", A, B, "--subspace", out / "V.npy", "--energy", f"{c['radius']:.6f}",
                         *common, "--json", save=out / "design_subspace.json"))
    print(f"optimum inside the span of the top {args.rank} principal directions of the prompts' "
          f"hidden states (||x|| <= {c['radius']:.4g}): H^2 {sub['hellinger_squared']:.4g}, predicted "
          f"{sub['samples']['predicted']:,} queries ({100 * sub['hellinger_squared'] / c['optimum']['hellinger_squared']:.2g}% "
          "of the unrestricted optimum)")
    print(bht("rank", A, B, out / "H.npy", "--names", out / "names.txt", "--dtype", "float32",
              "--out", out / "scores.csv", save=out / "rank.txt"))
    print(bht("simulate", A, B, "--energy", f"{c['radius']:.6f}", "--query", out / "best.npy",
              "--policy", "fixed", "--trials", args.trials, "--plot", args.plot, "--dtype", "float32",
              save=out / "simulate.txt"))
    say(f"done in {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()

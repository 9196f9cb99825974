"""Which prompt makes a re-encoded SmolLM2-135M-Instruct detectable through its next token?

Model A is the GGUF file as shipped (Q4_1 layers, Q8_0 tied embedding); model B re-encodes
every quantized tensor as --reencode (default Q8_0) with the gguf package, F32 tensors
unchanged: a provider that re-encodes the weights. Both run the numpy forward pass of
llama.py; a prompt p's next-token laws are softmax(W_A h_A(p)) and softmax(W_B h_B(p)).

bht scores such pairs exactly in the block form (docs/llm_audit.md): A_blk = [W_A, 0],
B_blk = [0, W_B] (n x 2d) and the query x = [h_A(p); h_B(p)], so softmax(A_blk x) and
softmax(B_blk x) are the two next-token laws. Steps:

1. Check: "The capital of France is" -> top logit " Paris"; greedy continuation printed.
2. --prompts natural prompts (prompts.py), scored with bhtcli.rank in the block form.
3. A beam search over token substitutions and extensions (search.py) from the best natural
   prompts, --budget prompts scored (each one forward pass of both models), batches scored
   by bhtcli.rank; H^2 against forward passes is plotted.
4. The head-only design bhtcli.design(W_A, W_B, energy = median ||h_A|| of the prompts).
5. bhtcli.simulate (fixed n, --trials per model) at the best natural and the best searched
   prompt, with the query given: empirical n against predicted.
6. K = 3 (kway_audit.py): model C re-encodes every quantized tensor as --third (default
   Q5_0); the natural prompts of largest H^2(A, B) and a prompt search scored by their
   bottleneck min_ij D_ij, the best schedule of the scored prompts, K-way counts and bht's
   K-way Monte Carlo, the head-only K-way design.
7. out/audit.json, out/h2_vs_passes.png and the tables printed on stdout.

Usage: .venv/bin/python examples/llm_audit/audit.py [--quick] [--prompts 1000] [--budget 2000]
[--kway-budget 400] (``make llm-audit`` runs setup.sh and this).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# One BLAS thread unless told otherwise: on the shared 2-core machine, OpenBLAS's two threads
# spin against any other load and ran the forward pass 5-7 times slower than one thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gguf_model import gguf_path, load_gguf, reencode  # noqa: E402
from llama import Config, Llama                        # noqa: E402
from prompts import natural_prompts                    # noqa: E402
from search import beam_search                         # noqa: E402
from tokenizer import Tokenizer                        # noqa: E402

CHECK_PROMPT = "The capital of France is"
CHECK_TOKEN, CHECK_LOGIT = " Paris", 17.37


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def block_pair(WA: np.ndarray, WB: np.ndarray):
    """A_blk = [W_A, 0] and B_blk = [0, W_B]: softmax(A_blk [a; b]) = softmax(W_A a), and
    softmax(B_blk [a; b]) = softmax(W_B b)."""
    Z = np.zeros_like(WA)
    return np.hstack([WA, Z]), np.hstack([Z, WB])


def hellinger_direct(WA, WB, hA, hB) -> float:
    """1 - sum sqrt(p q) of softmax(W_A hA) and softmax(W_B hB), in float64 (independent of bht)."""
    def log_softmax(z):
        z = z - z.max()
        return z - np.log(np.exp(z).sum())
    la = log_softmax(WA.astype(np.float64) @ np.asarray(hA, np.float64))
    lb = log_softmax(WB.astype(np.float64) @ np.asarray(hB, np.float64))
    return float(-np.expm1(np.log(np.exp(0.5 * (la + lb)).sum())))


_MODELS: dict = {}


def _hidden(which: str, prompts):
    return _MODELS[which].hidden(prompts)


class Pair:
    """Models A and B (and C, re-encoded as `third`), the tokenizer and bht's scoring of
    prompts in the block form.

    With jobs = 2, A and B run their forward passes at the same time in two forked worker
    processes (one BLAS thread each; the weights are shared copy-on-write); C runs in two
    halves, one per process.
    """

    def __init__(self, reencode_as: str, top: int, jobs: int = 2, third: str | None = None,
                 path=None):
        t0 = time.perf_counter()
        w = load_gguf(path or gguf_path())
        self.cfg = Config.from_meta(w.meta)
        self.tok = Tokenizer(w.meta["tokenizer.ggml.tokens"], w.meta["tokenizer.ggml.merges"])
        self.A = Llama(w.tensors, self.cfg)
        wb = reencode(w, reencode_as)
        self.B = Llama(wb.tensors, self.cfg)
        self.C = Llama(reencode(w, third).tensors, self.cfg) if third else None
        self.types = sorted(set(w.types.values()))
        self.head_identical = bool(np.array_equal(self.A.head, self.B.head))
        self.Ablk, self.Bblk = block_pair(self.A.head, self.B.head)
        self.top = top
        self.passes = 0
        self.hA: dict = {}       # hidden states of A at prompts that reached a beam (for next tokens)
        self.pool = None
        self.seconds = {"forward": 0.0, "bht rank": 0.0}
        if jobs > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor
            _MODELS.update(A=self.A, B=self.B, C=self.C)
            self.pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
        say(f"weights loaded and re-encoded in {time.perf_counter() - t0:.0f} s")

    def hidden_of(self, which: str, prompts) -> list:
        """Hidden states of the models named in `which` ("AB", "C", "ABC") at the prompts, one
        (m x d) array per model. With the pool, A and B run side by side and C in two halves."""
        t0 = time.perf_counter()
        models = {"A": self.A, "B": self.B, "C": self.C}
        if self.pool is None:
            out = [models[k].hidden(prompts) for k in which]
        else:
            jobs = []
            for k in which:
                if k == "C" or len(which) == 1:
                    h = (len(prompts) + 1) // 2
                    jobs.append([self.pool.submit(_hidden, k, part)
                                 for part in (prompts[:h], prompts[h:]) if part])
                else:
                    jobs.append([self.pool.submit(_hidden, k, prompts)])
            out = [np.concatenate([f.result() for f in fs]) for fs in jobs]
        self.seconds["forward"] += time.perf_counter() - t0
        return out

    def states(self, prompts) -> np.ndarray:
        """Rows [h_A(p); h_B(p)] (float32), one forward pass of each model per prompt."""
        self.passes += len(prompts)
        return np.hstack(self.hidden_of("AB", prompts))

    def rank(self, H, **kw):
        import bhtcli
        t0 = time.perf_counter()
        r = bhtcli.rank(self.Ablk, self.Bblk, H, dtype="float32", **kw)
        self.seconds["bht rank"] += time.perf_counter() - t0
        return r

    def score(self, prompts):
        """The best `top` of a batch: [(index, H^2), ...], best first (bht's float64 re-scores)."""
        H = self.states(prompts)
        r = self.rank(H, top=min(self.top, len(prompts)))
        for e in r.top:
            self.hA[tuple(prompts[e["index"]])] = H[e["index"], :self.cfg.dim]
        return [(e["index"], e["hellinger_squared"]) for e in r.top]

    def next_tokens(self, ids, k: int = 24):
        h = self.hA.get(tuple(ids))
        if h is None:
            h = self.A.hidden([ids])[0]
        return np.argsort(-(self.A.head @ h))[:k]

    def roundtrip(self, ids) -> bool:
        return self.tok.encode(self.tok.decode(ids)) == list(ids)


def check(pair: Pair) -> dict:
    ids = pair.tok.encode(CHECK_PROMPT)
    hA = pair.A.hidden([ids])[0]
    lg = pair.A.logits(hA)
    order = np.argsort(-lg)[:5]
    top = [(pair.tok.decode([int(i)]), float(lg[i])) for i in order]
    cont = pair.tok.decode(pair.A.greedy(ids, 12))
    print(f"check: {CHECK_PROMPT!r} -> top next tokens " +
          ", ".join(f"{t!r} {v:.2f}" for t, v in top))
    print(f"  greedy continuation: {cont!r}")
    if top[0][0] != CHECK_TOKEN or abs(top[0][1] - CHECK_LOGIT) > 0.05:
        sys.exit(f"the forward pass does not reproduce the check: expected {CHECK_TOKEN!r} at "
                 f"{CHECK_LOGIT}, got {top[0][0]!r} at {top[0][1]:.3f}")
    hB = pair.B.hidden([ids])[0]
    h2 = hellinger_direct(pair.A.head, pair.B.head, hA, hB)
    print(f"  H^2(A, B) at this prompt: {h2:.3g}")
    return {"prompt": CHECK_PROMPT, "token_ids": ids, "top": [[t, round(v, 3)] for t, v in top],
            "greedy": cont, "hellinger_squared": h2}


def simulate_at(pair: Pair, x: np.ndarray, trials: int, seed: int) -> dict:
    import bhtcli
    x = np.asarray(x, np.float64)
    s = bhtcli.simulate(pair.Ablk, pair.Bblk, float(np.linalg.norm(x)) * (1 + 1e-9), query=x,
                        policy="fixed", trials=trials, seed=seed)
    return s.fixed


def plot(history, natural_best: float, designed: float | None, path: Path, natural_passes: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    xs = [natural_passes + p for p, _ in history]
    ax.step(xs, [h for _, h in history], where="post", label="prompt search (best so far)")
    ax.axhline(natural_best, color="grey", ls="--", lw=1,
               label=f"best of the {natural_passes:,} natural prompts")
    ax.axvline(natural_passes, color="grey", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("forward passes (one prompt through both models)")
    ax.set_ylabel("H² of the next-token laws")
    ax.set_title("SmolLM2-135M as shipped vs Q8_0 re-encoding")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp)
    os.replace(tmp, path)


def record(pair: Pair, ids, entry: dict) -> dict:
    return {"text": pair.tok.decode(ids), "token_ids": [int(i) for i in ids],
            "hellinger_squared": entry["hellinger_squared"], "predicted": entry["predicted"],
            "lower": entry["lower"], "upper": entry["upper"], "norm_h_a": None}


def print_kway(k: dict) -> None:
    """The K = 3 table: each pair's D, the bottleneck and the answers that name the true model."""
    names = [p["pair"] for p in k["best_natural"]["pairs"]]
    print(f"\nK = 3 (A, B, C): naming the true model, every error <= 0.05\n"
          f"| prompt | {' | '.join('D ' + n for n in names)} | bottleneck | lower | predicted | upper "
          f"| empirical n [95% interval] |\n|---|{'---:|' * (len(names) + 5)}")

    def row(name, r):
        emp = "–" if r.get("empirical") is None else \
            f"{r['empirical']:,} [{r['interval'][0] or '?'}–{r['interval'][1] or '?'}]"
        return (f"| {name} | {' | '.join(format(p['bhattacharyya_distance'], '.3g') for p in r['pairs'])} | "
                f"{r['bottleneck_pair']} | {r['lower']} | {r['predicted']} | {r['upper']} | {emp} |")
    print(row(f"best natural: {k['best_natural']['text']!r}", k["best_natural"]))
    print(row(f"best searched: {k['best_searched']['text']!r}", k["best_searched"]))
    s = k["schedule"]
    mix = " + ".join(f"{p['weight']:.0%} {p['text']!r}" for p in s["prompts"])
    print(row(f"schedule: {mix}", s))
    g = s["gain_predicted"]
    print(f"schedule against the best single prompt: exponent ratio {s['gain_exponent']:.4g} "
          f"(schedule / single), predicted answers ratio {'–' if g is None else f'{g:.3g}'} "
          "(single / schedule)")
    h = k["head_only"]
    print(f"head-only design at ||h|| <= {h['energy']:.4g}: " + (
        f"bottleneck D {h['bottleneck_d']:.3g}" if h["distinguishable"] else
        "not distinguishable (" + "; ".join(
            f"{p['pair']}: " + ("identical heads" if p["identical_heads"] else
                               f"H^2 {p['hellinger_squared']:.4g}, predicted {p['predicted']}")
            for p in h["pairs"]) + ")"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smaller run: 200 prompts, budget 300, 400 trials (about 3 minutes)")
    parser.add_argument("--prompts", type=int, default=None, help="natural prompts (default 1000)")
    parser.add_argument("--budget", type=int, default=None,
                        help="prompts the search may score, each one forward pass of both models (default 2000)")
    parser.add_argument("--beam", type=int, default=8, help="beam width of the search (default 8)")
    parser.add_argument("--per-round", type=int, default=100, help="prompts scored per round (default 100)")
    parser.add_argument("--trials", type=int, default=None, help="Monte Carlo trials per model (default 1000)")
    parser.add_argument("--reencode", default="Q8_0", help="model B's re-encoding: Q8_0 (default), Q5_0, ...")
    parser.add_argument("--third", default="Q5_0",
                        help="model C's re-encoding for the K = 3 audit (A, B, C): Q5_0 (default); none skips it")
    parser.add_argument("--kway-budget", type=int, default=None,
                        help="prompts the K = 3 search may score, each one forward pass of A, B and C (default 400)")
    parser.add_argument("--kway-natural", type=int, default=None,
                        help="natural prompts of largest H^2(A, B) that also go through C (default 200)")
    parser.add_argument("--jobs", type=int, default=2, choices=(1, 2),
                        help="processes for the forward passes: 2 runs A and B side by side (default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "out"), help="output folder")
    args = parser.parse_args(argv)
    prompts_n = args.prompts or (200 if args.quick else 1000)
    budget = args.budget if args.budget is not None else (300 if args.quick else 2000)
    trials = args.trials or (400 if args.quick else 1000)
    third = None if args.third.lower() == "none" else args.third
    kway_budget = args.kway_budget if args.kway_budget is not None else (100 if args.quick else 400)
    kway_natural = args.kway_natural or (50 if args.quick else 200)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    times = {}

    pair = Pair(args.reencode, top=max(args.beam, 10), jobs=args.jobs, third=third)
    print(f"model A: {gguf_path().name} (tensor types {', '.join(pair.types)}); model B: every "
          f"quantized tensor re-encoded as {args.reencode}; tied head identical in A and B: "
          f"{pair.head_identical}")
    checked = check(pair)

    # Natural prompts.
    t0 = time.perf_counter()
    texts = natural_prompts(prompts_n, args.seed)
    ids = [pair.tok.encode(t) for t in texts]
    say(f"natural prompts: {len(ids):,} ({sum(map(len, ids)):,} tokens), forward passes of A and B")
    H = pair.states(ids)
    natural_passes = pair.passes
    names = out / "natural_names.txt"
    names.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    r = pair.rank(H, names=names, top=max(args.beam, 10), out=out / "natural_scores.csv")
    times["natural"] = time.perf_counter() - t0
    best_n = r.top[0]
    bi = best_n["index"]
    direct = hellinger_direct(pair.A.head, pair.B.head, H[bi, :pair.cfg.dim], H[bi, pair.cfg.dim:])
    rel = abs(direct - best_n["hellinger_squared"]) / direct
    print(f"\n{len(ids):,} natural prompts scored by bht in the block form in {times['natural']:.0f} s; "
          f"best: {texts[bi]!r} H^2 {best_n['hellinger_squared']:.4g} (direct numpy {direct:.4g}, "
          f"relative difference {rel:.1e})")
    if rel > 1e-6:
        sys.exit("bht's block-form H^2 disagrees with the direct computation")
    import csv
    with open(out / "natural_scores.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    allh = np.array([float(row["hellinger_squared"]) for row in rows])
    alld = np.array([float(row["bhattacharyya_distance"]) for row in rows])
    if [int(row["index"]) for row in rows] != list(range(len(ids))):
        sys.exit("natural_scores.csv is not in the order of the prompts")
    normsA = np.linalg.norm(H[:, :pair.cfg.dim].astype(np.float64), axis=1)
    for e in r.top:
        pair.hA[tuple(ids[e["index"]])] = H[e["index"], :pair.cfg.dim]

    # The prompt search.
    t0 = time.perf_counter()
    pool = np.unique(np.concatenate([np.asarray(i) for i in ids]))
    start = [(e["hellinger_squared"], ids[e["index"]]) for e in r.top]
    res = beam_search(start, pair.score, budget=budget, pool=pool, beam=args.beam,
                      per_round=args.per_round, next_tokens=pair.next_tokens,
                      roundtrip=pair.roundtrip, seed=args.seed, progress=say)
    times["search"] = time.perf_counter() - t0
    say(f"time so far: {pair.seconds['forward']:.0f} s forward passes, {pair.seconds['bht rank']:.0f} s bht rank")
    best_ids = res.beam[0][1]
    Hs = pair.states([best_ids])
    pair.passes -= 1                      # the re-run of the winner is not part of the search
    rs = pair.rank(Hs, top=1).top[0]
    print(f"search: {res.scored:,} prompts scored in {times['search']:.0f} s; best H^2 "
          f"{rs['hellinger_squared']:.4g}: {pair.tok.decode(best_ids)!r}")

    # The head-only design at the prompts' typical hidden-state norm.
    import bhtcli
    t0 = time.perf_counter()
    E = float(np.median(normsA))
    d = bhtcli.design(pair.A.head, pair.B.head, E, dtype="float32", starts=8)
    times["design"] = time.perf_counter() - t0
    designed = {"hellinger_squared": d.hellinger_squared, "predicted": d.samples["predicted"],
                "energy": E, "distinguishable": d.to_dict().get("distinguishable"), "note": None}
    if pair.head_identical:
        designed["note"] = ("W_A = W_B: the tied head (token_embd) is stored as Q8_0, and its Q8_0 "
                            "re-encoding is bit-identical, so no common hidden state separates A "
                            "and B; every bit of H^2 comes from h_A(p) != h_B(p)")
    print(f"head-only design at ||h|| <= {E:.4g} (median over the natural prompts): H^2 "
          f"{d.hellinger_squared:.4g}, predicted {d.samples['predicted']}")

    # Predicted against empirical.
    t0 = time.perf_counter()
    sim_n = simulate_at(pair, H[bi], trials, args.seed)
    sim_s = simulate_at(pair, Hs[0], trials, args.seed)
    times["simulate"] = time.perf_counter() - t0

    kway = None
    if third:
        from kway_audit import run_kway
        t0 = time.perf_counter()
        kway = run_kway(pair, ids, [H[:, :pair.cfg.dim], H[:, pair.cfg.dim:]],
                        [b for _, b in res.beam], budget=kway_budget, beam=args.beam,
                        per_round=args.per_round, trials=trials, seed=args.seed, pool=pool,
                        energy=E, natural_d_ab=alld, natural_top=kway_natural,
                        check_ids=checked["token_ids"], out_dir=out, progress=say)
        kway["models"] = {"A": gguf_path().name, "B": f"re-encoded as {args.reencode}",
                          "C": f"re-encoded as {third}"}
        times["kway"] = time.perf_counter() - t0

    best_natural = record(pair, ids[bi], best_n)
    best_natural.update(norm_h_a=float(normsA[bi]), empirical=sim_n and sim_n["empirical"],
                        interval=sim_n and sim_n["interval"])
    best_searched = record(pair, best_ids, rs)
    best_searched.update(norm_h_a=float(np.linalg.norm(Hs[0, :pair.cfg.dim])),
                         empirical=sim_s and sim_s["empirical"], interval=sim_s and sim_s["interval"],
                         retokenizes=pair.roundtrip(best_ids))
    wall = time.perf_counter() - t_all
    result = {
        "model_a": gguf_path().name, "model_b": f"every quantized tensor re-encoded as {args.reencode}",
        "check": checked,
        "natural": {"count": len(ids), "tokens": int(sum(map(len, ids))),
                    "hellinger_squared_min": float(allh.min()),
                    "hellinger_squared_median": float(np.median(allh)),
                    "hellinger_squared_max": float(allh.max()),
                    "norm_h_a_median": E},
        "best_natural": best_natural,
        "best_searched": best_searched,
        "search": {"budget": budget, "scored": res.scored, "beam": args.beam,
                   "per_round": args.per_round,
                   "history": [[int(p), float(h)] for p, h in res.history]},
        "designed": designed,
        "simulate": {"trials": trials, "policy": "fixed", "seed": args.seed},
        "kway": kway,
        "forward_passes": pair.passes,
        "seconds": {k: round(v, 1) for k, v in (times | pair.seconds).items()} | {"total": round(wall, 1)},
        "options": {"prompts": prompts_n, "budget": budget, "quick": args.quick,
                    "third": third, "kway_budget": kway_budget, "kway_natural": kway_natural},
    }
    tmp = out / "audit.json.tmp"
    tmp.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, out / "audit.json")
    plot(res.history, best_n["hellinger_squared"], designed["hellinger_squared"],
         out / "h2_vs_passes.png", natural_passes)

    def row(name, rec):
        emp = "–" if rec.get("empirical") is None else f"{rec['empirical']:,} [{rec['interval'][0]:,}–{rec['interval'][1] or '?'}]"
        return f"| {name} | {rec['hellinger_squared']:.3g} | {rec['predicted']:,} | {emp} |"
    print("\n| prompt | H² | predicted n | empirical n [95% interval] |\n|---|---:|---:|---:|")
    print(row(f"best natural: {best_natural['text']!r}", best_natural))
    print(row(f"best searched: {best_searched['text']!r}", best_searched))
    print(f"| head-only design, ‖h‖ ≤ {E:.1f} | {designed['hellinger_squared']:.3g} | "
          f"{designed['predicted'] if designed['predicted'] is not None else '–'} | – |")
    if kway:
        print_kway(kway)
    say(f"done in {wall:.0f} s; wrote {out / 'audit.json'} and {out / 'h2_vs_passes.png'}")


if __name__ == "__main__":
    main()

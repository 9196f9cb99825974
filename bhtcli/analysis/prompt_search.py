"""`prompts --search`: a beam search over token ids for a prompt whose next-token laws tell the
builds apart better than the best natural ones (docs/llm_audit.md, "The prompt search").

It talks to the builds only through the engine's public interface (`tokenize`, `detokenize`,
`next_logits`, `piece`) and scores with maths/: any architecture llama.cpp runs.

- **Cost.** One prompt scored on one build is one forward pass, however many prompts an engine
  call packs; a candidate costs K passes (K builds). The budget covers scoring the starts, every
  candidate, and re-scoring the best candidates alone at the end; it is never exceeded (at most
  K - 1 passes of it stay unused).
- **Starts.** The best natural prompts of the ranking, each scored alone (one prompt per engine
  call), so their H^2 is the ranking's.
- **Proposals.** From each prompt of the beam: append a token (extension) or replace one
  token after the BOS (substitution). The tokens come from a pool built from the prompt's own
  laws at its end: the tokens carrying most of the bottleneck pair's H^2,
  (sqrt p_i(t) - sqrt p_j(t))^2; each build's most probable tokens; and tokens drawn uniformly
  from the vocabulary (a seeded generator). A proposal is kept only when its ids survive a round
  trip through text (detokenize, tokenize, the same ids), so the found prompt can be sent to an
  API as text, and only once.
- **Beam.** Candidates are scored in batches (`sequences` per engine call); the beam keeps the
  best `beam` distinct prompts seen so far.
- **The end.** The best candidates by their batched H^2 are re-scored alone (a prompt's logits
  depend slightly on the prompts decoded beside it); the found prompts are the best by that
  H^2 among them and the starts, so the best found prompt is never worse than the best start.
- **The margin.** Each found prompt is scored again alone on every build and under every floor
  setting of every build (the engine floor, as the ranking's); these passes are the report's,
  counted apart from the budget (`report_passes`). With `min_margin`, the candidates are
  checked best first (the starts always among them, at most MARGIN_WALK x found others) and
  those below `min_margin` times their floor are dropped: every found prompt passes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bhtcli.engine.laws import floor_laws, sampler_laws
from bhtcli.errors import InputError, parameter_name
from bhtcli.maths.laws import (bhattacharyya, build_counts, clears_floor, error_shift, pair_h2,
                              pair_list)

MARGIN_WALK = 8             # with min_margin: candidates checked per found prompt, at most


@dataclass(frozen=True)
class SearchSettings:
    """The search's knobs: the pass budget, the beam's width, proposals per beam prompt and
    round, tokens of each kind in the pool, prompts reported, the seed."""

    budget: int
    beam: int = 4
    proposals: int = 16
    contrast_tokens: int = 16     # largest H^2 contributions of the bottleneck pair
    top_tokens: int = 8           # each build's most probable tokens
    random_tokens: int = 16       # uniform draws from the vocabulary
    found: int = 3
    seed: int = 0


def check_budget(budget, builds: int) -> int:
    """--search: a whole number of passes, enough to score one start, one candidate and
    re-score it (3 K)."""
    name = parameter_name("search")
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)):
        raise InputError(f"{name} must be a whole number of forward passes, got {budget!r}")
    if budget < 3 * builds:
        raise InputError(f"{name} must be at least {3 * builds} forward passes for {builds} "
                         f"builds (a candidate costs {builds}), got {budget}")
    return int(budget)


def bottleneck(L) -> tuple[np.ndarray, np.ndarray]:
    """(H^2 of the closest pair, its index in pair order) per prompt, for K laws (K, m, n)."""
    h2 = pair_h2(L)
    b = np.argmin(h2, axis=0)
    return h2[b, np.arange(h2.shape[1])], b


class Prompter:
    """The text a list of ids is sent as, when there is one: the ids without the BOS the
    tokenizer adds, detokenized; with a leading space dropped when the tokenizer adds one
    itself (SentencePiece's space prefix). None when no text tokenizes back to the ids."""

    def __init__(self, engine):
        self.engine = engine
        self.prefix = list(engine.tokenize(""))

    def text(self, ids) -> str | None:
        ids = list(ids)
        n = len(self.prefix)
        if ids[:n] != self.prefix or len(ids) == n:
            return None
        body = self.engine.detokenize(ids[n:])
        for text in (body, body[1:] if body.startswith(" ") else None):
            if text and self.engine.tokenize(text) == ids:
                return text
        return None


class Counter:
    """Forward passes spent, against the budget, reported as they go."""

    def __init__(self, budget: int, K: int, say):
        self.budget, self.K, self.say, self.used = budget, K, say, 0
        self.best = 0.0

    def score(self, engines, ids, sampler, phase: str):
        """The K laws (K, m, n) of the prompts `ids`; K passes per prompt."""
        assert self.used + self.K * len(ids) <= self.budget
        L = [sampler_laws(e, ids, sampler) for e in engines]
        self.used += self.K * len(ids)
        self.say(f"{phase}: best H^2 {self.best:.4g}", self.used, self.budget)
        return L


def _pool(L, pair, s: SearchSettings, n_vocab: int, rng) -> np.ndarray:
    """Candidate tokens for one prompt, from its K laws at the end (K, n)."""
    i, j = pair
    contrib = (np.exp(0.5 * L[i]) - np.exp(0.5 * L[j])) ** 2
    parts = [np.argsort(-contrib, kind="stable")[:s.contrast_tokens]]
    parts += [np.argsort(-L[k], kind="stable")[:s.top_tokens] for k in range(len(L))]
    parts.append(rng.integers(0, n_vocab, size=s.random_tokens))
    return np.unique(np.concatenate(parts))


def _proposals(member, s: SearchSettings, n_vocab: int, context: int, prompter: Prompter,
               seen: set, rng, stats: dict) -> list:
    """Up to s.proposals new ids lists around one beam member that round-trip through text."""
    ids, L, pair = member["ids"], member["laws"], member["pair"]
    pool = _pool(L, pair, s, n_vocab, rng)
    first = len(prompter.prefix)
    out = []
    for _ in range(4 * s.proposals):
        if len(out) >= s.proposals:
            break
        t = int(rng.choice(pool))
        extend = len(ids) < context and (len(ids) == first or rng.random() < 0.5)
        if extend:
            new = ids + [t]
        else:
            pos = int(rng.integers(first, len(ids)))
            if ids[pos] == t:
                continue
            new = ids[:pos] + [t] + ids[pos + 1:]
        key = tuple(new)
        if key in seen:
            continue
        seen.add(key)
        text = prompter.text(new)
        if text is None:
            stats["rejected"] += 1
            continue
        out.append({"ids": new, "text": text, "start": member["start"],
                    "edits": member["edits"] + 1,
                    "kind": "extensions" if extend else "substitutions"})
    return out


def search_prompts(engines, singles, floor_engines, starts, sampler, settings: SearchSettings,
                   error: float = 0.05, flag_margin: float = 10.0, min_margin: float | None = None,
                   progress=None) -> dict:
    """The prompt search (see the module docstring) from `starts` ((text, ids), best first).

    Parameters
    ----------
    engines : list
        The K builds' engines that score candidates (many prompts per call).
    singles : list
        The same builds scoring one prompt per call: the starts and the final re-scores.
    floor_engines : list of lists
        floor_engines[k]: build k under each other engine setting of the floor (each scores
        the found prompts).
    starts : list of (str, list of int)
    sampler : bhtcli.engine.Sampler
    settings : SearchSettings
    error : float
        alpha of the counts.
    flag_margin : float
        A found prompt whose H^2 is below this times its floor is flagged.
    min_margin : float, optional
        Found prompts must have H^2 at least this times their floor (others are dropped).

    Returns
    -------
    dict
        The `search` object of PromptsResult (docs/json.md).
    """
    t0 = time.perf_counter()
    say = progress or (lambda *a, **k: None)
    s = settings
    K, n_vocab = len(engines), engines[0].n_vocab
    pairs = pair_list(K)
    rng = np.random.default_rng(s.seed)
    prompter = Prompter(engines[0])
    context = engines[0].context
    count = Counter(s.budget, K, say)
    n_starts = max(1, min(s.beam, len(starts), s.budget // (3 * K)))
    # the final re-scores, alone: up to `found` candidates, never more than half what is left
    reserve = max(1, min(s.found, (s.budget // K - n_starts) // 2)) * K
    starts = [(text, list(ids)) for text, ids in starts[:n_starts]]
    seen = {tuple(ids) for _, ids in starts}
    L = count.score(singles, [ids for _, ids in starts], sampler, "search: the starts")
    h2, b = bottleneck(L)
    verified = [{"ids": ids, "text": text, "h2": float(h2[r]), "start": r, "edits": 0,
                 "laws": np.stack([l[r] for l in L]), "pair": pairs[int(b[r])]}
                for r, (text, ids) in enumerate(starts)]
    start_best = max(v["h2"] for v in verified)
    count.best = start_best
    beam = sorted(verified, key=lambda m: -m["h2"])[:s.beam]
    scored = []                                      # every candidate: ids, text, batched h2
    history = [{"passes": count.used, "hellinger_squared": start_best}]
    stats = {"extensions": 0, "substitutions": 0, "rejected": 0}
    rounds = 0
    while count.best < 1.0:
        room = (s.budget - reserve - count.used) // K
        if room < 1:
            break
        batch = []
        for member in beam:
            batch += _proposals(member, s, n_vocab, context, prompter, seen, rng, stats)
        if not batch:
            break
        batch = batch[:room]
        for c in batch:
            stats[c["kind"]] += 1
        rounds += 1
        L = count.score(engines, [c["ids"] for c in batch], sampler, f"search: round {rounds}")
        h2, b = bottleneck(L)
        for r, c in enumerate(batch):
            c["h2"], c["pair"] = float(h2[r]), pairs[int(b[r])]
        keep = sorted(beam + batch, key=lambda m: -m["h2"])[:s.beam]
        for r, c in enumerate(batch):
            if any(c is m for m in keep):
                c["laws"] = np.stack([l[r] for l in L])
        beam = keep
        scored += batch
        count.best = max(count.best, beam[0]["h2"])
        history.append({"passes": count.used, "hellinger_squared": count.best})
    # the best candidates re-scored alone; the found prompts are the best of them and the starts
    best = sorted(scored, key=lambda c: -c["h2"])[:reserve // K]
    if best:
        L = count.score(singles, [c["ids"] for c in best], sampler, "search: re-scoring alone")
        h2, b = bottleneck(L)
        for r, c in enumerate(best):
            c["batched_h2"], c["h2"], c["pair"] = c["h2"], float(h2[r]), pairs[int(b[r])]
        verified += best
    found, checked, dropped = pick(verified, scored, starts_n=len(starts), want=s.found,
                                   singles=singles, floor_engines=floor_engines, sampler=sampler,
                                   error=error, flag_margin=flag_margin, min_margin=min_margin,
                                   say=lambda *a: say("search: the floor of the found prompts", *a))
    history.append({"passes": count.used,
                    "hellinger_squared": found[0]["hellinger_squared"] if found else None})
    search_seconds = time.perf_counter() - t0
    per_prompt = K + sum(len(fs) for fs in floor_engines)
    return {"budget": s.budget, "passes": count.used, "report_passes": checked * per_prompt,
            "seed": s.seed, "beam": s.beam, "proposals": s.proposals, "rounds": rounds,
            "candidates": len(scored), "extensions": stats["extensions"],
            "substitutions": stats["substitutions"],
            "rejected_tokenization": stats["rejected"],
            "starts": [{"text": text, "token_ids": ids, "hellinger_squared": v["h2"]}
                       for (text, ids), v in zip(starts, verified)],
            "start_hellinger_squared": start_best, "found": found, "history": history,
            "margin_checked": checked, "margin_dropped": dropped,
            "search_seconds": search_seconds, "seconds": time.perf_counter() - t0}


def pick(verified, scored, *, starts_n, want, singles, floor_engines, sampler, error,
         flag_margin, min_margin, say) -> tuple[list, int, int]:
    """The found prompts, described (see :func:`describe`), and how many were checked and
    dropped. Without `min_margin`: the best `want` of `verified` (the starts and the candidates
    re-scored alone). With it: candidates best first -- by H^2 alone where known, else batched
    --, the starts always among them, `want` at a time, each kept when its H^2 is at least
    `min_margin` times its floor, until `want` are kept."""
    pool = sorted(verified, key=lambda c: -c["h2"])
    if min_margin is None:
        pool = pool[:want]
        described = describe(pool, singles, floor_engines, sampler, error, flag_margin)
        return renumber(described), len(pool), 0
    alone = {id(c) for c in verified}
    batched = [dict(c, batched_h2=c["h2"]) for c in scored if id(c) not in alone]
    pool = sorted(pool + batched, key=lambda c: -c["h2"])
    starts = verified[:starts_n]
    pool = [c for c in pool[:MARGIN_WALK * want] if not any(c is t for t in starts)] + starts
    pool.sort(key=lambda c: -c["h2"])
    kept, checked, dropped = [], 0, 0
    for at in range(0, len(pool), want):
        if len(kept) >= want:
            break
        chunk = pool[at:at + want]
        checked += len(chunk)
        say(checked, len(pool))
        for e in describe(chunk, singles, floor_engines, sampler, error, flag_margin):
            if clears_floor(e["hellinger_squared"], e["floor_hellinger_squared"], min_margin):
                kept.append(e)
            else:
                dropped += 1
    kept = sorted(kept, key=lambda e: -e["hellinger_squared"])[:want]
    return renumber(kept), checked, dropped


def renumber(entries: list) -> list:
    """Best first by H^2 alone, ranks from 1."""
    entries = sorted(entries, key=lambda e: -e["hellinger_squared"])
    for k, e in enumerate(entries, start=1):
        e["rank"] = k
    return entries


def describe(found, singles, floor_engines, sampler, error: float, flag_margin: float) -> list:
    """The found prompts as the ranking reports its prompts: H^2 and counts of the bottleneck
    pair (scored alone), the engine floor over every build, each build's top token."""
    ids = [c["ids"] for c in found]
    L, per_build = floor_laws(singles, floor_engines, ids, sampler)
    K, pairs = len(L), pair_list(len(L))
    h2, b = bottleneck(L)
    out = []
    for r, c in enumerate(found):
        bi, bj = pairs[int(b[r])]
        fb = int(np.argmax(per_build[:, r]))
        value, floor = float(h2[r]), float(per_build[fb, r])
        counts = build_counts([l[r] for l in L], error)
        out.append({
            "rank": r + 1, "text": c["text"], "token_ids": c["ids"], "hellinger_squared": value,
            "bhattacharyya_distance": bhattacharyya(value),
            "samples": counts,
            "bottleneck": {"i": bi, "j": bj},
            "floor_hellinger_squared": floor, "floor_build": fb,
            "floors": [float(x) for x in per_build[:, r]],
            "margin": None if floor == 0 else value / floor,
            "flagged": not clears_floor(value, floor, flag_margin),
            "error_shift": error_shift(floor, counts["predicted"]),
            "start": c["start"], "edits": c["edits"],
            "batched_hellinger_squared": c.get("batched_h2"),
            "top_tokens": [{"id": t, "piece": singles[0].piece(t),
                            "probability": float(np.exp(L[k][r][t]))}
                           for k, t in ((k, int(np.argmax(L[k][r]))) for k in range(K))]})
    return out

"""The declared JSON schema of every command: each key of each `--json` output, its type and
its meaning. docs/json.md is generated from it (`python -m bhtcli.cli.docs`), and
tests/test_docs.py checks real outputs against it both ways (an undeclared key, a declared key
never produced, or a value of another type fails).

A key path is dotted for nested objects (`samples.lower`), with `[]` for the items of a list
of objects (`failures[].line`). Types: string, integer, number, boolean, object, array
(of numbers, or as said), each possibly "or null". A note in brackets at the start of a
meaning says which model family has the key ("[softmax]", "[leverage]"); the other family
has null there.
"""
from __future__ import annotations

HEADER = {
    "model": ("string or null", "Model family: \"softmax\" (softmax and its links) or \"leverage\"."),
    "n": ("integer or null", "Rows of A and B: the number of possible answers."),
    "d": ("integer or null", "Columns of A and B: the size of a softmax query x."),
    "energy": ("number or null", "The budget E: ||x||_2 <= E (softmax), s_i^2 <= E (leverage)."),
    "target_error": ("number or null", "alpha, the target for both error probabilities (--error)."),
}

SAMPLES = {
    "lower": ("integer or null", "Queries any test needs at this query (x repeated): a lower bound."),
    "upper": ("integer or null", "Queries the likelihood-ratio test needs by Chernoff's bound: an upper bound."),
    "predicted": ("integer or null", "Queries the minimax likelihood-ratio test needs (exact lattice or saddlepoint)."),
    "method": ("string", "How `predicted` was computed: lattice, saddlepoint, or none."),
}

READOUT = {
    "readout": ("object or null", "[softmax] How each model turns scores into probabilities."),
    "readout.link_a": ("string", "Link of model A: exp, poly:K, taylor:K or softcap:C."),
    "readout.link_b": ("string", "Link of model B."),
    "readout.bias_a": ("boolean", "Whether model A has a bias."),
    "readout.bias_b": ("boolean", "Whether model B has a bias."),
    "readout.links": ("array", "[K models, --links or --biases] The link of each model, in their order (in place of link_a, link_b; absent for plain softmax models)."),
    "readout.biases": ("array", "[K models, --links or --biases] Whether each model has a bias, in their order."),
}


def _nested(prefix: str, keys: dict) -> dict:
    return {f"{prefix}.{k}": v for k, v in keys.items()}


CANDIDATE = {
    "index": ("integer", "0-based row of H."),
    "name": ("string or null", "Its line of --names, if given."),
    "hellinger_squared": ("number", "H^2 at this candidate."),
    "bhattacharyya_distance": ("number", "D at this candidate."),
    "predicted": ("integer or null", "Queries the minimax likelihood-ratio test needs with it (null: cannot tell apart)."),
    "lower": ("integer or null", "Lower bound on the queries any test needs with it."),
    "upper": ("integer or null", "Queries the likelihood-ratio test needs by Chernoff's bound."),
    "query_norm": ("number", "||x|| of the candidate (leverage: ||s||)."),
}

CANDIDATES = {
    "candidates": ("object or null", "design --candidates only: the ranking of the given queries."),
    "candidates.count": ("integer", "Rows of H."),
    "candidates.eligible": ("integer", "Rows inside the budget (and, leverage: no zero entry)."),
    "candidates.ineligible": ("integer", "Rows left out."),
    "candidates.why_ineligible": ("string or null", "Why rows were left out."),
    "candidates.best_index": ("integer", "0-based row of the best eligible candidate (its report is the design's)."),
    "candidates.best_name": ("string or null", "Its name (--names)."),
    "candidates.top": ("array", "The best candidates by H^2 (--top of them), best first."),
    **_nested("candidates.top[]", CANDIDATE),
    "candidates.radius": ("number", "The budget of the comparison optimum: E, or the largest eligible norm (leverage: the box's C)."),
    "candidates.floor": ("number or null", "[leverage] The box's floor of the comparison."),
    "candidates.radius_from": ("string", "Where radius comes from (energy, or the candidates' norms)."),
    "candidates.reachable_fraction": ("number or null", "The best candidate's H^2 over the designed optimum's H^2 at radius."),
    "candidates.optimum": ("object", "The designed optimum over the ball of that radius (the usual search)."),
    "candidates.optimum.hellinger_squared": ("number", "Its H^2."),
    "candidates.optimum.predicted": ("integer or null", "Its predicted query count."),
    "candidates.optimum.lower": ("integer or null", "Its lower count."),
    "candidates.optimum.upper": ("integer or null", "Its upper count."),
    "candidates.optimum.query_norm": ("number", "||x|| of the optimum."),
    "candidates.optimum.on_boundary": ("boolean", "Whether it is on the sphere (box faces)."),
    "candidates.optimum.starts": ("integer or null", "Starts of its search."),
    "candidates.optimum.iterations": ("integer or null", "Iterations of its search."),
    "candidates.optimum.query": ("array", "The optimum query."),
    "subspace_rank": ("integer or null", "design --subspace only: rank r of V (queries x = V z)."),
    "energy_search": ("object or null", "design --queries only: how the smallest budget was found (energy is that budget)."),
    "energy_search.queries": ("integer", "N: the design at `energy` needs at most N queries (samples.predicted)."),
    "energy_search.energy_max": ("number", "The largest budget considered (--energy)."),
    "energy_search.rungs": ("array", "Every budget tried, in increasing order."),
    "energy_search.rungs[].energy": ("number", "A budget tried."),
    "energy_search.rungs[].hellinger_squared": ("number", "H^2 designed there."),
    "energy_search.rungs[].predicted": ("integer or null", "Its predicted query count."),
    "energy_search.relative_tolerance": ("number", "Relative width of the final bracket (0.005)."),
}

RANK = {
    **HEADER,
    "floor": ("number or null", "[leverage] The box's floor."),
    "count": ("integer", "Rows of H."),
    "eligible": ("integer", "Rows inside the budget."),
    "best_index": ("integer", "0-based row of the best eligible candidate."),
    "best_name": ("string or null", "Its name (--names)."),
    "top": ("array", "The best candidates by H^2, best first."),
    **_nested("top[]", CANDIDATE),
    "out": ("string or null", "The file every candidate's scores were written to (--out)."),
    "models": ("array or null", "[K models] The models' names as given; then every row is scored by its bottleneck (the closest pair at it) and its counts are for naming the true model."),
    "top[].bottleneck": ("object", "[K models] The closest pair at this candidate: {i, j}, 0-based."),
    "top[].bottleneck.i": ("integer", "First model of the pair."),
    "top[].bottleneck.j": ("integer", "Second model of the pair."),
    "dtype": ("string", "Precision of the products (float64 or float32)."),
    **READOUT,
    "seconds": ("number", "Seconds in all."),
    "distinguishable": ("boolean", "Whether some eligible candidate tells A from B (false: H^2 = 0 at every one)."),
    "note": ("string or null", "Why not distinguishable (the same model, as design says, or no candidate separates)."),
}

CERTIFICATE = {
    "certificate": ("object", "Bounds over every admissible query (no query can do better)."),
    "certificate.hellinger_squared_max_bound": ("number or null", "Upper bound on sup H^2 over the admissible queries."),
    "certificate.samples_lower_any_strategy": ("integer or null", "Queries any strategy with a fixed budget needs, adaptive too."),
    "certificate.mean_samples_lower_sequential": ("integer or null", "[softmax] Lower bound on the mean number of queries of any sequential strategy."),
    "certificate.bhattacharyya_max_bound": ("number or null", "[softmax] Upper bound on sup D over the ball."),
    "certificate.score_spread_bound": ("number or null", "[softmax] Bound on the spread of log-weight differences over the ball (null: none is finite)."),
    "certificate.kl_max_bound": ("number or null", "[softmax] Upper bound on sup KL (either direction) over the ball."),
    "certificate.ceiling_method": ("string or null", "[softmax] The ceiling that binds: per_row, range, or (--certificate exact) bilinear (docs/maths.md §4.4); K models: the binding pair's."),
    "certificate.ceilings": ("object or null", "[softmax] The H^2 ceiling of each bound (null: it does not apply)."),
    "certificate.ceilings.per_row": ("number or null", "H^2 ceiling of the per-row variance bound (null: it does not apply, or, for large pairs, it was not computed because a lower bound on it exceeds the range ceiling; the note says which; docs/maths.md §4.11)."),
    "certificate.ceilings.range": ("number or null", "H^2 ceiling of the range bound E^2 diam^2/32."),
    "certificate.row_diameter": ("number", "[softmax] Diameter of the rows of A - B (an upper bound when not exact)."),
    "certificate.row_diameter_exact": ("boolean", "[softmax] Whether row_diameter is exact."),
    "certificate.design_over_bound": ("number or null", "[softmax] The design's H^2 over the bound on sup H^2 (1: the design is optimal; null in bound: no design)."),
    "certificate.note": ("string or null", "[softmax] Why there is no certificate, or how it was obtained (links)."),
    "certificate.tv_max_bound": ("number", "[leverage] Upper bound on the total variation over the box (Theorem 4.2)."),
    "certificate.tv_method": ("string or null", "[leverage] Which bound gives tv_max_bound: spectral or thm42 (docs/maths.md §6.2)."),
    "certificate.lambda_min_larger": ("number", "[leverage] The larger of lambda_min(A^T A) and lambda_min(B^T B)."),
    "certificate.sum_op_norm_diff": ("number", "[leverage] sum_i ||b_i b_i^T - a_i a_i^T||_op."),
}

DESIGN = {
    **HEADER,
    "query": ("array", "The designed query: x (length d, softmax) or s (length n, leverage)."),
    "query_norm": ("number", "||query||_2."),
    "on_boundary": ("boolean", "Whether the query is on the boundary (the sphere; every s_i^2 on a face of the box)."),
    "hellinger": ("number", "Hellinger distance H between the two answer laws at the query."),
    "hellinger_squared": ("number", "H^2 = 1 - sum sqrt(p q)."),
    "bhattacharyya_distance": ("number", "D = -ln sum sqrt(p q)."),
    "total_variation": ("number", "Total variation distance."),
    "kl_ab": ("number", "KL(P_A || P_B)."),
    "kl_ba": ("number", "KL(P_B || P_A)."),
    "chernoff_information": ("number", "Chernoff information."),
    "distinguishable": ("boolean", "Whether any query tells A from B (false: the same model, exactly, or up to float64 rounding with the exact-arithmetic ceiling in certificate; the note says which)."),
    "note": ("string or null", "Why not distinguishable, or a remark on the result (e.g. underflow, ranks)."),
    "samples": ("object", "Queries needed with the query repeated, both errors <= alpha."),
    **_nested("samples", SAMPLES),
    **CERTIFICATE,
    "solver": ("object", "How the query was found: the core keys method, starts, iterations, passes, seconds, kkt_residual and search_space on every path (null where they do not apply), and groups."),
    "solver.method": ("string", "lbfgs, ccp, given (a query supplied by the caller) or candidates (the best of given queries)."),
    "solver.starts": ("integer", "Starting points of the multi-start search."),
    "solver.iterations": ("integer", "Iterations (ccp: convex solves)."),
    "solver.passes": ("integer or null", "Passes over A and B (leverage: evaluations, one pass each)."),
    "solver.seconds": ("number", "Seconds in all."),
    "solver.kkt_residual": ("number or null", "[softmax] Relative KKT residual at the query (small: a verified local maximum)."),
    "solver.search_space": ("string or null", "[softmax lbfgs] full (the full multistart search, after the screened starts where the default search runs it), or sketch: the sketched search alone, screened starts halved in a sketched subspace grown until the winner is a KKT point in full d (--search-space; the default auto gives sketch at n*d >= 5e6 with d >= 256, else full; docs/search.md §6)."),
    "solver.success": ("boolean", "Whether every start of the search ran to its stopping test."),
    "solver.message": ("string", "Why the search stopped (e.g. the best maximum was reached from enough starts)."),
    "solver.pass_seconds": ("number or null", "[softmax] Measured pass-time in seconds: the run's own first forward product of the stacked 2n x d matrix plus its first backward product, timed as they ran (no extra product; at vocabulary scale the sketch's d x r block, r ~ 70-100, and a few columns back); a run that made neither, one forward and backward product with a d x 32 block (solver.seconds / solver.pass_seconds compares runs across machines)."),
    "solver.search_seconds": ("number or null", "[softmax] Seconds in the search."),
    "solver.local_maxima": ("integer", "Distinct local maxima found."),
    "solver.local_maxima_values": ("array", "H^2 at the best few local maxima, best first."),
    "solver.evidence": ("object or null", "[softmax lbfgs] The evidence of the rounds of starts (null on other paths)."),
    "solver.evidence.best_hits": ("integer", "Starts that ended at the best maximum (sketch: survivors of the successive halving that did); the budget curve's `evidence` column shows it as best xN."),
    "solver.evidence.rounds": ("integer", "Rounds of starts run at the budget (sketch: 1)."),
    "solver.evidence.stop_reason": ("string", "Why the rounds stopped: the best maximum was reached from enough starts, a round found nothing better, the budget (--max-starts) ran out, or --starts fixed the count; sketch: how many starts were halved in a subspace of which rank."),
    "solver.evidence.budget_exhausted": ("boolean", "True when --max-starts ran out before the evidence was reached (the table warns)."),
    "solver.evidence.adaptive": ("boolean", "Whether the number of starts was adaptive (no --starts, full search)."),
    "solver.evidence.max_starts": ("integer or null", "The budget of the adaptive rounds (null with --starts and for the sketch)."),
    "solver.evidence.ladder": ("array", "The budgets climbed, smallest first, ending at the energy (docs/search.md)."),
    "solver.fraction_at_box_faces": ("number or null", "[leverage] Fraction of the entries of s on a face of the box."),
    "row_norm_2inf": ("number or null", "[softmax] The paper's eps = ||A - B||_{2->inf} = max_i ||a_i - b_i||."),
    "paper_lower_order": ("number or null", "[softmax, exp links] Theorem 3.2's order 1/(eps E)^2, without its constant."),
    "floor": ("number or null", "[leverage] The box's floor c: c <= s_i^2 <= energy."),
    "warnings": ("array", "Warnings (strings), also printed on stderr."),
    **READOUT,
    "dtype": ("string", "Precision of the search's products (float64 or float32); reports are float64."),
    **CANDIDATES,
    "seconds": ("number", "Seconds in all (as solver.seconds)."),
}

CURVE = {
    "model": ("string", "Model family, as in each design."),
    "n": ("integer", "Rows of A and B."),
    "d": ("integer", "Columns of A and B."),
    "target_error": ("number", "alpha of every design."),
    "floor": ("number or null", "[leverage] The box's floor of every design."),
    "energies": ("array", "The budgets, increasing (leverage: the box's upper ends C)."),
    "designs": ("array", "One design per budget, as `bht design --json` prints it (every key above but run: the curve has one run record)."),
    **_nested("designs[]", {k: v for k, v in DESIGN.items()       # one budget each: no ranking,
                            if not k.startswith(("candidates.", "energy_search."))   # no search,
                            and k not in ("readout.links", "readout.biases")}),     # two models
    "seconds": ("number", "Seconds in all (the designs share one search)."),
}

BOUND = {
    **HEADER,
    "distinguishable": ("boolean", "Whether any query tells A from B (false: the same model, exactly, or up to float64 rounding with the exact-arithmetic ceiling reported; the note says which)."),
    "note": ("string or null", "Why not distinguishable, when the models are the same."),
    "row_norm_2inf": ("number or null", "[softmax] The paper's eps = ||A - B||_{2->inf}."),
    "paper_lower_order": ("number or null", "[softmax, exp links] Theorem 3.2's order 1/(eps E)^2, without its constant."),
    **CERTIFICATE,
    "certificate.ceilings.bilinear": ("number or null", "[--certificate exact] H^2 ceiling of the bilinear bound, certified by a Cholesky factorisation (null: it does not apply; the note says why; docs/maths.md §4.14). Absent without --certificate exact."),
    **READOUT,
    "floor": ("number", "[leverage] The box's floor c."),
    "rank_a": ("integer", "[leverage] Rank of A."),
    "rank_b": ("integer", "[leverage] Rank of B."),
    "seconds": ("number", "Seconds in all."),
}

DECIDE = {
    **HEADER,
    "model": ("string or null", "Model family: softmax, leverage, or causal-lm (--prompt: GGUF builds through the engine)."),
    "n": ("integer or null", "The number of possible answers (causal-lm: the vocabulary's size)."),
    "d": ("integer or null", "Columns of A and B (null for causal-lm: the query is a prompt)."),
    "decision": ("string", "The SPRT's decision on the answers in order: A, B or undecided."),
    "samples_used": ("integer", "Answers up to the SPRT's first crossing (all of them if undecided)."),
    "samples_total": ("integer", "Answers given."),
    "threshold": ("number", "The SPRT thresholds +-ln((1 - alpha)/alpha)."),
    "llr": ("number", "Log-likelihood ratio ln P_A / P_B of all answers (> 0 favours A)."),
    "llr_at_decision": ("number", "The log-likelihood ratio where the SPRT stopped."),
    "posterior_a": ("number", "P(A | answers) under equal priors."),
    "fixed_verdict": ("string", "The decision of the best fixed-n test on all the answers (the minimax likelihood-ratio test whose error design's predicted count uses): A, B or tie (it randomises)."),
    "fixed_error": ("number", "Both error probabilities of that test on this many answers, computed as design's predicted count is: <= the target error once there are predicted answers."),
    "fixed_error_bound": ("number", "The Bhattacharyya bound BC^N on both errors of the sign test (looser than fixed_error)."),
    "favoured": ("string", "The model the answers favour: A or B."),
    "expected_more": ("integer or null", "When undecided: about how many more answers, rounded up (Wald, if the favoured model is true)."),
    "kl_ab": ("number", "KL(P_A || P_B) at the query."),
    "kl_ba": ("number", "KL(P_B || P_A) at the query."),
    "seconds": ("number", "Seconds in all."),
}

SEQUENTIAL = {
    "mean_samples_a": ("number", "Mean queries when A is true."),
    "mean_samples_b": ("number", "Mean queries when B is true."),
    "p95_samples_a": ("integer", "95th percentile of the queries when A is true."),
    "p95_samples_b": ("integer", "95th percentile when B is true."),
    "error_a": ("number", "Realised error when A is true."),
    "error_b": ("number", "Realised error when B is true."),
    "undecided": ("integer", "Trials stopped undecided after the step limit."),
}

SIMULATE = {
    **HEADER,
    "trials": ("integer", "Monte Carlo trials per model."),
    "seed": ("integer", "The seed."),
    "query": ("array", "The query simulated (designed, or given with --query)."),
    "hellinger_squared": ("number", "H^2 at the query."),
    "fixed": ("object or null", "The fixed-n experiment (null when not run)."),
    "fixed.empirical": ("integer or null", "Smallest n whose best threshold test has max error <= alpha."),
    "fixed.interval": ("array", "95% interval of that n: [low, high] (high null when not reached)."),
    **_nested("fixed", {k: v for k, v in SAMPLES.items() if k != "method"}),
    "fixed.method": ("string", "paths, or multinomial counts, interpolated (large n)."),
    "sprt": ("object or null", "Wald's SPRT with the query repeated (null when not run)."),
    **_nested("sprt", SEQUENTIAL),
    "sprt.wald_lower_a": ("number or null", "Wald's lower bound on the mean queries at this query, A true."),
    "sprt.wald_lower_b": ("number or null", "Wald's lower bound, B true."),
    "sprt.mean_samples_lower_sequential": ("integer or null", "The certificate's lower bound on the mean queries of any sequential strategy."),
    "adaptive": ("object or null", "Chernoff's adaptive rule (null when not run)."),
    **_nested("adaptive", SEQUENTIAL),
    "adaptive.saving_vs_sprt": ("number", "Mean saving of the adaptive rule against the SPRT (0.1: 10% fewer queries)."),
    "adaptive.query_a": ("array", "The query asked while A is at least as likely (argmax KL(P_A||P_B))."),
    "adaptive.query_b": ("array", "The query asked otherwise (argmax KL(P_B||P_A))."),
    "curve": ("object or null", "Empirical max error against n (the fixed experiment's grid); K models: the largest error over the models, present with --plot."),
    "curve.n": ("array", "The n of the grid."),
    "curve.error": ("array", "Empirical max error at each n."),
    "curve.standard_error": ("array", "Its standard error."),
    "curve.predicted_n": ("array", "(with --plot) The n of the predicted curve."),
    "curve.predicted_error": ("array", "(with --plot) Minimax error of the likelihood-ratio test at each n."),
    "seconds": ("number", "Seconds in all."),
    "distinguishable": ("boolean", "Whether anything was simulated (false: A and B cannot be told apart)."),
    "note": ("string or null", "Why nothing was simulated."),
    "floor": ("number or null", "[leverage] The box's floor."),
}

SMALL = {
    "nu": ("number", "nu = sup Var_A((B - A) x) over the ball."),
    "query_norm": ("number", "||x|| of the maximiser of the variance."),
    "bhattacharyya_distance_estimate": ("number", "nu / 8, the second-order estimate of D."),
    "hellinger_squared_estimate": ("number", "1 - exp(-nu / 8)."),
    "samples": ("object", "Counts from the estimate."),
    "samples.lower": ("integer or null", "Lower count with D = nu/8."),
    "samples.upper": ("integer or null", "Upper count with D = nu/8."),
    "samples.predicted": ("integer or null", "ceil(4 z^2 / nu), the Gaussian limit of the minimax test."),
    "paper_order": ("number or null", "1/nu: Theorem 3.5's order, eps absorbed."),
    "local_maxima": ("integer", "Distinct local maxima of the variance found."),
    "starts": ("integer", "Starting points of that search."),
}

SHIFT = {
    **HEADER,
    "m": ("integer", "Data points (rows of Q)."),
    "lr": ("number", "Learning rate."),
    "steps": ("integer", "Full-batch gradient steps."),
    "loss_before": ("number", "Loss L(A)."),
    "loss_after": ("number", "Loss L(B)."),
    "loss_history": ("array", "L after 0, 1, ..., steps steps."),
    "grad_norm": ("number", "||grad L(A)||_F at the start."),
    "delta_frobenius": ("number", "||B - A||_F."),
    "row_norm_2inf": ("number", "||B - A||_{2->inf} (the paper's eps for the pair A, B)."),
    "out": ("string or null", "Where B was written."),
    "detection": ("object or null", "(with --energy) How many queries detect the update."),
    "detection.distinguishable": ("boolean", "Whether B differs from A as a softmax model."),
    "detection.hellinger_squared": ("number", "H^2 at the designed query."),
    "detection.bhattacharyya_distance": ("number", "D at the designed query."),
    "detection.query_norm": ("number", "||x|| of the designed query."),
    "detection.samples": ("object", "Counts at the designed query (as design's samples)."),
    **_nested("detection.samples", SAMPLES),
    "detection.small_perturbation": ("object", "The small-perturbation estimate."),
    **_nested("detection.small_perturbation", SMALL),
    "detection.estimate_over_design": ("number or null", "(nu/8) / D: 1 for small updates."),
    "seconds": ("number", "Seconds in all."),
    "warnings": ("array", "Warnings (strings), also printed on stderr (e.g. the loss rose)."),
}

SWEEP = {
    **{k: ("null", "Null: each task has its own, in the results journal.") for k in HEADER},
    "manifest": ("string", "The manifest."),
    "results": ("string", "The results journal (JSONL)."),
    "tasks": ("integer", "Distinct tasks in the manifest."),
    "manifest_rows": ("integer", "Rows of the manifest."),
    "ok": ("integer", "Tasks done without failure (this run and earlier ones)."),
    "failed": ("integer", "Tasks failed (this run and earlier ones)."),
    "ran": ("integer", "Tasks run by this invocation."),
    "failed_now": ("integer", "Tasks that failed in this invocation."),
    "already_done": ("integer", "Tasks found in the journal and skipped."),
    "stale_rows": ("integer", "Journal rows of tasks no longer in the manifest."),
    "engine": ("string", "What ran the tasks (e.g. a local Dask cluster)."),
    "workers": ("integer or null", "Worker processes."),
    "startup_seconds": ("number", "Seconds to start the engine."),
    "run_seconds": ("number", "Seconds running tasks."),
    "seconds": ("number", "Seconds in all."),
    "tasks_per_second": ("number or null", "Throughput."),
    "export": ("string or null", "Where the rows were exported (--export)."),
    "failures": ("array of objects", "Up to 10 failed tasks."),
    "failures[].line": ("integer", "Its manifest line."),
    "failures[].task": ("string", "Its task key."),
    "failures[].failure": ("string or null", "Why it failed."),
    "notes": ("array", "Notes (strings), also printed on stderr."),
}

TENSORS = {
    "n": ("integer or null", "Rows of the head bht reads for FILE alone (null: no head found)."),
    "d": ("integer or null", "Columns of that head."),
    "file": ("string", "The file or folder listed."),
    "format": ("string", "gguf, folder (Hugging Face checkpoint), safetensors, npz or npy."),
    "tensors": ("array of objects", "Every tensor, in the file's order."),
    "tensors[].name": ("string", "Its name (FILE:NAME reads it)."),
    "tensors[].shape": ("array", "Its shape in the order bht reads it (a GGUF head: n_vocab x d)."),
    "tensors[].dtype": ("string", "Stored type: F32, BF16, Q4_K, ... (numpy dtype names for .npz/.npy)."),
    "tensors[].bytes": ("integer", "Bytes of its data as stored."),
    "total_bytes": ("integer", "Bytes of all tensor data."),
    "head": ("string or null", "The tensor bht reads for FILE alone: the output layer (null: none found)."),
    "head_tied": ("boolean or null", "Whether the head is the input embedding (tied)."),
    "softcap": ("number or null", "final_logit_softcapping the checkpoint declares (bht then reads out with softcap:C)."),
    "architecture": ("string or null", "general.architecture (GGUF) or model_type (config.json)."),
    "compared_with": ("string or null", "[FILE OTHER] OTHER, the GGUF file compared with FILE (null: a listing of one file)."),
    "differ": ("array of objects or null", "[FILE OTHER] The tensors of both files that differ (type, shape or bytes), in FILE's order."),
    "differ[].name": ("string", "Its name."),
    "differ[].shape": ("array", "Its shape in FILE (numpy order)."),
    "differ[].other_shape": ("array", "Its shape in OTHER."),
    "differ[].dtype": ("string", "Its stored type in FILE."),
    "differ[].other_dtype": ("string", "Its stored type in OTHER."),
    "differ[].max_abs_error": ("number or null", "max |T_OTHER - T_FILE| over its values, dequantized (null: the shapes differ)."),
    "identical": ("integer or null", "[FILE OTHER] Tensors stored alike in both, bit for bit."),
    "only_in_file": ("array or null", "[FILE OTHER] Names of the tensors only FILE holds."),
    "only_in_other": ("array or null", "[FILE OTHER] Names of the tensors only OTHER holds."),
}

QUANTIZE = {
    "n": ("integer", "Rows of the matrix (a .gguf build: of its head)."),
    "d": ("integer", "Columns of the matrix."),
    "source": ("string", "The matrix quantized (a .gguf build: the source file)."),
    "to": ("string", "The type of the round trip (q8_0 ... q4_0, f16, bf16, f32, int8-row)."),
    "out": ("string", "Where the round trip was written (float32), or the .gguf build."),
    "block_size": ("integer", "Values per quantization block (int8-row: the row length)."),
    "bits_per_weight": ("number", "Stored bits per value, scales included."),
    "max_abs_error": ("number", "max |A' - A| over all entries (a .gguf build: of its head)."),
    "relative_frobenius_error": ("number or null", "||A' - A||_F / ||A||_F (null for A = 0 with A' != 0)."),
    "row_norm_2inf": ("number", "||A' - A||_{2->inf}, the largest change of a row."),
    "seconds": ("number", "Seconds in all."),
    "exact": ("boolean", "max |A' - A| = 0: the round trip changes no value (A is already of that type)."),
    "head": ("string or null", "[.gguf build] The head whose round trip the numbers above describe (null: not a .gguf build)."),
    "file_type": ("integer or null", "[.gguf build] general.file_type written (llama.cpp's LLAMA_FTYPE_*)."),
    "tensors": ("array of objects or null", "[.gguf build] Every tensor of the build, in the file's order."),
    "tensors[].name": ("string", "Its name."),
    "tensors[].shape": ("array", "Its shape in numpy's order."),
    "tensors[].from": ("string", "Its type in the source."),
    "tensors[].to": ("string", "Its type in the build."),
    "tensors[].reencoded": ("boolean", "Whether it was re-encoded (false: copied byte for byte: 1-D tensors, norms, ...)."),
    "tensors[].max_abs_error": ("number", "max |T' - T| over its values (0 for a copied tensor)."),
    "fallbacks": ("array or null", "[.gguf build] Tensors written as F16 because their rows are not a multiple of the type's block."),
}

PROMPTS = {
    "model": ("string", "causal-lm: next-token laws of whole models through the engine."),
    "n": ("integer", "Tokens in the builds' vocabulary."),
    "d": ("null", "Null: the query is a prompt, not a vector."),
    "energy": ("null", "Null: no budget."),
    "target_error": ("number", "alpha of the counts."),
    "builds": ("array", "The GGUF builds as given (A first)."),
    "source": ("string", "The prompt file, or corpus (natural prompts from text Python ships)."),
    "prompts_scored": ("integer", "Prompts whose laws were computed on every build."),
    "sampler": ("object", "The sampler whose law is compared (llama.cpp's chain order: top-k, top-p, min-p, temperature)."),
    "sampler.temperature": ("number", "Temperature (0: greedy)."),
    "sampler.top_k": ("integer", "Top-k (0: off)."),
    "sampler.top_p": ("number", "Top-p (1: off)."),
    "sampler.min_p": ("number", "Min-p (0: off)."),
    "engine": ("object", "What computed the laws: engine, binding and its version, llama.cpp build (null: not exposed), library versions and source commit, CPU features, threads, batch, KV type, flash attention, context, sequences per call."),
    "engine.engine": ("string", "llama.cpp."),
    "engine.binding": ("string", "llama-cpp-python."),
    "engine.binding_version": ("string", "Its version (it vendors one llama.cpp)."),
    "engine.llama_cpp_build": ("integer or null", "llama.cpp's build number when the binding exposes it."),
    "engine.llama_version": ("string or null", "libllama's version (llama_version())."),
    "engine.ggml_version": ("string or null", "ggml's version (ggml_version())."),
    "engine.ggml_commit": ("string or null", "The llama.cpp source commit the library was built from (ggml_commit(); '-dirty': with local changes)."),
    "engine.system_info": ("string", "llama_print_system_info()."),
    "engine.cpu_features": ("array", "CPU features the build uses (AVX2, FMA, ...)."),
    "engine.threads": ("integer", "Threads."),
    "engine.batch": ("integer", "Physical batch (ubatch) in tokens."),
    "engine.kv_type": ("string", "KV cache type: f16 or f32."),
    "engine.flash_attn": ("boolean", "Flash attention."),
    "engine.context": ("integer", "Most tokens of one prompt."),
    "engine.sequences": ("integer", "Prompts per engine call."),
    "floor_settings": ("array of objects", "The other engine settings the floor compares each build's laws under (threads, batch, kv_type, flash_attn, context, sequences)."),
    "floor_settings[].threads": ("integer", "Threads."),
    "floor_settings[].batch": ("integer", "Physical batch."),
    "floor_settings[].kv_type": ("string", "KV cache type."),
    "floor_settings[].flash_attn": ("boolean", "Flash attention."),
    "floor_settings[].context": ("integer", "Context of one prompt (0: the model's, at most 512)."),
    "floor_settings[].sequences": ("integer", "Prompts per engine call."),
    "min_margin": ("number or null", "--min-margin: prompts whose H^2 is below this times their floor are left out."),
    "excluded": ("integer", "Prompts left out by --min-margin while filling the top."),
    "border_prompts": ("integer or null", "Temperature 0: prompts whose top token differs between builds (null otherwise)."),
    "median_hellinger_squared": ("number", "Median over the prompts of the (bottleneck) H^2."),
    "top": ("array of objects", "The best prompts, best first."),
    "top[].rank": ("integer", "1 for the best."),
    "top[].index": ("integer", "0-based position in the prompt list."),
    "top[].text": ("string", "The prompt (token_ids prompts: detokenized)."),
    "top[].token_ids": ("array", "Its token ids as the engine reads them (BOS included when the model adds one)."),
    "top[].hellinger_squared": ("number", "H^2 between the builds' laws, each prompt scored alone (one prompt per engine call; the batched scores only choose which prompts are reported; K builds: the bottleneck pair's)."),
    "top[].bhattacharyya_distance": ("number or null", "D = -log(1 - H^2) (null: disjoint supports)."),
    "top[].samples": ("object", "Answers to this prompt for the fixed-n verdict, as design's counts: two builds, the likelihood-ratio test; K builds, the maximum-likelihood verdict among all K (every build's error <= target_error)."),
    "top[].samples.lower": ("integer or null", "Any test needs at least this many."),
    "top[].samples.predicted": ("integer or null", "The minimax likelihood-ratio test's count (K builds: the maximum-likelihood verdict's, saddlepoint-copula)."),
    "top[].samples.upper": ("integer or null", "Chernoff's bound: enough."),
    "top[].samples.method": ("string", "lattice, saddlepoint, support (disjoint supports: one answer), saddlepoint-copula (K builds) or none."),
    "top[].bottleneck": ("object", "The pair of builds the H^2 is of: {i, j}, 0-based."),
    "top[].bottleneck.i": ("integer", "First build."),
    "top[].bottleneck.j": ("integer", "Second build."),
    "top[].floor_hellinger_squared": ("number", "The engine floor: the largest, over the builds, of floors[] (docs/llm_audit.md, The engine floor)."),
    "top[].floor_build": ("integer", "The build whose floor it is, 0-based."),
    "top[].floors": ("array", "Each build's floor: the largest H^2 between its laws scored alone under the settings used and under each of floor_settings, and batched with other prompts (sequences per call)."),
    "top[].error_shift": ("number or null", "Le Cam's bound sqrt(1 - (1 - floor)^(2n)) at n = samples.predicted: how far any test's error on n answers can move when the answers come from another of the floor's settings (null: no count)."),
    "top[].margin": ("number or null", "H^2 / floor (null: floor 0)."),
    "top[].flagged": ("boolean", "H^2 is 0 (equal laws) or below 10x the floor."),
    "top[].top_tokens": ("array of objects", "Each build's most probable next token."),
    "top[].top_tokens[].id": ("integer", "Its id."),
    "top[].top_tokens[].piece": ("string", "Its text."),
    "top[].top_tokens[].probability": ("number", "Its probability under the sampler's law."),
    "scoring_seconds": ("number", "Seconds to load the builds and score every prompt on each."),
    "prompts_per_second": ("number or null", "Prompts scored per second (all builds)."),
    "seconds": ("number", "Seconds in all."),
    "search": ("object or null", "--search: the prompt search from the best prompts of the ranking (null: not run; docs/llm_audit.md, The prompt search)."),
    "search.budget": ("integer", "--search: the forward passes allowed. One prompt scored on one build is one pass, however many prompts an engine call packs; a candidate costs one pass per build."),
    "search.passes": ("integer", "Forward passes the search spent: the starts scored alone, every candidate (batched), the best candidates re-scored alone. At most budget (up to builds - 1 below it, or fewer when no new proposal was left)."),
    "search.report_passes": ("integer", "Passes of the report, outside the budget: each prompt of margin_checked scored again alone on every build and under each floor setting of every build."),
    "search.margin_checked": ("integer", "Candidates scored for the report (without --min-margin: the found prompts; with it, best first until found prompts pass)."),
    "search.margin_dropped": ("integer", "Of them, left out by --min-margin (H^2 below M x their floor)."),
    "search.seed": ("integer", "--seed: the seed of the random draws (equal seeds, equal results)."),
    "search.beam": ("integer", "Prompts kept between rounds."),
    "search.proposals": ("integer", "Proposals per beam prompt and round."),
    "search.rounds": ("integer", "Rounds of proposals scored."),
    "search.candidates": ("integer", "Distinct proposals scored (each re-tokenizes to its ids)."),
    "search.extensions": ("integer", "Of them, a token appended."),
    "search.substitutions": ("integer", "Of them, one token replaced."),
    "search.rejected_tokenization": ("integer", "Proposals dropped unscored: their text does not tokenize back to their ids."),
    "search.starts": ("array of objects", "The natural prompts the search started from (the best of the ranking), best first."),
    "search.starts[].text": ("string", "The prompt."),
    "search.starts[].token_ids": ("array", "Its token ids."),
    "search.starts[].hellinger_squared": ("number", "Its (bottleneck) H^2, the prompt scored alone."),
    "search.start_hellinger_squared": ("number", "The best start's H^2: the best found prompt's is never below it."),
    "search.found": ("array of objects", "The best prompts the search saw, best first, each scored alone (a start when none beat it; with --min-margin, only those at least M x their floor); the keys of top[] except index, plus start, edits and batched_hellinger_squared."),
    "search.found[].rank": ("integer", "1 for the best."),
    "search.found[].text": ("string", "The text to send: it tokenizes to token_ids."),
    "search.found[].token_ids": ("array", "Its token ids (BOS included when the model adds one)."),
    "search.found[].hellinger_squared": ("number", "H^2 between the builds' laws (K builds: the bottleneck pair's), the prompt scored alone: what a fresh score of token_ids gives."),
    "search.found[].bhattacharyya_distance": ("number or null", "D = -log(1 - H^2) (null: disjoint supports)."),
    "search.found[].samples": ("object", "Answers to this prompt for the fixed-n verdict, as design's counts: two builds, the likelihood-ratio test; K builds, the maximum-likelihood verdict among all K (every build's error <= target_error)."),
    "search.found[].samples.lower": ("integer or null", "Any test needs at least this many."),
    "search.found[].samples.predicted": ("integer or null", "The minimax likelihood-ratio test's count (K builds: the maximum-likelihood verdict's, saddlepoint-copula)."),
    "search.found[].samples.upper": ("integer or null", "Chernoff's bound: enough."),
    "search.found[].samples.method": ("string", "lattice, saddlepoint, support, saddlepoint-copula (K builds) or none."),
    "search.found[].bottleneck": ("object", "The pair of builds the H^2 is of: {i, j}, 0-based."),
    "search.found[].bottleneck.i": ("integer", "First build."),
    "search.found[].bottleneck.j": ("integer", "Second build."),
    "search.found[].floor_hellinger_squared": ("number", "The engine floor, as top[]'s (the found prompts batched together for the batched variant)."),
    "search.found[].floor_build": ("integer", "The build whose floor it is, 0-based."),
    "search.found[].floors": ("array", "Each build's floor, as top[]'s."),
    "search.found[].error_shift": ("number or null", "As top[]'s."),
    "search.found[].margin": ("number or null", "H^2 / floor (null: floor 0)."),
    "search.found[].flagged": ("boolean", "H^2 is 0 (equal laws) or below 10x the floor."),
    "search.found[].start": ("integer", "0-based index in starts of the prompt it was edited from."),
    "search.found[].edits": ("integer", "Substitutions and extensions from that start (0: the start itself)."),
    "search.found[].batched_hellinger_squared": ("number or null", "The H^2 the search chose it by, scored among other candidates (null for a start)."),
    "search.found[].top_tokens": ("array of objects", "Each build's most probable next token."),
    "search.found[].top_tokens[].id": ("integer", "Its id."),
    "search.found[].top_tokens[].piece": ("string", "Its text."),
    "search.found[].top_tokens[].probability": ("number", "Its probability under the sampler's law."),
    "search.history": ("array of objects", "H^2 against passes: the best H^2 seen after the starts, after each round (batched scores) and at the end (the best found prompt, scored alone)."),
    "search.history[].passes": ("integer", "Passes spent so far."),
    "search.history[].hellinger_squared": ("number or null", "The best H^2 by then (null at the end: no found prompt passed --min-margin)."),
    "search.search_seconds": ("number", "Seconds in the search."),
    "search.seconds": ("number", "Seconds in the search and its report."),
    "notes": ("array", "Notes (strings), also printed on stderr."),
}

ERROR = {
    "error": ("string", "The message of the `Error:` line on stderr."),
    "exit_status": ("integer", "The exit status (2 bad input, 1 run-time failure, 130 interrupted)."),
}

# --- K models (docs/kway.md): the keys the K-way results add to their commands' objects ---
KWAY_SAMPLES = {
    "lower": ("integer or null", "Answers any test needs to tell the closest pair apart (the pair bound at the bottleneck)."),
    "predicted": ("integer or null", "Answers the maximum-likelihood test needs for every error <= alpha (saddlepoint marginals, Gaussian copula; docs/maths.md §7.2)."),
    "upper": ("integer or null", "Answers for which the union of Chernoff bounds sum_j exp(-n D_kj) <= alpha for every model k."),
    "method": ("string", "How `predicted` was computed: saddlepoint-copula, or none (a schedule of two models: as `samples.method`)."),
}
DESIGN.update({
    "models": ("array", "[K models] The models' names as given (paths; M1, M2, ... for arrays)."),
    "bottleneck": ("object", "[K models] The closest pair at the query: {i, j}, 0-based, i < j."),
    "bottleneck.i": ("integer", "First model of the pair (0-based)."),
    "bottleneck.j": ("integer", "Second model of the pair."),
    "pairs": ("array of objects", "[K models] Every pair at the query."),
    "pairs[].i": ("integer", "First model (0-based)."),
    "pairs[].j": ("integer", "Second model (i < j)."),
    "pairs[].hellinger_squared": ("number", "H^2 of the pair at the query."),
    "pairs[].bhattacharyya_distance": ("number", "D of the pair at the query."),
    "pairs[].predicted": ("integer or null", "Queries that pair alone needs (minimax likelihood-ratio test, x repeated)."),
    "candidates.top[].bottleneck": ("object", "[K models] The closest pair at this candidate: {i, j} (its H^2, D and counts are the bottleneck's and naming the true model's)."),
    "candidates.top[].bottleneck.i": ("integer", "First model of the pair (0-based)."),
    "candidates.top[].bottleneck.j": ("integer", "Second model of the pair."),
    "certificate.bhattacharyya_max_bound": ("number or null", "[K models] No query and no schedule has a bottleneck D above this: the smallest of the pairs' ceilings."),
    "certificate.binding_pair": ("object or null", "[K models] The pair whose ceiling it is: {i, j}."),
    "certificate.binding_pair.i": ("integer", "First model of the pair."),
    "certificate.binding_pair.j": ("integer", "Second model."),
    "certificate.pair_bounds": ("array", "[K models] Each pair's ceiling on D, in the order of `pairs` (null: none)."),
    "schedule": ("object or null", "[--schedule] The best schedule: queries used in fixed proportions (two models: the query alone, weight 1; the key is absent without --schedule, null for K models)."),
    "schedule.queries": ("array", "The queries (one list of d numbers each)."),
    "schedule.weights": ("array", "Their shares of the answers (summing to 1)."),
    "schedule.bhattacharyya_distance": ("number", "The schedule's bottleneck exponent min_ij sum_l w_l D_ij(x_l) per answer."),
    "schedule.hellinger_squared": ("number", "1 - exp(-that exponent)."),
    "schedule.samples": ("object", "Answers to name the true model with the schedule (as `samples`)."),
    **{f"schedule.samples.{k}": v for k, v in KWAY_SAMPLES.items()},
    "schedule.counts": ("array or null", "Answers to each query for the predicted total."),
    "schedule.gain_vs_single": ("number or null", "The schedule's exponent over the single query's (1.3: 23% fewer answers)."),
    "schedule.preferred": ("string", "\"schedule\" or \"single\": the one whose predicted count (`schedule.samples.predicted` against `samples.predicted`) is smaller, the single query on a tie; by the exponent when a count is null. A larger exponent can still need more answers."),
    "schedule.dual_bound": ("number", "max_x sum lambda_ij D_ij(x) at the programme's last dual weights: no schedule's exponent exceeds it (when that maximum is global)."),
    "schedule.converged": ("boolean", "Whether column generation found no query that improves the programme."),
    "schedule.rounds": ("integer", "Rounds of column generation."),
})
DESIGN["schedule.candidates"] = ("integer", "Candidate queries the linear programme saw.")
DESIGN["schedule.indices"] = ("array", "[--candidates] The rows of H the schedule mixes (0-based, in the order of `queries`); its programme has every eligible row as a column, so `dual_bound` is its optimum.")
BOUND.update({
    "models": ("array", "[K models] The models' names as given."),
    "pairs": ("array of objects", "[K models] Each pair's ceiling."),
    "pairs[].i": ("integer", "First model (0-based)."),
    "pairs[].j": ("integer", "Second model (i < j)."),
    "pairs[].bhattacharyya_max_bound": ("number or null", "Upper bound on sup D of the pair over the ball."),
    "pairs[].hellinger_squared_max_bound": ("number or null", "Upper bound on sup H^2 of the pair."),
    "pairs[].samples_lower_any_strategy": ("integer or null", "Queries any strategy needs to tell that pair apart."),
    "pairs[].row_diameter": ("number", "Diameter of the rows of the pair's difference."),
    "pairs[].ceiling_method": ("string or null", "The ceiling that binds for the pair: per_row, range, or (--certificate exact) bilinear."),
    "certificate.binding_pair": ("object or null", "[K models] The pair with the smallest ceiling: {i, j}; certificate.bhattacharyya_max_bound is its ceiling, which no query and no schedule beats on the closest pair."),
    "certificate.binding_pair.i": ("integer", "First model of the pair."),
    "certificate.binding_pair.j": ("integer", "Second model."),
})
DECIDE.update({
    "decision": ("string", "The SPRT's decision on the answers in order: A, B or undecided (K models: the model named by the matrix SPRT, M1 .. MK in the order given, or undecided)."),
    "decision_index": ("integer or null", "The 0-based index of `decision` among the models (A is 0, B is 1); null when undecided. The same key for two models and for K."),
    "fixed_verdict": ("string", "The fixed-n verdict: A, B or tie (K models: the maximum-likelihood model, M1 .. MK, or tie)."),
    "fixed_verdict_index": ("integer or null", "The 0-based index of `fixed_verdict` among the models; null on a tie."),
    "fixed_error_bound": ("number", "BC^N: both errors of the sign test are at most this (K models: max_k sum_j prod_t BC_kj, the union bound)."),
    "threshold": ("number", "The SPRT thresholds +-ln((1 - alpha)/alpha) (K models: ln((K - 1)/alpha), passed by the leader against every other model)."),
    "models": ("array", "[K models] The models' names as given."),
    "log_likelihoods": ("array", "[K models] sum_t log p_k(answer_t) per model."),
    "posterior": ("array", "[K models] P(model k | answers) under the priors."),
    "priors": ("array", "[K models] The priors (--prior, default equal)."),
    "queries_used": ("integer", "[K models] Distinct queries the answers came from (> 1: a schedule)."),
    "fixed_error": ("number", "Both error probabilities of that test on this many answers, computed as design's predicted count is: <= the target error once there are predicted answers (K models: the largest error over the true model, saddlepoint marginals joined by a Gaussian copula)."),
})
SIMULATE.update({
    "models": ("array", "[K models] The models' names as given."),
    "queries": ("array", "[K models] The queries simulated (one: a single query)."),
    "weights": ("array", "[K models] Their shares of the answers."),
    "bhattacharyya_distance": ("number", "[K models] The bottleneck exponent per answer."),
    "fixed.error_at_predicted": ("number", "[K models] Largest empirical error (over the true model) at the predicted n."),
    "fixed.worst_model": ("integer", "[K models] The model (0-based) with that error."),
    "fixed.errors_at_empirical": ("array", "[K models] Empirical error under each model at the empirical n."),
    "readout": ("object", "[K models, --links or --biases] How each model turns scores into probabilities (absent for plain softmax models)."),
    "readout.links": ("array", "The link of each model, in their order."),
    "readout.biases": ("array", "Whether each model has a bias, in their order."),
    "sequential": ("object or null", "[K models] The matrix SPRT (null when not run)."),
    "sequential.mean_samples": ("array", "Mean answers under each true model."),
    "sequential.error": ("array", "Realised error under each true model."),
    "sequential.threshold": ("number", "ln((K - 1)/alpha)."),
    "sequential.undecided": ("integer", "Trials still undecided at the cap."),
    "sequential.cap": ("integer", "Most answers a trial may draw."),
    "adaptive.mean_samples": ("array", "[K models] Mean answers of Chernoff's adaptive rule under each true model (matrix SPRT stop)."),
    "adaptive.error": ("array", "[K models] Its realised error under each true model."),
    "adaptive.cap": ("integer", "[K models] Most answers a trial may draw."),
    "adaptive.threshold": ("number", "[K models] ln((K - 1)/alpha), the matrix SPRT's stop."),
    "adaptive.queries": ("array", "[K models] The candidate queries some leader asks: the simulated query first, then argmax KL(P_k||P_j) of the ordered pairs."),
    "adaptive.mixes": ("array", "[K models] Row k: the shares of those queries while model k leads, maximising min_j sum_q share_q KL_q(P_k||P_j)."),
    "adaptive.exponents": ("array", "[K models] That maximum per leading model: the adaptive rule's exponent under model k."),
    "adaptive.mean_samples_predicted": ("array", "[K models] ln((K-1)/alpha) / exponent per true model: the first-order mean answers (no overshoot; null when the exponent is 0)."),
})


SAMPLE = {
    "model": ("string", "causal-lm: tokens drawn by the engine from a whole model."),
    "n": ("integer", "Tokens in the build's vocabulary."),
    "d": ("null", "Null: the query is a prompt, not a vector."),
    "energy": ("null", "Null: no budget."),
    "target_error": ("null", "Null: nothing is decided."),
    "build": ("string", "The GGUF build as given."),
    "prompt": ("string", "The prompt's text (--prompt; token ids given to the Python API: detokenized)."),
    "prompt_token_ids": ("array", "Its token ids as the engine reads them (BOS included when the model adds one)."),
    "sampler": ("object", "The sampler the tokens were drawn with (llama.cpp's chain: top-k, top-p, min-p, temperature, then the draw; temperature 0: greedy)."),
    "sampler.temperature": ("number", "--temperature."),
    "sampler.top_k": ("integer", "--top-k (0: off)."),
    "sampler.top_p": ("number", "--top-p (1: off)."),
    "sampler.min_p": ("number", "--min-p (0: off)."),
    "seed": ("integer", "--seed of the draw."),
    "count": ("integer", "Tokens drawn (--count)."),
    "token_ids": ("array", "The drawn token ids in order, each the first token of an independent completion: the lines bht sample --prompt prints without --json."),
    "pieces": ("array", "Each drawn token's text as the engine renders it (llama_token_to_piece; bytes that are not UTF-8 on their own become U+FFFD)."),
    "tokens": ("array", "Each drawn token's vocabulary string (what --text prints; what decide --prompt reads as answers)."),
    "seconds": ("number", "Seconds in all (loading the build, the draw)."),
}

# --- the run record (bhtcli/io/run_record.py), last in every command's object ---
RUN = {
    "run": ("object", "The run record: what the command read and which bht read it, so that the run can be reproduced and cited (null only for a result built below bhtcli.api)."),
    "run.bht_version": ("string", "The bht version (bht --version)."),
    "run.inputs": ("array of objects", "The models as given, in order (A first; K models; the builds; tensors: FILE and OTHER; quantize: SRC; shift: A; sweep: none, the tasks name theirs in the results journal). Every other file read is in run.files."),
    "run.inputs[].given": ("string or null", "The argument as given (relative paths kept, FILE:TENSOR, DIR, -); null for an array given to the Python API."),
    "run.inputs[].format": ("string or null", "npy, npz, text, safetensors, gguf, folder, stream (standard input or a pipe: no size or hash, its bytes were read once) or array (null: not recognised)."),
    "run.inputs[].tensor": ("string or null", "The tensor chosen (a checkpoint's head, FILE:TENSOR or an .npz key; null for a plain matrix file)."),
    "run.inputs[].shape": ("array or null", "Its shape as bht reads it (n x d), from the headers."),
    "run.inputs[].stored": ("string or null", "Its stored type: Q4_1, BF16, F32, ... (numpy dtype names for .npy/.npz and arrays)."),
    "run.files": ("array of objects", "Every regular file the command read, once each, in the order read: matrix files, a folder's config.json, index and shards, a GGUF file, queries, answers, names, a manifest."),
    "run.files[].path": ("string", "The path as read (relative paths kept)."),
    "run.files[].size": ("integer", "Its size in bytes."),
    "run.files[].sha256": ("string or null", "The SHA-256 of its bytes, hex (null with --no-hash, hash_files=False in Python). Computed after the command's work, reading the whole file once more: about 0.1 s per 100 MB from the page cache, more from a cold disk."),
    "run.files[].symlink_to": ("string or null", "The file a symlink resolves to (its bytes are the ones hashed); null for a plain file."),
    "run.hashed": ("boolean", "Whether the SHA-256s were computed (false: --no-hash)."),
}
ENGINE_RUN = {
    "run.engine": ("object", "What ran the builds, the engine's record (as the engine key of bht prompts)."),
    **{f"run.{k}": v for k, v in PROMPTS.items() if k.startswith("engine.")},
}
for _keys in (DESIGN, CURVE, BOUND, DECIDE, SIMULATE, SHIFT, RANK, TENSORS, QUANTIZE, PROMPTS,
              SAMPLE):
    _keys.update(RUN)
SWEEP.update({k: v for k, v in RUN.items() if not k.startswith("run.inputs[]")})   # no models
for _keys in (DECIDE, PROMPTS, SAMPLE):
    _keys.update(ENGINE_RUN)
DECIDE["run.engine"] = ("object", "[--prompt] What ran the builds, the engine's record (as the engine key of bht prompts).")
PROMPTS["engine"] = (PROMPTS["engine"][0], PROMPTS["engine"][1] + " The same record as run.engine (kept here for compatibility).")

# command -> (result classes, keys); the classes are named for the reference.
SCHEMA = {
    "design": (("DesignResult",), DESIGN),
    "design --energy E1,E2,...": (("BudgetCurveResult",), CURVE),
    "bound": (("BoundResult", "LeverageBoundResult"), BOUND),
    "decide": (("DecideResult",), DECIDE),
    "simulate": (("SimulateResult",), SIMULATE),
    "shift": (("ShiftResult",), SHIFT),
    "sweep": (("SweepResult",), SWEEP),
    "rank": (("RankResult",), RANK),
    "tensors": (("TensorsResult",), TENSORS),
    "quantize": (("QuantizeResult",), QUANTIZE),
    "prompts": (("PromptsResult",), PROMPTS),
    "sample --prompt": (("SampleResult",), SAMPLE),
}


def type_of(value) -> str:
    """The schema's name for the type of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array of objects" if value and isinstance(value[0], dict) else "array"
    return type(value).__name__


def accepts(declared: str, value) -> bool:
    """Whether `value` has the declared type ("integer" also passes as "number")."""
    allowed = {t.strip() for t in declared.split(" or ")}
    actual = type_of(value)
    if actual == "integer" and "number" in allowed:
        return True
    if actual == "array of objects" and "array" in allowed:
        return True
    if actual == "array" and "array of objects" in allowed and value == []:
        return True
    return actual in allowed


def key_paths(obj, prefix: str = "") -> dict:
    """{key path: value} of every key in a JSON object (nested objects, lists of objects)."""
    out = {}
    for key, value in obj.items():
        path = f"{prefix}{key}"
        out[path] = value
        if isinstance(value, dict):
            out.update(key_paths(value, path + "."))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                out.update(key_paths(item, path + "[]."))
    return out

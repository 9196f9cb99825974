"""How close the certificate comes to the design on a real model: all-MiniLM-L6-v2's token
embeddings (30,522 x 384) against their int8 per-row round-trip (the pair of audit.py).

For each energy E it runs `design` (the designed H^2 and its predicted query count) and prints
the ceilings on sup H^2 over the ball: the old one (the range bound E^2 diam^2/32 with the
cheap diameter bound 2 max_i |g_i - mean| that bht used beyond 10,000 rows), the certificate
now (the smallest valid ceiling), which bound gives it, and ceiling / design.

With --exact E1,E2,... it also runs, at those energies, `bound --certificate exact` (the
bilinear ceiling, docs/maths.md §4.14: a 30,521 x 30,521 float64 matrix, 7.5 GB, and its
Cholesky factorisation; minutes per energy) and adds that ceiling, its ratio to the design and
its wall time.

Usage: .venv/bin/python examples/quantization_audit/certificate_table.py [--energies 0.3,1,3,10]
[--exact 0.3,1,3] (after examples/quantization_audit/setup.sh). The table (Markdown) on stdout,
progress on stderr.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit import TENSOR, int8_round_trip, model_file  # noqa: E402

from bhtcli import bound, design, load_matrix  # noqa: E402
from bhtcli.analysis.diameter import centred_difference, row_diameter  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--energies", default="0.3,1,3,10", help="comma-separated energies")
    parser.add_argument("--starts", type=int, default=32, help="starting points per design")
    parser.add_argument("--exact", default="", metavar="ENERGIES",
                        help="comma-separated energies at which to add the bilinear ceiling of "
                             "bound --certificate exact (minutes each, 7.5 GB)")
    args = parser.parse_args(argv)
    spec = f"{model_file()}:{TENSOR}"
    A = load_matrix(spec, dtype="float32")
    exact = {float(e) for e in args.exact.split(",") if e}
    extra = ((" ceiling (exact) | binds | ceiling / design | seconds |", "---:|---|---:|---:|")
             if exact else ("", ""))
    print("| E | designed H² | queries (predicted) | ceiling (old) | ceiling (new) | "
          "binds | ceiling / design |" + extra[0])
    print("|---:|---:|---:|---:|---:|---|---:|" + extra[1])
    with tempfile.TemporaryDirectory(prefix="bht-cert-") as scratch:
        int8_file = Path(scratch) / "int8_roundtrip.safetensors"
        B = int8_round_trip(np.asarray(A))
        save_file({"weight": B}, str(int8_file))
        cheap = row_diameter(centred_difference(A, B), max_pair_work=0).value   # old diameter
        for energy in (float(e) for e in args.energies.split(",")):
            t0 = time.perf_counter()
            r = design(spec, str(int8_file), energy, starts=args.starts, seed=0, dtype="float32")
            c = r.certificate
            print(f"| {energy:g} | {r.hellinger_squared:.4g} | {r.samples['predicted']:,} | "
                  f"{-math.expm1(-(energy * cheap) ** 2 / 32):.4g} | {c['hellinger_squared_max_bound']:.4g} | "
                  f"{c['ceiling_method']} | {1 / c['design_over_bound']:.3g}× |", end="", flush=True)
            print(f"  E={energy:g}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            if energy in exact:
                t0 = time.perf_counter()
                x = bound(spec, str(int8_file), energy, certificate="exact",
                          progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True)).certificate
                seconds = time.perf_counter() - t0
                ratio = x["hellinger_squared_max_bound"] / r.hellinger_squared
                print(f" {x['hellinger_squared_max_bound']:.4g} | {x['ceiling_method']} | {ratio:.3g}× | "
                      f"{seconds:.0f} |", end="")
            elif exact:
                print(" – | – | – | – |", end="")
            print(flush=True)


if __name__ == "__main__":
    main()

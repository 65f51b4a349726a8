"""Benchmark of the argmaxable-token pipeline against one LP per token.

Prints, in one run, for random heads with V = 10,000 and D in {2, 8, 32}: the time per token of
the certified pipeline (duplicates, batched certificates, reflections, the cutting-plane margin LP,
then exact convex weights for the tokens that never win) against one margin LP over all tokens per
token, read uncertified as "argmaxable when the margin exceeds 1e-9", measured on the same sample
of tokens, as a ratio; how many sampled tokens the pipeline certified each way and left undecided;
and, where qhull can run (D <= 8), the agreement of the pipeline's answers with the vertices of the
convex hull.

Usage: python benchmarks/argmax.py [--V N] [--sample N] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy.spatial import ConvexHull

from rankwall.theory import expressivity as ex

#: The margin above which the uncertified baseline reads a token as argmaxable.
BASELINE_MARGIN_FLOOR = 1e-9


def pipeline_on(W: np.ndarray, tokens: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    started = time.perf_counter()
    result = ex.argmaxable(W, tokens=tokens)
    return time.perf_counter() - started, result["argmaxable"][tokens], result["never"][tokens]


def lp_on(W: np.ndarray, tokens: np.ndarray) -> tuple[float, np.ndarray]:
    head = ex.Head.of(W)
    started = time.perf_counter()
    decided = [ex.argmax_lp(head, i)[0] > BASELINE_MARGIN_FLOOR for i in tokens]
    return time.perf_counter() - started, np.array(decided)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--V", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for D in (2, 8, 32):
        rng = np.random.default_rng(D)
        W = rng.standard_normal((args.V, D))
        tokens = rng.choice(args.V, size=args.sample, replace=False)
        t_pipe, pipe, never = pipeline_on(W, tokens)
        t_lp, lp = lp_on(W, tokens)
        row = {
            "D": D,
            "V": args.V,
            "sample": args.sample,
            "pipeline_s_per_token": t_pipe / args.sample,
            "lp_s_per_token": t_lp / args.sample,
            "ratio": t_lp / t_pipe,
            "argmaxable_in_sample": int(pipe.sum()),
            "never_in_sample": int(never.sum()),
            "undecided_in_sample": int(np.sum(~pipe & ~never)),
            "pipeline_agrees_with_lp": bool((pipe == lp).all()),
        }
        if D <= 8:
            started = time.perf_counter()
            vertices = np.zeros(args.V, dtype=bool)
            vertices[ConvexHull(W).vertices] = True
            row["qhull_s"] = time.perf_counter() - started
            row["agrees_with_hull"] = bool((pipe == vertices[tokens]).all() and (never == ~vertices[tokens]).all())
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        hull = f"   qhull agrees: {r['agrees_with_hull']} ({r['qhull_s']:.1f} s)" if "agrees_with_hull" in r else ""
        print(
            f"D = {r['D']:>2}, V = {r['V']}: pipeline {r['pipeline_s_per_token'] * 1e3:7.2f} ms/token   "
            f"LP {r['lp_s_per_token'] * 1e3:7.2f} ms/token   ratio {r['ratio']:5.1f}x   "
            f"argmaxable {r['argmaxable_in_sample']}/{r['sample']}, never {r['never_in_sample']}, "
            f"undecided {r['undecided_in_sample']}   "
            f"agree with LP: {r['pipeline_agrees_with_lp']}{hull}"
        )


if __name__ == "__main__":
    main()

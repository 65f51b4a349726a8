"""Benchmark of the argmaxable-token pipeline against qhull and against one LP per token.

Prints, in one run, for random Gaussian heads (V = 2,000 rows by default, no bias) at D = 2, 4, 8,
16 and 32, the CPU time (``time.process_time``, all threads) and the wall time of

- *rankwall*: :func:`rankwall.theory.expressivity.argmaxable` on every token, every answer certified
  exactly (a winning h re-checked over all V logits, or convex weights checked in integers): up to
  ``HULL_MAX_D`` its candidates come from qhull's hull (the vertices' normals, the pulling
  triangulation's simplices), above it from batched directions, reflections and a cutting-plane LP;
- *qhull*: ``scipy.spatial.ConvexHull(W).vertices``, the uncertified answer, where it runs (D <= 8;
  its output grows like V^(D/2), so it is not run above);
- *one LP per token*: the margin LP over all other tokens (HiGHS), read as "argmaxable when the margin
  exceeds 1e-9" (uncertified), timed on a sample of ``--sample`` tokens and multiplied by V/sample for
  the whole head (labelled as such);

with the ratios rankwall / qhull and LP / rankwall (CPU time), and whether the answers agree: rankwall
against qhull's vertices on every token, against the LP on the sample. Below D = 8 rankwall and qhull
are timed ``--repeats`` times, alternately, and the medians are reported (both take milliseconds
there); the modules both import are loaded before any clock starts.

Usage: python benchmarks/argmax.py [--V N] [--sample N] [--repeats N] [--dimensions 2 4 ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter

import numpy as np
from scipy.spatial import ConvexHull

from rankwall.theory import expressivity as ex

#: The margin above which the uncertified LP baseline reads a token as argmaxable.
BASELINE_MARGIN_FLOOR = 1e-9
#: The largest D at which qhull is run (its output, and time, grow like V^(D/2)).
QHULL_MAX_D = 8
#: Below this D both rankwall and qhull take milliseconds: they are timed --repeats times.
REPEATED_BELOW_D = 8


def timed(work) -> tuple[float, float, object]:
    """CPU seconds, wall seconds and the result of ``work()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def hull_vertices(W: np.ndarray) -> np.ndarray:
    vertices = np.zeros(len(W), dtype=bool)
    vertices[ConvexHull(W).vertices] = True
    return vertices


def lp_answers(W: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    head = ex.Head.of(W)
    return np.array([ex.argmax_lp(head, int(i))[0] > BASELINE_MARGIN_FLOOR for i in tokens])


def warm_up() -> None:
    """Load what the timed calls import lazily (scipy.spatial, scipy.optimize, python-flint)."""
    W = np.random.default_rng(0).standard_normal((40, 3))
    ex.argmaxable(W)
    ex.argmaxable(np.random.default_rng(0).standard_normal((40, 12)))
    lp_answers(W, np.arange(2))
    hull_vertices(W)


def measure(V: int, D: int, sample: int, repeats: int) -> dict:
    rng = np.random.default_rng(D)
    W = rng.standard_normal((V, D))
    tokens = rng.choice(V, size=min(sample, V), replace=False)
    runs = repeats if D < REPEATED_BELOW_D else 1
    ours, hull = [], []
    for _ in range(runs):
        ours.append(timed(lambda: ex.argmaxable(W)))
        if D <= QHULL_MAX_D:
            hull.append(timed(lambda: hull_vertices(W)))
    result = ours[-1][2]
    decided, never = result["argmaxable"], result["never"]
    lp_cpu, lp_wall, lp = timed(lambda: lp_answers(W, tokens))
    scale = V / len(tokens)
    row = {
        "D": D,
        "V": V,
        "rankwall_cpu_s": statistics.median(c for c, _, _ in ours),
        "rankwall_wall_s": statistics.median(w for _, w, _ in ours),
        "argmaxable": int(decided.sum()),
        "never": int(never.sum()),
        "undecided": int(np.sum(~decided & ~never)),
        "methods": dict(Counter(str(m) for m in result["method"])),
        "lp_sample": len(tokens),
        "lp_cpu_s_for_V": lp_cpu * scale,
        "lp_wall_s_for_V": lp_wall * scale,
        "lp_over_rankwall_cpu": lp_cpu * scale / statistics.median(c for c, _, _ in ours),
        "agrees_with_lp_on_sample": bool((decided[tokens] == lp).all() and (never[tokens] == ~lp).all()),
        "timed_runs": runs,
    }
    if hull:
        vertices = hull[-1][2]
        row |= {
            "qhull_cpu_s": statistics.median(c for c, _, _ in hull),
            "qhull_wall_s": statistics.median(w for _, w, _ in hull),
            "agrees_with_qhull": bool((decided == vertices).all() and (never == ~vertices).all()),
        }
        row["rankwall_over_qhull_cpu"] = row["rankwall_cpu_s"] / row["qhull_cpu_s"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--V", type=int, default=2000)
    parser.add_argument("--sample", type=int, default=50, help="tokens the LP baseline is timed on")
    parser.add_argument("--repeats", type=int, default=7, help=f"timed runs below D = {REPEATED_BELOW_D}")
    parser.add_argument("--dimensions", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    warm_up()
    rows = [measure(args.V, D, args.sample, args.repeats) for D in args.dimensions]
    report = {"rows": rows, "hull_max_d": ex.HULL_MAX_D, "load_average": os.getloadavg()}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"V = {args.V} Gaussian rows, no bias; rankwall's hull route up to D = {ex.HULL_MAX_D}")
    for r in rows:
        hull = (
            f"qhull {r['qhull_cpu_s']:8.4f} CPU-s ({r['qhull_wall_s']:8.4f} wall)  "
            f"rankwall/qhull {r['rankwall_over_qhull_cpu']:6.1f}x  agree {r['agrees_with_qhull']}"
            if "qhull_cpu_s" in r
            else "qhull not run (D > 8)"
        )
        print(
            f"D = {r['D']:>2}: rankwall {r['rankwall_cpu_s']:8.3f} CPU-s ({r['rankwall_wall_s']:8.3f} wall)   {hull}   "
            f"LP per token x V {r['lp_cpu_s_for_V']:8.1f} CPU-s ({r['lp_wall_s_for_V']:8.1f} wall, from "
            f"{r['lp_sample']} tokens)  LP/rankwall {r['lp_over_rankwall_cpu']:7.1f}x  "
            f"agree {r['agrees_with_lp_on_sample']}   "
            f"argmaxable {r['argmaxable']}, never {r['never']}, undecided {r['undecided']}"
        )
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in report["load_average"]))


if __name__ == "__main__":
    main()

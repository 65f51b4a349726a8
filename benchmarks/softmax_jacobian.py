"""Benchmark of spectral_norm: speed against dense eigvalsh, and throughput at V = 131,072.

Prints, in one run:
- the time per row of `spectral_norm` (secular equation, O(V) per iteration) against forming J
  and calling `numpy.linalg.eigvalsh` on it, at V = 512 and 2048, as a ratio (target: >= 100x
  at V = 2048);
- rows per second of `spectral_norm` at V = 131,072 (target: >= 100 rows/s on two cores).

Usage: python benchmarks/softmax_jacobian.py [--backend numpy|torch|cupy] [--device cpu|cuda]
       [--rows N] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rankwall.checks.backends import resolve, to_numpy
from rankwall.theory import softmax_jacobian as sj

FAMILIES = ((0.05, "peaked"), (0.5, "moderate"), (5.0, "flat"))


def rows(V: int, n: int) -> np.ndarray:
    """n Dirichlet rows cycling through peaked, moderate and flat concentrations."""
    return np.stack([sj.construct_dirichlet(V, FAMILIES[i % 3][0], i) for i in range(n)])


def best_of(repeats: int, work) -> float:
    """Smallest wall time of ``repeats`` runs (the least disturbed one)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def dense_versus_secular(V: int, n: int) -> dict:
    batch = rows(V, n)
    dense = best_of(2, lambda: [np.linalg.eigvalsh(sj.dense_jacobian(r))[-1] for r in batch]) / n
    secular = best_of(5, lambda: sj.spectral_norm(batch)) / n
    return {
        "V": V,
        "rows": n,
        "eigvalsh_s_per_row": dense,
        "secular_s_per_row": secular,
        "speedup": dense / secular,
    }


def throughput(V: int, n: int, backend) -> dict:
    batch = backend.asarray(rows(V, n))
    sj.spectral_norm(batch[:2, ...])  # warm up (CUDA context, allocator)
    seconds = best_of(3, lambda: to_numpy(sj.spectral_norm(batch)))
    return {"V": V, "rows": n, "seconds": seconds, "rows_per_second": n / seconds, **backend.describe()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--rows", type=int, default=96)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    backend = resolve(args.backend, args.device, args.dtype)
    report = {
        "dense": [dense_versus_secular(512, 24), dense_versus_secular(2048, 6)],
        "throughput": throughput(131072, args.rows, backend),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for r in report["dense"]:
        print(
            f"V = {r['V']:>5}: eigvalsh {r['eigvalsh_s_per_row'] * 1e3:9.3f} ms/row   "
            f"spectral_norm {r['secular_s_per_row'] * 1e3:7.3f} ms/row   ratio {r['speedup']:8.1f}x"
        )
    t = report["throughput"]
    print(f"V = 131072: {t['rows_per_second']:.0f} rows/s on {t['backend']}/{t['device']}/{t['dtype']}")
    at_2048 = report["dense"][1]["speedup"]
    print(f"target >= 100x at V = 2048: {'met' if at_2048 >= 100 else 'NOT met'} ({at_2048:.0f}x)")
    rate = t["rows_per_second"]
    print(f"target >= 100 rows/s at V = 131072: {'met' if rate >= 100 else 'NOT met'} ({rate:.0f})")


if __name__ == "__main__":
    main()

"""Benchmark of the rank certificates of the error-rank family.

Prints, in one run:
- the O(V)-per-row dominance certificate against a dense SVD rank of P - Ñ (k = V/2 unique
  contexts), at V = 2048 and 4096, as a speed ratio;
- python-flint's exact rank against sympy's DomainMatrix at n = 200 (an integer matrix of rank
  150), and against sympy's Matrix.rank at n = 25;
- the peak traced memory of `rankwall verify error-rank.unique-continuation --V 131072`,
  against the 128 GiB a dense V x V float64 array would take.

Usage: python benchmarks/error_rank.py [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
import tracemalloc

import sympy
from sympy.polys.matrices import DomainMatrix

from rankwall.checks import exact
from rankwall.checks.claims.error_rank import dense_rank_lower
from rankwall.checks.cli import main as rankwall
from rankwall.theory import error_rank as er


def timed(work) -> tuple[float, object]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def dominance_lower(logits: er.LogitRows, tokens) -> int:
    """Route 1 of error-rank.unique-continuation: k when every dominance margin is positive."""
    return len(tokens) if bool((er.dominance_margins(logits, tokens) > 0).all()) else 0


def certificate_versus_svd(V: int) -> dict:
    logits, tokens = er.construct_unique_continuation(V, V // 2, 16, seed=V)
    t_cert, lower = timed(lambda: dominance_lower(logits, tokens))
    t_svd, (svd_lower, _) = timed(lambda: dense_rank_lower(logits, tokens))
    return {
        "V": V,
        "k": V // 2,
        "certificate_s": t_cert,
        "svd_s": t_svd,
        "ratio": t_svd / t_cert,
        "ranks_agree": lower == svd_lower == V // 2,
    }


def flint_versus_sympy(n: int = 200, rank: int = 150) -> dict:
    """python-flint against sympy's fastest exact rank (DomainMatrix over QQ) at n, and against
    the textbook Matrix.rank at n = 25 (at n = 50 it does not finish within five minutes)."""
    A = er.construct_low_rank_integers(n, n, rank, seed=0, spread=2)
    t_flint, (r_flint, _) = timed(lambda: exact.exact_rank(A))
    domain = DomainMatrix.from_list_sympy(n, n, A.tolist()).convert_to(sympy.QQ)
    t_sympy, r_sympy = timed(domain.rank)
    small = er.construct_low_rank_integers(25, 25, 18, seed=0, spread=2)
    t_small_flint, (r_small, _) = timed(lambda: exact.exact_rank(small))
    t_small_sympy, r_small_sympy = timed(lambda: sympy.Matrix(small.tolist()).rank())
    return {
        "n": n,
        "flint_s": t_flint,
        "sympy_domainmatrix_s": t_sympy,
        "ratio": t_sympy / t_flint,
        "ranks_agree": r_flint == r_sympy == rank,
        "n_small": 25,
        "sympy_matrix_rank_s": t_small_sympy,
        "ratio_small": t_small_sympy / t_small_flint,
        "small_ranks_agree": r_small == r_small_sympy == 18,
    }


def peak_memory_at_full_vocabulary() -> dict:
    tracemalloc.start()
    with contextlib.redirect_stdout(io.StringIO()):
        seconds, code = timed(lambda: rankwall(["verify", "error-rank.unique-continuation", "--V", "131072", "--json"]))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dense = 131072**2 * 8
    return {
        "V": 131072,
        "exit_code": code,
        "seconds": seconds,
        "peak_bytes": peak,
        "dense_bytes": dense,
        "ratio": dense / peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {
        "certificate": [certificate_versus_svd(2048), certificate_versus_svd(4096)],
        "exact_rank": flint_versus_sympy(),
        "memory": peak_memory_at_full_vocabulary(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for r in report["certificate"]:
        print(
            f"V = {r['V']}, k = {r['k']}: dominance certificate {r['certificate_s'] * 1e3:8.1f} ms   "
            f"dense SVD {r['svd_s'] * 1e3:9.1f} ms   ratio {r['ratio']:7.1f}x   ranks agree: {r['ranks_agree']}"
        )
    e = report["exact_rank"]
    print(
        f"exact rank n = {e['n']}: python-flint {e['flint_s'] * 1e3:.1f} ms   sympy DomainMatrix "
        f"{e['sympy_domainmatrix_s'] * 1e3:.1f} ms   ratio {e['ratio']:.0f}x   ranks agree: {e['ranks_agree']}"
    )
    print(
        f"exact rank n = {e['n_small']}: sympy Matrix.rank {e['sympy_matrix_rank_s']:.2f} s   "
        f"ratio {e['ratio_small']:.0f}x   ranks agree: {e['small_ranks_agree']}"
    )
    m = report["memory"]
    print(
        f"verify error-rank.unique-continuation --V 131072: exit {m['exit_code']}, {m['seconds']:.1f} s, "
        f"peak {m['peak_bytes'] / 2**20:.0f} MiB (a dense V x V array: {m['dense_bytes'] / 2**30:.0f} GiB, "
        f"{m['ratio']:.0f}x more)"
    )


if __name__ == "__main__":
    main()

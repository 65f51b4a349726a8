"""Benchmark of Eq. 1: the QR-streamed projection against a naive pseudo-inverse projector.

Prints, in one run, at V = 8192 and D = 256 (512 tokens): the time and the peak traced memory
of (a) a column-pivoted QR of W and the logit gradient streamed through Q in blocks, and (b) the
projector Pi = W W^+ formed as a V x V matrix from numpy.linalg.pinv, with the speed ratio and
the agreement of the destroyed share.

Usage: python benchmarks/compression.py [--V N] [--D N] [--tokens N] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

import numpy as np

from rankwall.theory import compression as cp


def measured(work) -> tuple[float, int, object]:
    """Seconds, peak traced bytes and result of ``work()``."""
    tracemalloc.start()
    started = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak, result


def streamed(W: np.ndarray, H: np.ndarray, targets: np.ndarray) -> float:
    Q, _ = cp.column_basis(W)
    return cp.compression(cp.logit_gradient_blocks(H, W, targets), Q).destroyed


def naive(W: np.ndarray, H: np.ndarray, targets: np.ndarray) -> float:
    projector = W @ np.linalg.pinv(W)  # V x V
    G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
    return float(np.linalg.norm(G - G @ projector) / np.linalg.norm(G))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--V", type=int, default=8192)
    parser.add_argument("--D", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    W = cp.construct_head(args.V, args.D, 0)
    H, targets = cp.construct_batch(args.tokens, args.D, args.V, 1)
    t_qr, m_qr, r_qr = measured(lambda: streamed(W, H, targets))
    t_pinv, m_pinv, r_pinv = measured(lambda: naive(W, H, targets))
    report = {
        "V": args.V,
        "D": args.D,
        "tokens": args.tokens,
        "qr_streamed": {"seconds": t_qr, "peak_bytes": m_qr, "destroyed": r_qr},
        "pinv_projector": {"seconds": t_pinv, "peak_bytes": m_pinv, "destroyed": r_pinv},
        "speed_ratio": t_pinv / t_qr,
        "memory_ratio": m_pinv / m_qr,
        "destroyed_difference": abs(r_qr - r_pinv),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"V = {args.V}, D = {args.D}, {args.tokens} tokens")
    print(f"  QR-streamed : {t_qr:7.3f} s   peak {m_qr / 2**20:8.1f} MiB   destroyed share {r_qr:.12f}")
    print(f"  pinv (V x V): {t_pinv:7.3f} s   peak {m_pinv / 2**20:8.1f} MiB   destroyed share {r_pinv:.12f}")
    print(
        f"  speed ratio {report['speed_ratio']:.1f}x   memory ratio {report['memory_ratio']:.1f}x   "
        f"|difference| {report['destroyed_difference']:.1e}"
    )


if __name__ == "__main__":
    main()

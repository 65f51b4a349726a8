"""Benchmark of Eq. 1: rankwall's streamed projection against a plain PyTorch version.

Prints, in one run, at V = 131,072, D = 576 and 4,096 tokens by default (``rankwall compress``'s
defaults): the CPU time (all threads, user + system), the wall time and the peak resident memory of

- *rankwall*: :func:`rankwall.theory.compression.random_head_compression`, what ``rankwall compress``
  runs (a Householder QR of W and a pivoted QR of its D x D factor, the logit gradient streamed in
  blocks of 256 rows through one buffer, the residual formed in place);
- *plain PyTorch*: the same W, hidden states and targets (built by the same constructors), Q from
  ``torch.linalg.qr(W)``, then per block of 256 rows ``softmax(H Wᵀ)`` minus the one-hot targets over
  T, C = G Q, G - C Qᵀ and the row norms, as one would write it in PyTorch;
- with ``--pinv`` (V <= 16,384 only), the V x V projector W W⁺ from ``numpy.linalg.pinv``;

each in a fresh child process (so neither inherits the other's allocations or warm caches), with
the CPU-time ratio against rankwall and the largest difference of the five shares (frequency-weighted
destroyed share and cosine, squared share, per-token means). ``--repeats N`` runs the set N times,
alternating the order, and reports every run; the ratio of the medians is the figure to quote on a
shared machine, where wall times move with other jobs and CPU times much less.

Usage: python benchmarks/compression.py [--V N] [--D N] [--tokens N] [--repeats N] [--pinv] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

from rankwall.theory import compression as cp

#: Rows of G per block in the plain version (rankwall's BLOCK_ROWS, so both hold the same block).
PLAIN_BLOCK_ROWS = 256
#: The largest V for which the V x V pseudo-inverse projector is formed (2 GiB of float64).
PINV_MAX_V = 16384
SHARES = ("destroyed", "cosine", "destroyed_squared", "destroyed_per_token", "cosine_per_token")


def rankwall_shares(V: int, D: int, tokens: int) -> dict[str, float]:
    result = cp.random_head_compression(V, D, tokens, 0)
    return {name: getattr(result, name) for name in SHARES}


def plain_torch_shares(V: int, D: int, tokens: int) -> dict[str, float]:
    import torch

    W = torch.from_numpy(cp.construct_head(V, D, 0))
    H, targets = (torch.from_numpy(x) for x in cp.construct_batch(tokens, D, V, 1))
    Q = torch.linalg.qr(W).Q
    total = kept = lost = 0.0
    lost_shares, kept_shares = [], []
    for start in range(0, tokens, PLAIN_BLOCK_ROWS):
        G = torch.softmax(H[start : start + PLAIN_BLOCK_ROWS] @ W.T, dim=1)
        G[torch.arange(G.shape[0]), targets[start : start + PLAIN_BLOCK_ROWS]] -= 1
        G /= tokens
        C = G @ Q
        norms, kept_norms, lost_norms = (torch.linalg.vector_norm(X, dim=1) for X in (G, C, G - C @ Q.T))
        total += float(norms @ norms)
        kept += float(kept_norms @ kept_norms)
        lost += float(lost_norms @ lost_norms)
        lost_shares.append(lost_norms / norms)
        kept_shares.append(kept_norms / norms)
    return {
        "destroyed": (lost / total) ** 0.5,
        "cosine": (kept / total) ** 0.5,
        "destroyed_squared": lost / total,
        "destroyed_per_token": float(torch.cat(lost_shares).mean()),
        "cosine_per_token": float(torch.cat(kept_shares).mean()),
    }


def pinv_shares(V: int, D: int, tokens: int) -> dict[str, float]:
    W = cp.construct_head(V, D, 0)
    H, targets = cp.construct_batch(tokens, D, V, 1)
    projector = W @ np.linalg.pinv(W)  # V x V
    G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
    kept, lost = G @ projector, G - G @ projector
    norms, kept_norms, lost_norms = (np.linalg.norm(X, axis=1) for X in (G, kept, lost))
    total = float(norms @ norms)
    return {
        "destroyed": float(np.sqrt(lost_norms @ lost_norms / total)),
        "cosine": float(np.sqrt(kept_norms @ kept_norms / total)),
        "destroyed_squared": float(lost_norms @ lost_norms / total),
        "destroyed_per_token": float(np.mean(lost_norms / norms)),
        "cosine_per_token": float(np.mean(kept_norms / norms)),
    }


VARIANTS = {"rankwall": rankwall_shares, "plain PyTorch": plain_torch_shares, "pinv projector": pinv_shares}


def child(variant: str, V: int, D: int, tokens: int) -> None:
    """Run one variant here and print its record: CPU seconds (user + system, all threads) and wall
    seconds of the work alone (imports left out), peak resident memory of the process, the shares."""
    import torch  # noqa: F401  (imported before the clock starts, whichever variant uses it)

    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    shares = VARIANTS[variant](V, D, tokens)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    record = {
        "variant": variant,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "system_s": after.ru_stime - before.ru_stime,
        "wall_s": wall,
        "peak_bytes": after.ru_maxrss * 1024,
        "resident_before_bytes": before.ru_maxrss * 1024,
        "shares": shares,
    }
    print(json.dumps(record))


def measured(variant: str, args: argparse.Namespace) -> dict:
    argv = [sys.executable, __file__, "--child", variant, "--V", str(args.V), "--D", str(args.D)]
    out = subprocess.run([*argv, "--tokens", str(args.tokens)], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--V", type=int, default=131072)
    parser.add_argument("--D", type=int, default=576)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=1, help="runs of the set, alternating the order")
    parser.add_argument("--pinv", action="store_true", help=f"also the V x V pinv projector (V <= {PINV_MAX_V})")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", choices=tuple(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.V, args.D, args.tokens)
        return
    if args.pinv and args.V > PINV_MAX_V:
        parser.error(f"--pinv: the V x V projector is formed only for V <= {PINV_MAX_V}, got --V {args.V}")
    names = ["rankwall", "plain PyTorch"] + (["pinv projector"] if args.pinv else [])
    runs = []
    for repeat in range(args.repeats):
        order = names if repeat % 2 == 0 else names[::-1]
        runs += [{"repeat": repeat, "load_before": os.getloadavg()[0], **measured(name, args)} for name in order]
    reference = [r for r in runs if r["variant"] == "rankwall"]
    summary = {}
    for name in names:
        mine = [r for r in runs if r["variant"] == name]
        summary[name] = {
            "median_cpu_s": statistics.median(r["cpu_s"] for r in mine),
            "median_wall_s": statistics.median(r["wall_s"] for r in mine),
            "largest_peak_bytes": max(r["peak_bytes"] for r in mine),
            "largest_share_difference": max(
                abs(r["shares"][k] - o["shares"][k]) for r in mine for o in reference for k in SHARES
            ),
        }
    base = summary["rankwall"]["median_cpu_s"]
    for name in names:
        summary[name]["cpu_ratio_to_rankwall"] = summary[name]["median_cpu_s"] / base
    report = {"V": args.V, "D": args.D, "tokens": args.tokens, "runs": runs, "summary": summary}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"V = {args.V}, D = {args.D}, {args.tokens} tokens, {args.repeats} run(s) of each, alternated")
    for r in runs:
        print(
            f"  run {r['repeat']} {r['variant']:<15} CPU {r['cpu_s']:7.1f} s (system {r['system_s']:5.1f})   "
            f"wall {r['wall_s']:7.1f} s   peak {r['peak_bytes'] / 2**30:5.2f} GiB   "
            f"destroyed {r['shares']['destroyed']:.15f}   load {r['load_before']:.1f}"
        )
    for name in names:
        s = summary[name]
        print(
            f"{name:<15} median CPU {s['median_cpu_s']:7.1f} s   wall {s['median_wall_s']:7.1f} s   "
            f"CPU ratio to rankwall {s['cpu_ratio_to_rankwall']:5.2f}   "
            f"peak {s['largest_peak_bytes'] / 2**30:5.2f} GiB   "
            f"largest |share difference| to rankwall {s['largest_share_difference']:.1e}"
        )


if __name__ == "__main__":
    main()

r"""Certified rank of the log-probability matrix against the number of mixture components K (seed 001).

Over N contexts and V tokens, log P = [H_eff, -z][W, 1]^T for a softmax head and for a mixture of
contexts (MoC), so its rank is at most D + 1 whatever K is. A mixture of K softmaxes (MoS) is
:math:`\log\sum_k \pi_k \operatorname{softmax}(W h_k)`, a nonlinear function of K rank-D logit
matrices with no such factorization. For every head, D and K we report the certified interval
lo <= rank(log P) <= hi of :func:`rankwall.checks.claims.heads.log_probability_interval`: lo from
the float64 SVD with a Weyl margin (a lower bound only), hi from structure (the factorization
through D + 1 columns, its residual checked against a rounding bound and rank [W, 1] exact over Q)
or, for MoS with K >= 2, the shape.

The ceiling is min(N, V): with C = log P (I - 11^T / V) the row-centred matrix, C1 = 0 gives
rank C <= min(N, V - 1), and log P = C + z1^T adds at most one, so the normalising row shift costs
nothing; a pinned interval at min(N, V) shows the ceiling is reached. The counts of normalised
singular values above 1e-3, 1e-6 and 1e-9 are numerical ranks, reported for comparison and
certified by nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.claims import heads as ch
from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs
from rankwall.theory import heads as hd
from rankwall.theory.validation import InputError

NAME = "mos-rank"
SUMMARY = "certified rank of log P for softmax, MoC and MoS against K (seed 001)"
K_VALUES = (1, 2, 4, 8, 16, 32, 64)
D_VALUES = (2, 8)
HEADS = ("softmax", "moc", "mos")
#: Relative thresholds of the uncertified numerical ranks (the essay's spectrum plot uses 1e-9).
THRESHOLDS = (1e-3, 1e-6, 1e-9)
#: Largest N * V * K: MoS holds an N x K x V float64 array (512 MiB at this limit).
MAX_ENTRIES = 1 << 26


def measure(case: ch.HeadCase) -> dict[str, Any]:
    """One head at one (D, K): the certified interval of rank(log P), how each end is certified,
    the normalised singular values σ_i / σ_1 and the numerical ranks at :data:`THRESHOLDS`."""
    interval = ch.log_probability_interval(case)
    theta, H = ch.contexts(case)
    sigma = np.linalg.svd(np.asarray(hd.log_probabilities(case.head, theta, H)), compute_uv=False)
    normalised = sigma / sigma[0]
    return {
        "head": case.head,
        "D": case.d,
        "K": case.K,
        "rank_lower": interval.lo,
        "rank_upper": interval.hi,
        "pinned": interval.pinned,
        "certified_by": interval.kind.value if interval.lo <= interval.hi else "contradiction",
        "lower_from": interval.lower,
        "upper_from": interval.upper,
        "weyl_margin": interval.certificate["weyl_margin"],
        "numerical_rank": {f"{t:.0e}": int(np.sum(normalised > t)) for t in THRESHOLDS},
        "spectrum": [float(f"{s:.4g}") for s in normalised],
    }


def saturation(records: list[dict[str, Any]], D: int, ceiling: int) -> int | None:
    """Smallest K at which MoS's rank is certified (pinned) at the ceiling min(N, V); ``None`` if never."""
    pinned = [r["K"] for r in records if r["head"] == "mos" and r["D"] == D and r["rank_lower"] == ceiling]
    return min(pinned, default=None)


def run(
    N: int = 256,
    V: int = 256,
    D_values: tuple[int, ...] = D_VALUES,
    K_values: tuple[int, ...] = K_VALUES,
    seed: int = 0,
    scale: float = 1.0,
    on_step: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every head at every D and K (softmax once per D: it has no K); the same parameters W and
    contexts H for every head at a given (D, K), from ``seed``."""
    if N * V * max(K_values) > MAX_ENTRIES:
        raise InputError(f"K: N * V * K = {N * V * max(K_values):,} exceeds {MAX_ENTRIES:,} (memory of the MoS head)")
    started = time.perf_counter()
    records = []
    for D in D_values:
        for head in HEADS:
            for K in (1,) if head == "softmax" else K_values:
                if on_step is not None:
                    on_step(f"{head} D={D} K={K}")
                records.append(measure(ch.HeadCase(head=head, N=N, V=V, d=D, K=K, seed=seed, scale=scale)))
    ceiling = min(N, V)
    return {
        "N": N,
        "V": V,
        "scale": scale,
        "seed": seed,
        "ceiling": ceiling,
        "saturation_K": {str(D): saturation(records, D, ceiling) for D in D_values},
        "records": records,
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Left: the certified interval of rank(log P) against K for MoC and MoS at each D (band from
    lower to upper end), with D + 1 and the ceiling. Right: MoS spectra σ_i / σ_1 at the largest D."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = result["records"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    D_values = list(dict.fromkeys(r["D"] for r in records))
    for number, D in enumerate(D_values):
        # D + 1 wide and pale under the data, so the MoC line that sits on it leaves it visible; named twice.
        left.axhline(D + 1, color="grey", linewidth=6, alpha=0.3, label="D + 1 (softmax, MoC)" if not number else None)
        left.annotate(
            f"D + 1 = {D + 1}", (1.0, D + 1), xycoords=("axes fraction", "data"), xytext=(4, 0),
            textcoords="offset points", va="center", fontsize=7, color="dimgrey",
        )  # fmt: skip
        for head, marker in (("mos", "o"), ("moc", "s")):
            mine = [r for r in records if r["head"] == head and r["D"] == D]
            K = [r["K"] for r in mine]
            (line,) = left.plot(K, [r["rank_lower"] for r in mine], marker=marker, label=f"{head} D={D}: lower end")
            left.fill_between(
                K, [r["rank_lower"] for r in mine], [r["rank_upper"] for r in mine], alpha=0.15, color=line.get_color()
            )
    left.axhline(result["ceiling"], color="black", linestyle="--", linewidth=1, label="min(N, V)")
    left.set(xscale="log", yscale="log", xlabel="K", ylabel="certified rank of log P")
    K_values = sorted({r["K"] for r in records if r["head"] != "softmax"})
    left.set_xticks(K_values, [str(K) for K in K_values])
    left.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    left.set_title(f"rank(log P), N={result['N']}, V={result['V']} (band: lower to upper end)")
    left.legend(fontsize=7)
    D_max = max(r["D"] for r in records)
    # MoS with K = 1 is a softmax of its one latent: one line for both. The spectra of larger K lie
    # within a line's width of each other, so each K has its own marker, at interleaved positions.
    spectra = [r for r in records if r["D"] == D_max and r["head"] == "mos" and r["K"] > 1]
    softmax = next(r for r in records if r["D"] == D_max and r["head"] == "softmax")
    every = max(1, len(softmax["spectrum"]) // 8)
    right.plot(range(1, len(softmax["spectrum"]) + 1), softmax["spectrum"], color="black", label="softmax (= MoS K=1)")
    for number, r in enumerate(spectra):
        right.plot(
            range(1, len(r["spectrum"]) + 1),
            r["spectrum"],
            marker="osv^D<>ph"[number % 9],
            markevery=(number * every // max(1, len(spectra)), every),
            markersize=4,
            label=f"MoS K={r['K']}",
        )
    right.set(yscale="log", xlabel="i", ylabel="σ_i / σ_1", ylim=(1e-20, 2))
    right.set_title(f"normalised singular values of log P, D={D_max}")
    right.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``mos_rank.json`` and ``mos_rank.png`` into ``out``."""
    return write_outputs(result, out, "mos_rank", plot)


def upper_end(record: dict[str, Any]) -> str:
    """What certifies the upper end, in a word: the factorization through D + 1 columns, or the shape."""
    return "factorization" if record["upper_from"].startswith("the factorization") else "shape"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--K",
        type=integer_in(1, 256),
        nargs="+",
        default=list(K_VALUES),
        help=f"mixture components (default {' '.join(map(str, K_VALUES))})",
    )
    parser.add_argument(
        "--D",
        type=integer_in(1, 512),
        nargs="+",
        default=list(D_VALUES),
        help=f"hidden sizes (default {' '.join(map(str, D_VALUES))})",
    )
    parser.add_argument("--V", type=integer_in(2, 4096), default=256, help="tokens (default 256)")
    parser.add_argument("--N", type=integer_in(1, 4096), default=256, help="contexts (default 256)")


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment mos-rank``: run, write JSON and PNG, print a table (or the JSON)."""
    D_values, K_values = tuple(dict.fromkeys(args.D)), tuple(sorted(set(args.K)))
    with progress_bar(err) as progress:
        task = progress.add_task("mos-rank", total=len(D_values) * (1 + 2 * len(K_values)))

        def step(description: str) -> None:
            progress.update(task, description=description)
            progress.advance(task)

        result = run(args.N, args.V, D_values, K_values, seed=args.seed, on_step=step)
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"mos-rank: certified rank of log P, N={result['N']}, V={result['V']}")
    numerical = [f"σ/σ₁>{t:.0e}" for t in THRESHOLDS]
    for column in ("head", "D", "K", "lower", "upper", "certified by", "upper end", *numerical):
        table.add_column(column, overflow="fold")  # at a narrow terminal: folded, never cut
    for r in result["records"]:
        table.add_row(
            r["head"],
            str(r["D"]),
            str(r["K"]),
            str(r["rank_lower"]),
            str(r["rank_upper"]),
            r["certified_by"],
            upper_end(r),
            *map(str, r["numerical_rank"].values()),
        )
    out.print(table)
    for D, K in result["saturation_K"].items():
        where = f"K = {K}" if K is not None else "no K of the sweep"
        out.print(f"D = {D}: MoS certified at the ceiling min(N, V) = {result['ceiling']} from {where}")
    out.print(f"{result['seconds']:.1f} s, peak memory {result['peak_memory_mb']:.0f} MB")
    out.print(f"wrote {json_path} and {png_path}")

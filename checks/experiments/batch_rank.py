"""Rank of the logit gradient against the number of tokens in the batch (seed 000, Figure 7).

For a language with next-token counts N over contexts, the model is the smoothed n-gram
P = (1 - delta) Ñ + delta u (u the unigram distribution), positive and close to Ñ as in
Prop. A.7. A batch of b tokens gives the logit gradient G = diag(f)(P - Ñ^B) on the contexts
it contains (f their batch frequencies). We report, for each b, the rank of G certified by a
dense SVD with a Weyl margin, and the number of singular components needed to hold 70%,
99% and 99.9% of its Frobenius norm.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sparse
from rich.console import Console
from rich.table import Table

from rankwall.checks import exact
from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.companion.data import characters, read_corpus, words
from rankwall.checks.engine import tolerance
from rankwall.checks.run.outputs import progress_bar, write_outputs
from rankwall.theory import error_rank as er

SHARES = (0.7, 0.99, 0.999)
U = tolerance.unit_roundoff(np.float64)


NAME = "batch-rank"
SUMMARY = "rank of the logit gradient against batch size (seed 000, Figure 7)"
BATCH_SIZES = (64, 256, 1024, 4096, 8192)


def components_for(sigma: np.ndarray, share: float) -> int:
    """Smallest r with the top-r singular values holding ``share`` of the Frobenius norm."""
    energy = np.cumsum(sigma**2)
    return int(np.searchsorted(energy, (share**2) * energy[-1]) + 1)


def gradient_spectrum(counts: sparse.csr_matrix, batch: sparse.csr_matrix, delta: float) -> tuple[np.ndarray, int]:
    """Singular values of G = diag(f)(P - Ñ^B) on the batch's contexts, and the rank certified by
    the Weyl margin of forming G and of the SVD."""
    rows = np.flatnonzero(np.diff(batch.indptr))
    unigram = np.asarray(counts.sum(axis=0)).ravel()
    unigram /= unigram.sum()
    full = er.empirical_distribution(counts[rows]).toarray()
    P = (1 - delta) * full + delta * unigram
    batch_rows = batch[rows]
    totals = np.asarray(batch_rows.sum(axis=1)).ravel()
    N_batch = (sparse.diags(1 / totals) @ batch_rows).toarray()
    f = totals / totals.sum()
    G = f[:, None] * (P - N_batch)
    rank, _, sigma = exact.weyl_rank_lower_bound(G, U, forming_norm=float(np.linalg.norm(G)))
    return sigma, rank


def languages(seed: int) -> dict[str, tuple[sparse.csr_matrix, int]]:
    """The languages measured: a Zipfian synthetic one (1024 tokens, 20,000 contexts) and
    tinyshakespeare as word bigrams (top 2,047 words and <unk>) and character 4-grams."""
    text = read_corpus("tinyshakespeare.txt")
    word_stream, char_stream = words(text), characters(text)
    word_counts, _ = er.ngram_counts(word_stream.ids, 1, word_stream.V)
    char_counts, _ = er.ngram_counts(char_stream.ids, 3, char_stream.V)
    zipf = er.construct_zipf_language(1024, 20000, seed, unique_share=0.4)
    return {
        "zipf V=1024": (zipf, 1024),
        f"words bigram V={word_stream.V}": (word_counts, word_stream.V),
        f"chars 4-gram V={char_stream.V}": (char_counts, char_stream.V),
    }


def run(
    batch_sizes: tuple[int, ...] = (64, 256, 1024, 4096, 8192),
    seed: int = 0,
    delta: float = 1e-3,
    on_step: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every language at every batch size; one record per (language, batch size)."""
    records = []
    for name, (counts, V) in languages(seed).items():
        for b in batch_sizes:
            if on_step is not None:
                on_step(f"{name}: {b} tokens")
            batch = er.sample_batch(counts, min(b, int(counts.sum())), seed + b)
            sigma, rank = gradient_spectrum(counts, batch, delta)
            records.append(
                {
                    "language": name,
                    "V": V,
                    "batch_tokens": b,
                    "contexts": int(np.count_nonzero(np.diff(batch.indptr))),
                    "certified_rank": rank,
                    "rank_share_of_V_minus_1": rank / (V - 1),
                    "components": {str(s): components_for(sigma, s) for s in SHARES},
                }
            )
    return records


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Two panels: certified rank / (V - 1), and components for 99.9% of the norm, against b."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name in dict.fromkeys(r["language"] for r in records):
        mine = [r for r in records if r["language"] == name]
        b = [r["batch_tokens"] for r in mine]
        left.plot(b, [r["rank_share_of_V_minus_1"] for r in mine], marker="o", label=name)
        for share, style in zip(SHARES, ("-", "--", ":"), strict=True):
            right.plot(b, [r["components"][str(share)] for r in mine], style, marker=".", label=f"{name}, {share:.1%}")
    left.set(xscale="log", xlabel="tokens in the batch", ylabel="certified rank of G / (V - 1)", ylim=(0, 1.05))
    left.set_title("rank of the logit gradient (Figure 7a)")
    right.set(xscale="log", yscale="log", xlabel="tokens in the batch", ylabel="singular components")
    right.set_title("components for 70% / 99% / 99.9% of the norm (Figure 7b)")
    left.legend(fontsize=7)
    right.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))  # beside the panel, off the data
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def write(records: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    """Write ``batch_rank.json`` and ``batch_rank.png`` into ``out``."""
    return write_outputs(records, out, "batch_rank", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-sizes",
        type=integer_in(1, 1_000_000),
        nargs="+",
        default=list(BATCH_SIZES),
        help=f"tokens per batch (default {' '.join(map(str, BATCH_SIZES))})",
    )


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment batch-rank``: run, write JSON and PNG, print a table (or the JSON)."""
    sizes = tuple(args.batch_sizes)
    with progress_bar(err) as progress:
        task = progress.add_task("batch-rank", total=3 * len(sizes))

        def step(description: str) -> None:
            progress.update(task, description=description)
            progress.advance(task)

        records = run(sizes, seed=args.seed, on_step=step)
    json_path, png_path = write(records, Path(args.out))
    if args.json:
        print(json.dumps(records, indent=2))
        return
    table = Table(title="batch-rank: rank of the logit gradient G = diag(f)(P - Ñ^B)")
    for column in ("language", "tokens", "contexts", "certified rank", "/ (V-1)", "70%", "99%", "99.9%"):
        table.add_column(column, no_wrap=column != "language", overflow="fold")
    for r in records:
        table.add_row(
            r["language"],
            str(r["batch_tokens"]),
            str(r["contexts"]),
            str(r["certified_rank"]),
            f"{r['rank_share_of_V_minus_1']:.3f}",
            *(str(r["components"][str(s)]) for s in SHARES),
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")

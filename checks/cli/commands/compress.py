"""``rankwall compress``: Eq. 1 on synthetic tokens, the share of the logit gradient a head destroys."""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.cli.commands.common import EXIT_OK, UsageError
from rankwall.checks.run.outputs import available_memory_bytes, progress_bar
from rankwall.theory.validation import MAX_VOCABULARY

NAME = "compress"
HELP = "Eq. 1: the share of the logit gradient destroyed in ker Wᵀ by a random or low-rank head"
ORDER = 4
DESCRIPTION = """\
Build a random head W (V x D; with --head lowrank, of rank --rank) and --tokens synthetic hidden states
with Zipfian targets, stream the frequency-weighted logit gradient G in blocks, project it on col W
through a pivoted QR of W (never a V x V projector), and print the share of its norm destroyed in
ker Wᵀ and the cosine of what survives. The defaults are SmolLM2-like (V = 131,072, D = 576,
4,096 tokens: about 80 s and 3 GB on two idle cores); a size that cannot fit the available memory is
refused before anything is allocated.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--V", type=integer_in(2, MAX_VOCABULARY), default=131072, dest="V", help="vocabulary size")
    parser.add_argument("--D", type=integer_in(1, 65536), default=576, dest="D", help="hidden size (columns of W)")
    parser.add_argument("--tokens", type=integer_in(1, 10_000_000), default=4096, help="synthetic tokens (rows of G)")
    parser.add_argument(
        "--head", choices=("random", "lowrank"), default="random", help="a Gaussian W, or one of rank --rank"
    )
    parser.add_argument(
        "--rank", type=integer_in(1, 65536), default=None, help="rank of W, with --head lowrank only (default D/8)"
    )
    parser.add_argument("--seed", type=integer_in(0), default=0, help="seed of W and of the tokens")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.theory import compression as cp

    if args.D > args.V:
        raise UsageError(f"--D: hidden size {args.D} exceeds the vocabulary --V {args.V}")
    if args.rank is not None and args.head != "lowrank":
        raise UsageError("--rank: applies to --head lowrank only (a random head has full rank D)")
    rank = None
    if args.head == "lowrank":
        rank = args.rank if args.rank is not None else max(1, args.D // 8)
        if rank > args.D:
            raise UsageError(f"--rank: {rank} exceeds --D {args.D}")
    needed, available = cp.compression_memory_bytes(args.V, args.D, args.tokens), available_memory_bytes()
    if available is not None and needed > available:
        raise UsageError(
            f"--V {args.V} --D {args.D} --tokens {args.tokens}: needs about {needed / 2**30:.1f} GiB, "
            f"but only {available / 2**30:.1f} GiB of memory is available"
        )
    started = time.perf_counter()
    with progress_bar(err) as progress:
        task = progress.add_task("projecting the logit gradient", total=-(-args.tokens // cp.BLOCK_ROWS))
        result = cp.random_head_compression(
            args.V, args.D, args.tokens, args.seed, rank=rank, on_block=lambda: progress.advance(task)
        )
    record = {
        "V": args.V,
        "D": args.D,
        "head": args.head,
        "tokens": args.tokens,
        **result.to_json(),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if args.json:
        print(json.dumps(record, indent=2))
        return EXIT_OK
    table = Table(title=f"Eq. 1 on {args.tokens} tokens, V={args.V}, {args.head} head of rank {result.rank}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for key in (
        "destroyed_frequency_weighted",
        "cosine_frequency_weighted",
        "destroyed_squared_norm",
        "destroyed_per_token_mean",
        "cosine_per_token_mean",
        "pythagoras_residual",
        "seconds",
    ):
        table.add_row(key.replace("_", " "), f"{record[key]:.6g}")
    out.print(table)
    return EXIT_OK

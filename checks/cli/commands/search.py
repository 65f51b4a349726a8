"""``rankwall search CLAIM [CLAIM ...]``: hunt a counterexample with Hypothesis, shrink it, say what was
undecided; one search per claim that the arguments name (ids, mutant ids or shell patterns)."""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import tempfile
import time
from fractions import Fraction
from typing import Any

from rich.console import Console
from rich.markup import escape

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.cli.commands.common import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_VIOLATED,
    UsageError,
    backend_options,
    backend_spec,
    claim_named,
    claims_option,
    cluster,
    cluster_options,
    described,
    factor,
    load_user_claims,
    on_cluster,
    sources,
    verdict_lines,
)
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import REGISTRY, Claim
from rankwall.checks.run.outputs import progress_bar, writable_folder
from rankwall.checks.run.search import SearchResult, search
from rankwall.checks.run.strategies import CI_SEARCH_BUDGET

NAME = "search"
HELP = "hunt a counterexample to claims (or sharper ones, or a mutant) with Hypothesis"
ORDER = 2
DESCRIPTION = """\
Draw instances from the claim's Hypothesis strategy, steer them towards a violation with target() on
the margin, and shrink the first counterexample to a minimal one. Every counterexample is certified
(exactly, in balls, or by a two-sided rounding-model margin). Instances the claim could not decide are
counted and named: a search with none found but some undecided exits 3.

Several claims, or shell patterns ('softmax-jacobian.*'), get one search each, with the same flags,
then a summary line; the exit code is the worst of them (a counterexample, then undecided). --json
prints one object for a single claim id, and a list of them for several claims or a pattern.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="CLAIM",
        help="claim ids (a mutant as id[name], or with --mutant) or shell patterns, one search each",
    )
    parser.add_argument(
        "--tighten",
        type=factor,
        default=Fraction(1),
        metavar="F",
        help="multiply the bound by F (F < 1 sharpens an upper bound, F > 1 a lower one; identities refuse it)",
    )
    parser.add_argument(
        "--mutant", default=None, metavar="NAME", help="search a planted false variant of the one claim named instead"
    )
    parser.add_argument(
        "--budget",
        type=integer_in(1, 10_000_000),
        default=CI_SEARCH_BUDGET,
        metavar="N",
        help=f"examples to try (default: {CI_SEARCH_BUDGET}, the CI budget)",
    )
    parser.add_argument(
        "--database",
        metavar="DIR",
        default=None,
        help="a Hypothesis example database: replay what is stored there, store the counterexample found "
        "(without it nothing is written to the working folder)",
    )
    parser.add_argument(
        "--save",
        metavar="DIR",
        default=None,
        help="write each counterexample found as a file of exact values (`rankwall replay FILE` re-checks it)",
    )
    parser.add_argument(
        "--exact", action="store_true", help="re-decide every identity exactly at every size (see `verify --help`)"
    )
    backend_options(parser, json_help="print the result as JSON")
    cluster_options(parser)
    claims_option(parser)


def names_one_claim(argument: str) -> bool:
    """Whether ``argument`` is a claim id or a mutant id (``id[name]``) rather than a shell pattern."""
    return argument in REGISTRY or (argument.endswith("]") and argument.partition("[")[0] in REGISTRY)


def searched_claims(arguments: list[str], mutant: str | None) -> list[Claim]:
    """The claims that ``CLAIM ...`` names, each once, in the order given (a pattern's matches in
    registry order): an exact id or mutant id (``id[name]``) first, else a shell pattern."""
    found: dict[str, Claim] = {}
    for argument in arguments:
        if names_one_claim(argument):
            claims = [claim_named(argument)]
        elif any(c in argument for c in "*?["):
            claims = REGISTRY.match([argument])
            if not claims:
                raise UsageError(f"CLAIM: no claim matches {argument!r}; see `rankwall list`")
        else:
            close = difflib.get_close_matches(argument, [c.id for c in REGISTRY], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(f"CLAIM: unknown claim {argument!r}{hint} (`rankwall list` names them all)")
        found.update((claim.id, claim) for claim in claims)
    if mutant is not None:
        if len(found) != 1:
            raise UsageError(f"--mutant: applies to one claim, and CLAIM names {len(found)} ({', '.join(found)})")
        return [claim_named(next(iter(found)), mutant)]
    return list(found.values())


def require_bounds(claims: list[Claim], tighten: Fraction) -> None:
    """Refuse ``--tighten`` when a claim named is an identity (it has no bound to tighten)."""
    identities = [c.id for c in claims if c.direction is None]
    if tighten != 1 and len(claims) == 1:
        claims[0].require_bound(tighten)
    elif tighten != 1 and identities:
        raise UsageError(
            f"--tighten: {', '.join(identities)} {'is an identity' if len(identities) == 1 else 'are identities'}, "
            "with no bound to tighten; name bounds only (`rankwall list` gives each claim's kind)"
        )


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    load_user_claims(args)
    claims = searched_claims(args.targets, args.mutant)
    require_bounds(claims, args.tighten)
    backend = resolve(args.backend, args.device, args.dtype)
    if args.database is not None:
        args.database = str(writable_folder(args.database, "--database"))
    save_to = None if args.save is None else writable_folder(args.save, "--save")
    one = len(args.targets) == 1 and names_one_claim(args.targets[0])
    records, codes, started = [], [], time.perf_counter()
    results: list[SearchResult] = []
    for claim in claims:
        record, code, result = _search_one(args, claim, backend, save_to, out, err)
        records.append(record)
        codes.append(code)
        results.append(result)
    worst = EXIT_VIOLATED if EXIT_VIOLATED in codes else EXIT_INCONCLUSIVE if EXIT_INCONCLUSIVE in codes else EXIT_OK
    if args.json:
        print(json.dumps(records[0] if one else records, indent=2))
    elif not one:
        out.print(search_summary(results, time.perf_counter() - started), soft_wrap=True)
    return worst


def search_summary(results: list[SearchResult], seconds: float) -> str:
    """One line for people after several searches: counterexamples, undecided, none; examples and time."""
    found = sum(r.found for r in results)
    undecided = sum(not r.found and r.undecided > 0 for r in results)
    clean = len(results) - found - undecided
    examples = sum(r.examples for r in results)
    return (
        f"{len(results)} searches: {found} found a counterexample, {undecided} undecided, {clean} found none; "
        f"{examples} examples in {seconds:.1f} s"
    )


def _search_one(
    args: argparse.Namespace, claim: Claim, backend: Any, save_to: Any, out: Console, err: Console
) -> tuple[dict[str, Any], int, SearchResult]:
    """One claim's search: its JSON record, its exit code and its result (printed for people unless --json)."""
    searches: list[SearchResult] = []
    replayed: dict[int, bool] = {}
    if on_cluster(args):
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
                exact=True if args.exact else None,
            )
    saved = None
    if result.counterexample is not None and save_to is not None:
        from rankwall.checks.run.replay import save

        used = backend if claim.array_api else resolve("numpy")
        saved = save(result.counterexample, claim, used, args.tighten, save_to)
    code = EXIT_VIOLATED if result.found else EXIT_INCONCLUSIVE if result.undecided else EXIT_OK
    record = result.to_json()
    record["mutant"] = claim.is_mutant
    record["saved"] = None if saved is None else str(saved)
    if searches:
        record["searches"] = [{**_search_summary(r), "replayed": replayed.get(r.seed)} for r in searches]
    if not args.json:
        print_result(claim, result, searches, replayed, out)
        if saved is not None:
            out.print(f"  saved     {escape(str(saved))}  (re-check it: rankwall replay {escape(str(saved))})")
    return record, code, result


def print_result(
    claim: Claim, result: SearchResult, searches: list[SearchResult], replayed: dict[int, bool], out: Console
) -> None:
    """The result for people: the counterexample, or none with what stayed undecided."""
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
        tried += f" ({result.rejected} drawn instances rejected: invalid, or outside their domain)"
    what = f"{described(claim)} (tighten {result.tighten})"
    if result.counterexample is None:
        if not result.undecided:
            out.print(f"[green]no counterexample[/] to {what} in {tried}, {result.seconds:.1f} s")
            return
        out.print(
            f"[yellow]no counterexample, but {result.undecided} undecided[/] to {what} in {tried}, "
            f"{result.seconds:.1f} s; the first of them:"
        )
        for verdict in result.undecided_verdicts:
            out.print(f"  {escape(json.dumps(verdict.instance.to_json()))}  ({escape(verdict.method)})")
        return
    v = result.counterexample
    out.print(f"[bold red]counterexample[/] to {what} after {tried}, shrunk in {result.shrink_steps} steps:")
    for line in verdict_lines(v):
        out.print(f"  {line}")
    if result.undecided:
        out.print(f"  ({result.undecided} other instances were undecided)")


def _search_on_cluster(
    args: argparse.Namespace, claim: Claim, err: Console
) -> tuple[SearchResult, list[SearchResult], dict[int, bool]]:
    """One seeded search per worker on a shared example database (``--database``, else a temporary
    folder): the result to report (:func:`rankwall.checks.run.distributed.first_found`), every search's
    result by seed, and, when some seed found a counterexample, whether each seed that did not
    replays it from the database (a search of budget 1 on the same worker pool: Hypothesis reads the
    database as a search starts)."""
    from rankwall.checks.run.distributed import first_found, search_all, worker_count

    with cluster(args) as client, tempfile.TemporaryDirectory(prefix="rankwall-search-") as scratch:
        seeds = range(args.seed, args.seed + worker_count(client))
        shared = functools.partial(
            search_all,
            client,
            claim.id,
            backend_spec(args, claim),
            tighten=args.tighten,
            database=args.database or scratch,
            sources=sources(args),
            exact=True if args.exact else None,
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
        "found": result.found,
        "examples": result.examples,
        "rejected": result.rejected,
        "undecided": result.undecided,
        "shrink_steps": result.shrink_steps,
        "seconds": round(result.seconds, 3),
    }

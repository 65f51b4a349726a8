"""``rankwall verify``: every matching claim checked on its witnesses and random instances."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.cli.commands.common import (
    EXIT_OF,
    NUMPY_ONLY,
    STYLE,
    UsageError,
    backend_options,
    backend_spec,
    claims_option,
    cluster,
    cluster_options,
    load_user_claims,
    matched_claims,
    memory,
    on_cluster,
    sources,
    verdict_lines,
)
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import DEFAULT_V, Status, Verdict
from rankwall.checks.run import runner
from rankwall.checks.run.outputs import available_memory_bytes, progress_bar
from rankwall.theory.validation import MAX_VOCABULARY

NAME = "verify"
HELP = "check claims on their constructed witnesses and on random instances"
ORDER = 1
DESCRIPTION = f"""\
Check every claim that a PATTERN names (all of them by default) on its constructed witnesses, which
include its equality and boundary cases, and on --examples random instances. Without --V each claim
runs at its own default size ({DEFAULT_V}, smaller for claims whose witnesses are expensive: see
`rankwall list --json`, `default_V`); --V N [N ...] checks every claim at each size in turn.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("patterns", nargs="*", metavar="PATTERN", help="claim ids or shell patterns (default: all)")
    parser.add_argument(
        "--V",
        type=integer_in(2, MAX_VOCABULARY),
        nargs="+",
        default=None,
        dest="V",
        metavar="N",
        help="vocabulary sizes, each checked in turn (default: each claim's default_V)",
    )
    parser.add_argument("--examples", type=integer_in(0, 100_000), default=16, help="random instances per claim")
    parser.add_argument(
        "--exact",
        action="store_true",
        help="re-decide every identity exactly (the default at every size: an identity whose sides agree only "
        "to rounding is inconclusive, never holds); kept for scripts that pass it",
    )
    backend_options(parser, json_help="print one JSON entry per claim and size instead of tables")
    cluster_options(parser)
    parser.add_argument(
        "--worker-memory",
        type=memory,
        default=None,
        metavar="SIZE",
        help="memory limit of each --workers process, e.g. 4GiB (default: 8GiB, or less where the machine has less)",
    )
    claims_option(parser)


def memory_limit(args: argparse.Namespace) -> int | None:
    """The bytes one instance may take: the per-worker limit with ``--workers``, else what is available."""
    from rankwall.checks.run.distributed import default_worker_memory

    available = available_memory_bytes()
    if args.workers is None:
        return available
    return args.worker_memory if args.worker_memory is not None else default_worker_memory(args.workers, available)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    load_user_claims(args)
    claims = matched_claims(args.patterns)
    backend = resolve(args.backend, args.device, args.dtype)
    numpy_backend = resolve(*NUMPY_ONLY)
    if args.worker_memory is not None and args.workers is None:
        raise UsageError("--worker-memory: applies to the workers of --workers N only")
    planned = runner.plan(claims, args.V, args.examples, args.seed)
    if args.scheduler is None:
        what = "per-worker memory limit (--worker-memory)" if args.workers else "available memory"
        runner.admit(planned, memory_limit(args), what)
    with progress_bar(err) as progress:
        task = progress.add_task("verifying", total=sum(len(p.cases) for p in planned))

        def on_case(p: runner.Planned | None) -> None:
            if p is not None:
                progress.update(task, description=f"{p.claim.id}  V={p.V}")
            progress.advance(task)

        remote = _remote(args, planned) if on_cluster(args) else None
        exact = True if args.exact else None
        report = runner.verify(planned, backend, numpy_backend, on_case=on_case, remote=remote, exact=exact)
    if args.json:
        print(json.dumps([r.to_json() for r in report.reports], indent=2))
    else:
        print_tables(report, backend, out)
    return EXIT_OF[report.worst_status]


def _remote(args: argparse.Namespace, planned: list[runner.Planned]) -> runner.Remote:
    """The cluster runner: every (claim, case) a task; on a running cluster (``--scheduler``) the sizes
    are first checked against its workers' smallest memory limit."""
    from rankwall.checks.run.distributed import check_all, worker_memory_limit

    def run_remotely(jobs: list[tuple[Any, Any, Any]], on_done: Any) -> list[tuple[Verdict | None, float]]:
        specs = [(claim.id, case, backend_spec(args, claim)) for claim, case, _ in jobs]
        with cluster(args, memory_limit(args) if args.workers is not None else None) as client:
            if args.scheduler is not None:
                runner.admit(planned, worker_memory_limit(client), "per-worker memory limit")
            return check_all(client, specs, on_done, sources(args), True if args.exact else None)

    return run_remotely


#: Below this console width the verify table stacks "certified by: method" under the claim id.
WIDE_TABLE = 120


def margin_text(verdict: Verdict) -> str:
    """The worst margin rhs − lhs for people: relative to the larger side (``rel``), or absolute
    (``abs``) where both sides are within the tolerance of zero, where a ratio means nothing."""
    scale = max(abs(verdict.lhs), abs(verdict.rhs))
    if not math.isfinite(verdict.margin):
        return "-"
    if scale <= max(verdict.tolerance, 0.0) or scale == 0:
        return f"{verdict.margin:+.1e} abs"
    return f"{verdict.relative_margin:+.1e} rel"


def print_tables(report: runner.VerifyReport, backend: Any, out: Console) -> None:
    """One table per size (per claim's default size when none was asked), the worst instance of each
    claim that is violated or inconclusive (what ``--json`` gives as ``instance``), then the summary line."""
    for V in dict.fromkeys(r.V for r in report.reports):
        at_V = [r for r in report.reports if r.V == V]
        title = f"rankwall verify  V={V}  {backend.name}/{backend.dtype_name}/{backend.device}"
        out.print(verify_table(at_V, backend, title, out.width))
        unchecked = [r.claim.id for r in at_V if r.verdict is None]
        if unchecked:
            out.print(f"no instance at V = {V} for: {escape(', '.join(unchecked))}")
    out.print(
        "[dim]margin = rhs − lhs of the worst instance: relative to the larger side (rel), or absolute (abs) "
        "where both sides are within rounding of 0. A claim marked \\[numpy/float64] computes in NumPy float64 "
        "whatever --backend asks.[/]",
        soft_wrap=True,
    )
    for r in report.reports:
        if r.verdict is not None and r.verdict.status is not Status.HOLDS:
            status = f"[{STYLE[r.verdict.status]}]{r.verdict.status.value}[/]"
            out.print(f"{escape(r.claim.id)} {status} at V = {r.V} on its worst instance:", soft_wrap=True)
            for line in verdict_lines(r.verdict):
                out.print(f"  {line}", soft_wrap=True)
    out.print(report.summary(), soft_wrap=True)


def verify_table(reports: list[runner.ClaimReport], backend: Any, title: str, width: int) -> Table:
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
    asked = backend.describe()
    for r in reports:
        verdict = r.verdict
        status = "[dim]unchecked[/]" if verdict is None else f"[{STYLE[verdict.status]}]{verdict.status.value}[/]"
        margin = "-" if verdict is None else margin_text(verdict)
        method = "no instance at this V" if verdict is None else escape(verdict.method)
        if verdict is not None and verdict.certified_by is not None:
            method = f"{verdict.certified_by.value}: {method}"
        ran = r.backend.describe()
        if ran != asked:
            method = f"\\[{ran['backend']}/{ran['dtype']}] {method}"
        largest = "-" if r.largest_V is None else f"{r.largest_V:,}"
        name = escape(r.claim.id)
        if wide:
            table.add_row(name, status, str(r.checked), largest, margin, method)
        else:
            table.add_row(f"{name}\n[dim]{method}[/]", status, str(r.checked), largest, margin)
    return table

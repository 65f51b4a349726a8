"""What the commands share: exit codes, argument types and groups, claim lookup, the cluster."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

from rich.console import Console
from rich.markup import escape

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.engine.backends import BACKENDS, DTYPES
from rankwall.checks.engine.verdict import REGISTRY, Claim, Status, Verdict
from rankwall.theory.validation import InputError

EXIT_OK, EXIT_VIOLATED, EXIT_USAGE, EXIT_INCONCLUSIVE, EXIT_INTERNAL = 0, 1, 2, 3, 4
#: A closed output pipe (``rankwall list --json | head``): the status a shell reports for SIGPIPE.
EXIT_BROKEN_PIPE = 128 + 13
#: Interrupted (Ctrl-C).
EXIT_INTERRUPTED = 128 + 2
#: The exit code of each status (the worst one decides).
EXIT_OF = {Status.HOLDS: EXIT_OK, Status.INCONCLUSIVE: EXIT_INCONCLUSIVE, Status.VIOLATED: EXIT_VIOLATED}
EXIT_CODES_TEXT = (
    "exit codes: 0 all hold / no counterexample, 1 violated / counterexample found, 2 bad usage or input, "
    "3 inconclusive (nothing violated, something undecided), 4 internal error"
)
#: The backend a claim that does not follow ``--backend`` runs on, whatever is asked: NumPy float64.
NUMPY_ONLY = ("numpy", None, "float64")
STYLE = {Status.HOLDS: "green", Status.VIOLATED: "bold red", Status.INCONCLUSIVE: "yellow"}


#: The width a console for a pipe or a file lays out at: wider than any line rankwall prints, so
#: nothing is wrapped or cut and every table takes its natural width.
UNBOUNDED_WIDTH = 1 << 16


def people_console(stderr: bool = False) -> Console:
    """A console for the output people read. At a terminal, rich's own (its width, colour, tables
    fitted to the window). Elsewhere (a pipe, a file, CI) nothing is wrapped or truncated: lines are
    soft-wrapped (left whole) and tables laid out at their natural width, whatever ``COLUMNS`` says.
    The stream's ``isatty`` decides, not rich's ``is_terminal``, which ``FORCE_COLOR`` turns on."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        terminal = bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        terminal = False
    if terminal:
        return _Console(stderr=stderr)
    return _Console(stderr=stderr, soft_wrap=True, width=UNBOUNDED_WIDTH)


class _Console(Console):
    """rich's console, but a closed pipe is a :class:`BrokenPipeError` for :func:`rankwall.checks.cli.main`
    to answer with its own exit code: rich's default leaves with ``SystemExit(1)``, the code of a
    violated claim."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("the reader of the output closed it")


class UsageError(InputError):
    """A command-line argument that cannot be used, with the reason."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions kept as written, and each option's default after its help, once: not where the help
    already says its default (``(default: each claim's default_V)``), and not for an option whose default
    is nothing at all (None, False, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        nothing = action.default is None or action.default is False or action.default == []
        if nothing or action.default == argparse.SUPPRESS or re.search(r"\bdefault", text, re.IGNORECASE):
            return action.help
        return super()._get_help_string(action)


#: ``--tighten`` factors outside this range are refused: the bound times F must stay a normal float64.
TIGHTEN_RANGE = (Fraction(1, 2**64), Fraction(2**64))


def factor(text: str) -> Fraction:
    """An argparse type: a positive rational factor within :data:`TIGHTEN_RANGE`."""
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    low, high = TIGHTEN_RANGE
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{text} is out of range (need 2^-64 <= F <= 2^64)")
    return value


def memory(text: str) -> int:
    """An argparse type: a memory size such as ``4GiB``, in bytes."""
    from rankwall.checks.run.distributed import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def claims_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--claims",
        action="append",
        default=[],
        metavar="FILE_OR_MODULE",
        help="also load the claims a Python file or module declares (repeatable; installed packages' "
        "claims come from the entry-point group rankwall.claims)",
    )


def backend_options(parser: argparse.ArgumentParser, json_help: str = "print JSON instead of a table") -> None:
    parser.add_argument("--backend", choices=BACKENDS, default="numpy", help="array library to compute in")
    parser.add_argument(
        "--device", default=None, help="cpu or cuda (array-api-strict: a named device); None: the library's default"
    )
    parser.add_argument("--dtype", choices=DTYPES, default="float64", help="floating-point type to compute in")
    parser.add_argument("--seed", type=integer_in(0), default=0, help="seed of the random instances / the search")
    parser.add_argument("--json", action="store_true", help=json_help)


def cluster_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=integer_in(1, 1024), default=None, help="run on a local Dask cluster of N processes"
    )
    where.add_argument("--scheduler", metavar="ADDRESS", default=None, help="run on the Dask cluster at ADDRESS")


def load_user_claims(args: argparse.Namespace) -> None:
    """The installed packages' claims and those of ``--claims``, into the registry."""
    from rankwall.checks.run.loader import load_all

    load_all(tuple(getattr(args, "claims", ())))


def sources(args: argparse.Namespace) -> list[str]:
    """The ``--claims`` sources as a worker must load them (files by absolute path)."""
    from rankwall.checks.run.loader import source_key

    return [source_key(s) for s in getattr(args, "claims", ())]


def matched_claims(patterns: Sequence[str]) -> list[Claim]:
    """The claims that the patterns name; every pattern must match at least one claim."""
    unmatched = [p for p in patterns if not REGISTRY.match([p]) and p not in REGISTRY]
    if unmatched:
        raise UsageError(f"no claim matches {', '.join(map(repr, unmatched))}; see `rankwall list`")
    return REGISTRY.match(patterns)


def claim_named(claim_id: str, mutant: str | None = None) -> Claim:
    """The claim ``claim_id`` (``id[name]`` for a mutant), or its mutant ``mutant``."""
    try:
        claim = REGISTRY[claim_id]
    except KeyError as error:
        raise UsageError(str(error.args[0])) from None
    if mutant is None:
        return claim
    if mutant not in claim.mutants:
        known = ", ".join(sorted(claim.mutants)) or "none"
        raise UsageError(f"--mutant: {claim.id} has no mutant {mutant!r} (known: {known})")
    return claim.mutants[mutant]


def described(claim: Claim) -> str:
    """A claim's id for rich output (escaped: a mutant's ``[name]`` is not markup), naming a mutant as one."""
    if claim.is_mutant:
        parent, _, name = claim.id.partition("[")
        return f"{escape(claim.id)} (the planted false variant {escape(name[:-1])!r} of {parent})"
    return escape(claim.id)


def verdict_lines(verdict: Verdict) -> list[str]:
    """A verdict for people, in rich markup: the instance (as JSON, enough to rebuild it), the two sides
    and the margin, and what certified it."""
    certified = f"{verdict.certified_by.value}: " if verdict.certified_by is not None else ""
    return [
        f"instance  {escape(json.dumps(verdict.instance.to_json()))}",
        f"lhs {verdict.lhs!r}  rhs {verdict.rhs!r}  margin {verdict.margin!r}",
        f"certified by {escape(certified + verdict.method)}",
    ]


def on_cluster(args: argparse.Namespace) -> bool:
    return getattr(args, "workers", None) is not None or getattr(args, "scheduler", None) is not None


@contextlib.contextmanager
def cluster(args: argparse.Namespace, memory_limit: int | None = None) -> Iterator[Any]:
    """The Dask client of ``--workers`` / ``--scheduler``; no dask, or no cluster there, is a usage error."""
    from rankwall.checks.run.distributed import ClusterUnavailable, connect

    try:
        with connect(args.workers, args.scheduler, memory_limit) as client:
            yield client
    except ClusterUnavailable as error:
        raise UsageError(str(error)) from None


def backend_spec(args: argparse.Namespace, claim: Claim) -> tuple[str, str | None, str]:
    """The backend a worker resolves for ``claim``: NumPy for a claim that is not array-API."""
    return (args.backend, args.device, args.dtype) if claim.array_api else NUMPY_ONLY


def debug_option() -> argparse.ArgumentParser:
    """A parent parser with ``--debug`` for every command and experiment; SUPPRESS keeps a ``--debug``
    given before the command."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parent

"""The ``rankwall`` command line: it builds the parser from the command modules of
:mod:`rankwall.checks.cli.commands` (each adds its own flags and runs through the library), dispatches,
and turns every outcome into an exit code.

Exit codes: 0 every verdict holds (for ``search``: no counterexample found); 1 a claim is
violated (a counterexample was found); 2 bad usage or bad input; 3 nothing is violated but some
verdict is inconclusive (for ``search``: some instance undecided); 4 an internal error (the
traceback with ``--debug``); 130 interrupted; 141 the output pipe was closed. A crash never exits
1. ``--json`` output is a stable contract: see ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata

from rankwall.checks.cli.commands import commands
from rankwall.checks.cli.commands.common import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES_TEXT,
    EXIT_INCONCLUSIVE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATED,
    HelpFormatter,
    UsageError,
    debug_option,
    people_console,
)
from rankwall.checks.engine.backends import BackendUnavailable
from rankwall.theory.validation import InputError

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VIOLATED",
    "UsageError",
    "build_parser",
    "main",
]


class _Parser(argparse.ArgumentParser):
    """A parser whose errors print its own usage (a command's, not the top level's) and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _version() -> str:
    try:
        return metadata.version("rankwall")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rankwall",
        description="Check the mathematics of the softmax / LM-head bottleneck: list the claims, verify them, "
        "search for counterexamples, replay them, and measure heads and models.",
        epilog=f"{EXIT_CODES_TEXT}. JSON contract: docs/cli.md.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rankwall {_version()}")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an internal error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for name, module in commands().items():
        command = sub.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=EXIT_CODES_TEXT,
            parents=[debug_option()],
            formatter_class=HelpFormatter,
        )
        command.set_defaults(parser=command)
        module.add_arguments(command)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush into a closed pipe is silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _escape_what_the_terminal_cannot_show() -> None:
    """Write a character the output's encoding lacks (a − or a Σ under ``PYTHONIOENCODING=ascii`` or a
    Latin-1 locale) as a backslash escape, instead of failing the command with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rankwall`` console script; returns the exit code (see the module docstring)."""
    _escape_what_the_terminal_cannot_show()
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the command's own parser, with its usage
            (getattr(args, "parser", None) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as stop:  # --help, --version, or a usage error already printed
        return int(stop.code or 0)
    out, err = people_console(), people_console(stderr=True)
    try:
        return commands()[args.command].run(args, out, err)
    except (InputError, BackendUnavailable) as error:
        print(f"rankwall: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("rankwall: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        if args.debug:
            traceback.print_exc()
        hint = "" if args.debug else " (run again with --debug for the traceback)"
        print(f"rankwall: internal error: {type(error).__name__}: {error}{hint}", file=sys.stderr)
        return EXIT_INTERNAL

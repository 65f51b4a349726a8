"""``rankwall experiment NAME``: one of the experiments of :mod:`rankwall.checks.experiments`."""

from __future__ import annotations

import argparse

from rich.console import Console

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.cli.commands.common import EXIT_CODES_TEXT, EXIT_OK, HelpFormatter, debug_option
from rankwall.checks.experiments import experiments

NAME = "experiment"
HELP = "run an experiment (synthetic languages, trained heads, SmolLM2) and write its JSON and PNG"
ORDER = 8
DESCRIPTION = "Each writes NAME.json and NAME.png into --out; `rankwall experiment NAME --help` lists its flags."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    names = parser.add_subparsers(dest="name", required=True, metavar="NAME", parser_class=type(parser))
    for name, module in experiments().items():
        runner = names.add_parser(
            name,
            help=module.SUMMARY,
            description=module.SUMMARY,
            epilog=EXIT_CODES_TEXT,
            parents=[debug_option()],
            formatter_class=HelpFormatter,
        )
        runner.set_defaults(parser=runner)
        runner.add_argument("--out", default="out", help="folder for the JSON and PNG")
        runner.add_argument("--seed", type=integer_in(0), default=0, help="seed of the run")
        runner.add_argument("--json", action="store_true", help="print the records as JSON")
        module.add_arguments(runner)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks.run.outputs import writable_folder

    args.out = writable_folder(args.out, "--out")
    experiments()[args.name].main(args, out, err)
    return EXIT_OK

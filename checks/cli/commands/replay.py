"""``rankwall replay FILE``: re-check a counterexample that ``search --save`` wrote."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.markup import escape

from rankwall.checks.cli.commands.common import EXIT_OF, STYLE, claims_option, load_user_claims
from rankwall.checks.engine.backends import BACKENDS, DTYPES, resolve
from rankwall.checks.run.replay import claim_of, load, replay

NAME = "replay"
HELP = "re-check a saved counterexample (exit 1 if it is still one, 0 if the claim now holds on it)"
ORDER = 3
DESCRIPTION = """\
Rebuild the case a counterexample file holds (its floats are written exactly), load its claim (a
user's claim from the file or module it was declared in, or --claims), and decide the claim on it
again with the saved --tighten factor, on the saved backend unless --backend says otherwise.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a counterexample file written by `rankwall search --save`")
    parser.add_argument("--backend", choices=BACKENDS, default=None, help="judge on this backend (default: saved)")
    parser.add_argument("--device", default=None, help="with --backend: its device")
    parser.add_argument("--dtype", choices=DTYPES, default=None, help="with --backend: its dtype (default: saved)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    claims_option(parser)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    saved = load(args.file)
    load_user_claims(args)
    claim = claim_of(saved)
    spec = saved.backend
    if args.backend is not None:
        backend = resolve(args.backend, args.device, args.dtype or spec.get("dtype", "float64"))
    else:
        device = None if spec.get("device") in (None, "cpu") else spec["device"]
        backend = resolve(spec.get("backend", "numpy"), device, args.dtype or spec.get("dtype", "float64"))
    if not claim.array_api:
        backend = resolve("numpy")
    verdict = replay(saved, backend)
    if args.json:
        print(json.dumps({**verdict.to_json(), "file": args.file, "was": saved.verdict.get("status")}, indent=2))
        return EXIT_OF[verdict.status]
    out.print(
        f"{escape(claim.id)} on {escape(json.dumps(saved.case.to_json()))} (tighten {saved.tighten}, "
        f"{backend.name}/{backend.dtype_name}): [{STYLE[verdict.status]}]{verdict.status.value}[/]"
    )
    certified = f"{verdict.certified_by.value}: " if verdict.certified_by is not None else ""
    out.print(f"  lhs {verdict.lhs!r}  rhs {verdict.rhs!r}  margin {verdict.margin!r}")
    out.print(f"  certified by {escape(certified + verdict.method)}")
    return EXIT_OF[verdict.status]

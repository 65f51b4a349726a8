"""``rankwall list [PATTERN ...]``: the claims, one line each; one claim whole when a pattern names it;
``rankwall list --quantities [FAMILY ...]``: the quantities a statement of one's own can use."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from rankwall.checks.cli.commands.common import EXIT_OK, UsageError, claims_option, load_user_claims, matched_claims
from rankwall.checks.engine.verdict import REGISTRY, Claim

NAME = "list"
HELP = "the claims: id, kind and title (one claim whole: its statement, source, domain and mutants)"
ORDER = 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "patterns", nargs="*", metavar="PATTERN", help="claim ids or shell patterns (default: every claim)"
    )
    parser.add_argument("--json", action="store_true", help="print every matching claim whole, as JSON")
    parser.add_argument(
        "--quantities",
        action="store_true",
        help="list the families' quantities instead (PATTERN: family names): what each means, the cases it "
        "reads and how it is evaluated exactly",
    )
    claims_option(parser)


def kind(claim: Claim) -> str:
    """``upper bound``, ``lower bound`` or ``identity``."""
    return "identity" if claim.direction is None else f"{claim.direction} bound"


def claim_json(claim: Claim) -> dict[str, Any]:
    return {
        "id": claim.id,
        "title": claim.title,
        "source": claim.source,
        "statement": claim.statement,
        "domain": claim.domain,
        "relation": claim.relation.value,
        "direction": claim.direction,
        "array_api": claim.array_api,
        "default_V": claim.default_V,
        "origin": claim.origin,
        "mutants": [{"name": name, "id": m.id, "statement": m.statement} for name, m in sorted(claim.mutants.items())],
    }


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    load_user_claims(args)
    if args.quantities:
        return list_quantities(args, out)
    claims = matched_claims(args.patterns)
    if args.json:
        print(json.dumps([claim_json(c) for c in claims], indent=2))
        return EXIT_OK
    if len(args.patterns) == 1 and args.patterns[0] in REGISTRY:
        print_whole(REGISTRY[args.patterns[0]], out)
        return EXIT_OK
    width = max((len(c.id) for c in claims), default=5)
    out.print(f"[bold]{'claim':<{width}}  {'kind':<8}  title[/]", soft_wrap=True)
    for claim in claims:
        line = f"{claim.id:<{width}}  {claim.direction or 'identity':<8}  {claim.title}"
        if len(line) > out.width:
            line = line[: max(out.width - 1, width)] + "…"
        out.print(escape(line), soft_wrap=True, highlight=False)
    out.print(f"{len(claims)} claims; `rankwall list CLAIM` shows one whole, `--json` all of them")
    return EXIT_OK


def print_whole(claim: Claim, out: Console) -> None:
    """One claim, every field of it, for people."""
    out.print(f"[bold]{escape(claim.id)}[/]: {escape(claim.title)}")
    for label, value in (
        ("statement", claim.statement),
        ("kind", kind(claim)),
        ("source", claim.source),
        ("domain", claim.domain),
        ("backends", "follows --backend" if claim.array_api else "NumPy float64 whatever --backend says"),
        ("loaded from", claim.origin),
    ):
        if value:
            out.print(f"  {label:<11} {escape(value)}")
    if claim.mutants:
        out.print("  mutants (planted false variants; `rankwall search CLAIM --mutant NAME`):")
        for name, mutant in sorted(claim.mutants.items()):
            out.print(f"    {escape(name)}: {escape(mutant.statement)}")


def list_quantities(args: argparse.Namespace, out: Console) -> int:
    """The quantities of the families named (all of them by default), as JSON or one block each."""
    from rankwall.checks.claims import FAMILY_MODULES, catalog, family_name

    known = [family_name(m) for m in FAMILY_MODULES]
    unknown = [
        f for f in args.patterns if f not in known and f.replace("-", "_") not in [k.replace("-", "_") for k in known]
    ]
    if unknown:
        raise UsageError(f"--quantities: no family {unknown[0]!r} (the families: {', '.join(known)})")
    entries = [e for f in (args.patterns or [None]) for e in catalog(f if f is None else f.replace("_", "-"))]
    if args.json:
        print(json.dumps(entries, indent=2, ensure_ascii=False))
        return EXIT_OK
    for entry in entries:
        kind = "integer" if entry["integer"] else "real"
        out.print(f"[bold]{escape(entry['name'])}[/]  prints as {escape(entry['prints'])}  ({kind})", soft_wrap=True)
        for label, value in (
            ("meaning", entry["meaning"]),
            ("cases", ", ".join(entry["cases"]) or "none of the family's bundles"),
            ("exactly", entry["exactly"] or "no exact route: decided by its two-sided float margin"),
        ):
            out.print(f"  {label:<8} {escape(value)}", soft_wrap=True, highlight=False)
    out.print(f"{len(entries)} quantities; combine them with + - * /, powers, minimum, maximum, sqrt, log, exp, abs")
    return EXIT_OK

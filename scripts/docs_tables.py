"""The family and quantity tables of ``docs/conjectures.md``, generated from the registry and each
family's quantities, so that a reader of the Markdown (on the repository page, without Sphinx) sees them.

    python scripts/docs_tables.py --check   # exit 1, with a diff, if the page is not what the code gives
    python scripts/docs_tables.py --write   # rewrite the blocks between the markers

The blocks lie between ``<!-- families:begin -->`` / ``<!-- families:end -->`` and
``<!-- quantities:begin -->`` / ``<!-- quantities:end -->``. Nothing in them is typed by hand.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "conjectures.md"
BLOCKS = ("families", "quantities")


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def families_block() -> str:
    """One row per family module: how to import it, the claims it registers, its docs page."""
    from rankwall.checks.claims import FAMILY_MODULES, family_name
    from rankwall.checks.engine.verdict import REGISTRY

    lines = ["| module | claims | page |", "|---|---|---|"]
    for module in FAMILY_MODULES:
        name = family_name(module)
        count = sum(c.id.startswith(name + ".") for c in REGISTRY)
        public = module.__name__.rsplit(".", 1)[1]
        page = getattr(module, "PAGE", public)  # a family whose theorem another family's page states
        lines.append(f"| `rankwall.{public}` | `{name}.*` ({count}) | {{doc}}`{page}` |")
    return "\n".join(lines)


def quantities_block() -> str:
    """One row per public quantity: its name, how it prints, what it means, the cases it reads, and how
    it is evaluated exactly (``rankwall list --quantities`` prints the same)."""
    from rankwall.checks.claims import catalog

    lines = ["| quantity | prints as | meaning | cases | evaluated exactly |", "|---|---|---|---|---|"]
    for entry in catalog():
        kind = " (integer)" if entry["integer"] else ""
        lines.append(
            f"| `{entry['name'].removeprefix('rankwall.')}` | {cell(entry['prints'])}{kind} | {cell(entry['meaning'])} "
            f"| {cell(', '.join(entry['cases']))} | {cell(entry['exactly'] or 'no exact route')} |"
        )
    return "\n".join(lines)


def generated(text: str) -> str:
    """The page with each block replaced by what the code gives now."""
    makers = {"families": families_block, "quantities": quantities_block}
    for name in BLOCKS:
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        head, found, rest = text.partition(begin)
        if not found or end not in rest:
            raise SystemExit(f"{PAGE}: no {begin} ... {end} block")
        _, _, tail = rest.partition(end)
        text = f"{head}{begin}\n{makers[name]()}\n{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="exit 1 with a diff if the page is stale")
    action.add_argument("--write", action="store_true", help="rewrite the page's blocks")
    args = parser.parse_args(argv)
    text = PAGE.read_text(encoding="utf-8")
    fresh = generated(text)
    if args.write:
        PAGE.write_text(fresh, encoding="utf-8")
        return 0
    if fresh != text:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), fresh.splitlines(True), "page", "generated"))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

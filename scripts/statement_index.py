"""The statement index of the current release, recorded for citations.

    python scripts/statement_index.py --check   # exit 1, naming the changed numbers, if the index of this
                                                # version is not the recorded one
    python scripts/statement_index.py --write   # record docs/_static/statements/<version>.json

A release's record holds every numbered statement of the proof companion (number, label, page, kind,
seed reference, and the title and text its page prints). The version is the installed package's
(``pyproject.toml``; reinstall after changing it). A statement that changes needs a new version: bump
it in ``pyproject.toml`` and ``CITATION.cff``, list the change in ``docs/errata.md`` under the new
version, and write the new record; the records of earlier releases are never rewritten.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def main(argv: list[str] | None = None) -> int:
    import json

    from rankwall.checks.companion import fidelity
    from rankwall.checks.engine.statements import RECORDS, changed, read_record, record, stated

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="compare the index with this version's record")
    action.add_argument("--write", action="store_true", help="record this version's index (never overwrites)")
    parser.add_argument("--note", default="", help="a sentence kept with the record (what it was recorded from)")
    args = parser.parse_args(argv)
    release = version("rankwall")
    path = DOCS / RECORDS / f"{release}.json"
    if args.write:
        if path.exists():
            print(f"{path} exists: a release's record is never rewritten; bump the version", file=sys.stderr)
            return 2
        path.parent.mkdir(parents=True, exist_ok=True)
        data = record(release, fidelity.STATEMENTS, DOCS)
        if args.note:
            data["note"] = args.note
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {path}")
        return 0
    if not path.exists():
        print(f"no record for rankwall {release}: run python scripts/statement_index.py --write", file=sys.stderr)
        return 1
    differences = changed(read_record(release, DOCS), stated(fidelity.STATEMENTS, DOCS))
    if differences:
        print(f"changed since the record of rankwall {release}: {', '.join(differences)}", file=sys.stderr)
        return 1
    print(f"the statement index is rankwall {release}'s record")
    return 0


if __name__ == "__main__":
    sys.exit(main())

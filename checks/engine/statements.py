"""The statements of the proof companion: each theorem and lemma of a family's docs page, with its
stable number, where the seeds state it, how it stands to them, its claims and its tests.

A family module lists its page's statements in a module-level ``STATEMENTS`` tuple;
:data:`rankwall.checks.companion.fidelity.STATEMENTS` collects them from every family module, so a new family
states its theorems where it defines its claims and edits no shared file.

A release records its index (number, label, page, kind, seed reference, and the title and text each
page prints) in ``docs/_static/statements/<version>.json`` (``scripts/statement_index.py``), so that a
citation "rankwall X, Theorem SJ.2" can be checked against what release X said; a test requires the
index of the current version to be the recorded one, so a changed statement needs a new version."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = ["Kind", "Stated", "Statement", "changed", "read_record", "record", "recorded_versions", "stated", "theorems"]


class Kind(StrEnum):
    """How a statement of the companion stands to the seeds."""

    SEED = "the seed's statement"
    RECONSTRUCTED = "reconstructed"
    CORRECTED = "corrected"
    NEW = "new"


@dataclass(frozen=True)
class Statement:
    """One theorem or lemma of the companion. ``number`` is its stable name (the page's prefix and a
    serial, ``SJ.3``): it is never reused or renumbered, so a citation stays right across releases;
    a new statement takes the next free serial of its page. ``label`` is the theorem's label on
    ``page`` (a docs page's stem); ``claims`` are registry ids, ``tests`` pytest node ids
    (``path::name``)."""

    label: str
    number: str
    page: str
    seed: str
    kind: Kind
    claims: tuple[str, ...]
    tests: tuple[str, ...]
    note: str = ""


# --------------------------------------------------------------------------- the index of a release

#: Where each release's statement index is recorded (``<version>.json``), relative to ``docs/``.
RECORDS = Path("_static") / "statements"

_THEOREM = re.compile(
    r"^```\{prf:(?P<directive>theorem|lemma|proposition|corollary)\}(?P<title>[^\n]*)\n"
    r":label: (?P<label>[\w-]+)\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Stated:
    """A numbered statement as a release prints it: what a citation of its number refers to."""

    number: str
    label: str
    page: str
    kind: str
    seed: str
    directive: str
    title: str
    text: str


def theorems(docs: Path) -> dict[str, tuple[str, str, str]]:
    """label -> (directive, title, body) for every numbered statement of the pages under ``docs``."""
    found = {}
    for page in sorted(docs.glob("*.md")):
        for match in _THEOREM.finditer(page.read_text()):
            body = "\n".join(line for line in match["body"].strip().splitlines() if not line.startswith(":"))
            found[match["label"]] = (match["directive"], match["title"].strip(), body.strip())
    return found


def stated(statements: tuple[Statement, ...], docs: Path) -> list[Stated]:
    """Each indexed statement with its kind, seed reference, title and text as the pages print them,
    in the order of its number (page prefix, then serial)."""
    pages = theorems(docs)
    rows = [
        Stated(s.number, s.label, s.page, s.kind.value, s.seed, *pages.get(s.label, ("", "", ""))) for s in statements
    ]
    return sorted(rows, key=lambda r: (r.number.split(".")[0], int(r.number.split(".")[1])))


def record(version: str, statements: tuple[Statement, ...], docs: Path) -> dict[str, Any]:
    """The JSON record of a release's statement index (``docs/_static/statements/<version>.json``)."""
    return {"version": version, "statements": [asdict(s) for s in stated(statements, docs)]}


def recorded_versions(docs: Path) -> list[str]:
    """The releases whose statement index is recorded, oldest first."""
    return sorted((p.stem for p in (docs / RECORDS).glob("*.json")), key=version_key)


def read_record(version: str, docs: Path) -> list[Stated]:
    """The recorded statement index of ``version``."""
    data = json.loads((docs / RECORDS / f"{version}.json").read_text())
    return [Stated(**s) for s in data["statements"]]


def changed(old: list[Stated], new: list[Stated]) -> list[str]:
    """The numbers whose statement differs between two indexes (added, removed or changed in any
    field), in number order."""
    before, after = {s.number: s for s in old}, {s.number: s for s in new}
    numbers = sorted(before.keys() | after.keys(), key=lambda n: (n.split(".")[0], int(n.split(".")[1])))
    return [n for n in numbers if before.get(n) != after.get(n)]


def version_key(version: str) -> tuple[int, ...]:
    """``"0.10.1"`` -> (0, 10, 1), so that releases sort numerically."""
    return tuple(int(part) for part in version.split("."))

"""The statements of the proof companion: each theorem and lemma of a family's docs page, with its
stable number, where the seeds state it, how it stands to them, its claims and its tests.

A family module lists its page's statements in a module-level ``STATEMENTS`` tuple;
:data:`rankwall.checks.fidelity.STATEMENTS` collects them from every family module, so a new family
states its theorems where it defines its claims and edits no shared file."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Kind", "Statement"]


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

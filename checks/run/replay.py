"""Counterexamples as files: ``rankwall search --save DIR`` writes each one found, ``rankwall replay
FILE`` re-checks it.

A file is a small JSON document that needs neither Hypothesis's database nor its version: the claim's
id (a mutant as ``id[name]``), where a user's claim was loaded from, the factor of ``--tighten``, the
backend it was judged on, and the case with every float written exactly (``{"rational": "p/q"}``,
:func:`rankwall.checks.engine.verdict.exact_json`), beside the verdict as found. :func:`replay` rebuilds the
case (:func:`rankwall.checks.engine.verdict.case_from_json`) and decides the claim on it again.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from fractions import Fraction
from importlib import metadata
from pathlib import Path
from typing import Any

from rankwall.checks.engine.verdict import REGISTRY, Case, Claim, Verdict, case_from_json, exact_json
from rankwall.checks.run.outputs import write_text
from rankwall.theory.validation import InputError

#: The format's name and version, the first key of every file.
FORMAT = "rankwall-counterexample/1"


@dataclass(frozen=True)
class SavedCounterexample:
    """What a counterexample file holds."""

    claim: str
    origin: str | None
    tighten: Fraction
    backend: dict[str, str]
    case: Case
    verdict: dict[str, Any]


def _version() -> str:
    try:
        return metadata.version("rankwall")
    except metadata.PackageNotFoundError:
        return "unknown"


def save(verdict: Verdict, claim: Claim, backend: Any, tighten: Fraction, folder: Path) -> Path:
    """Write the counterexample ``verdict`` of ``claim`` into ``folder``; the file's name is the claim's
    id and a digest of the case, so saving the same counterexample twice writes one file."""
    record = {
        "format": FORMAT,
        "claim": claim.id,
        "origin": claim.origin,
        "tighten": str(tighten),
        "backend": backend.describe(),
        "case": exact_json(verdict.instance),
        "verdict": verdict.to_json(),
        "rankwall": _version(),
    }
    digest = hashlib.sha256(json.dumps(record["case"], sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", claim.id).strip("_")
    path = Path(folder) / f"{slug}-{digest}.json"
    write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def load(path: str | Path) -> SavedCounterexample:
    """Read a counterexample file; a missing, unreadable or malformed one is an :class:`InputError`."""
    file = Path(path)
    try:
        record = json.loads(file.read_text())
    except FileNotFoundError:
        raise InputError(f"FILE: no file {file}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"FILE: {file} is not a counterexample file ({error})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(f"FILE: {file} is not a {FORMAT} file")
    try:
        return SavedCounterexample(
            claim=str(record["claim"]),
            origin=record.get("origin"),
            tighten=Fraction(record["tighten"]),
            backend=dict(record["backend"]),
            case=case_from_json(record["case"]),
            verdict=dict(record.get("verdict") or {}),
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
        raise InputError(f"FILE: {file} is missing or mangles a field ({type(error).__name__}: {error})") from None


def claim_of(saved: SavedCounterexample) -> Claim:
    """The claim a file names, loading the user's file or module it came from if that still exists."""
    from rankwall.checks.run.loader import load_all

    origin = [saved.origin] if saved.origin and not saved.origin.startswith("entry point") else []
    if origin and saved.claim.split("[")[0] not in REGISTRY:
        if not Path(origin[0]).exists() and "/" in origin[0]:
            raise InputError(f"FILE: claim {saved.claim} came from {origin[0]}, which is gone; give --claims")
        load_all(tuple(origin))
    else:
        load_all(())
    try:
        return REGISTRY[saved.claim]
    except KeyError as error:
        raise InputError(f"FILE: {error.args[0]}") from None


def replay(saved: SavedCounterexample, backend: Any) -> Verdict:
    """The claim decided again on the saved case, in ``backend``, with the saved factor."""
    return claim_of(saved).check(saved.case, backend, saved.tighten)

"""Counterexample search: Hypothesis drives a claim's strategy towards a violation.

Each example is checked with :meth:`Claim.check` (so a reported counterexample is always
confirmed in exact or ball arithmetic), and ``target()`` is told how close the example came:
minus the relative margin for an inequality, the relative discrepancy for an identity. When
a violation is found Hypothesis shrinks it to a minimal instance before it is reported.

With a ``database`` folder the search keeps its shrunk counterexamples in a Hypothesis
:class:`~hypothesis.database.DirectoryBasedExampleDatabase` (one subfolder per claim, factor and
backend: :func:`database_folder`) and replays what is stored there before it generates anything,
so searches that share the folder (another seed, another worker, a later run) replay each other's finds.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import Phase, given, reject, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase

from rankwall.checks.strategies import _QUIET
from rankwall.checks.verdict import Claim, Instance, Relation, Status, Verdict
from rankwall.theory.validation import InputError


class _Found(Exception):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.claim)
        self.verdict = verdict


@dataclass(frozen=True)
class SearchResult:
    """What a search did and, if it found one, the shrunk counterexample."""

    claim: str
    tighten: Fraction
    budget: int
    seed: int
    examples: int  # instances checked up to the first violation (all of them when none is found)
    rejected: int  # drawn instances refused as invalid input (not counted in ``examples``)
    shrink_steps: int  # instances checked while shrinking the first violation to a minimal one
    seconds: float
    counterexample: Verdict | None

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "tighten": str(self.tighten),
            "budget": self.budget,
            "seed": self.seed,
            "examples": self.examples,
            "rejected": self.rejected,
            "shrink_steps": self.shrink_steps,
            "seconds": round(self.seconds, 3),
            "found": self.counterexample is not None,
            "counterexample": None if self.counterexample is None else self.counterexample.to_json(),
        }


def closeness(verdict: Verdict, relation: Relation) -> float:
    """How near a verdict is to a violation (larger is nearer), for ``target()``."""
    if relation is Relation.AT_MOST:
        return -verdict.relative_margin
    return abs(verdict.relative_margin)


def database_folder(root: str | os.PathLike[str], claim: Claim, backend: Any, tighten: Fraction) -> str:
    """The subfolder of ``root`` that holds the examples of one search: a counterexample is one
    only for its claim (or mutant), its factor and the backend it was judged on."""
    identity = f"{claim.id} {tighten} {sorted(backend.describe().items())}"
    return os.path.join(os.fspath(root), hashlib.sha256(identity.encode()).hexdigest()[:24])


def search(
    claim: Claim,
    backend: Any,
    *,
    tighten: Fraction = Fraction(1),
    budget: int = 300,
    seed: int = 0,
    on_example: Callable[[], None] | None = None,
    database: str | os.PathLike[str] | None = None,
) -> SearchResult:
    """Search ``claim`` (with its bound multiplied by ``tighten``) for a counterexample; with a
    ``database`` folder, replay the counterexamples stored there first and store the one found."""
    if tighten <= 0:
        raise ValueError("--tighten: the factor must be positive")
    if tighten != 1 and claim.bound is None:
        raise ValueError(f"--tighten: {claim.id} is an identity, it has no bound to tighten")
    counts = {"examples": 0, "rejected": 0, "shrink_steps": 0}
    found_one = False
    started = time.perf_counter()

    @settings(
        max_examples=budget,
        database=None
        if database is None
        else DirectoryBasedExampleDatabase(database_folder(database, claim, backend, tighten)),
        deadline=None,
        derandomize=False,
        suppress_health_check=_QUIET,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        report_multiple_bugs=False,
        print_blob=False,
    )
    @hypothesis_seed(seed)
    @given(claim.strategy())
    def probe(instance: Instance) -> None:
        nonlocal found_one
        try:
            verdict = claim.check(instance, backend, tighten)
        except InputError:
            counts["rejected"] += 1
            reject()
        counts["shrink_steps" if found_one else "examples"] += 1
        if on_example is not None and not found_one:
            on_example()
        target(closeness(verdict, claim.relation), label="closeness to a violation")
        if verdict.status is Status.VIOLATED:
            found_one = True
            raise _Found(verdict)

    counterexample = None
    try:
        probe()
    except _Found as found:
        counterexample = found.verdict
    return SearchResult(
        claim.id, tighten, budget, seed, **counts, seconds=time.perf_counter() - started, counterexample=counterexample
    )

"""Counterexample search: Hypothesis drives a claim's strategy towards a violation.

Each example is checked with :meth:`Claim.check` (so a reported counterexample is always
certified: exactly, in balls, or by a two-sided rounding-model margin), and ``target()`` is told
how close the example came: minus the relative margin for an inequality, the relative discrepancy
for an identity. When a violation is found Hypothesis shrinks it to a minimal instance before it is
reported. An instance outside the domain its constructor guarantees, or refused as invalid input, is
rejected (counted in ``rejected``); an instance the claim could not decide (``inconclusive``) is
counted in ``undecided``, with the first few kept, so a search that found nothing says what it could
not decide.

With a ``database`` folder the search keeps its shrunk counterexamples in a Hypothesis
:class:`~hypothesis.database.DirectoryBasedExampleDatabase` (one subfolder per claim, factor and
backend: :func:`database_folder`) and replays what is stored there before it generates anything,
so searches that share the folder (another seed, another worker, a later run) replay each other's
finds. Only failing examples are kept there (:class:`CounterexampleDatabase`), so a seed names one
search whatever else shares the folder. Without one, nothing is written to the working folder
(Hypothesis's own cache goes to a temporary folder for the search).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import Phase, given, reject, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis.configuration import set_hypothesis_home_dir, storage_directory
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from rankwall.checks.engine.verdict import Case, Claim, Relation, Status, Verdict
from rankwall.checks.run.strategies import QUIET_HEALTH_CHECKS
from rankwall.theory.validation import InputError

#: How many undecided instances a search keeps to name (it counts them all).
UNDECIDED_KEPT = 5


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
    rejected: int  # drawn instances refused as invalid input or outside their domain (not in ``examples``)
    shrink_steps: int  # instances checked while shrinking the first violation to a minimal one
    seconds: float
    counterexample: Verdict | None
    undecided: int = 0  # of ``examples``, the instances the claim could not decide (inconclusive)
    undecided_verdicts: tuple[Verdict, ...] = field(default=())  # the first UNDECIDED_KEPT of them

    @property
    def found(self) -> bool:
        return self.counterexample is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "tighten": str(self.tighten),
            "budget": self.budget,
            "seed": self.seed,
            "examples": self.examples,
            "rejected": self.rejected,
            "undecided": self.undecided,
            "undecided_instances": [
                {"instance": v.instance.to_json(), "method": v.method} for v in self.undecided_verdicts
            ],
            "shrink_steps": self.shrink_steps,
            "seconds": round(self.seconds, 3),
            "found": self.found,
            "counterexample": None if self.counterexample is None else self.counterexample.to_json(),
        }


def closeness(verdict: Verdict, relation: Relation) -> float:
    """How near a verdict is to a violation (larger is nearer), for ``target()``: the measurement's own
    continuous ``"closeness"`` where its certificate has one (an integer bound, whose margin moves in
    whole steps, names a singular-value gap or a normalised margin there), else minus the relative
    margin of an inequality, or the relative discrepancy of an identity; always a finite float."""
    given = (verdict.certificate or {}).get("closeness")
    if isinstance(given, int | float) and math.isfinite(given):
        return float(given)
    value = -verdict.relative_margin if relation is Relation.AT_MOST else abs(verdict.relative_margin)
    return _finite_target(value)


def _finite_target(value: float) -> float:
    """``target()`` takes finite floats only: a margin that is NaN (both float sides overflowed, so the
    float decision had nothing to say) steers nowhere (0), an infinite one is clamped to the largest float."""
    if math.isnan(value):
        return 0.0
    return max(-sys.float_info.max, min(sys.float_info.max, value))


class CounterexampleDatabase(ExampleDatabase):
    """A :class:`~hypothesis.database.DirectoryBasedExampleDatabase` that keeps failing examples only.

    Hypothesis also stores the pareto front of its targets (near misses that passed) under the key's
    ``pareto`` sub-key and replays it first in the next search, which then spends its budget on them:
    with a shared folder, whether seed ``s`` finds a counterexample at a small budget would hang on
    whether a concurrent seed stored its near misses first. Dropping those saves keeps a search's
    examples a function of its seed and of the counterexamples stored, nothing else."""

    NEAR_MISSES = b".pareto"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.folder = DirectoryBasedExampleDatabase(path)

    def save(self, key: bytes, value: bytes) -> None:
        if not key.endswith(self.NEAR_MISSES):
            self.folder.save(key, value)

    def fetch(self, key: bytes) -> Iterator[bytes]:
        return self.folder.fetch(key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.folder.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.folder.move(src, dest, value)


def database_folder(root: str | os.PathLike[str], claim: Claim, backend: Any, tighten: Fraction) -> str:
    """The subfolder of ``root`` that holds the examples of one search: a counterexample is one
    only for its claim (or mutant), its factor and the backend it was judged on."""
    identity = f"{claim.id} {tighten} {sorted(backend.describe().items())}"
    return os.path.join(os.fspath(root), hashlib.sha256(identity.encode()).hexdigest()[:24])


@contextlib.contextmanager
def _hypothesis_cache_elsewhere() -> Iterator[None]:
    """Point Hypothesis's storage (its constants cache) at a temporary folder for the block, so that a
    search without a database leaves no ``.hypothesis/`` in the working folder."""
    previous = storage_directory(intent_to_write=False).home_directory
    with tempfile.TemporaryDirectory(prefix="rankwall-hypothesis-") as scratch:
        set_hypothesis_home_dir(scratch)
        try:
            yield
        finally:
            set_hypothesis_home_dir(previous)


def search(
    claim: Claim,
    backend: Any,
    *,
    tighten: Fraction = Fraction(1),
    budget: int = 300,
    seed: int = 0,
    on_example: Callable[[], None] | None = None,
    database: str | os.PathLike[str] | None = None,
    exact: bool | None = None,
) -> SearchResult:
    """Search ``claim`` (with its bound multiplied by ``tighten``) for a counterexample; with a
    ``database`` folder, replay the counterexamples stored there first and store the one found.
    ``exact`` as in :meth:`Claim.check`."""
    if tighten <= 0:
        raise InputError("--tighten: the factor must be positive")
    claim.require_bound(tighten)
    counts = {"examples": 0, "rejected": 0, "shrink_steps": 0, "undecided": 0}
    undecided: list[Verdict] = []
    found_one = False
    started = time.perf_counter()

    @settings(
        max_examples=budget,
        database=None
        if database is None
        else CounterexampleDatabase(database_folder(database, claim, backend, tighten)),
        deadline=None,
        derandomize=False,
        suppress_health_check=QUIET_HEALTH_CHECKS,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        report_multiple_bugs=False,
        print_blob=False,
    )
    @hypothesis_seed(seed)
    @given(claim.strategy())
    def probe(instance: Case) -> None:
        nonlocal found_one
        try:
            verdict = claim.check(instance, backend, tighten, exact=exact)
        except InputError:  # invalid input, or outside the domain its constructor guarantees
            counts["rejected"] += 1
            reject()
        if found_one:
            counts["shrink_steps"] += 1
        else:
            counts["examples"] += 1
            if verdict.status is Status.INCONCLUSIVE:
                counts["undecided"] += 1
                if len(undecided) < UNDECIDED_KEPT:
                    undecided.append(verdict)
            if on_example is not None:
                on_example()
        target(closeness(verdict, claim.relation), label="closeness to a violation")
        if verdict.status is Status.VIOLATED:
            found_one = True
            raise _Found(verdict)

    counterexample = None
    with contextlib.nullcontext() if database is not None else _hypothesis_cache_elsewhere():
        try:
            probe()
        except _Found as found:
            counterexample = found.verdict
    return SearchResult(
        claim.id,
        tighten,
        budget,
        seed,
        counts["examples"],
        counts["rejected"],
        counts["shrink_steps"],
        time.perf_counter() - started,
        counterexample,
        counts["undecided"],
        tuple(undecided),
    )

"""Verdicts, claims and the registry of claims.

A :class:`Claim` is a proposition of the form ``lhs <= rhs`` or ``lhs == rhs`` over a family
of instances. Checking one instance gives a :class:`Verdict` -- ``holds``, ``violated`` or
``inconclusive`` -- with both sides, the margin ``rhs - lhs``, the tolerance it was judged
against and the method that decided it. The decision procedure, :func:`decide`, is the same
for every claim:

1. evaluate both sides in the working dtype and bound the rounding error (the tolerance);
   sides that are certified exactly (ranks from certificates) are compared as they are;
2. a margin clear of the tolerance is a float verdict; a violation is never reported from
   floating point alone;
3. otherwise re-decide in exact rationals or certified balls (``judge_exactly``); if even
   that cannot separate the sides, the answer is ``inconclusive``.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from fractions import Fraction
from typing import Any, ClassVar


class Status(StrEnum):
    """The three possible answers of a checker."""

    HOLDS = "holds"
    VIOLATED = "violated"
    INCONCLUSIVE = "inconclusive"


class Relation(StrEnum):
    """How the two sides of a claim compare."""

    AT_MOST = "<="
    EQUAL = "=="


class _Reproducible:
    """What every instance offers: its constructor family, its parameters, its vocabulary size
    and its JSON form ``{"family": ..., **params}`` (the contract of ``--json``)."""

    family: str
    params: dict[str, Any]

    @property
    def vocabulary(self) -> int | None:
        """The instance's vocabulary size: ``V``, or the columns of a log-probability matrix, or
        the order ``n`` of a transition matrix (``None`` for instances without one)."""
        for key in ("V", "columns", "n"):
            if isinstance(self.params.get(key), int):
                return self.params[key]
        return None

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, **self.params}


@dataclass(frozen=True)
class Instance(_Reproducible):
    """A reproducible instance given as a constructor family and a dict of parameters (the
    untyped form; a family's own cases are :class:`Case` dataclasses)."""

    family: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Case(_Reproducible):
    """Base of a family's typed cases. A subclass is a frozen dataclass whose fields are the
    parameters its constructor builds an instance from, and ``FAMILY`` names that constructor
    family in the JSON::

        @dataclass(frozen=True)
        class RunnerUp(Case):
            FAMILY: ClassVar[str] = "runner-up"
            V: int
            m: float
            tail_mass: float = 0.0
    """

    FAMILY: ClassVar[str] = ""

    @property
    def family(self) -> str:  # type: ignore[override]
        return self.FAMILY

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: Either form of an instance: the untyped Instance or a family's Case.
AnyInstance = Instance | Case


class Certification(StrEnum):
    """What certifies a verdict."""

    EXACT = "exact"  # integers or rationals: no rounding anywhere
    TWO_SIDED = "two-sided"  # balls, intervals, or a rounding-model margin on independently computed sides
    ONE_SIDED = "one-sided"  # a side bounded in one direction only (a float SVD bounds a rank from below)


@dataclass(frozen=True)
class Measurement:
    """Both sides of a claim in floating point, with the tolerance from the error model.

    ``exact_sides``: the sides are certified as they are and compare without a tolerance.
    ``certified_by`` says how (default: a rounding-model margin is two-sided; exact sides
    must say). A one-sided measurement can prove only the verdict named by ``proves``: a
    certified lower bound on a rank above b proves "rank <= b" violated, never that it holds."""

    lhs: float
    rhs: float
    tolerance: float
    method: str
    certificate: dict[str, Any] | None = None
    exact_sides: bool = False
    certified_by: Certification | None = None
    proves: Status | None = None

    def __post_init__(self) -> None:
        if self.certified_by is None and not self.exact_sides:
            object.__setattr__(self, "certified_by", Certification.TWO_SIDED)
        if (self.certified_by is Certification.ONE_SIDED) != (self.proves is not None):
            raise ValueError("a one-sided measurement names the one verdict it can prove (proves=...)")


@dataclass(frozen=True)
class Judgement:
    """Both sides re-decided exactly: ``sign`` is that of ``rhs - lhs`` (``None`` undecided).
    ``certified_by`` defaults to exact for a judgement without radius, else two-sided."""

    lhs: float
    rhs: float
    sign: int | None
    method: str
    radius: float = 0.0
    certificate: dict[str, Any] | None = None
    certified_by: Certification | None = None

    def __post_init__(self) -> None:
        if self.certified_by is None and self.sign is not None:
            kind = Certification.EXACT if self.radius == 0 else Certification.TWO_SIDED
            object.__setattr__(self, "certified_by", kind)


@dataclass(frozen=True)
class RankInterval:
    """A certified enclosure ``lo <= value <= hi`` of an integer quantity (a rank, or a difference
    of ranks), how each end was certified, and whether both ends are free of rounding (``exact``).
    :meth:`sides` turns it into the measurement and the judgement of a claim on that value, so
    every rank claim decides the same way: the end that can prove an answer proves it alone
    (one-sided), a point proves either (exact or two-sided), anything else is undecided."""

    lo: int
    hi: int
    lower: str
    upper: str
    exact: bool = False
    certificate: dict[str, Any] = field(default_factory=dict)
    #: When the ends contradict (lo > hi): decide nothing (the default), or keep trusting the lower
    #: end, which can still refute "value <= b" and "value == b" (for an upper end computed on a
    #: nearby matrix, such as the exactly normalised p̂ in place of the float p).
    trust_lower: bool = False

    @property
    def method(self) -> str:
        return f"rank in [{self.lo}, {self.hi}]: lower from {self.lower}; upper from {self.upper}"

    @property
    def pinned(self) -> bool:
        return self.lo == self.hi

    @property
    def kind(self) -> Certification:
        """What a verdict resting on these ends is certified by."""
        if not self.pinned:
            return Certification.ONE_SIDED
        return Certification.EXACT if self.exact else Certification.TWO_SIDED

    def json(self) -> dict[str, Any]:
        return {"rank_lower": self.lo, "rank_upper": self.hi, **self.certificate}

    def sides(self, bound: int, direction: str) -> tuple[Measurement, Judgement]:
        """The measurement and the judgement of "value <= b" (``direction`` "upper"), "b <= value"
        ("lower") or "value == b" ("equal"). Contradicting ends (lo > hi) decide nothing."""
        return self._measurement(bound, direction), self._judgement(bound, direction)

    def _measurement(self, bound: int, direction: str) -> Measurement:
        """A pinned value compares as it is; otherwise the one end that can decide does, proving only
        the answer it can. Contradicting ends, or an identity without a point, give NaN sides, which
        never clear a tolerance: the judgement says why."""
        if self.lo > self.hi:
            return Measurement(math.nan, math.nan, math.nan, f"{self.method}: the ends contradict", self.json())
        b = float(bound)
        if self.pinned:
            value = float(self.lo)
            lhs, rhs = (b, value) if direction == "lower" else (value, b)
            return Measurement(lhs, rhs, 0.0, self.method, self.json(), exact_sides=True, certified_by=self.kind)
        if direction == "upper":
            sides, proves = (float(self.lo), b), Status.VIOLATED
        elif direction == "lower":
            sides, proves = (b, float(self.lo)), Status.HOLDS
        else:
            return Measurement(math.nan, math.nan, math.nan, f"{self.method}: not a point", self.json())
        one_sided = Certification.ONE_SIDED
        return Measurement(*sides, 0.0, self.method, self.json(), True, one_sided, proves)

    def _judgement(self, bound: int, direction: str) -> Judgement:
        """The verdict the ends give on their own: ``sign`` of rhs - lhs, ``None`` when the interval
        straddles the bound or the ends contradict each other."""
        b, lo, hi, method = float(bound), float(self.lo), float(self.hi), self.method
        if self.lo > self.hi:
            if self.trust_lower and direction != "lower" and lo > b:
                why = f"{method}; the ends contradict, and the lower end alone gives lower > {bound}"
                return Judgement(lo, b, -1, why, certificate=self.json(), certified_by=Certification.ONE_SIDED)
            return Judgement(hi, lo, None, f"{method}: undecided, the certificates contradict", certificate=self.json())
        if direction == "upper":  # value <= b
            decided = [(hi, b, f"upper <= {bound}")] if hi <= b else [(lo, b, f"lower > {bound}")] if lo > b else []
        elif direction == "lower":  # b <= value
            decided = [(b, lo, f"lower >= {bound}")] if lo >= b else [(b, hi, f"upper < {bound}")] if hi < b else []
        else:  # value == b
            end = lo if lo > b else hi
            decided = (
                [(lo, b, "a point")] if self.pinned else [(end, b, f"excludes {bound}")] if lo > b or hi < b else []
            )
        if not decided:
            return Judgement(
                lo, b, None, f"{method}: undecided, the interval straddles {bound}", certificate=self.json()
            )
        lhs, rhs, why = decided[0]
        sign = (rhs > lhs) - (rhs < lhs)
        return Judgement(lhs, rhs, sign, f"{method}; {why}", certificate=self.json(), certified_by=self.kind)


@dataclass(frozen=True)
class Verdict:
    """The answer for one claim on one instance. ``margin`` is ``rhs - lhs``."""

    claim: str
    status: Status
    lhs: float
    rhs: float
    margin: float
    tolerance: float
    method: str
    instance: AnyInstance
    certificate: dict[str, Any] | None = None
    certified_by: Certification | None = None  # None: undecided, or a claim that does not say yet

    @property
    def relative_margin(self) -> float:
        """``margin`` over the larger side (for ranking instances and for ``target()``)."""
        scale = max(abs(self.lhs), abs(self.rhs))
        return self.margin / scale if scale > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "status": self.status.value,
            "lhs": _json_number(self.lhs),
            "rhs": _json_number(self.rhs),
            "margin": _json_number(self.margin),
            "tolerance": _json_number(self.tolerance),
            "method": self.method,
            "instance": self.instance.to_json(),
            "certificate": self.certificate,
            "certified_by": None if self.certified_by is None else self.certified_by.value,
        }


def _json_number(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


SEVERITY = {Status.HOLDS: 0, Status.INCONCLUSIVE: 1, Status.VIOLATED: 2}


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict, and among equals the one with the smallest relative margin."""
    return max(verdicts, key=lambda v: (SEVERITY[v.status], -abs(v.relative_margin)))


@dataclass(frozen=True)
class Claim:
    """A proposition with everything needed to build, check and search its instances.

    ``measure(instance, backend, factor)`` and ``judge_exactly(instance, factor)`` return
    both sides; ``factor`` multiplies the bound (the right side of an upper bound, the left
    side of a lower bound) for ``rankwall search --tighten``; for an identity it moves the stated
    side, a test hook only (:meth:`check_planted`). ``witnesses(V)`` lists the
    constructed instances at vocabulary size V; ``random_instances(V, n, seed)`` adds drawn
    ones; ``strategy()`` is the Hypothesis strategy that hunts counterexamples."""

    id: str
    title: str
    source: str
    statement: str
    domain: str
    relation: Relation
    bound: str | None
    measure: Callable[[AnyInstance, Any, Fraction], Measurement]
    judge_exactly: Callable[[AnyInstance, Fraction], Judgement]
    witnesses: Callable[[int], list[AnyInstance]]
    random_instances: Callable[[int, int, int], list[AnyInstance]]
    strategy: Callable[[], Any]
    mutants: dict[str, Claim] = field(default_factory=dict)
    array_api: bool = True  # False: the claim computes in NumPy whatever backend is asked for

    def with_mutant(self, name: str, statement: str, **changes: Any) -> Claim:
        """Plant a false variant ``id[name]`` of this claim (``rankwall search --mutant name``):
        the same claim with another statement and whichever fields the falsehood changes."""
        mutant = replace(self, id=f"{self.id}[{name}]", statement=statement, mutants={}, **changes)
        self.mutants[name] = mutant
        return mutant

    def check(self, instance: AnyInstance, backend: Any, factor: Fraction = Fraction(1)) -> Verdict:
        """Decide the claim on one instance (see the module docstring). A numerical failure of
        the backend (an eigensolver that does not converge, an overflow) leaves the instance
        undecided: the verdict is ``inconclusive`` and names the failure."""
        if factor != 1 and self.bound is None:
            raise ValueError(f"{self.id}: an identity has no bound to tighten")
        return self.check_planted(instance, backend, factor)

    def check_planted(self, instance: AnyInstance, backend: Any, factor: Fraction) -> Verdict:
        """:meth:`check` with the stated side moved by ``factor`` in every route, identities included:
        the meta-tests' hook for planting a wrong measured value. A bound is multiplied by F; the
        stated side of an identity is multiplied by F, or moved to :func:`planted_side` where it
        can be zero by its form (a count of failures, J·1 = 0)."""
        try:
            measured = self.measure(instance, backend, factor)
            return decide(self, instance, measured, lambda: self.judge_exactly(instance, factor))
        except Exception as error:
            if not is_numerical_failure(error):
                raise
            reason = f"{NUMERICAL_FAILURE}: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
            nan = math.nan
            return Verdict(self.id, Status.INCONCLUSIVE, nan, nan, nan, nan, reason, instance)


def planted_side(value: Any, factor: Fraction) -> Any:
    """The stated side v of an identity moved by F (the meta-tests' hook; F = 1 leaves it):
    F·(v + 1) − 1, which differs from v for every F ≠ 1 and v ≠ −1, so that a side that is zero by
    its form moves too. Exact for integers and Fractions (an integer stays one for an integer F);
    a float is moved in floating point."""
    if factor == 1:
        return value
    if isinstance(value, float):
        return float(factor) * (value + 1) - 1
    moved = factor * (value + 1) - 1
    return int(moved) if isinstance(value, int) and moved.denominator == 1 else moved


def tightened_integer_bound(bound: int, factor: Fraction, direction: str) -> int:
    """An integer bound b multiplied by ``factor`` for ``search --tighten``, kept strictly
    sharper than the real product: an upper bound "x <= b" becomes x <= ceil(F b) - 1 (for F < 1),
    a lower bound "x >= b" becomes x >= floor(F b) + 1 (for F > 1). F = 1 leaves b unchanged."""
    if factor == 1:
        return bound
    scaled = factor * bound
    if direction == "upper":
        return math.ceil(scaled) - 1
    if direction == "lower":
        return math.floor(scaled) + 1
    raise ValueError(f"direction: expected 'upper' or 'lower', got {direction!r}")


#: How the method of a verdict begins when the backend failed on the instance.
NUMERICAL_FAILURE = "numerical failure, undecided"


def is_numerical_failure(error: BaseException) -> bool:
    """An arithmetic failure of a backend rather than a bug: overflow, a floating-point trap, or a
    linear-algebra routine that did not converge (NumPy's, CuPy's and torch's ``LinAlgError``)."""
    if isinstance(error, OverflowError | FloatingPointError):
        return True
    return any(cls.__name__ in ("LinAlgError", "_LinAlgError") for cls in type(error).__mro__)


def decide(claim: Claim, instance: AnyInstance, measured: Measurement, judge: Callable[[], Judgement]) -> Verdict:
    """Float verdict when the margin clears the tolerance, else an exact judgement."""
    margin = measured.rhs - measured.lhs
    if measured.exact_sides:
        holds = margin >= 0 if claim.relation is Relation.AT_MOST else margin == 0
    elif claim.relation is Relation.AT_MOST:
        holds = margin > measured.tolerance
    else:
        holds = abs(margin) <= measured.tolerance
    found = Status.HOLDS if holds else Status.VIOLATED
    # A clear float margin proves "holds"; certified sides prove either answer, except that a
    # one-sided bound proves only the answer it names. Anything else goes to the exact judge.
    if measured.certified_by is Certification.ONE_SIDED:
        decisive = found is measured.proves and (measured.exact_sides or holds)
    else:
        decisive = holds
    if decisive:
        return Verdict(
            claim.id,
            found,
            measured.lhs,
            measured.rhs,
            margin,
            measured.tolerance,
            measured.method,
            instance,
            measured.certificate,
            measured.certified_by,
        )
    exact = judge()
    if exact.sign is None:
        status = Status.INCONCLUSIVE
    elif claim.relation is Relation.AT_MOST:
        status = Status.HOLDS if exact.sign >= 0 else Status.VIOLATED
    else:
        status = Status.HOLDS if exact.sign == 0 else Status.VIOLATED
    return Verdict(
        claim.id,
        status,
        exact.lhs,
        exact.rhs,
        exact.rhs - exact.lhs,
        exact.radius,
        exact.method,
        instance,
        exact.certificate,
        exact.certified_by,
    )


class Registry:
    """Claims keyed by dotted id (``family.name``), matched by shell-style patterns."""

    def __init__(self) -> None:
        self._claims: dict[str, Claim] = {}

    def register(self, claim: Claim) -> Claim:
        if claim.id in self._claims:
            raise ValueError(f"claim {claim.id!r} is registered twice")
        self._claims[claim.id] = claim
        return claim

    def __getitem__(self, claim_id: str) -> Claim:
        try:
            return self._claims[claim_id]
        except KeyError:
            known = ", ".join(sorted(self._claims))
            raise KeyError(f"unknown claim {claim_id!r}; known claims: {known}") from None

    def __iter__(self) -> Any:
        return iter(sorted(self._claims.values(), key=lambda c: c.id))

    def __len__(self) -> int:
        return len(self._claims)

    def match(self, patterns: Sequence[str]) -> list[Claim]:
        """Claims whose id matches any pattern (all claims when there is none)."""
        if not patterns:
            return list(self)
        return [c for c in self if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]


#: The registry every theory family registers its claims in (see :mod:`rankwall.checks.claims`).
REGISTRY = Registry()


class Family:
    """A family of claims (the part of a claim id before the dot) and the fields its claims
    share; :meth:`claim` builds a claim and registers it at once, so a family module needs no
    registration code and no list of its claims anywhere else."""

    def __init__(self, name: str, **defaults: Any) -> None:
        self.name = name
        self.defaults = defaults

    def claim(self, name: str, **fields: Any) -> Claim:
        """The claim ``<family>.<name>``: the family's defaults, overridden by ``fields``, registered."""
        return REGISTRY.register(Claim(id=f"{self.name}.{name}", **{**self.defaults, **fields}))

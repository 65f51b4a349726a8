"""Verdicts, cases, claims and the registry of claims.

A :class:`Claim` is a proposition of the form ``lhs <= rhs`` or ``lhs == rhs`` over a family
of cases (:class:`Case`). Checking one case gives a :class:`Verdict` -- ``holds``, ``violated`` or
``inconclusive`` -- with both sides, the margin ``rhs - lhs``, the tolerance it was judged
against, the method that decided it and what certifies that decision. The decision procedure,
:func:`decide`, is the same for every claim:

1. evaluate both sides in the working dtype and bound the rounding error (the tolerance);
   sides that are certified exactly (ranks from certificates) are compared as they are;
2. a margin clear of the tolerance proves "holds"; a violation is never reported from a float
   margin alone, unless the measurement certifies both of its sides (a two-sided enclosure);
3. otherwise re-decide in exact rationals or certified balls (``judge_exactly``); if even
   that cannot separate the sides, the answer is ``inconclusive``.

A case whose built values leave the domain its constructor guarantees is no instance of a claim:
building it raises :class:`OutsideDomain`, which the search rejects and ``verify`` counts apart,
never as a counterexample.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from fractions import Fraction
from typing import Any, ClassVar

from rankwall.errors import CannotTighten, OutsideDomain  # re-exported: the classes live in rankwall.errors
from rankwall.theory.validation import InputError


class Status(StrEnum):
    """The three possible answers of a checker."""

    HOLDS = "holds"
    VIOLATED = "violated"
    INCONCLUSIVE = "inconclusive"


class Relation(StrEnum):
    """How the two sides of a claim compare: ``lhs <= rhs``, ``lhs >= rhs`` or ``lhs == rhs``."""

    AT_MOST = "<="
    AT_LEAST = ">="
    EQUAL = "=="

    def slack(self, lhs: float, rhs: float) -> float:
        """How far the sides are from breaking the relation: ``rhs - lhs`` for ``<=`` and ``==`` (zero
        for an identity that holds), ``lhs - rhs`` for ``>=``. A claim holds where its slack is
        nonnegative (zero for an identity)."""
        return lhs - rhs if self is Relation.AT_LEAST else rhs - lhs

    @property
    def is_bound(self) -> bool:
        return self is not Relation.EQUAL

    @property
    def direction(self) -> str | None:
        """The kind of bound the right side is, as the JSON and the tables name it: ``"upper"`` for
        ``<=``, ``"lower"`` for ``>=``, ``None`` for an identity (a derived name, not a second vocabulary)."""
        return {Relation.AT_MOST: "upper", Relation.AT_LEAST: "lower", Relation.EQUAL: None}[self]


class Case:
    """Base of every family's typed cases: a frozen dataclass whose fields are the parameters its
    constructor builds an instance from. ``KIND`` names that constructor in the JSON, and every case
    type registers itself under it (:data:`CASE_TYPES`), so that :func:`case_from_json` rebuilds any
    case from its JSON form ``{"case": KIND, **params}``::

        @dataclass(frozen=True)
        class RunnerUp(Case):
            KIND: ClassVar[str] = "runner-up"
            V: int
            m: float
            tail_mass: float = 0.0
    """

    KIND: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("KIND")
        if kind:
            known = CASE_TYPES.get(kind)
            if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
                raise ValueError(f"case kind {kind!r} is taken by {known.__module__}.{known.__qualname__}")
            CASE_TYPES[kind] = cls

    @property
    def params(self) -> dict[str, Any]:
        """The constructor's parameters (every dataclass field)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @property
    def vocabulary(self) -> int | None:
        """The case's vocabulary size: ``V``, or the columns of a log-probability matrix, or the
        order ``n`` of a transition matrix (``None`` for cases without one)."""
        for key in ("V", "columns", "n"):
            if isinstance(self.params.get(key), int):
                return self.params[key]
        return None

    def to_json(self) -> dict[str, Any]:
        return {"case": self.KIND, **self.params}


#: Every case type by its ``KIND`` (filled as the family modules are imported).
CASE_TYPES: dict[str, type[Case]] = {}


def case_from_json(data: dict[str, Any]) -> Case:
    """The case that ``data`` describes: a case's :meth:`Case.to_json`, the ``instance`` of a
    verdict's JSON, or :func:`exact_json`'s form, where a float is written ``{"rational": "p/q"}``.
    An unknown kind or parameter is an :class:`InputError`."""
    load_shipped_families()  # registers the shipped case types

    if not isinstance(data, dict) or not isinstance(data.get("case"), str):
        raise InputError(f"case: expected an object with a 'case' kind, got {str(data)[:80]!r}")
    kind = data["case"]
    if kind not in CASE_TYPES:
        raise InputError(f"case: unknown kind {kind!r}; known kinds: {', '.join(sorted(CASE_TYPES))}")
    cls = CASE_TYPES[kind]
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    params = {k: _read_exact(v, k) for k, v in data.items() if k != "case"}
    unknown = sorted(set(params) - names)
    if unknown:
        raise InputError(f"case: {kind} has no parameter {unknown[0]!r} (its parameters: {', '.join(sorted(names))})")
    try:
        return cls(**params)
    except TypeError as error:
        raise InputError(f"case: cannot build {kind} from {params}: {error}") from None


def exact_json(case: Case) -> dict[str, Any]:
    """:meth:`Case.to_json` with every finite float written exactly, ``{"rational": "p/q", "float":
    repr}``, so that the file means the same numbers whatever reads it."""

    def written(value: Any) -> Any:
        if isinstance(value, float) and math.isfinite(value):
            return {"rational": str(Fraction(value)), "float": repr(value)}
        return value

    return {k: written(v) for k, v in case.to_json().items()}


def _read_exact(value: Any, name: str) -> Any:
    """A parameter of :func:`exact_json`'s form: ``{"rational": "p/q"}`` is the float p/q, exactly."""
    if isinstance(value, dict) and "rational" in value and set(value) <= {"rational", "float"}:
        try:
            q = Fraction(value["rational"])
        except (TypeError, ValueError, ZeroDivisionError):
            raise InputError(f"case: parameter {name}: {value['rational']!r} is not a rational") from None
        if float(q) != q:
            raise InputError(f"case: parameter {name} = {value['rational']} is not exactly a float")
        return float(q)
    return value


class Certification(StrEnum):
    """What certifies a verdict."""

    EXACT = "exact"  # integers or rationals: no rounding anywhere
    TWO_SIDED = "two-sided"  # balls, intervals, or a rounding-model margin on independently computed sides
    #: An identity whose two sides agree to within their rounding bound (or the radius of their balls):
    #: consistent with equality, not a proof of it. The verdict's ``tolerance`` is that bound.
    WITHIN_ROUNDING = "within rounding"
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
    """Both sides re-decided exactly: ``sign`` is that of the relation's slack (``rhs - lhs``, or
    ``lhs - rhs`` for ``>=``; ``None`` undecided).
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


#: The largest integer magnitude below which every integer is a float64 (2^53): an integer side beyond
#: it is compared as a Python integer, never through its rounded float.
FLOAT64_EXACT_INTEGERS = 2**53


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

    def sides(self, stated: int, relation: Relation) -> tuple[Measurement, Judgement]:
        """The measurement and the judgement of "value <= b" (``Relation.AT_MOST``: b is an upper
        bound), "value >= b" (``AT_LEAST``) or "value == b" (``EQUAL``), for the stated integer b.
        Contradicting ends (lo > hi) decide nothing."""
        relation = Relation(relation)
        return self._measurement(stated, relation), self._judgement(stated, relation)

    def _measurement(self, stated: int, relation: Relation) -> Measurement:
        """A pinned value compares as it is; otherwise the one end that can decide does, proving only
        the answer it can. Contradicting ends, or an identity without a point, give NaN sides, which
        never clear a tolerance: the judgement says why."""
        if self.lo > self.hi:
            return Measurement(math.nan, math.nan, math.nan, f"{self.method}: the ends contradict", self.json())
        if max(abs(stated), abs(self.lo), abs(self.hi)) > FLOAT64_EXACT_INTEGERS:
            why = "integers beyond float64's exact range (2^53): compared exactly by the judgement"
            return Measurement(math.nan, math.nan, math.nan, f"{self.method}: {why}", self.json())
        b = float(stated)
        if self.pinned:
            value = float(self.lo)
            lhs, rhs = (b, value) if relation is Relation.AT_LEAST else (value, b)
            return Measurement(lhs, rhs, 0.0, self.method, self.json(), exact_sides=True, certified_by=self.kind)
        if relation is Relation.AT_MOST:
            sides, proves = (float(self.lo), b), Status.VIOLATED
        elif relation is Relation.AT_LEAST:
            sides, proves = (b, float(self.lo)), Status.HOLDS
        else:
            return Measurement(math.nan, math.nan, math.nan, f"{self.method}: not a point", self.json())
        one_sided = Certification.ONE_SIDED
        return Measurement(*sides, 0.0, self.method, self.json(), True, one_sided, proves)

    def _judgement(self, stated: int, relation: Relation) -> Judgement:
        """The verdict the ends give on their own: ``sign`` of rhs - lhs, ``None`` when the interval
        straddles the stated value or the ends contradict each other."""
        # compared as Python integers (exact at any size), reported as floats
        b, lo, hi, method = stated, self.lo, self.hi, self.method
        if self.lo > self.hi:
            if self.trust_lower and relation is not Relation.AT_LEAST and lo > b:
                why = f"{method}; the ends contradict, and the lower end alone gives lower > {stated}"
                return Judgement(
                    float(lo), float(b), -1, why, certificate=self.json(), certified_by=Certification.ONE_SIDED
                )
            why = f"{method}: undecided, the certificates contradict"
            return Judgement(float(hi), float(lo), None, why, certificate=self.json())
        if relation is Relation.AT_MOST:  # value <= b
            decided = [(hi, b, f"upper <= {stated}")] if hi <= b else [(lo, b, f"lower > {stated}")] if lo > b else []
        elif relation is Relation.AT_LEAST:  # b <= value
            decided = [(b, lo, f"lower >= {stated}")] if lo >= b else [(b, hi, f"upper < {stated}")] if hi < b else []
        else:  # value == b
            end = lo if lo > b else hi
            decided = (
                [(lo, b, "a point")] if self.pinned else [(end, b, f"excludes {stated}")] if lo > b or hi < b else []
            )
        if not decided:  # the lower end against b, in the relation's order of sides
            sides = (b, lo) if relation is Relation.AT_LEAST else (lo, b)
            return Judgement(
                float(sides[0]),
                float(sides[1]),
                None,
                f"{method}: undecided, the interval straddles {stated}",
                certificate=self.json(),
            )
        lhs, rhs, why = decided[0]
        sign = (rhs > lhs) - (rhs < lhs)
        return Judgement(
            float(lhs), float(rhs), sign, f"{method}; {why}", certificate=self.json(), certified_by=self.kind
        )


@dataclass(frozen=True)
class Verdict:
    """The answer for one claim on one case, its sides as the claim writes them. ``margin`` is the
    relation's slack: ``rhs - lhs`` for ``<=`` and ``==``, ``lhs - rhs`` for ``>=``."""

    claim: str
    status: Status
    lhs: float
    rhs: float
    margin: float
    tolerance: float
    method: str
    instance: Case
    certificate: dict[str, Any] | None = None
    certified_by: Certification | None = None  # None: undecided

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


#: The vocabulary size a claim is checked at by default (``rankwall verify`` without ``--V``).
DEFAULT_V = 1024


@dataclass(frozen=True)
class Claim:
    """A proposition with everything needed to build, check and search its cases.

    A claim is declared (:func:`rankwall.checks.engine.quantities.declare`): ``sides`` is ``lhs <relation>
    rhs`` over quantities of its family, and every case is decided on one :class:`Context
    <rankwall.checks.engine.quantities.Context>` (the case as the backend built it, read exactly) by
    :func:`~rankwall.checks.engine.quantities.measurement_of`, :func:`~rankwall.checks.engine.quantities.judgement_of`
    and :func:`decide`. ``measure(case, backend, factor)``, ``judge_exactly(case, factor)`` and
    ``reference(case, backend)`` are the same routes on a fresh context (``factor`` multiplies the
    bound for ``rankwall search --tighten``; for an identity it moves the stated side, a test hook only:
    :meth:`check_planted`). ``direction`` says which kind of bound an inequality states (``"upper"``
    for ``<=``, ``"lower"`` for ``>=``; ``None`` for an identity). ``witnesses(V)`` lists the
    constructed cases at vocabulary size V; ``random_instances(V, n, seed)`` adds drawn ones;
    ``strategy()`` is the Hypothesis strategy that hunts counterexamples; ``hypothesis(case)`` says why
    a case lies outside the claim's domain (``None`` inside). ``origin`` names where a claim declared
    outside the package was loaded from (a file or a module; ``None`` for a shipped claim)."""

    id: str
    title: str
    source: str
    statement: str
    domain: str
    relation: Relation
    witnesses: Callable[[int], list[Case]]
    random_instances: Callable[[int, int, int], list[Case]]
    strategy: Callable[[], Any]
    sides: Any = None  # rankwall.checks.engine.quantities.Sides
    mutants: dict[str, Claim] = field(default_factory=dict)
    array_api: bool = True  # False: the claim computes in NumPy whatever backend is asked for
    origin: str | None = None
    #: The vocabulary size ``verify`` checks the claim at when no ``--V`` is given: smaller than
    #: :data:`DEFAULT_V` for a claim whose witnesses are expensive (an LP per token, a dense SVD), so
    #: that the default run stays short while keeping the witnesses' boundary cases.
    default_V: int = DEFAULT_V
    #: The boundary classes of the claim's strategy (see :class:`rankwall.checks.engine.toolkit.Cases`).
    boundary_classes: dict[str, Callable[[Case], bool]] = field(default_factory=dict)
    #: Peak bytes per vocabulary entry of one of its instances (its cases' ``bytes_per_entry``), for the
    #: memory admission of ``verify``; None: the runner's default.
    bytes_per_entry: int | None = None
    #: The sides the exact route decides (the declared ones, or a user's ``judge`` in their place).
    judged_sides: Any = None
    #: Why a case lies outside the claim's domain, or ``None`` inside it.
    hypothesis: Callable[[Case], str | None] | None = None

    def __post_init__(self) -> None:
        if self.sides is None:
            raise ValueError(f"{self.id}: a claim is declared over quantities (rankwall.declare)")

    @property
    def direction(self) -> str | None:
        """The kind of bound the claim states, derived from its relation (:attr:`Relation.direction`)."""
        return self.relation.direction

    @property
    def is_mutant(self) -> bool:
        """Whether this is a planted false variant ``parent[name]`` of a claim."""
        return self.id.endswith("]") and "[" in self.id

    def with_mutant(self, name: str, statement: str, **changes: Any) -> Claim:
        """Plant a false variant ``id[name]`` of this claim (``rankwall search --mutant name``): the same
        claim with another statement and new sides (``lhs=``, ``rhs=``, ``relation=``), other cases
        (``cases=``, a :class:`~rankwall.checks.engine.toolkit.Cases`), or other fields."""
        if "cases" in changes:
            changes = {**changes.pop("cases").fields(), **changes}
        side_changes = {k: changes.pop(k) for k in ("lhs", "relation", "rhs") if k in changes}
        if side_changes:
            from rankwall.checks.engine.quantities import mutated_fields

            changes = {**mutated_fields(self, **side_changes), **changes}
        mutant = replace(self, id=f"{self.id}[{name}]", statement=statement, mutants={}, **changes)
        self.mutants[name] = mutant
        return mutant

    def require_bound(self, factor: Fraction) -> None:
        """Refuse a factor other than 1 on an identity, which has no bound to tighten."""
        if factor != 1 and self.direction is None:
            raise CannotTighten(f"--tighten: {self.id} is an identity, it has no bound to tighten")

    # the routes on one context ------------------------------------------------------------------
    def context(self, case: Case, backend: Any) -> Any:
        """The context a case is decided on; a case outside the claim's hypothesis raises
        :class:`OutsideDomain`."""
        from rankwall.checks.engine.quantities import Context

        reason = self.hypothesis(case) if self.hypothesis is not None else None
        if reason is not None:
            raise OutsideDomain(f"{self.id}: {reason}")
        return Context(case, backend)

    def measure(self, case: Case, backend: Any, factor: Fraction = Fraction(1)) -> Measurement:
        """Both sides measured in the backend, with their rounding bound as the tolerance."""
        from rankwall.checks.engine.quantities import measurement_of

        return measurement_of(self.sides, self.context(case, backend), factor)

    def judge_exactly(self, case: Case, factor: Fraction = Fraction(1), backend: Any = None) -> Judgement:
        """Both sides re-decided on the exact instance (built in ``backend``, NumPy float64 by default)."""
        from rankwall.checks.engine.quantities import judgement_of
        from rankwall.checks.engine.toolkit import numpy_float64

        return judgement_of(self.judged_sides or self.sides, self.context(case, backend or numpy_float64()), factor)

    def reference(self, case: Case, backend: Any) -> Any:
        """Both sides the slow, obviously right way (:class:`rankwall.checks.engine.toolkit.Reference`), as
        written, or ``None`` where a side has no reference."""
        from rankwall.checks.engine.quantities import reference_of
        from rankwall.checks.engine.toolkit import Reference

        lhs, rhs = reference_of(self.sides, self.context(case, backend))
        if lhs is None or rhs is None:
            return None
        return Reference(lhs, rhs, f"references of {self.sides}")

    def check(
        self, instance: Case, backend: Any, factor: Fraction = Fraction(1), *, exact: bool | None = None
    ) -> Verdict:
        """Decide the claim on one case (see the module docstring and :func:`decide`; ``exact=False``
        forbids the exact re-decision of an identity that holds to rounding, which is then
        inconclusive). A numerical failure of the backend (an eigensolver that does not converge, an
        overflow) leaves the case undecided: the verdict is ``inconclusive`` and names the failure."""
        self.require_bound(factor)
        return self.check_planted(instance, backend, factor, exact=exact)

    def check_planted(self, instance: Case, backend: Any, factor: Fraction, *, exact: bool | None = None) -> Verdict:
        """:meth:`check` with the stated side moved by ``factor`` in every route, identities included:
        the meta-tests' hook for planting a wrong measured value. A bound is multiplied by F; the
        stated side of an identity v is moved to F(v + 1) - 1, which moves a side that is zero by its
        form too. Both routes read one context: one exact instance."""
        from rankwall.checks.engine.quantities import judgement_of, measurement_of

        ctx = self.context(instance, backend)
        try:
            measured = measurement_of(self.sides, ctx, factor)
            sides = self.judged_sides or self.sides
            return decide(self, instance, measured, lambda: judgement_of(sides, ctx, factor), exact)
        except Exception as error:
            if not is_numerical_failure(error):
                raise
            reason = f"{NUMERICAL_FAILURE}: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
            nan = math.nan
            return Verdict(self.id, Status.INCONCLUSIVE, nan, nan, nan, nan, reason, instance)


def tightened_integer_bound(bound: int, factor: Fraction, relation: Relation) -> int:
    """An integer bound b multiplied by ``factor`` for ``search --tighten``, kept strictly
    sharper than the real product: an upper bound "x <= b" becomes x <= ceil(F b) - 1 (for F < 1),
    a lower bound "x >= b" becomes x >= floor(F b) + 1 (for F > 1). F = 1 leaves b unchanged."""
    if factor == 1:
        return bound
    scaled = factor * bound
    if relation is Relation.AT_MOST:
        return math.ceil(scaled) - 1
    if relation is Relation.AT_LEAST:
        return math.floor(scaled) + 1
    raise ValueError(f"relation: an identity has no bound to tighten, got {relation!r}")


#: How the method of a verdict begins when the backend failed on the instance.
NUMERICAL_FAILURE = "numerical failure, undecided"


def is_numerical_failure(error: BaseException) -> bool:
    """An arithmetic failure of a backend rather than a bug: overflow, a floating-point trap, or a
    linear-algebra routine that did not converge (NumPy's, CuPy's and torch's ``LinAlgError``)."""
    if isinstance(error, OverflowError | FloatingPointError):
        return True
    return any(cls.__name__ in ("LinAlgError", "_LinAlgError") for cls in type(error).__mro__)


def decide(
    claim: Claim, instance: Case, measured: Measurement, judge: Callable[[], Judgement], exact: bool | None = None
) -> Verdict:
    """Float verdict when the margin clears the tolerance, else an exact judgement.

    An identity is decided as an identity: a float margin inside its tolerance only shows the sides
    equal to rounding, so the exact judge re-decides it (unless ``exact`` is false). Exact equality
    holds with the judge's certification and a certified difference is a violation; sides whose exact
    evaluations agree only to a positive radius, or whose float sides agree where no exact route runs,
    are *equal within rounding*: consistent with equality, not a proof of it, so the verdict is
    ``inconclusive`` (certification :attr:`Certification.WITHIN_ROUNDING`, with that radius as the
    tolerance), never ``holds``."""
    relation = claim.relation
    slack = relation.slack(measured.lhs, measured.rhs)
    if measured.exact_sides:
        holds = slack >= 0 if relation.is_bound else slack == 0
    elif relation.is_bound:
        holds = slack > measured.tolerance
    else:
        holds = abs(slack) <= measured.tolerance
    found = Status.HOLDS if holds else Status.VIOLATED
    # A clear float margin proves "holds"; certified sides prove either answer, except that a
    # one-sided bound proves only the answer it names. Anything else goes to the exact judge.
    if measured.certified_by is Certification.ONE_SIDED:
        decisive = found is measured.proves and (measured.exact_sides or holds)
    else:
        decisive = holds
    to_rounding = decisive and not relation.is_bound and not measured.exact_sides
    if decisive and not to_rounding:
        return _verdict(claim, instance, found, measured, measured.tolerance, measured.certified_by)
    if to_rounding and exact is False:
        return _within_rounding(claim, instance, measured, measured.tolerance, "the exact re-decision was not asked")
    judged = judge()
    if judged.sign is None:
        if not relation.is_bound and 0 < judged.radius < math.inf:
            return _within_rounding(claim, instance, judged, judged.radius, "the exact sides overlap")
        if to_rounding:
            return _within_rounding(claim, instance, measured, measured.tolerance, "no exact route decided")
        status = Status.INCONCLUSIVE
    elif relation.is_bound:
        status = Status.HOLDS if judged.sign >= 0 else Status.VIOLATED
    else:
        status = Status.HOLDS if judged.sign == 0 else Status.VIOLATED
    return _verdict(claim, instance, status, judged, judged.radius, judged.certified_by)


def _within_rounding(claim: Claim, instance: Case, sides: Measurement | Judgement, bound: float, why: str) -> Verdict:
    """An identity whose sides agree to within ``bound`` and were not shown equal: inconclusive."""
    method = f"{sides.method} (equal within rounding: the sides agree to within {bound:.1e}, not shown equal; {why})"
    shown = replace(sides, method=method)
    return _verdict(claim, instance, Status.INCONCLUSIVE, shown, bound, Certification.WITHIN_ROUNDING)


def _verdict(
    claim: Claim,
    instance: Case,
    status: Status,
    sides: Measurement | Judgement,
    tolerance: float,
    certified_by: Certification | None,
) -> Verdict:
    return Verdict(
        claim.id,
        status,
        sides.lhs,
        sides.rhs,
        claim.relation.slack(sides.lhs, sides.rhs),
        tolerance,
        sides.method,
        instance,
        sides.certificate,
        certified_by,
    )


#: A claim id: dotted segments (``family.name``) of letters, digits, ``_`` and ``-``; shell patterns,
#: the mutant lookup ``id[name]`` and the README's claims table rely on it.
CLAIM_ID = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+")


def check_claim_id(claim_id: Any) -> str:
    """``claim_id`` if it is a claim id (:data:`CLAIM_ID`), else an :class:`InputError` naming it."""
    if not isinstance(claim_id, str) or not CLAIM_ID.fullmatch(claim_id):
        raise InputError(f"id: a claim id is dotted, family.name, of letters, digits, '_' and '-', got {claim_id!r}")
    return claim_id


def _declared_at() -> str:
    """Where the declaration being registered was written: the innermost caller outside rankwall."""
    import os
    import traceback

    import rankwall
    import rankwall.theory

    folders = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (rankwall, rankwall.theory))
    folders += (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)  # checks/
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = os.path.abspath(frame.filename)
        if not path.startswith(folders) and not frame.filename.startswith("<"):
            return f"{frame.filename}, line {frame.lineno}"
    return "inside rankwall"


class Registry:
    """Claims keyed by dotted id (``family.name``), matched by shell-style patterns; a mutant is
    looked up as ``id[name]``. ``load``, if given, is called once, on the first read (not on a
    registration): :data:`REGISTRY` imports the shipped families then, so no reader imports them first."""

    def __init__(self, load: Callable[[], None] | None = None) -> None:
        self._claims: dict[str, Claim] = {}
        self._load = load

    @property
    def _loaded(self) -> dict[str, Claim]:
        if self._load is not None:
            load, self._load = self._load, None  # before the call: a family may read the registry
            load()
        return self._claims

    def register(self, claim: Claim) -> Claim:
        check_claim_id(claim.id)
        if claim.id in self._claims:
            raise InputError(f"id: the claim {claim.id!r} is declared twice ({_declared_at()})")
        self._claims[claim.id] = claim
        return claim

    def unregister(self, claim_id: str) -> None:
        self._claims.pop(claim_id, None)

    def __contains__(self, claim_id: str) -> bool:
        return claim_id in self._loaded

    def __getitem__(self, claim_id: str) -> Claim:
        """The claim ``claim_id``, or its mutant for ``id[name]``."""
        parent, _, mutant = claim_id.partition("[")
        if mutant and claim_id.endswith("]") and parent in self._loaded:
            claim = self._claims[parent]
            name = mutant[:-1]
            if name not in claim.mutants:
                known = ", ".join(sorted(claim.mutants)) or "none"
                raise KeyError(f"{parent} has no mutant {name!r} (its mutants: {known})")
            return claim.mutants[name]
        try:
            return self._loaded[claim_id]
        except KeyError:
            known = ", ".join(sorted(self._claims))
            raise KeyError(f"unknown claim {claim_id!r}; known claims: {known}") from None

    def __iter__(self) -> Iterator[Claim]:
        return iter(sorted(self._loaded.values(), key=lambda c: c.id))

    def __len__(self) -> int:
        return len(self._loaded)

    def match(self, patterns: Sequence[str]) -> list[Claim]:
        """Claims whose id matches any pattern (all claims when there is none)."""
        if not patterns:
            return list(self)
        return [c for c in self if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]


def load_shipped_families() -> None:
    """Import every shipped family module (:mod:`rankwall.checks.claims`), which registers its claims
    and case types: discovery by name, the engine's one import of the layer above it."""
    import rankwall.checks.claims  # noqa: F401


#: The registry every family registers its claims in (see :mod:`rankwall.checks.claims`); the shipped
#: families are imported on its first read.
REGISTRY = Registry(load=load_shipped_families)

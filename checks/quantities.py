"""Quantities of a case: the sides of a claim a user declares (:func:`declare`).

A :class:`Quantity` is a function of a case that rankwall knows how to evaluate twice over:

- *measured* in the backend's floating point, as a :class:`Measured` value with a bound on its
  distance from the exact quantity (the rounding model of :mod:`rankwall.checks.tolerance`; the
  user never writes a gamma), or, for an integer quantity such as a rank, as a certified interval
  (:class:`~rankwall.checks.verdict.RankInterval`);
- *exactly*, on the exact instance (the built floats read as rationals, or a softmax in ball
  arithmetic), as a python-flint rational or a ball at the working precision.

Quantities combine with ``+ - * /``, numbers and :func:`minimum`/:func:`maximum`; a combination is
measured by propagating the error bounds (each operation adds the float64 rounding of its result)
and evaluated exactly by combining the exact values. A family module defines its base quantities
with :func:`quantity`; a number such as ``1.9`` stands for the rational its shortest decimal names
(19/10), so that a claim's constant means what its author wrote.

Deciding ``lhs <= rhs``, ``lhs >= rhs`` or ``lhs == rhs`` follows :func:`rankwall.checks.verdict.decide`:
a float margin beyond the sum of both error bounds proves the claim; anything else is re-decided
exactly, in rationals where both sides are rational, else in balls at 128, 512 and 2048 bits. A base
quantity may offer an exact *comparison* with a number (the spectral norm of J compares with a
rational through the sign of its secular function), which decides equalities that balls cannot.
A side without an exact evaluation is re-decided by its two-sided float64 margin alone (beyond
its error bound in either direction), which certifies a violation just as it certifies a hold.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint

from rankwall.checks import exact
from rankwall.checks.verdict import (
    Certification,
    Claim,
    Judgement,
    Measurement,
    RankInterval,
    Relation,
    tightened_integer_bound,
)
from rankwall.theory._rounding import gamma, smallest_normal, unit_roundoff
from rankwall.theory.validation import InputError

#: Unit roundoff of the float64 arithmetic that combines measured values (whatever the backend's dtype).
U64 = unit_roundoff("float64")
#: Absolute error a float64 product or quotient may lose to underflow (below the normal range).
UNDERFLOW64 = smallest_normal("float64")


@dataclass(frozen=True)
class Measured:
    """A float ``value`` within ``error`` of the exact quantity: ``|value - exact| <= error``. An
    infinite or NaN ``error`` says that the float route cannot bound it (the exact route decides)."""

    value: float
    error: float

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.value) and math.isfinite(self.error)


class Context:
    """One case on one backend, with a cache that the quantities evaluated on it share (the case is
    built once for both sides)."""

    def __init__(self, case: Any, backend: Any) -> None:
        self.case = case
        self.backend = backend
        self._cache: dict[Hashable, Any] = {}

    def once(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()`` the first time ``key`` is asked for, the remembered value afterwards."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]


#: An exact value: a python-flint rational or a ball at the working precision.
Exact = Any


@dataclass(frozen=True)
class Compared:
    """What a comparison hook decided: the sign of (quantity − t), how, and whether exactly (rationals,
    structure) or two-sided (balls)."""

    sign: int
    method: str
    exact: bool


class Quantity:
    """A real or integer function of a case, measured with a rounding bound and evaluated exactly
    (see the module docstring). Subclasses: :class:`Base`, :class:`Constant`, :class:`Combination`.
    An integer quantity is measured, and evaluated exactly, as a certified interval
    (:class:`~rankwall.checks.verdict.RankInterval`)."""

    integer: bool = False

    def measure(self, ctx: Context) -> Measured | RankInterval:
        raise NotImplementedError

    def exact(self, ctx: Context) -> Exact | RankInterval | None:
        """The exact value at the current precision (an interval for an integer quantity), or ``None``
        where there is no exact route."""
        raise NotImplementedError

    def bases(self) -> list[Base]:
        """The base quantities this one is built from."""
        raise NotImplementedError

    @property
    def array_api(self) -> bool:
        """Whether every base quantity follows the backend it is measured on."""
        return all(b.follows_backend for b in self.bases())

    # arithmetic -----------------------------------------------------------------------------
    def __add__(self, other: Any) -> Quantity:
        return Combination("+", (self, as_quantity(other)))

    def __radd__(self, other: Any) -> Quantity:
        return Combination("+", (as_quantity(other), self))

    def __sub__(self, other: Any) -> Quantity:
        return Combination("-", (self, as_quantity(other)))

    def __rsub__(self, other: Any) -> Quantity:
        return Combination("-", (as_quantity(other), self))

    def __mul__(self, other: Any) -> Quantity:
        return Combination("*", (self, as_quantity(other)))

    def __rmul__(self, other: Any) -> Quantity:
        return Combination("*", (as_quantity(other), self))

    def __truediv__(self, other: Any) -> Quantity:
        return Combination("/", (self, as_quantity(other)))

    def __rtruediv__(self, other: Any) -> Quantity:
        return Combination("/", (as_quantity(other), self))

    def __neg__(self) -> Quantity:
        return Combination("-", (Constant(Fraction(0)), self))

    def __pow__(self, power: int) -> Quantity:
        if isinstance(power, bool) or not isinstance(power, int) or power < 1:
            raise InputError(f"power: a quantity is raised to a positive integer power, got {power!r}")
        result: Quantity = self
        for _ in range(power - 1):
            result = result * self
        return result

    def __bool__(self) -> bool:
        raise TypeError("a quantity has no truth value: compare it in a claim (rankwall.declare)")


@dataclass(frozen=True, eq=False)
class Base(Quantity):
    """A quantity a family defines: ``measure(ctx)`` gives a :class:`Measured` (or, for an integer
    quantity, a :class:`~rankwall.checks.verdict.RankInterval`), ``exact(ctx)`` a rational or a ball
    at the current precision (or ``None``), and ``compare(ctx, t, expression)`` the exact sign of
    (quantity - t) for the exact value t of ``expression``, or ``None`` where it cannot decide."""

    name: str
    measure_fn: Callable[[Context], Measured | RankInterval]
    exact_fn: Callable[[Context], Exact | None] | None = None
    compare_fn: Callable[[Context, Exact, Quantity], Compared | None] | None = None
    integer: bool = False
    follows_backend: bool = True
    doc: str = ""

    def measure(self, ctx: Context) -> Measured | RankInterval:
        return ctx.once(("measure", id(self)), lambda: self.measure_fn(ctx))

    def exact(self, ctx: Context) -> Exact | RankInterval | None:
        if self.exact_fn is None:
            return None
        return ctx.once(("exact", id(self), flint.ctx.prec), lambda: self.exact_fn(ctx))

    def compare(self, ctx: Context, t: Exact, expression: Quantity) -> Compared | None:
        """sign(quantity − t) for the other side's exact value ``t``, which ``expression`` computes (a hook
        may read the expression's structure, where no finite precision separates two equal sides), with
        how it was decided and whether that was exact."""
        return None if self.compare_fn is None else self.compare_fn(ctx, t, expression)

    def bases(self) -> list[Base]:
        return [self]

    def __str__(self) -> str:
        return self.name


def quantity(
    name: str,
    measure: Callable[[Context], Measured | RankInterval],
    exact: Callable[[Context], Exact | None] | None = None,
    *,
    compare: Callable[[Context, Exact, Quantity], Compared | None] | None = None,
    integer: bool = False,
    follows_backend: bool = True,
    doc: str = "",
) -> Base:
    """A base quantity named ``name`` (how it prints in a statement and a method), see :class:`Base`.
    ``follows_backend`` is false for a quantity computed in NumPy float64 whatever backend is asked."""
    return Base(name, measure, exact, compare, integer, follows_backend, doc)


@dataclass(frozen=True, eq=False)
class Constant(Quantity):
    """An exact rational constant."""

    value: Fraction

    @property
    def integer(self) -> bool:  # type: ignore[override]
        return self.value.denominator == 1

    def measure(self, ctx: Context) -> Measured | RankInterval:
        if self.integer:
            n = int(self.value)
            return RankInterval(n, n, "a constant", "a constant", exact=True)
        value = float(self.value)
        return Measured(value, abs(value - self.value) if value != self.value else 0.0)

    def exact(self, ctx: Context) -> Exact | RankInterval:
        return self.measure(ctx) if self.integer else exact.fmpq_of(self.value)

    def bases(self) -> list[Base]:
        return []

    def __str__(self) -> str:
        decimal = repr(float(self.value))
        return decimal.removesuffix(".0") if Fraction(decimal) == self.value else str(self.value)


def as_quantity(x: Any) -> Quantity:
    """A quantity, or a number as a :class:`Constant`: an int or a Fraction as it is, a float as the
    rational of its shortest decimal (``1.9`` is 19/10)."""
    if isinstance(x, Quantity):
        return x
    if isinstance(x, bool) or not isinstance(x, int | float | Fraction):
        raise InputError(f"a side of a claim is a quantity or a number, got {type(x).__name__} {x!r}")
    if isinstance(x, float):
        if not math.isfinite(x):
            raise InputError(f"a constant of a claim must be finite, got {x!r}")
        return Constant(Fraction(repr(x)))
    return Constant(Fraction(x))


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


@dataclass(frozen=True, eq=False)
class Combination(Quantity):
    """``operands[0] op operands[1]`` for op in ``+ - * /``, or the minimum or maximum of the operands."""

    op: str
    operands: tuple[Quantity, ...]

    @property
    def integer(self) -> bool:  # type: ignore[override]
        return self.op in ("+", "-", "*", "min", "max") and all(q.integer for q in self.operands)

    def bases(self) -> list[Base]:
        return [b for q in self.operands for b in q.bases()]

    def measure(self, ctx: Context) -> Measured | RankInterval:
        parts = [q.measure(ctx) for q in self.operands]
        if self.integer and all(isinstance(p, RankInterval) for p in parts):
            return _interval_combination(self.op, parts)
        return _float_combination(self.op, [as_measured(p) for p in parts])

    def exact(self, ctx: Context) -> Exact | RankInterval | None:
        values = [q.exact(ctx) for q in self.operands]
        if any(v is None for v in values):
            return None
        if self.integer and all(isinstance(v, RankInterval) for v in values):
            return _interval_combination(self.op, values)
        values = [interval_as_exact(v) if isinstance(v, RankInterval) else v for v in values]
        if any(v is None for v in values):
            return None
        if self.op in ("min", "max"):
            return _exact_extremum(self.op, values)
        a, b = values
        if self.op == "/":
            if exact.sign(b) in (0, None):
                return flint.arb(0, math.inf) if isinstance(b, flint.arb) or isinstance(a, flint.arb) else None
            return a / b
        return {"+": operator.add, "-": operator.sub, "*": operator.mul}[self.op](a, b)

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({', '.join(map(str, self.operands))})"
        a, b = self.operands

        def wrapped(q: Quantity, right: bool) -> str:
            text = str(q)
            if isinstance(q, Combination) and q.op in _PRECEDENCE:
                weaker = _PRECEDENCE[q.op] < _PRECEDENCE[self.op]
                if weaker or (right and _PRECEDENCE[q.op] == _PRECEDENCE[self.op] and self.op in "-/"):
                    return f"({text})"
            return text

        if self.op == "-" and isinstance(a, Constant) and a.value == 0:
            return f"-{wrapped(b, True)}"
        return f"{wrapped(a, False)} {self.op} {wrapped(b, True)}"


def minimum(*quantities: Any) -> Quantity:
    """The least of the quantities (1-Lipschitz: its error is the largest of theirs)."""
    return Combination("min", tuple(as_quantity(q) for q in _at_least_two(quantities)))


def maximum(*quantities: Any) -> Quantity:
    """The greatest of the quantities."""
    return Combination("max", tuple(as_quantity(q) for q in _at_least_two(quantities)))


def _at_least_two(quantities: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(quantities) < 2:
        raise InputError("minimum/maximum: give at least two quantities")
    return quantities


def as_measured(x: Measured | RankInterval) -> Measured:
    """An integer interval [lo, hi] as a real enclosure: its midpoint within half its width."""
    if isinstance(x, Measured):
        return x
    if x.lo > x.hi:  # contradicting ends: no enclosure
        return Measured(math.nan, math.nan)
    return Measured((x.lo + x.hi) / 2, (x.hi - x.lo) / 2)


def _rounded(value: float, error: float, products: int = 0) -> Measured:
    """A result computed in float64 from operands ``error`` away from exact: add the rounding of the
    result (gamma_1 of its size) and, per product or quotient, the absolute loss to underflow."""
    return Measured(value, error + gamma(1, U64) * abs(value) + products * UNDERFLOW64)


def _float_combination(op: str, parts: list[Measured]) -> Measured:
    """The float64 value of the combination and a bound on its distance from the exact one."""
    if not all(p.bounded for p in parts):
        return Measured(math.nan, math.inf)
    if op in ("min", "max"):
        pick = min if op == "min" else max
        return Measured(pick(p.value for p in parts), max(p.error for p in parts))
    a, b = parts
    if op in "+-":
        value = a.value + b.value if op == "+" else a.value - b.value
        return _rounded(value, a.error + b.error)
    if op == "*":
        error = abs(a.value) * b.error + abs(b.value) * a.error + a.error * b.error
        return _rounded(a.value * b.value, error, products=1)
    if abs(b.value) <= b.error:  # the divisor's enclosure holds 0: no bound
        return Measured(math.nan, math.inf)
    value = a.value / b.value
    error = (a.error + abs(value) * b.error) / (abs(b.value) - b.error)
    return _rounded(value, error, products=1)


def _interval_combination(op: str, parts: list[RankInterval]) -> RankInterval:
    """Integer interval arithmetic: the ends of the result from the ends of the operands."""
    if any(p.lo > p.hi for p in parts):
        return RankInterval(1, 0, "contradicting ends", "contradicting ends")
    if op in ("min", "max"):
        pick = min if op == "min" else max
        lo, hi = pick(p.lo for p in parts), pick(p.hi for p in parts)
    else:
        a, b = parts
        if op == "+":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif op == "-":
            lo, hi = a.lo - b.hi, a.hi - b.lo
        else:
            corners = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
            lo, hi = min(corners), max(corners)
    lower = "; ".join(dict.fromkeys(p.lower for p in parts))
    upper = "; ".join(dict.fromkeys(p.upper for p in parts))
    certificate = {k: v for p in parts for k, v in p.certificate.items()}
    return RankInterval(lo, hi, lower, upper, all(p.exact for p in parts), certificate)


def _exact_extremum(op: str, values: list[Exact]) -> Exact | None:
    """min or max of exact values: decided where the signs of the differences are, else the ball's hull."""
    best = values[0]
    for v in values[1:]:
        difference = exact.sign(v - best)
        if difference is None:
            lo = min(_lower(v), _lower(best)) if op == "min" else max(_lower(v), _lower(best))
            hi = min(_upper(v), _upper(best)) if op == "min" else max(_upper(v), _upper(best))
            best = flint.arb(flint.arb(lo).union(flint.arb(hi)))
        elif (difference < 0) == (op == "min") and difference != 0:
            best = v
    return best


def interval_as_exact(x: RankInterval) -> Exact | None:
    """An integer interval as an exact real: the integer itself when pinned, else the ball holding
    [lo, hi]; ``None`` when the ends contradict."""
    if x.lo > x.hi:
        return None
    if x.pinned:
        return flint.fmpq(x.lo)
    return flint.arb(flint.fmpq(x.lo + x.hi, 2), flint.fmpq(x.hi - x.lo, 2))


def _lower(x: Exact) -> Any:
    return x if isinstance(x, flint.fmpq) else x.lower()


def _upper(x: Exact) -> Any:
    return x if isinstance(x, flint.fmpq) else x.upper()


# --------------------------------------------------------------------------- the sides of a claim

#: The relations a declared claim states, and the direction of the bound each one makes of ``rhs``.
RELATIONS = {"<=": "upper", ">=": "lower", "==": None}


@dataclass(frozen=True)
class Sides:
    """``lhs <relation> rhs`` of a declared claim, ``rhs`` being the bound of an inequality (an upper
    bound for ``"<="``, a lower bound for ``">="``) or the stated side of an identity (``"=="``)."""

    lhs: Quantity
    relation: str
    rhs: Quantity

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise InputError(f"relation: expected one of {', '.join(RELATIONS)}, got {self.relation!r}")

    @property
    def direction(self) -> str | None:
        return RELATIONS[self.relation]

    @property
    def integer(self) -> bool:
        return self.lhs.integer and self.rhs.integer

    def __str__(self) -> str:
        return f"{self.lhs} {self.relation} {self.rhs}"

    def moved_rhs(self, factor: Fraction) -> Quantity:
        """The stated side as an expression, moved by ``factor`` as :meth:`moved` moves its values."""
        if factor == 1:
            return self.rhs
        f = Constant(factor)
        return f * (self.rhs + 1) - 1 if self.direction is None else f * self.rhs

    def moved(self, right: Any, factor: Fraction) -> Any:
        """The stated side moved by ``factor`` (in either route): an inequality's bound times F, an
        integer bound tightened strictly (:func:`tightened_integer_bound`), an identity's stated side
        v moved to F(v + 1) - 1 (the meta-tests' hook, :func:`rankwall.checks.toolkit.planted_side`)."""
        if factor == 1 or right is None:
            return right
        if isinstance(right, RankInterval):
            return _moved_interval(right, factor, self.direction)
        if isinstance(right, Measured):
            return _moved_measured(right, factor, self.direction)
        f = exact.fmpq_of(factor)
        return f * (right + 1) - 1 if self.direction is None else f * right


def _moved_interval(right: RankInterval, factor: Fraction, direction: str | None) -> RankInterval | Measured:
    if direction is not None:
        lo, hi = (tightened_integer_bound(end, factor, direction) for end in (right.lo, right.hi))
        return RankInterval(lo, hi, right.lower, right.upper, right.exact, right.certificate)
    lo, hi = (factor * (end + 1) - 1 for end in (right.lo, right.hi))
    if lo.denominator == 1 and hi.denominator == 1:
        return RankInterval(int(lo), int(hi), right.lower, right.upper, right.exact, right.certificate)
    return _moved_measured(as_measured(right), factor, direction)


def _moved_measured(right: Measured, factor: Fraction, direction: str | None) -> Measured:
    """A real side times F (a bound) or moved to F(v + 1) - 1 (an identity's side), with the rounding
    of F read as a float and of each operation."""
    f = float(factor)
    read = Measured(f, abs(Fraction(f) - factor) if f != factor else 0.0)
    if direction is not None:
        return _float_combination("*", [read, right])
    shifted = _float_combination("+", [right, Measured(1.0, 0.0)])
    return _float_combination("-", [_float_combination("*", [read, shifted]), Measured(1.0, 0.0)])


def measurement_of(sides: Sides, ctx: Context, factor: Fraction) -> Measurement:
    """Both sides measured on ``ctx``: integer sides against a pinned integer through
    :meth:`RankInterval.sides`, real sides with the sum of their error bounds (and the rounding of
    ``rhs - lhs``) as the tolerance. For ``">="`` the sides are reported in the order ``bound <= lhs``."""
    left, right = sides.lhs.measure(ctx), sides.moved(sides.rhs.measure(ctx), factor)
    where = f"{ctx.backend.name} {ctx.backend.dtype_name}"
    method = f"{where}: {sides}"
    if isinstance(left, RankInterval) and isinstance(right, RankInterval) and right.pinned:
        m = left.sides(right.lo, _INTERVAL_DIRECTIONS[sides.relation])[0]
        return Measurement(
            m.lhs, m.rhs, m.tolerance, f"{method} ({m.method})", m.certificate, m.exact_sides, m.certified_by, m.proves
        )
    a, b = as_measured(left), as_measured(right)
    if not (a.bounded and b.bounded):
        return Measurement(math.nan, math.nan, math.nan, f"{method}: a side has no float bound")
    lhs, rhs = (b, a) if sides.relation == ">=" else (a, b)
    tolerance = a.error + b.error + gamma(2, U64) * max(abs(a.value), abs(b.value))
    certificate = {"lhs_error": lhs.error, "rhs_error": rhs.error}
    return Measurement(lhs.value, rhs.value, tolerance, method, certificate, certified_by=Certification.TWO_SIDED)


_INTERVAL_DIRECTIONS = {"<=": "upper", ">=": "lower", "==": "equal"}


def judgement_of(sides: Sides, ctx: Context, factor: Fraction) -> Judgement:
    """Both sides re-decided on the exact instance: integer sides on their exact intervals; real sides
    in rationals where both are rational, else in balls at rising precision, a base side's comparison
    hook first. A side with no exact route leaves the two-sided NumPy float64 margin to decide (beyond
    its bound in either direction), or nothing."""
    for bits in exact.BALL_PRECISIONS:
        with exact.precision(bits):
            left, right = sides.lhs.exact(ctx), sides.moved(sides.rhs.exact(ctx), factor)
            if left is None or right is None:
                return _two_sided_float(sides, ctx, factor)
            if isinstance(left, RankInterval) and isinstance(right, RankInterval) and right.pinned:
                return left.sides(right.lo, _INTERVAL_DIRECTIONS[sides.relation])[1]
            left, right = (interval_as_exact(x) if isinstance(x, RankInterval) else x for x in (left, right))
            if left is None or right is None:
                return Judgement(math.nan, math.nan, None, "exact route: contradicting interval ends")
            rational = isinstance(left, flint.fmpq) and isinstance(right, flint.fmpq)
            hooked = None if rational else _hooked(sides, ctx, left, right, factor)
            decided = hooked.sign if hooked is not None else exact.sign(right - left)
            if decided is not None or rational:
                break
    lhs, rhs = (right, left) if sides.relation == ">=" else (left, right)
    sign = None if decided is None else (-decided if sides.relation == ">=" else decided)
    exactly = hooked.exact if hooked is not None else rational
    kind = None if sign is None else Certification.EXACT if exactly else Certification.TWO_SIDED
    how = hooked.method if hooked is not None else "exact-rational" if rational else f"interval-{bits}"
    method = f"{how}: {sides}"
    radius = exact.radius(rhs - lhs)
    return Judgement(exact.to_float(lhs), exact.to_float(rhs), sign, method, radius, certified_by=kind)


def _hooked(sides: Sides, ctx: Context, left: Exact, right: Exact, factor: Fraction) -> Compared | None:
    """sign(right - left) from a base side's comparison hook, where one decides (the hook sees the other
    side's exact value and expression); ``None`` leaves the difference of the exact values to decide."""
    if isinstance(sides.lhs, Base) and sides.lhs.compare_fn is not None:
        below = sides.lhs.compare(ctx, right, sides.moved_rhs(factor))  # sign(lhs - right)
        if below is not None:
            return Compared(-below.sign, below.method, below.exact)
    if isinstance(sides.rhs, Base) and sides.rhs.compare_fn is not None and factor == 1:
        above = sides.rhs.compare(ctx, left, sides.lhs)  # sign(rhs - left)
        if above is not None:
            return above
    return None


def _two_sided_float(sides: Sides, ctx: Context, factor: Fraction) -> Judgement:
    """The judgement of the NumPy float64 measurement alone: certified beyond its bound either way."""
    from rankwall.checks.toolkit import numpy_float64, two_sided

    m = measurement_of(sides, Context(ctx.case, numpy_float64()), factor)
    return two_sided(m, "==" if sides.relation == "==" else "<=")


# --------------------------------------------------------------------------- declaring a claim

#: Where the claims being loaded come from (set by :func:`rankwall.checks.loader.load_claims`).
LOADING_ORIGIN: list[str] = []


def _sides_fields(sides: Sides, judge: Callable[[Any], tuple[Any, Any]] | None) -> dict[str, Any]:
    """The :class:`~rankwall.checks.verdict.Claim` fields that ``sides`` (and an optional exact
    ``judge``) determine: relation, direction, measure, judge_exactly, array_api."""
    from rankwall.checks.toolkit import numpy_float64

    def measure(case: Any, backend: Any, factor: Fraction) -> Measurement:
        return measurement_of(sides, Context(case, backend), factor)

    def judge_exactly(case: Any, factor: Fraction) -> Judgement:
        ctx = Context(case, numpy_float64())
        if judge is None:
            return judgement_of(sides, ctx, factor)
        users = Sides(
            quantity("lhs", sides.lhs.measure, lambda c: _exact_number(judge(c.case)[0]), integer=sides.lhs.integer),
            sides.relation,
            quantity("rhs", sides.rhs.measure, lambda c: _exact_number(judge(c.case)[1]), integer=sides.rhs.integer),
        )
        return judgement_of(users, ctx, factor)

    relation = Relation.EQUAL if sides.relation == "==" else Relation.AT_MOST
    return {
        "relation": relation,
        "direction": sides.direction,
        "measure": measure,
        "judge_exactly": judge_exactly,
        "array_api": sides.lhs.array_api and sides.rhs.array_api,
        "sides": sides,
    }


def _exact_number(x: Any) -> Exact:
    """A user's exact value: an int or a Fraction becomes a rational, a flint rational or ball stays."""
    if isinstance(x, flint.fmpq | flint.arb):
        return x
    if isinstance(x, bool) or not isinstance(x, int | Fraction | flint.fmpz):
        raise InputError(f"judge: an exact side is an int, a Fraction or a python-flint number, got {x!r}")
    return exact.fmpq_of(Fraction(int(x)) if isinstance(x, flint.fmpz) else Fraction(x))


def declare(
    id: str,
    *,
    statement: str,
    lhs: Any,
    relation: str,
    rhs: Any,
    cases: Any,
    title: str | None = None,
    source: str = "user",
    domain: str | None = None,
    judge: Callable[[Any], tuple[Any, Any]] | None = None,
    register: bool = True,
) -> Claim:
    """Declare the claim ``lhs <relation> rhs`` over ``cases`` and register it under ``id`` (dotted:
    ``family.name``). ``relation`` is ``"<="`` (``rhs`` an upper bound), ``">="`` (a lower bound) or
    ``"=="``; ``lhs`` and ``rhs`` are quantities of the cases' family (or numbers, or expressions of
    both), measured with their rounding bounds and re-decided exactly where the float margin does not
    decide. ``judge(case) -> (lhs, rhs)``, if given, supplies the exact values of both sides (ints,
    Fractions or python-flint numbers) in place of the quantities' own. ``cases`` is a
    :class:`~rankwall.checks.toolkit.Cases` (a family exports one per kind of case). The claim then
    has everything a shipped one has: ``verify``, ``search`` with shrinking and ``--tighten``,
    mutants (:meth:`Claim.with_mutant` with ``lhs=``, ``rhs=`` or ``relation=``), JSON, backends, Dask."""
    from rankwall.checks.toolkit import Cases
    from rankwall.checks.verdict import REGISTRY, check_claim_id

    check_claim_id(id)
    if not isinstance(cases, Cases):
        raise InputError(f"cases: expected a Cases bundle of a family (e.g. softmax_jacobian.rows), got {cases!r}")
    if not isinstance(statement, str) or not statement.strip():
        raise InputError("statement: a claim states what it claims, in words or symbols")
    if judge is not None and not callable(judge):
        raise InputError(f"judge: expected a function of a case returning (lhs, rhs), got {judge!r}")
    sides = Sides(as_quantity(lhs), relation, as_quantity(rhs))
    claim = Claim(
        id=id,
        title=title or statement,
        source=source,
        statement=statement,
        domain=domain or "the cases given",
        origin=LOADING_ORIGIN[-1] if LOADING_ORIGIN else None,
        **cases.fields(),
        **_sides_fields(sides, judge),
    )
    return REGISTRY.register(claim) if register else claim


def mutated_fields(claim: Claim, lhs: Any = None, relation: str | None = None, rhs: Any = None) -> dict[str, Any]:
    """The fields of a declared claim's mutant whose sides change (for :meth:`Claim.with_mutant`)."""
    if claim.sides is None:
        raise InputError(f"{claim.id}: only a declared claim takes lhs=, rhs= or relation= for a mutant")
    old = claim.sides
    sides = Sides(
        old.lhs if lhs is None else as_quantity(lhs),
        old.relation if relation is None else relation,
        old.rhs if rhs is None else as_quantity(rhs),
    )
    return _sides_fields(sides, None)

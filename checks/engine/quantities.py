"""Quantities of a case, and the claims stated over them: the one route every claim takes.

A :class:`Quantity` is a real or integer function of a case that rankwall evaluates three ways, each
of the *same* exact object: the case as the context's backend built it, read exactly (a family states
that object for each kind of case in its module docstring):

- *measured* in the backend's floating point, as a :class:`Measured` value with a bound on its
  distance from the exact quantity (the rounding model of :mod:`rankwall.checks.engine.tolerance`), or, for
  an integer quantity such as a rank, as a certified interval (:class:`~rankwall.checks.engine.verdict.RankInterval`);
  a float route that cannot bound that distance (an underflowed tail) returns an infinite error and
  leaves the decision to the exact route, never its float zeros;
- *exactly*, as a :class:`~rankwall.checks.engine.reals.Real` (a rational, or a ball at the working
  precision, with a symbolic form where the instance has one);
- by a *reference*: the slow, obviously right way (dense matrices in Fractions or in 256-bit
  mpmath), sharing no code with the other two, which the tests compare them with.

Quantities combine with ``+ - * /``, integer powers, :func:`minimum`, :func:`maximum`, :func:`sqrt`,
:func:`log`, :func:`exp` and ``abs``; a combination is measured by propagating the error bounds (each
operation adds the float64 rounding of its result) and evaluated exactly by combining exact values. A
number such as ``1.9`` stands for the rational its shortest decimal names (19/10).

A claim (:func:`declare`) is ``lhs <= rhs``, ``lhs >= rhs`` or ``lhs == rhs`` over a family's cases,
decided by :func:`rankwall.checks.engine.verdict.decide` from :func:`measurement_of` (a float margin beyond
the sum of both error bounds proves it holds) and :func:`judgement_of` (the exact re-decision: a base
quantity's comparison hook first, wherever the statement is linear in it, then rationals, identical
forms and square roots, then balls at 128, 512 and 2048 bits). A side without an exact route is
decided by its own two-sided float margin, beyond its bound in either direction. Every shipped claim
is declared this way, so the statements a user writes take the route the project's own tests exercise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint
import mpmath

from rankwall.checks import exact
from rankwall.checks.engine.reals import Real, Undefined, difference_sign, radius, to_float
from rankwall.checks.engine.verdict import (
    FLOAT64_EXACT_INTEGERS,
    Certification,
    Claim,
    Judgement,
    Measurement,
    OutsideDomain,
    RankInterval,
    Relation,
    tightened_integer_bound,
)
from rankwall.errors import UndefinedStatement  # re-exported: the classes live in rankwall.errors
from rankwall.theory._rounding import gamma, smallest_normal, unit_roundoff
from rankwall.theory.validation import InputError

#: Unit roundoff of the float64 arithmetic that combines measured values (whatever the backend's dtype).
U64 = unit_roundoff("float64")
#: Absolute error a float64 product or quotient may lose to underflow (below the normal range).
UNDERFLOW64 = smallest_normal("float64")
#: The relative error of the platform's float64 ``exp`` and ``log`` (``math.exp``, ``math.log``): glibc
#: documents them accurate to within one ulp, so twice the unit roundoff bounds it. (``math.sqrt`` is
#: correctly rounded by IEEE 754, within u.)
LIBM_RELATIVE_ERROR = 2 * U64
#: The precision (bits) at which references are evaluated (mpmath's working precision).
REFERENCE_BITS = 256


@dataclass(frozen=True)
class Approximately:
    """A reference value known to within ``error`` (absolute): a number computed in mpmath at a finite
    precision whose rounding does not scale with the value (a sum that is 0 in exact arithmetic comes
    out as a tiny number). A reference otherwise is an int, a Fraction (exact), or an mpmath number
    accurate to 2^-200 of itself."""

    value: Any
    error: Any


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
    """One case on one backend, with a cache that the quantities evaluated on it share: the case is
    built once, and its exact object (the built arrays read exactly) is the one every quantity of the
    context measures, evaluates exactly and references."""

    def __init__(self, case: Any, backend: Any) -> None:
        self.case = case
        self.backend = backend
        self._cache: dict[Hashable, Any] = {}

    def once(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()`` the first time ``key`` is asked for, the remembered value afterwards."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]


@dataclass(frozen=True)
class Compared:
    """What a comparison hook decided: the sign of (quantity − t), how, and whether exactly (rationals,
    structure) or two-sided (balls)."""

    sign: int
    method: str
    exact: bool


#: An exact value as a quantity returns it: a Real, or an interval for an integer quantity.
Exact = Any

#: The certified enclosure lo <= value <= hi that an integer quantity (a rank, a count) returns from its
#: ``measure`` and ``exact`` routes: ``Interval(lo, hi, lower="how lo is certified", upper="how hi is",
#: exact=True)`` where both ends are free of rounding (the public name of
#: :class:`~rankwall.checks.engine.verdict.RankInterval`).
Interval = RankInterval


class Quantity:
    """A real or integer function of a case, measured with a rounding bound, evaluated exactly and by a
    reference (see the module docstring). Subclasses: :class:`Base`, :class:`Constant`,
    :class:`Combination`. An integer quantity is measured, and evaluated exactly, as a certified
    interval (:class:`~rankwall.checks.engine.verdict.RankInterval`)."""

    integer: bool = False

    def measure(self, ctx: Context) -> Measured | RankInterval:
        raise NotImplementedError

    def exact(self, ctx: Context) -> Exact | None:
        """The exact value at the current precision (a :class:`~rankwall.checks.engine.reals.Real`, or an
        interval for an integer quantity), or ``None`` where there is no exact route."""
        raise NotImplementedError

    def reference(self, ctx: Context) -> Any:
        """The reference value (an int, a Fraction or an mpmath number at the working precision), or
        ``None`` where there is none."""
        raise NotImplementedError

    def bases(self) -> list[Base]:
        """The base quantities this one is built from."""
        raise NotImplementedError

    def contains(self, base: Base) -> bool:
        return any(b is base for b in self.bases())

    @property
    def array_api(self) -> bool:
        """Whether every base quantity follows the backend it is measured on."""
        return all(b.follows_backend for b in self.bases())

    @property
    def families(self) -> set[str]:
        """The families whose cases the base quantities belong to (none for a user's own quantity)."""
        return {b.family for b in self.bases() if b.family is not None}

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
        return Combination("neg", (self,))

    def __abs__(self) -> Quantity:
        return Combination("abs", (self,))

    def __pow__(self, power: int) -> Quantity:
        if isinstance(power, bool) or not isinstance(power, int) or power == 0:
            raise InputError(
                f"power: a quantity is raised to a nonzero integer power (use sqrt() for a root), got {power!r}"
            )
        return self if power == 1 else Combination("^", (self, Constant(Fraction(power))))

    def __bool__(self) -> bool:
        raise TypeError("a quantity has no truth value: compare it in a claim (rankwall.declare)")

    def __repr__(self) -> str:
        return f"<quantity {self}>"


@dataclass(eq=False, repr=False)
class Base(Quantity):
    """A quantity a family (or a user) defines: ``measure(ctx)`` gives a :class:`Measured` (or, for an
    integer quantity, a :class:`~rankwall.checks.engine.verdict.RankInterval`), ``exact(ctx)`` a
    :class:`~rankwall.checks.engine.reals.Real` (an int, a Fraction or a python-flint number is read as one)
    at the current precision (or ``None``), ``reference(ctx)`` the slow value, and ``compare(ctx, t,
    expression)`` the exact sign of (quantity − t) for the exact value t of ``expression``, or ``None``
    where it cannot decide. ``family`` names the family whose cases it reads; ``exact_doc`` says how
    it is evaluated exactly."""

    name: str
    measure_fn: Callable[[Context], Measured | RankInterval]
    exact_fn: Callable[[Context], Any] | None = None
    compare_fn: Callable[[Context, Real, Quantity], Compared | None] | None = None
    integer: bool = False
    follows_backend: bool = True
    doc: str = ""
    reference_fn: Callable[[Context], Any] | None = None
    family: str | None = None
    exact_doc: str = ""
    #: The kinds of case it reads (empty: any case of its family).
    reads: tuple[type, ...] = ()

    def measure(self, ctx: Context) -> Measured | RankInterval:
        return ctx.once(("measure", id(self)), lambda: self.measure_fn(ctx))

    def exact(self, ctx: Context) -> Exact | None:
        if self.exact_fn is None:
            return None

        def evaluated() -> Any:
            value = self.exact_fn(ctx)
            return value if value is None or isinstance(value, RankInterval) else Real.of(value)

        return ctx.once(("exact", id(self), flint.ctx.prec), evaluated)

    def reference(self, ctx: Context) -> Any:
        if self.reference_fn is None:
            return None
        return ctx.once(("reference", id(self), mpmath.mp.prec), lambda: self.reference_fn(ctx))

    def compare(self, ctx: Context, t: Real, expression: Quantity) -> Compared | None:
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
    exact: Callable[[Context], Any] | None = None,
    *,
    reference: Callable[[Context], Any] | None = None,
    compare: Callable[[Context, Real, Quantity], Compared | None] | None = None,
    integer: bool = False,
    follows_backend: bool = True,
    doc: str = "",
    exact_doc: str = "",
    family: str | None = None,
    reads: tuple[type, ...] = (),
) -> Base:
    """A base quantity named ``name`` (how it prints in a statement and a method), see :class:`Base`.
    ``follows_backend`` is false for a quantity computed in NumPy float64 whatever backend is asked.
    An integer quantity returns a :class:`~rankwall.checks.engine.verdict.RankInterval` (``rankwall.Interval``)
    from ``measure`` and ``exact``."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"name: a quantity has a name (how it prints in a statement), got {name!r}")
    if not callable(measure):
        raise InputError(f"measure: expected a function of a context returning Measured, got {measure!r}")
    for what, fn in (("exact", exact), ("reference", reference), ("compare", compare)):
        if fn is not None and not callable(fn):
            raise InputError(f"{what}: expected a function of a context, got {fn!r}")
    return Base(name, measure, exact, compare, integer, follows_backend, doc, reference, family, exact_doc, reads)


@dataclass(frozen=True, eq=False, repr=False)
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
        return Measured(value, abs(Fraction(value) - self.value) if value != self.value else 0.0)

    def exact(self, ctx: Context) -> Exact:
        return self.measure(ctx) if self.integer else Real.of(self.value)

    def reference(self, ctx: Context) -> Any:
        return int(self.value) if self.integer else self.value

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


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "neg": 3, "^": 4}
#: Operations of one operand, printed as functions (``neg`` prints as a minus sign).
UNARY = ("neg", "abs", "sqrt", "log", "exp")
#: Operations whose result is an integer when every operand is.
INTEGER_OPS = ("+", "-", "*", "min", "max", "neg", "abs")


@dataclass(frozen=True, eq=False, repr=False)
class Combination(Quantity):
    """``operands[0] op operands[1]`` for op in ``+ - * /``, ``x ^ n`` for an integer constant n, the
    minimum or maximum of the operands, or a function of one operand (``neg``, ``abs``, ``sqrt``,
    ``log``, ``exp``)."""

    op: str
    operands: tuple[Quantity, ...]

    @property
    def integer(self) -> bool:  # type: ignore[override]
        if self.op == "^":
            return self.operands[0].integer and self.operands[1].value > 0  # type: ignore[attr-defined]
        return self.op in INTEGER_OPS and all(q.integer for q in self.operands)

    def bases(self) -> list[Base]:
        return [b for q in self.operands for b in q.bases()]

    def measure(self, ctx: Context) -> Measured | RankInterval:
        if self.op == "^":
            base, power = self.operands[0], int(self.operands[1].value)  # type: ignore[attr-defined]
            return _measured_power(base.measure(ctx), power, self.integer)
        parts = [q.measure(ctx) for q in self.operands]
        if self.integer and all(isinstance(p, RankInterval) for p in parts):
            return _interval_combination(self.op, parts)
        return _float_combination(self.op, [as_measured(p) for p in parts])

    def exact(self, ctx: Context) -> Exact | None:
        values = [q.exact(ctx) for q in self.operands]
        if any(v is None for v in values):
            return None
        if self.integer and all(isinstance(v, RankInterval) for v in values):
            if self.op == "^":
                return _interval_power(values[0], int(self.operands[1].value))  # type: ignore[attr-defined]
            return _interval_combination(self.op, values)
        reals = [interval_as_exact(v) if isinstance(v, RankInterval) else v for v in values]
        if any(v is None for v in reals):
            return None
        try:
            return _exact_combination(self.op, reals)
        except Undefined as error:
            raise UndefinedStatement(f"{self}: {error.what} (case {ctx.case.to_json()})") from None

    def reference(self, ctx: Context) -> Any:
        values = [q.reference(ctx) for q in self.operands]
        if any(v is None for v in values):
            return None
        return _reference_combination(self.op, values)

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({', '.join(map(str, self.operands))})"
        if self.op in UNARY and self.op != "neg":
            return f"{'|' + str(self.operands[0]) + '|' if self.op == 'abs' else f'{self.op}({self.operands[0]})'}"
        if self.op == "neg":
            return f"-{_wrapped(self.operands[0], self.op, True)}"
        a, b = self.operands
        if self.op == "^":
            return f"{_wrapped(a, '^', False)}^{b}"
        return f"{_wrapped(a, self.op, False)} {self.op} {_wrapped(b, self.op, True)}"


def _wrapped(q: Quantity, op: str, right: bool) -> str:
    """``q`` printed as an operand of ``op``, in parentheses where precedence needs them."""
    text = str(q)
    inner = q.op if isinstance(q, Combination) else "^" if isinstance(q, Constant) and q.value < 0 else None
    if inner in _PRECEDENCE:
        weaker = _PRECEDENCE[inner] < _PRECEDENCE[op]
        if weaker or (right and _PRECEDENCE[inner] == _PRECEDENCE[op] and op in ("-", "/", "^")):
            return f"({text})"
    if isinstance(q, Constant) and q.value.denominator != 1 and "/" in text and op in ("*", "/", "^", "neg"):
        return f"({text})"
    return text


def minimum(*quantities: Any) -> Quantity:
    """The least of the quantities (1-Lipschitz: its error is the largest of theirs)."""
    return Combination("min", tuple(as_quantity(q) for q in _at_least_two(quantities)))


def maximum(*quantities: Any) -> Quantity:
    """The greatest of the quantities."""
    return Combination("max", tuple(as_quantity(q) for q in _at_least_two(quantities)))


def sqrt(x: Any) -> Quantity:
    """The nonnegative square root (exact where the radicand is a rational square, and ``sqrt(x)**2``
    is x exactly)."""
    return Combination("sqrt", (as_quantity(x),))


def log(x: Any) -> Quantity:
    """The natural logarithm."""
    return Combination("log", (as_quantity(x),))


def exp(x: Any) -> Quantity:
    """The exponential."""
    return Combination("exp", (as_quantity(x),))


def _at_least_two(quantities: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(quantities) < 2:
        raise InputError("minimum/maximum: give at least two quantities")
    return quantities


# --------------------------------------------------------------------------- measured values


def as_measured(x: Measured | RankInterval) -> Measured:
    """An integer interval [lo, hi] as a real enclosure: its midpoint within half its width."""
    if isinstance(x, Measured):
        return x
    if x.lo > x.hi:  # contradicting ends: no enclosure
        return Measured(math.nan, math.nan)
    value, error = (x.lo + x.hi) / 2, (x.hi - x.lo) / 2
    if max(abs(x.lo), abs(x.hi)) > FLOAT64_EXACT_INTEGERS:  # the conversions to float64 round
        error = (error + abs(value) * U64) * _OUTWARD
    return Measured(value, error)


#: The bound on a propagated error is itself computed in float64: a few roundings, pushed outward.
_OUTWARD = 1 + 8 * U64


def _rounded(value: float, error: float, products: int = 0, relative: float = 0.0) -> Measured:
    """A result computed in float64 from operands ``error`` away from exact: add the rounding of the
    result (gamma_1 of its size, or ``relative`` for a library function) and, per product or quotient,
    the absolute loss to underflow."""
    if not math.isfinite(value):
        return Measured(math.nan, math.inf)
    rounding = max(gamma(1, U64), relative) * abs(value)
    return Measured(value, (error + rounding + products * UNDERFLOW64) * _OUTWARD)


def _float_combination(op: str, parts: list[Measured]) -> Measured:
    """The float64 value of the combination and a bound on its distance from the exact one."""
    if not all(p.bounded for p in parts):
        return Measured(math.nan, math.inf)
    if op in ("min", "max"):
        pick = min if op == "min" else max
        return Measured(pick(p.value for p in parts), max(p.error for p in parts))
    if op in UNARY:
        return _float_function(op, parts[0])
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


def _float_function(op: str, a: Measured) -> Measured:
    """A function of one measured operand: its value and a bound from the function's modulus of
    continuity on [value − error, value + error], plus the function's own rounding."""
    v, e = a.value, a.error
    if op == "neg":
        return Measured(-v, e)
    if op == "abs":
        return Measured(abs(v), e)
    if op == "sqrt":
        if v + e < 0:
            return Measured(math.nan, math.inf)  # negative: the exact route says it is undefined
        root = math.sqrt(max(v, 0.0))
        low = v - e
        # |√x − √v| = |x − v|/(√x + √v); where x may reach 0, at most √(v + e)
        error = e / (math.sqrt(low) + root) if low > 0 else math.sqrt(max(v, 0.0) + e)
        return _rounded(root, error)
    if op == "exp":
        try:
            value = math.exp(v)
            error = value * math.expm1(e) if e > 0 else 0.0
        except OverflowError:
            return Measured(math.nan, math.inf)
        return _rounded(value, error, products=1, relative=LIBM_RELATIVE_ERROR)
    # log
    low = v - e
    if low <= 0:
        return Measured(math.nan, math.inf)
    value = math.log(v)
    error = -math.log1p(-e / v) if e > 0 else 0.0  # log v − log(v − e) ≥ log(v + e) − log v
    return _rounded(value, error, relative=LIBM_RELATIVE_ERROR)


def _measured_power(x: Measured | RankInterval, power: int, integer: bool) -> Measured | RankInterval:
    """x^n by repeated products (its reciprocal for n < 0), each adding its rounding."""
    if integer and isinstance(x, RankInterval):
        return _interval_power(x, power)
    base = as_measured(x)
    result = base
    for _ in range(abs(power) - 1):
        result = _float_combination("*", [result, base])
    if power < 0:
        result = _float_combination("/", [Measured(1.0, 0.0), result])
    return result


def _interval_power(x: RankInterval, power: int) -> RankInterval:
    if x.lo > x.hi:
        return RankInterval(1, 0, "contradicting ends", "contradicting ends")
    ends = [x.lo**power, x.hi**power]
    lo, hi = (0 if x.lo < 0 < x.hi and power % 2 == 0 else min(ends)), max(ends)
    return RankInterval(lo, hi, x.lower, x.upper, x.exact, x.certificate)


def _interval_combination(op: str, parts: list[RankInterval]) -> RankInterval:
    """Integer interval arithmetic: the ends of the result from the ends of the operands."""
    if any(p.lo > p.hi for p in parts):
        return RankInterval(1, 0, "contradicting ends", "contradicting ends")
    if op in ("min", "max"):
        pick = min if op == "min" else max
        lo, hi = pick(p.lo for p in parts), pick(p.hi for p in parts)
    elif op == "neg":
        lo, hi = -parts[0].hi, -parts[0].lo
    elif op == "abs":
        p = parts[0]
        lo, hi = (0 if p.lo <= 0 <= p.hi else min(abs(p.lo), abs(p.hi))), max(abs(p.lo), abs(p.hi))
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


# --------------------------------------------------------------------------- exact values


def interval_as_exact(x: RankInterval) -> Real | None:
    """An integer interval as an exact real: the integer itself when pinned, else the ball holding
    [lo, hi]; ``None`` when the ends contradict."""
    if x.lo > x.hi:
        return None
    if x.pinned:
        return Real.of(x.lo)
    return Real(flint.arb(flint.fmpq(x.lo + x.hi, 2), flint.fmpq(x.hi - x.lo, 2)))


def _exact_combination(op: str, values: list[Real]) -> Real:
    if op in ("min", "max"):
        return _exact_extremum(op, values)
    if op in UNARY:
        x = values[0]
        return {"neg": lambda: -x, "abs": lambda: abs(x), "sqrt": x.sqrt, "log": x.log, "exp": x.exp}[op]()
    a, b = values
    if op == "^":
        return a ** int(b.value.p)
    return {"+": a.__add__, "-": a.__sub__, "*": a.__mul__, "/": a.__truediv__}[op](b)


def _exact_extremum(op: str, values: list[Real]) -> Real:
    """min or max of exact values: decided where the signs of the differences are, else the ball's hull."""
    best = values[0]
    for v in values[1:]:
        difference, _ = difference_sign(best, v)  # sign(v − best)
        if difference is None:
            lo = min(v.ball.lower(), best.ball.lower()) if op == "min" else max(v.ball.lower(), best.ball.lower())
            hi = min(v.ball.upper(), best.ball.upper()) if op == "min" else max(v.ball.upper(), best.ball.upper())
            best = Real(flint.arb(lo).union(flint.arb(hi)))
        elif (difference < 0) == (op == "min") and difference != 0:
            best = v
    return best


# --------------------------------------------------------------------------- references


def _reference_combination(op: str, values: list[Any]) -> Any:
    """The combination of reference values: exact (int, Fraction) while every operand and operation
    is, else mpmath at its working precision (an :class:`Approximately` enters as its value)."""
    values = [v.value if isinstance(v, Approximately) else v for v in values]
    if op in ("min", "max"):
        return (min if op == "min" else max)(values, key=_as_mpf)
    exact_inputs = all(isinstance(v, int | Fraction) for v in values)
    if op == "neg":
        return -values[0]
    if op == "abs":
        return abs(values[0])
    if op in ("sqrt", "log", "exp"):
        x = _as_mpf(values[0])
        if op == "sqrt":
            if exact_inputs and _rational_root(Fraction(values[0])) is not None:
                return _rational_root(Fraction(values[0]))
            return mpmath.sqrt(x) if x >= 0 else None
        if op == "log":
            return mpmath.log(x) if x > 0 else None
        return mpmath.exp(x)
    a, b = values
    if op == "^":
        n = int(b)
        if exact_inputs:
            return Fraction(a) ** n if n < 0 or isinstance(a, Fraction) else a**n
        return _as_mpf(a) ** n
    if not exact_inputs:
        a, b = _as_mpf(a), _as_mpf(b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    return Fraction(a) / Fraction(b) if exact_inputs else a / b


def _rational_root(q: Fraction) -> Fraction | None:
    if q < 0:
        return None
    n, d = math.isqrt(q.numerator), math.isqrt(q.denominator)
    return Fraction(n, d) if n * n == q.numerator and d * d == q.denominator else None


def _as_mpf(x: Any) -> Any:
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


# --------------------------------------------------------------------------- rewriting (isolation)


def _is_constant(q: Quantity, value: int) -> bool:
    return isinstance(q, Constant) and q.value == value


def _sum(a: Quantity, b: Quantity) -> Quantity:
    if _is_constant(a, 0):
        return b
    if _is_constant(b, 0):
        return a
    if isinstance(a, Constant) and isinstance(b, Constant):
        return Constant(a.value + b.value)
    return Combination("+", (a, b))


def _negated(a: Quantity) -> Quantity:
    if isinstance(a, Constant):
        return Constant(-a.value)
    if isinstance(a, Combination) and a.op == "neg":
        return a.operands[0]
    return Combination("neg", (a,))


def _difference(a: Quantity, b: Quantity) -> Quantity:
    if _is_constant(b, 0):
        return a
    if _is_constant(a, 0):
        return _negated(b)
    if isinstance(a, Constant) and isinstance(b, Constant):
        return Constant(a.value - b.value)
    return Combination("-", (a, b))


def _product(a: Quantity, b: Quantity) -> Quantity:
    if _is_constant(a, 0) or _is_constant(b, 0):
        return Constant(Fraction(0))
    if _is_constant(a, 1):
        return b
    if _is_constant(b, 1):
        return a
    if isinstance(a, Constant) and isinstance(b, Constant):
        return Constant(a.value * b.value)
    return Combination("*", (a, b))


def _quotient(a: Quantity, b: Quantity) -> Quantity:
    if _is_constant(b, 1):
        return a
    if _is_constant(a, 0):
        return a
    if isinstance(a, Constant) and isinstance(b, Constant) and b.value != 0:
        return Constant(a.value / b.value)
    return Combination("/", (a, b))


def linear_in(expression: Quantity, base: Base) -> tuple[Quantity, Quantity] | None:
    """``(c, r)`` with expression = c·base + r as an identity of expressions, c and r free of ``base``;
    ``None`` where ``base`` enters otherwise (in a product of two terms that hold it, a divisor, a
    function, a minimum or maximum)."""
    if expression is base:
        return Constant(Fraction(1)), Constant(Fraction(0))
    if not expression.contains(base):
        return Constant(Fraction(0)), expression
    if not isinstance(expression, Combination):
        return None
    op, operands = expression.op, expression.operands
    if op == "neg":
        inner = linear_in(operands[0], base)
        return None if inner is None else (_negated(inner[0]), _negated(inner[1]))
    if op in ("+", "-"):
        left, right = linear_in(operands[0], base), linear_in(operands[1], base)
        if left is None or right is None:
            return None
        combine = _sum if op == "+" else _difference
        return combine(left[0], right[0]), combine(left[1], right[1])
    if op == "*":
        a, b = operands
        if a.contains(base) and b.contains(base):
            return None
        varying, fixed = (a, b) if a.contains(base) else (b, a)
        inner = linear_in(varying, base)
        return None if inner is None else (_product(inner[0], fixed), _product(inner[1], fixed))
    if op == "/" and not operands[1].contains(base):
        inner = linear_in(operands[0], base)
        return None if inner is None else (_quotient(inner[0], operands[1]), _quotient(inner[1], operands[1]))
    return None


# --------------------------------------------------------------------------- the sides of a claim


@dataclass(frozen=True)
class Sides:
    """``lhs <relation> rhs`` of a declared claim, ``rhs`` being the bound of an inequality (an upper
    bound for ``"<="``, a lower bound for ``">="``) or the stated side of an identity (``"=="``)."""

    lhs: Quantity
    relation: Relation  # given as "<=", ">=" or "==" (a Relation is that string)
    rhs: Quantity

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "relation", Relation(self.relation))
        except ValueError:
            known = ", ".join(r.value for r in Relation)
            raise InputError(f"relation: expected one of {known}, got {self.relation!r}") from None

    @property
    def direction(self) -> str | None:
        return self.relation.direction

    @property
    def integer(self) -> bool:
        return self.lhs.integer and self.rhs.integer

    def __str__(self) -> str:
        return f"{self.lhs} {self.relation} {self.rhs}"

    def shown(self, factor: Fraction) -> str:
        """The statement as decided: with ``factor`` other than 1 (``--tighten``), the moved stated side."""
        return str(self) if factor == 1 else f"{self.lhs} {self.relation} {self.moved_rhs(factor)}"

    def moved_rhs(self, factor: Fraction) -> Quantity:
        """The stated side as an expression, moved by ``factor`` as :meth:`moved` moves its values."""
        if factor == 1:
            return self.rhs
        f = Constant(factor)
        return f * (self.rhs + 1) - 1 if self.direction is None else f * self.rhs

    def moved(self, right: Any, factor: Fraction) -> Any:
        """The stated side moved by ``factor`` (in either route): an inequality's bound times F, an
        integer bound tightened strictly (:func:`tightened_integer_bound`), an identity's stated side
        v moved to F(v + 1) - 1 (the meta-tests' hook, :func:`rankwall.checks.engine.toolkit.planted_side`)."""
        if factor == 1 or right is None:
            return right
        if isinstance(right, RankInterval):
            return _moved_interval(right, factor, self.relation)
        if isinstance(right, Measured):
            return _moved_measured(right, factor, self.relation)
        f = Real.of(factor)
        return f * (right + 1) - 1 if self.direction is None else f * right


def _moved_interval(right: RankInterval, factor: Fraction, relation: Relation) -> RankInterval | Measured:
    if relation.is_bound:
        lo, hi = (tightened_integer_bound(end, factor, relation) for end in (right.lo, right.hi))
        return RankInterval(lo, hi, right.lower, right.upper, right.exact, right.certificate)
    lo, hi = (factor * (end + 1) - 1 for end in (right.lo, right.hi))
    if lo.denominator == 1 and hi.denominator == 1:
        return RankInterval(int(lo), int(hi), right.lower, right.upper, right.exact, right.certificate)
    return _moved_measured(as_measured(right), factor, relation)


def _moved_measured(right: Measured, factor: Fraction, relation: Relation) -> Measured:
    """A real side times F (a bound) or moved to F(v + 1) - 1 (an identity's side), with the rounding
    of F read as a float and of each operation."""
    f = float(factor)
    read = Measured(f, abs(Fraction(f) - factor) if f != factor else 0.0)
    if relation.is_bound:
        return _float_combination("*", [read, right])
    shifted = _float_combination("+", [right, Measured(1.0, 0.0)])
    return _float_combination("-", [_float_combination("*", [read, shifted]), Measured(1.0, 0.0)])


def measurement_of(sides: Sides, ctx: Context, factor: Fraction) -> Measurement:
    """Both sides measured on ``ctx``: integer sides against a pinned integer through
    :meth:`RankInterval.sides`, real sides with the sum of their error bounds (and the rounding of
    ``rhs - lhs``) as the tolerance. The sides are reported as the user wrote them: ``lhs`` is the left
    side, ``rhs`` the right one, whatever the relation."""
    left, right = sides.lhs.measure(ctx), sides.moved(sides.rhs.measure(ctx), factor)
    where = f"{ctx.backend.name} {ctx.backend.dtype_name}"
    method = f"{where}: {sides.shown(factor)}"
    if isinstance(left, RankInterval) and isinstance(right, RankInterval) and right.pinned:
        m = left.sides(right.lo, sides.relation)[0]
        lhs, rhs = (m.rhs, m.lhs) if sides.relation == ">=" else (m.lhs, m.rhs)
        return Measurement(
            lhs, rhs, m.tolerance, f"{method} ({m.method})", m.certificate, m.exact_sides, m.certified_by, m.proves
        )
    a, b = as_measured(left), as_measured(right)
    if not (a.bounded and b.bounded):
        unbounded = " and ".join(name for name, x in (("lhs", a), ("rhs", b)) if not x.bounded)
        return Measurement(math.nan, math.nan, math.nan, f"{method}: {unbounded} has no float bound")
    tolerance = a.error + b.error + gamma(2, U64) * max(abs(a.value), abs(b.value))
    certificate = {"lhs_error": a.error, "rhs_error": b.error}
    return Measurement(a.value, b.value, tolerance, method, certificate, certified_by=Certification.TWO_SIDED)


def judgement_of(sides: Sides, ctx: Context, factor: Fraction) -> Judgement:
    """Both sides re-decided on the exact instance: integer sides on their exact intervals; real sides
    by a base side's comparison hook wherever the statement is linear in it (:func:`linear_in`), else
    in rationals, identical forms or square roots, else in balls at rising precision. A side with no
    exact route leaves its two-sided float margin on ``ctx`` to decide (beyond its bound in either
    direction), or nothing. ``lhs`` and ``rhs`` are reported as the user wrote them."""
    decided, how, exactly = None, "", False
    for bits in exact.BALL_PRECISIONS:
        with exact.precision(bits):
            left, right = _exact_side("lhs", sides.lhs, ctx), sides.moved(_exact_side("rhs", sides.rhs, ctx), factor)
            if left is None or right is None:
                return _two_sided_float(sides, ctx, factor)
            if isinstance(left, RankInterval) and isinstance(right, RankInterval) and right.pinned:
                j = left.sides(right.lo, sides.relation)[1]
                return _as_written(j, sides.relation) if sides.relation == ">=" else j
            left, right = (interval_as_exact(x) if isinstance(x, RankInterval) else x for x in (left, right))
            if left is None or right is None:
                return Judgement(math.nan, math.nan, None, "exact route: contradicting interval ends")
            if not (left.rational and right.rational):  # two rationals compare exactly as they are
                hooked = _hooked(sides, ctx, factor)
                if hooked is not None:
                    decided, how, exactly = hooked.sign, hooked.method, hooked.exact
                    break
            decided, how = difference_sign(left, right)
            exactly = not how.startswith("interval")
            if decided is not None or exactly:
                break
    sign = None if decided is None else (-decided if sides.relation == ">=" else decided)
    kind = None if sign is None else Certification.EXACT if exactly else Certification.TWO_SIDED
    method = f"{how}: {sides.shown(factor)}"
    difference = right.value - left.value
    return Judgement(to_float(left), to_float(right), sign, method, radius(difference), certified_by=kind)


def _exact_side(name: str, side: Quantity, ctx: Context) -> Exact | None:
    """A side's exact value; a side with no value on the case is bad input, named."""
    try:
        return side.exact(ctx)
    except UndefinedStatement as error:
        raise UndefinedStatement(f"{name}: {error}") from None


def _as_written(j: Judgement, relation: str) -> Judgement:
    """A judgement reported ``bound <= value`` turned back into the order the user wrote."""
    return Judgement(j.rhs, j.lhs, j.sign, j.method, j.radius, j.certificate, j.certified_by)


def hooked_bases(sides: Sides) -> list[Base]:
    """The base quantities of the statement that offer a comparison hook, each once."""
    found: dict[int, Base] = {}
    for b in sides.lhs.bases() + sides.rhs.bases():
        if b.compare_fn is not None:
            found.setdefault(id(b), b)
    return list(found.values())


def _hooked(sides: Sides, ctx: Context, factor: Fraction) -> Compared | None:
    """sign(rhs − lhs) from a base's comparison hook, where the statement lhs − rhs is linear in the base
    with an exactly signed coefficient c: lhs − rhs = c·(q − t), so the sign is −sign(c)·sign(q − t)."""
    difference = _difference(sides.lhs, sides.moved_rhs(factor))
    for base in hooked_bases(sides):
        split = linear_in(difference, base)
        if split is None:
            continue
        coefficient, rest = split
        c = coefficient.exact(ctx)
        c = interval_as_exact(c) if isinstance(c, RankInterval) else c
        if c is None:
            continue
        c_sign, c_how = difference_sign(Real.of(0), c)
        if c_sign in (None, 0):
            continue
        t_expression = _quotient(_negated(rest), coefficient)
        t = t_expression.exact(ctx)
        t = interval_as_exact(t) if isinstance(t, RankInterval) else t
        if t is None:
            continue
        found = base.compare(ctx, t, t_expression)
        if found is not None:
            exact_c = not c_how.startswith("interval")
            return Compared(-c_sign * found.sign, found.method, found.exact and exact_c)
    return None


def _two_sided_float(sides: Sides, ctx: Context, factor: Fraction) -> Judgement:
    """The judgement of the context's own measurement alone: certified beyond its bound either way
    (its error bounds are of the same exact object the exact route would have evaluated)."""
    from rankwall.checks.engine.toolkit import two_sided

    m = measurement_of(sides, ctx, factor)
    if sides.relation == ">=":  # two_sided reads lhs <= rhs: the bound below the value
        m = Measurement(m.rhs, m.lhs, m.tolerance, m.method, m.certificate, m.exact_sides, m.certified_by, m.proves)
        return _as_written(two_sided(m, "<="), ">=")
    return two_sided(m, "==" if sides.relation == "==" else "<=")


def reference_of(sides: Sides, ctx: Context) -> tuple[Any, Any]:
    """Both sides' references on ``ctx`` (as written), at :data:`REFERENCE_BITS`."""
    with mpmath.workprec(REFERENCE_BITS):
        values = sides.lhs.reference(ctx), sides.rhs.reference(ctx)
    return tuple(v.value if isinstance(v, Approximately) else v for v in values)


# --------------------------------------------------------------------------- declaring a claim

#: Where the claims being loaded come from (set by :func:`rankwall.checks.run.loader.load_claims`).
LOADING_ORIGIN: list[str] = []


def _domain_check(domain: Callable[[Any], Any] | None) -> Callable[[Any], str | None]:
    """The hypothesis of a claim as a function of a case: ``None`` inside it, else why not."""
    if domain is None:
        return lambda case: None

    def why_outside(case: Any) -> str | None:
        answer = domain(case)
        if answer is True or answer is None:
            return None
        if answer is False:
            return f"outside the claim's domain ({getattr(domain, '__doc__', None) or domain.__name__})".strip()
        return str(answer)

    return why_outside


def _sides_fields(sides: Sides, judge: Callable[[Any], tuple[Any, Any]] | None = None) -> dict[str, Any]:
    """The :class:`~rankwall.checks.engine.verdict.Claim` fields that ``sides`` (and an optional exact
    ``judge``) determine: relation, array_api, sides, and the exact judge's override."""
    relation = Relation(sides.relation)
    judged = sides
    if judge is not None:
        judged = Sides(
            _judged_side("lhs", sides.lhs, lambda c: judge(c.case)[0]),
            sides.relation,
            _judged_side("rhs", sides.rhs, lambda c: judge(c.case)[1]),
        )
    return {
        "relation": relation,
        "array_api": sides.lhs.array_api and sides.rhs.array_api,
        "sides": sides,
        "judged_sides": judged,
    }


def _judged_side(name: str, side: Quantity, value: Callable[[Context], Any]) -> Base:
    return quantity(name, side.measure, lambda ctx: _exact_number(value(ctx)), integer=side.integer)


def _exact_number(x: Any) -> Any:
    """A user's exact value: an int or a Fraction becomes a rational, a flint rational or ball stays."""
    if isinstance(x, RankInterval):
        return x
    try:
        return Real.of(x)
    except TypeError:
        raise InputError(f"judge: an exact side is an int, a Fraction or a python-flint number, got {x!r}") from None


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
    domain: str | Callable[[Any], Any] | None = None,
    hypothesis: Callable[[Any], Any] | None = None,
    default_V: int | None = None,
    judge: Callable[[Any], tuple[Any, Any]] | None = None,
    register: bool = True,
) -> Claim:
    """Declare the claim ``lhs <relation> rhs`` over ``cases`` and register it under ``id`` (dotted:
    ``family.name``). ``relation`` is ``"<="`` (``rhs`` an upper bound), ``">="`` (a lower bound) or
    ``"=="``; ``lhs`` and ``rhs`` are quantities of the cases' family (or numbers, or expressions of
    both), measured with their rounding bounds and re-decided exactly where the float margin does not
    decide. ``cases`` is a :class:`~rankwall.checks.engine.toolkit.Cases` (a family exports one per kind of
    case). ``domain`` describes where the claim ranges, in words, or is a predicate of a case (true,
    or ``None``, inside; false, or a string saying why, outside); ``hypothesis`` is such a predicate
    beside a ``domain`` in words. A case outside it is rejected by the search and counted apart by
    ``verify``. ``default_V`` is the size ``verify`` checks it at without ``--V``. ``judge(case) ->
    (lhs, rhs)``, if given, supplies the exact values of both sides (ints, Fractions or python-flint
    numbers) in place of the quantities' own. The claim then has everything a shipped one has."""
    from rankwall.checks.engine.toolkit import Cases
    from rankwall.checks.engine.verdict import DEFAULT_V, REGISTRY, check_claim_id

    check_claim_id(id)
    if not isinstance(cases, Cases):
        raise InputError(f"cases: expected a Cases bundle of a family (e.g. softmax_jacobian.rows), got {cases!r}")
    if not isinstance(statement, str) or not statement.strip():
        raise InputError("statement: a claim states what it claims, in words or symbols")
    if judge is not None and not callable(judge):
        raise InputError(f"judge: expected a function of a case returning (lhs, rhs), got {judge!r}")
    if default_V is not None and (isinstance(default_V, bool) or not isinstance(default_V, int) or default_V < 2):
        raise InputError(f"default_V: expected an integer >= 2, got {default_V!r}")
    predicate = hypothesis
    if callable(domain):
        predicate, domain = domain, (domain.__doc__ or "").strip() or None
    if predicate is not None and not callable(predicate):
        raise InputError(f"hypothesis: expected a predicate of a case, got {predicate!r}")
    sides = Sides(as_quantity(lhs), relation, as_quantity(rhs))
    try:
        _same_family(sides, cases)
    except InputError as error:
        raise InputError(f"{id}: {error}") from None
    claim = Claim(
        id=id,
        title=title or statement,
        source=source,
        statement=statement,
        domain=domain or "the cases given",
        origin=LOADING_ORIGIN[-1] if LOADING_ORIGIN else None,
        default_V=default_V or DEFAULT_V,
        hypothesis=_domain_check(predicate),
        **cases.fields(),
        **_sides_fields(sides, judge),
    )
    return REGISTRY.register(claim) if register else claim


#: The size at which a declaration's witnesses are built to see which kinds of case they are.
KINDS_PROBE_V = 16


def _same_family(sides: Sides, cases: Any) -> None:
    """Refuse a quantity of another family than the cases' (it cannot read their instances), and one
    that names the kinds of case it reads where the cases' witnesses are of another kind."""
    if cases.family is None:
        return
    kinds: set[type] | None = None
    for side_name, side in (("lhs", sides.lhs), ("rhs", sides.rhs)):
        for base in side.bases():
            if base.family is not None and base.family != cases.family:
                raise InputError(
                    f"{side_name}: the quantity {base.name!r} belongs to the family {base.family!r}, "
                    f"but the cases are {cases.family!r}'s (a quantity reads only its own family's cases)"
                )
            if base.reads:
                kinds = kinds if kinds is not None else {type(c) for c in cases.witnesses(KINDS_PROBE_V)}
                unread = sorted(kind.__name__ for kind in kinds if not issubclass(kind, base.reads))
                if unread:
                    raise InputError(
                        f"{side_name}: the quantity {base.name!r} reads "
                        f"{', '.join(kind.__name__ for kind in base.reads)} cases, but the cases given include "
                        f"{', '.join(unread)} cases"
                    )


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
    return _sides_fields(sides)


def outside_domain(claim: Claim, case: Any) -> None:
    """Raise :class:`~rankwall.checks.engine.verdict.OutsideDomain` for a case outside the claim's hypothesis."""
    reason = claim.hypothesis(case) if claim.hypothesis is not None else None
    if reason is not None:
        raise OutsideDomain(f"{claim.id}: {reason}")

r"""Exact real numbers of one instance: what a quantity's exact route returns.

A :class:`Real` is one stated real number of the exact instance (a row read as rationals and
normalised exactly, the softmax of the built logits, the singular values of the built gradient),
held three ways at once, each optional but the first:

- ``value``: an exact rational (:class:`flint.fmpq`) or a ball (:class:`flint.arb`) at the working
  precision that contains the number;
- ``form``: a rational function of the instance's *atoms* (:class:`Form`: symbols that stand for
  numbers the instance fixes, such as the weights :math:`w_j = e^{z_j - \max z}` of a softmax of
  logits), which equals the number exactly. Two numbers whose forms are the same rational function
  are equal, whatever no finite precision can show: :math:`\mathrm{tr} J = 1 - \sum p_i^2` holds on
  a softmax of logits because both are :math:`(W^2 - \sum_j c_j w_j^2)/W^2` with
  :math:`W = \sum_j c_j w_j`, not because two balls overlap;
- ``radicand``: the number is :math:`\sqrt{x}` for the exact real x, so :math:`\sqrt{x}\sqrt{x} = x`
  and comparisons of square roots reduce to comparisons of their radicands.

:func:`difference_sign` decides :math:`\mathrm{sign}(b - a)` from the strongest of these: rationals,
then identical forms, then radicands, then balls (never a float). A ball that straddles zero leaves
the sign undecided (``None``), never a guess.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import flint


class Undefined(ArithmeticError):
    """An operation that has no value on the instance (a division by an exact zero, the square root of
    a negative number, the logarithm of a nonpositive one). ``what`` says which."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@dataclass(frozen=True)
class Form:
    """``num / den``, two python-flint multivariate polynomials over the rationals in one ring (the
    instance's atoms), standing for a number of the instance exactly; ``atoms`` are the atoms' balls at
    the working precision. The producer guarantees that ``den`` is nonzero at the instance."""

    num: Any
    den: Any
    atoms: tuple[Any, ...]

    @classmethod
    def constant(cls, like: Form, q: Any) -> Form:
        ring = like.ring
        zero = (0,) * ring.nvars()
        return cls(ring.from_dict({zero: q}), ring.from_dict({zero: 1}), like.atoms)

    @property
    def ring(self) -> Any:
        return self.num.context()

    def is_zero(self) -> bool:
        return self.num.is_zero()

    def evaluate(self) -> Any:
        """The number as a ball: numerator and denominator evaluated at the atoms' balls, after the
        cancellations the polynomial arithmetic did exactly."""
        return _polynomial_ball(self.num, self.atoms) / _polynomial_ball(self.den, self.atoms)

    def __add__(self, other: Form) -> Form:
        if self.den == other.den:
            return Form(self.num + other.num, self.den, self.atoms)
        return Form(self.num * other.den + other.num * self.den, self.den * other.den, self.atoms)

    def __neg__(self) -> Form:
        return Form(-self.num, self.den, self.atoms)

    def __sub__(self, other: Form) -> Form:
        return self + (-other)

    def __mul__(self, other: Form) -> Form:
        return Form(self.num * other.num, self.den * other.den, self.atoms)

    def __truediv__(self, other: Form) -> Form:
        if other.num.is_zero():
            raise Undefined("a division by a quantity that is zero on the instance")
        return Form(self.num * other.den, self.den * other.num, self.atoms)


def _polynomial_ball(polynomial: Any, atoms: tuple[Any, ...]) -> Any:
    """Σ c·Π atoms^e over the polynomial's terms, in balls."""
    total = flint.arb(0)
    for exponents, coefficient in polynomial.terms():
        term = flint.arb(coefficient)
        for atom, e in zip(atoms, exponents, strict=True):
            if e:
                term *= atom**e
        total += term
    return total


Number = Any  # flint.fmpq | flint.arb


def _fmpq(x: int | Fraction | Any) -> Any:
    if isinstance(x, flint.fmpq):
        return x
    q = Fraction(x)
    return flint.fmpq(q.numerator, q.denominator)


@dataclass(frozen=True, eq=False)
class Real:
    """One real number of the instance (see the module docstring)."""

    value: Number
    form: Form | None = None
    radicand: Real | None = None
    #: The working precision the number was computed at (its ball is evaluated at it, whenever asked).
    bits: int = field(default_factory=lambda: flint.ctx.prec)

    # construction ---------------------------------------------------------------------------
    @classmethod
    def of(cls, x: Any) -> Real:
        """A Real from a Real, an int, a Fraction, a python-flint rational or ball."""
        if isinstance(x, Real):
            return x
        if isinstance(x, flint.arb):
            return cls(x)
        if isinstance(x, bool) or not isinstance(x, int | Fraction | flint.fmpq | flint.fmpz):
            raise TypeError(f"an exact value is an int, a Fraction or a python-flint number, got {x!r}")
        return cls(_fmpq(int(x)) if isinstance(x, flint.fmpz) else _fmpq(x))

    @property
    def rational(self) -> bool:
        return isinstance(self.value, flint.fmpq)

    @functools.cached_property
    def ball(self) -> Any:
        """The value as a ball at the working precision: where there is a form, the tighter of the
        propagated ball and the form evaluated at the atoms (whose exact cancellations balls cannot do)."""
        if self.rational:
            return flint.arb(self.value)
        if self.form is None:
            return self.value
        old = flint.ctx.prec
        flint.ctx.prec = max(old, self.bits)
        try:
            return _intersection(self.value, self.form.evaluate())
        except ZeroDivisionError:
            return self.value
        finally:
            flint.ctx.prec = old

    def _form_with(self, other: Real) -> tuple[Form, Form] | None:
        """Both forms in one ring (a rational lifted into the other's ring), or ``None``."""
        a, b = self.form, other.form
        if a is None and self.rational and b is not None:
            a = Form.constant(b, self.value)
        if b is None and other.rational and a is not None:
            b = Form.constant(a, other.value)
        if a is None or b is None or a.ring != b.ring:
            return None
        return a, b

    def _combined(self, other: Any, value: Number, op: str) -> Real:
        other = Real.of(other)
        pair = self._form_with(other)
        form = None
        if pair is not None and not (isinstance(value, flint.fmpq)):
            a, b = pair
            form = {"+": a.__add__, "-": a.__sub__, "*": a.__mul__, "/": a.__truediv__}[op](b)
            if form.is_zero():
                return Real.of(0)  # identically zero in the atoms: exactly zero
        return Real(value, form)

    # arithmetic -----------------------------------------------------------------------------
    def __add__(self, other: Any) -> Real:
        other = Real.of(other)
        return self._combined(other, self.value + other.value, "+")

    __radd__ = __add__

    def __sub__(self, other: Any) -> Real:
        other = Real.of(other)
        return self._combined(other, self.value - other.value, "-")

    def __rsub__(self, other: Any) -> Real:
        return Real.of(other) - self

    def __neg__(self) -> Real:
        return Real(-self.value, None if self.form is None else -self.form)

    def __mul__(self, other: Any) -> Real:
        other = Real.of(other)
        if self.radicand is not None and other.radicand is not None and _same(self.radicand, other.radicand):
            return self.radicand  # sqrt(x) sqrt(x) = x
        return self._combined(other, self.value * other.value, "*")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Real:
        other = Real.of(other)
        decided = sign(other)
        if decided == 0:
            raise Undefined("a division by a quantity that is exactly zero on the instance")
        if decided is None:  # a ball around 0: no value, no form
            return Real(flint.arb(0, math.inf))
        return self._combined(other, self.value / other.value, "/")

    def __rtruediv__(self, other: Any) -> Real:
        return Real.of(other) / self

    def __pow__(self, n: int) -> Real:
        if n == 0:
            return Real.of(1)
        if n < 0:
            return Real.of(1) / self ** (-n)
        result = self
        for _ in range(n - 1):
            result = result * self
        return result

    def __abs__(self) -> Real:
        decided = sign(self)
        if decided is not None:
            return -self if decided < 0 else self
        return Real(abs(self.ball))

    # functions ------------------------------------------------------------------------------
    def sqrt(self) -> Real:
        """The nonnegative square root: a rational where the radicand is a rational square."""
        decided = sign(self)
        if decided == -1:
            raise Undefined("the square root of a quantity that is negative on the instance")
        if decided == 0:
            return Real.of(0)
        if self.rational:
            try:
                return Real(self.value.sqrt())
            except Exception:  # python-flint's DomainError: not a rational square
                pass
        b = self.ball
        root = b.sqrt() if b > 0 else flint.arb(0).union(flint.arb(b.upper()).sqrt()) if b.upper() > 0 else flint.arb(0)
        return Real(root, radicand=self)

    def log(self) -> Real:
        decided = sign(self)
        if decided is not None and decided <= 0:
            raise Undefined("the logarithm of a quantity that is not positive on the instance")
        if self.rational and self.value == 1:
            return Real.of(0)
        b = self.ball
        return Real(b.log() if b > 0 else flint.arb(0, math.inf))

    def exp(self) -> Real:
        if self.rational and self.value == 0:
            return Real.of(1)
        return Real(self.ball.exp())

    def __float__(self) -> float:
        return to_float(self.value)

    def __repr__(self) -> str:
        extra = " (form)" if self.form is not None else " (root)" if self.radicand is not None else ""
        return f"Real({self.value}{extra})"


def atoms(balls: tuple[Any, ...] | list[Any], names: tuple[str, ...] | None = None) -> tuple[Real, ...]:
    """The instance's atoms as :class:`Real` numbers, one per ball: atom i is the symbol ``names[i]``
    (``a0``, ``a1``, ... by default) of a polynomial ring over the rationals, evaluated at ``balls[i]``.
    Arithmetic on them builds forms, so an expression that cancels in the atoms is decided exactly:
    choose as atoms the numbers the instance fixes that no rational names (a log, an exponential), and
    write every quantity of the instance in them."""
    balls = tuple(balls)
    if not balls:
        raise ValueError("balls: an instance with atoms has at least one")
    names = names or tuple(f"a{i}" for i in range(len(balls)))
    ring = flint.fmpq_mpoly_ctx.get(tuple(names), "lex")
    one = ring.from_dict({(0,) * len(balls): 1})
    return tuple(Real(ball, Form(symbol, one, balls)) for symbol, ball in zip(ring.gens(), balls, strict=True))


def _intersection(a: Any, b: Any) -> Any:
    """The tighter enclosure of one number from two balls that both contain it."""
    lo, hi = max(a.lower(), b.lower()), min(a.upper(), b.upper())
    if lo > hi:  # impossible for two enclosures of one number; keep the first rather than guess
        return a
    return flint.arb(lo).union(flint.arb(hi))


def _same(a: Real, b: Real) -> bool:
    """Whether two radicands are the same number, exactly."""
    if a is b:
        return True
    found, how = difference_sign(a, b)
    return found == 0 and how in EXACT_HOWS


def sign(x: Real) -> int | None:
    """The sign of ``x``: exactly from a rational or a zero form, from a radicand, else from its ball."""
    if x.rational:
        return (x.value > 0) - (x.value < 0)
    if x.form is not None and x.form.is_zero():
        return 0
    if x.radicand is not None:
        inner = sign(x.radicand)
        if inner is not None and inner >= 0:
            return inner
    return _ball_sign(x.value)


def _ball_sign(b: Any) -> int | None:
    if b > 0:
        return 1
    if b < 0:
        return -1
    if b == 0:
        return 0
    return None


#: How :func:`difference_sign` decided: exactly (rationals, identical forms, radicands compared
#: exactly) or two-sided (balls).
EXACT_HOWS = ("exact-rational", "identity in the instance's atoms", "square roots compared exactly")


def difference_sign(a: Real, b: Real) -> tuple[int | None, str]:
    """``(sign(b − a), how)``: from rationals, identical forms, radicands (sqrt x against sqrt y or
    against a nonnegative number), else balls at the working precision (``"interval-<bits>"``)."""
    if a.rational and b.rational:
        return (b.value > a.value) - (b.value < a.value), "exact-rational"
    pair = a._form_with(b)
    difference = None
    if pair is not None:
        difference = pair[1] - pair[0]
        if difference.is_zero():
            return 0, "identity in the instance's atoms"
    roots = _root_comparison(a, b)
    if roots is not None:
        return roots
    ball = b.ball - a.ball
    if difference is not None:
        try:
            ball = _intersection(ball, difference.evaluate())
        except ZeroDivisionError:
            pass
    return _ball_sign(ball), f"interval-{flint.ctx.prec}"


def _root_comparison(a: Real, b: Real) -> tuple[int | None, str] | None:
    """sign(b − a) where one side is a square root: for x, y ≥ 0, sign(√y − √x) = sign(y − x), and
    sign(c − √x) = sign(c² − x) for c ≥ 0 (c < 0 is below every root)."""
    if a.radicand is not None and b.radicand is not None:
        found, how = difference_sign(a.radicand, b.radicand)
    elif a.radicand is not None and sign(b) is not None:
        if sign(b) < 0:
            return -1, "square roots compared exactly" if b.rational else f"interval-{flint.ctx.prec}"
        found, how = difference_sign(a.radicand, b * b)
    elif b.radicand is not None and sign(a) is not None:
        if sign(a) < 0:
            return 1, "square roots compared exactly" if a.rational else f"interval-{flint.ctx.prec}"
        found, how = difference_sign(a * a, b.radicand)
    else:
        return None
    if found is None:
        return None
    return found, "square roots compared exactly" if how in EXACT_HOWS else how


def to_float(value: Any) -> float:
    """Nearest float of a rational, or the midpoint of a ball (a Real's value)."""
    if isinstance(value, Real):
        value = value.value
    if isinstance(value, flint.fmpq):
        return (
            int(value.p) / int(value.q) if abs(int(value.p)) < 2**1000 else float(Fraction(int(value.p), int(value.q)))
        )
    return float(value.mid())


def radius(value: Any) -> float:
    """Half-width of a ball as a float (zero for an exact rational), rounded up."""
    if isinstance(value, Real):
        value = value.value
    if isinstance(value, flint.fmpq):
        return 0.0
    r = float(value.rad())
    return math.nextafter(r, math.inf) if r > 0 else r

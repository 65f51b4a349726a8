"""Exact routes for softmax rows: a row as exact data, the spectral-norm comparison with a
bound (rationals, balls, and two structural lemmas for attained bounds), and certified norms.

The generic arithmetic (rationals, balls, precisions) is :mod:`rankwall.checks.exact`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint
import numpy as np

from rankwall.checks.engine.tolerance import unit_roundoff
from rankwall.checks.exact import BALL_PRECISIONS, EXACT_DISTINCT_LIMIT, ball, precision, rational, sign
from rankwall.theory.softmax_jacobian import secular_function


@dataclass(frozen=True)
class ExactRow:
    """One probability row as exact data: its distinct values, their counts, its total.

    ``from_probabilities`` reads float entries exactly; ``from_logits`` keeps the logits and
    evaluates :math:`e^{z_i - \\max z}` in ball arithmetic (the softmax of a float row is not
    rational)."""

    values: np.ndarray
    counts: np.ndarray
    logits: bool

    @classmethod
    def from_probabilities(cls, p: Sequence[float] | np.ndarray) -> ExactRow:
        values, counts = np.unique(np.asarray(p, dtype=np.float64), return_counts=True)
        return cls(values, counts, logits=False)

    @classmethod
    def from_logits(cls, z: Sequence[float] | np.ndarray) -> ExactRow:
        values, counts = np.unique(np.asarray(z, dtype=np.float64), return_counts=True)
        return cls(values, counts, logits=True)

    @property
    def distinct(self) -> int:
        return len(self.values)

    def weights(self, exact: bool) -> list[Any]:
        """Unnormalised masses of the distinct values (descending order of value)."""
        if self.logits:
            top = self.values[-1]
            return [(ball(z) - ball(top)).exp() for z in self.values[::-1]]
        convert = rational if exact else ball
        return [convert(v) for v in self.values[::-1]]

    def parts(self, exact: bool) -> tuple[Any, Any, list[Any], list[int]]:
        """``(m, s, tail values, tail counts)`` of the normalised row :math:`\\hat p`."""
        w = self.weights(exact)
        c = [int(k) for k in self.counts[::-1]]
        total = sum((wi * ci for wi, ci in zip(w, c, strict=True)), start=0 * w[0])
        top = w[0] / total
        tail = [wi / total for wi in w]
        counts = [c[0] - 1, *c[1:]]
        complement = sum((wi * ci for wi, ci in zip(w[1:], c[1:], strict=True)), start=0 * w[0])
        complement = (complement + (c[0] - 1) * w[0]) / total
        return top, complement, tail, counts

    def use_exact(self) -> bool:
        return not self.logits and self.distinct <= EXACT_DISTINCT_LIMIT


def _envelope_is_m(m: Any, s: Any) -> bool:
    """Whether min(m, 2m(1 - m)) is m, i.e. m <= 2ms (s = 1 - m as computed)."""
    return sign(m - 2 * m * s) in (-1, 0)


@dataclass(frozen=True)
class Bound:
    """A bound t on the spectral norm, with its structure kept for exact comparisons:
    ``"ms"``: :math:`t = c\\,m(1-m)`; ``"envelope"``: :math:`t = c\\min(m, 2m(1-m))`;
    ``"constant"``: :math:`t = c`; ``"value"``: t is the exact real ``real``
    (:class:`rankwall.checks.engine.reals.Real`: a rational, or a ball at the caller's precision)."""

    kind: str
    coefficient: Fraction = Fraction(1)
    real: Any = None

    def value(self, m: Any, s: Any, is_exact: bool) -> Any:
        """t in exact (``is_exact``) or ball arithmetic."""
        if self.kind == "value":
            return self.real.value if is_exact and self.real.rational else self.real.ball
        c = flint.fmpq(self.coefficient.numerator, self.coefficient.denominator)
        c = c if is_exact else flint.arb(c)
        if self.kind == "constant":
            return c
        if self.kind == "ms":
            return c * m * s
        return c * (m if _envelope_is_m(m, s) else 2 * m * s)

    def against_top(self, m: Any, s: Any, is_exact: bool) -> int | None:
        """sign(t - m) from the structure of t (m > 0), not from the difference of two balls of m,
        which is never an exact 0: the envelope's first branch t = c m is m itself for c = 1."""
        if self.kind == "value":
            return sign(self.value(m, s, is_exact) - m)
        c = flint.fmpq(self.coefficient.numerator, self.coefficient.denominator)
        c = c if is_exact else flint.arb(c)
        if self.kind == "constant":
            return sign(c - m)
        if self.kind == "ms":  # c m s - m = m (c s - 1)
            return sign(c * s - 1)
        if _envelope_is_m(m, s):  # t = c m
            return (self.coefficient > 1) - (self.coefficient < 1)
        return sign(2 * c * s - 1)  # t = 2c m s: t - m = m (2 c s - 1)

    def against_tie(self, s: Any, m: Any = None) -> int | None:
        """sign(t - m) when the top is tied (then the norm is m and m <= 1/2)."""
        if self.kind == "value" and m is not None:
            return sign(self.value(m, s, False) - m)
        if self.kind == "envelope":  # min(m, 2ms) = m
            return (self.coefficient > 1) - (self.coefficient < 1)
        if self.kind == "ms":  # c m s - m has the sign of c s - 1
            return sign(flint.fmpq(self.coefficient.numerator, self.coefficient.denominator) * s - 1)
        return None

    def against_two_atoms(self) -> int | None:
        """sign(t - 2ms) when the row has two atoms (then the norm is 2ms and m >= 1/2)."""
        target = {"ms": Fraction(2), "envelope": Fraction(1)}.get(self.kind)
        if target is None:
            return None
        return (self.coefficient > target) - (self.coefficient < target)


def decide_norm_at_most(row: ExactRow, bound: Bound) -> tuple[int | None, str]:
    """Decide :math:`\\lVert J(\\hat p) \\rVert_2 \\le t` for the bound t.

    Returns ``(s, method)`` with s = +1 if the norm is strictly below t, 0 if equal, -1 if
    strictly above, ``None`` if nothing decided it. Balls at 128 bits go first, then exact
    rationals (rows of few distinct values), then wider balls; when all of these leave an
    exact equality undecided (a transcendental row from logits that attains its bound), two
    structural lemmas finish: a tied top gives norm m, a single runner-up gives 2m(1-m)
    (both proved symbolically in the tests). Ties and atom counts come from the float
    input itself, so they are exact."""
    attempts: list[tuple[str, int | None]] = [("interval", BALL_PRECISIONS[0])]
    attempts += [("exact-rational", None)] if row.use_exact() else []
    attempts += [("interval", bits) for bits in BALL_PRECISIONS[1:]]
    for method, bits in attempts:
        is_exact = bits is None
        with precision(bits or 64):
            m, s, tail, counts = row.parts(is_exact)
            outcome = _secular_comparison(m, s, tail, counts, bound, is_exact)
        if outcome is not None:
            return outcome, method if is_exact else f"interval-{bits}"
    return _structural_comparison(row, bound)


def _structural_comparison(row: ExactRow, bound: Bound) -> tuple[int | None, str]:
    """The tie and two-atom lemmas, for equalities that no finite precision can show."""
    positive = [(v, c) for v, c in zip(row.values[::-1], row.counts[::-1], strict=True) if row.logits or v > 0]
    if not positive:
        return None, "structural"
    if positive[0][1] >= 2:
        with precision(BALL_PRECISIONS[-1]):
            m, s, _, _ = row.parts(False)
            return bound.against_tie(s, m), "tie lemma (norm = m)"
    if len(positive) == 2 and positive[1][1] == 1:
        if bound.kind == "value":
            with precision(BALL_PRECISIONS[-1]):
                m, s, _, _ = row.parts(False)
                return sign(bound.value(m, s, False) - 2 * m * s), "two-atom lemma (norm = 2m(1-m))"
        return bound.against_two_atoms(), "two-atom lemma (norm = 2m(1-m))"
    return None, "interval"


def _secular_comparison(m: Any, s: Any, tail: list[Any], counts: list[int], bound: Bound, is_exact: bool) -> int | None:
    """Compare :math:`\\lambda_{\\max}` with the bound t using the interlacing bracket and F(t)."""
    t = bound.value(m, s, is_exact)
    support = [(q, c) for q, c in zip(tail, counts, strict=True) if c > 0 and q != 0]
    if not support:  # one-hot: J = 0
        return sign(t)
    if counts[0] > 0:  # tie at the top (read from the float input, so exact): lambda = m
        return sign(t - m)  # undecided in balls at t = m: the rationals or the tie lemma show it
    second = support[0][0]
    t_against_top = bound.against_top(m, s, is_exact)
    if t_against_top in (0, 1):  # lambda < m <= t (strict: no tie)
        return 1
    if sign(t - second) in (0, -1):  # lambda > second >= t
        return -1
    if t_against_top is None or sign(t - second) is None:
        return None
    return sign(secular_function(t, m, s, [q for q, _ in support], [c for _, c in support]))


def certified_norm(row: ExactRow, estimate: float) -> tuple[float, float, str]:
    """Float endpoints ``[lo, hi]`` of :func:`norm_enclosure` (rounded outward), for reports."""
    ball, method = norm_enclosure(row, estimate)
    return _down(ball.lower()), _up(ball.upper()), method


def _down(x: Any) -> float:
    value = float(x)
    return value if value <= x else float(np.nextafter(value, -np.inf))


def _up(x: Any) -> float:
    value = float(x)
    return value if value >= x else float(np.nextafter(value, np.inf))


def norm_enclosure(row: ExactRow, estimate: float) -> tuple[Any, str]:
    """A ball that contains :math:`\\lVert J(\\hat p) \rVert_2`, as narrow as the working precision
    allows: a float bracket around ``estimate`` certified by the signs of the secular function at both
    ends (or, past the float range, bisection between the interlacing poles), then Newton steps in
    balls at the working precision, each result certified by the signs at its two ends. Never rounded
    to floats: a norm below the subnormal range stays a positive ball."""
    structural = _structural_norm(row)
    if structural is not None:
        return structural
    bracket = _float_bracket(row, estimate)
    lo, hi, method = bracket if bracket is not None else _bisected(row)
    return _refined(row, lo, hi), method


def _structural_norm(row: ExactRow) -> tuple[Any, str] | None:
    """The norm where the structure gives it: 0 (one atom), m (a tied top), 2m(1 - m) (two atoms)."""
    positive = [(v, c) for v, c in zip(row.values[::-1], row.counts[::-1], strict=True) if row.logits or v > 0]
    if len(positive) == 1 and positive[0][1] == 1:
        return flint.arb(0), "one-hot"
    m, s, _, _ = row.parts(False)
    if positive[0][1] >= 2:
        return m, "tie lemma (norm = m)"
    if len(positive) == 2 and positive[1][1] == 1:
        return 2 * m * s, "two-atom lemma (norm = 2m(1-m))"
    return None


def _float_bracket(row: ExactRow, estimate: float) -> tuple[Any, Any, str] | None:
    """Rationals lo < norm < hi within a few thousand ulps of the float estimate, or ``None``."""
    u = unit_roundoff(np.float64)
    if not estimate > 2.0**-1000:
        return None
    for widen in (4, 64, 2**12, 2**24):
        lo, hi = Fraction(estimate * (1 - widen * u)), Fraction(estimate * (1 + widen * u))
        below, method = decide_norm_at_most(row, Bound("constant", hi))
        above, _ = decide_norm_at_most(row, Bound("constant", lo))
        if below == 0:
            return flint.fmpq(hi.numerator, hi.denominator), flint.fmpq(hi.numerator, hi.denominator), method
        if above == 0:
            return flint.fmpq(lo.numerator, lo.denominator), flint.fmpq(lo.numerator, lo.denominator), method
        if below == 1 and above == -1:
            return flint.fmpq(lo.numerator, lo.denominator), flint.fmpq(hi.numerator, hi.denominator), method
    return None


def _secular_terms(row: ExactRow) -> tuple[Any, Any, list[Any], list[int]]:
    """(m, s, tail values, tail counts) in balls at the working precision, zeros dropped."""
    m, s, tail, counts = row.parts(False)
    support = [(q, c) for q, c in zip(tail, counts, strict=True) if c > 0 and q != 0]
    return m, s, [q for q, _ in support], [c for _, c in support]


def _bisected(row: ExactRow, steps: int = 400) -> tuple[Any, Any, str]:
    """Enclose the norm by bisecting the secular sign between the interlacing poles (geometric
    bisection across decades), at the working precision."""
    m, s, values, weights = _secular_terms(row)
    lo, hi = values[0], m
    for _ in range(steps):
        spread = sign(hi - 4 * lo) == 1 and sign(lo) == 1
        middle = (lo * hi).sqrt() if spread else (lo + hi) / 2
        middle = flint.arb(middle.mid())
        direction = sign(secular_function(middle, m, s, values, weights))
        if direction is None:
            break
        if direction >= 0:
            hi = middle
        if direction <= 0:
            lo = middle
        if sign(hi - lo - (hi * flint.arb(2) ** (8 - flint.ctx.prec))) in (-1, 0):
            break
    return lo, hi, f"interval-{flint.ctx.prec} bisection"


def _refined(row: ExactRow, lo: Any, hi: Any) -> Any:
    """The ball [lo, hi] narrowed by Newton steps on the secular function in balls at the working
    precision; each candidate [x - d, x + d] is kept only if the signs at its ends certify it (F is
    increasing between the last pole and m, so F(x - d) < 0 < F(x + d) puts the root inside)."""
    enclosure = flint.arb(flint.arb(lo).lower()).union(flint.arb(flint.arb(hi).upper()))
    if sign(flint.arb(hi) - flint.arb(lo)) == 0:
        return enclosure
    m, s, values, weights = _secular_terms(row)
    x = flint.arb(enclosure.mid())
    for _ in range(12):
        f = secular_function(x, m, s, values, weights)
        slope = (m - m * s) / (m - x) ** 2 + sum(
            (c * q * q / (x - q) ** 2 for q, c in zip(values, weights, strict=True)), flint.arb(0)
        )
        step = flint.arb((f / slope).mid())
        x = flint.arb((x - step).mid())
        if abs(step) < abs(x) * flint.arb(2) ** (16 - flint.ctx.prec):
            break
    for scale in (8, 64, 1024):
        d = abs(x) * flint.arb(2) ** (scale - flint.ctx.prec)
        a, b = flint.arb((x - d).upper()), flint.arb((x + d).lower())
        if (
            sign(secular_function(a, m, s, values, weights)) == -1
            and sign(secular_function(b, m, s, values, weights)) == 1
        ):
            narrow = flint.arb(a.lower()).union(flint.arb(b.upper()))
            return narrow if narrow.rad() < enclosure.rad() else enclosure
    return enclosure


# --------------------------------------------------------------------------- interior roots (the second eigenvalue)


def positive_groups(row: ExactRow) -> tuple[list[Any], list[int]]:
    """The positive distinct values of the row (floats: probabilities, or logits) and their counts,
    largest first; a zero probability carries no weight in the secular function and is dropped."""
    pairs = [(v, int(c)) for v, c in zip(row.values[::-1], row.counts[::-1], strict=True) if row.logits or v > 0]
    return [v for v, _ in pairs], [c for _, c in pairs]


def _interior_terms(row: ExactRow) -> tuple[list[Any], list[int], Any]:
    """(weights w_j of the positive distinct values, largest first, their counts, W = Σ c_j w_j) in balls at
    the working precision: the row's own entries (probabilities), or e^{z_j - max z} (logits)."""
    _, counts = positive_groups(row)
    weights = row.weights(False)[: len(counts)]
    total = sum((c * w for w, c in zip(weights, counts, strict=True)), flint.arb(0))
    return weights, counts, total


def interior_secular(x: Any, weights: list[Any], counts: list[int]) -> Any:
    """:math:`g(x) = \\sum_j c_j w_j/(w_j - x)`, increasing between consecutive poles w_j. For a probability
    vector :math:`\\hat p_j = w_j/W`, :math:`1 - \\sum_j c_j \\hat p_j^2/(\\hat p_j - \\lambda) = -\\lambda\\,
    g(W\\lambda)` (using :math:`\\sum_j c_j\\hat p_j = 1`), so the nonzero eigenvalues of J(p̂) off the values
    themselves are the roots of g divided by W. Written without the cancelling ``1 −``: a tail below
    the normal range keeps its digits in balls."""
    return sum((c * w / (w - x) for w, c in zip(weights, counts, strict=True)), 0 * x)


def _interior_slope(x: Any, weights: list[Any], counts: list[int]) -> Any:
    return sum((c * w / (w - x) ** 2 for w, c in zip(weights, counts, strict=True)), 0 * x)


def _brackets(x_lo: Any, x_hi: Any, weights: list[Any], counts: list[int]) -> bool:
    """Whether g(x_lo) < 0 < g(x_hi) in balls: then the root lies strictly between (g is increasing)."""
    return sign(interior_secular(x_lo, weights, counts)) == -1 and sign(interior_secular(x_hi, weights, counts)) == 1


def interior_root_enclosure(row: ExactRow, k: int, estimate: tuple[float, float] | None) -> tuple[Any, str]:
    """A ball that contains the eigenvalue of :math:`J(\\hat p)` strictly between the positive distinct
    values :math:`\\hat p` number k and k − 1 (0-based, largest first): the root of the secular function
    there, in units of the row (:func:`interior_secular`'s root over W).

    ``estimate``, a float bracket (lo, hi) of the root in units of the weights, is checked by the signs of g
    at both ends in balls at the working precision; where it is absent or fails, bisection between the two
    poles (geometric across decades) finds one. Newton steps then narrow it, each candidate kept only if the
    signs at its two ends certify it. Never rounded to floats."""
    weights, counts, total = _interior_terms(row)
    lo = hi = None
    method = f"interval-{flint.ctx.prec} bracket from the float root"
    if estimate is not None and 0 < estimate[0] < estimate[1]:
        a, b = ball(estimate[0]), ball(estimate[1])
        if _brackets(a, b, weights, counts):
            lo, hi = a, b
    if lo is None:
        lo, hi, method = _bisected_interior(weights, counts, k)
    enclosure = _refined_interior(weights, counts, lo, hi)
    return enclosure / total, method


def _bisected_interior(weights: list[Any], counts: list[int], k: int, steps: int = 4000) -> tuple[Any, Any, str]:
    """Bisect the sign of g between the poles w_k < w_{k-1} (geometric while they span more than a factor
    4), at the working precision; the ends stay certified: poles at first, then points where g has a sign."""
    lo, hi = weights[k], weights[k - 1]
    for _ in range(steps):
        spread = sign(hi - 4 * lo) == 1
        middle = flint.arb(((lo * hi).sqrt() if spread else (lo + hi) / 2).mid())
        direction = sign(interior_secular(middle, weights, counts))
        if direction is None:
            break
        if direction == 0:
            return middle, middle, f"interval-{flint.ctx.prec} bisection"
        if direction > 0:
            hi = middle
        else:
            lo = middle
        if sign(hi - lo - hi * flint.arb(2) ** (8 - flint.ctx.prec)) in (-1, 0):
            break
    return lo, hi, f"interval-{flint.ctx.prec} bisection"


def _refined_interior(weights: list[Any], counts: list[int], lo: Any, hi: Any) -> Any:
    """[lo, hi] (a certified bracket) narrowed by Newton steps on g, each candidate [x - d, x + d] kept
    only if g(x - d) < 0 < g(x + d) in balls."""
    enclosure = flint.arb(flint.arb(lo).lower()).union(flint.arb(flint.arb(hi).upper()))
    if sign(flint.arb(hi) - flint.arb(lo)) == 0:
        return enclosure
    x = flint.arb(enclosure.mid())
    for _ in range(12):
        f = interior_secular(x, weights, counts)
        slope = _interior_slope(x, weights, counts)
        if not f.is_finite() or sign(slope) != 1:
            break
        step = flint.arb((f / slope).mid())
        candidate = flint.arb((x - step).mid())
        if not (sign(candidate - flint.arb(lo).lower()) == 1 and sign(flint.arb(hi).upper() - candidate) == 1):
            break
        x = candidate
        if abs(step) < abs(x) * flint.arb(2) ** (16 - flint.ctx.prec):
            break
    for scale in (8, 64, 1024):
        d = abs(x) * flint.arb(2) ** (scale - flint.ctx.prec)
        a, b = flint.arb((x - d).upper()), flint.arb((x + d).lower())
        if _brackets(a, b, weights, counts):
            narrow = flint.arb(a.lower()).union(flint.arb(b.upper()))
            return narrow if narrow.rad() < enclosure.rad() else enclosure
    return enclosure

"""Escalation beyond floating point: exact rationals and certified balls (python-flint).

A float64 or float32 number is a dyadic rational, so a row of floats *is* an exact instance;
its normalisation :math:`\\hat p = p / \\sum p` is a genuine probability vector, and the
real-number statements are decided on it. Two arithmetics serve:

- :class:`flint.fmpq`, exact rationals, when the row has few distinct values (constructed
  witnesses: ties, runner-ups, spread tails), so an *attained* bound is shown to hold with
  margin exactly zero;
- :class:`flint.arb`, balls with rigorous radii at 128 to 2048 bits, for rows of many
  distinct values and for transcendental quantities (softmax of logits, entropy). A ball
  that straddles zero leaves the question undecided: the answer is then ``None``, never a
  guess.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import flint
import numpy as np

from theory.softmax_jacobian import secular_function

#: Largest number of distinct values for which exact rational arithmetic is attempted.
EXACT_DISTINCT_LIMIT = 4096

#: Working precisions (bits) tried in turn by ball arithmetic.
BALL_PRECISIONS = (128, 512, 2048)


@contextlib.contextmanager
def precision(bits: int) -> Iterator[None]:
    """Run a block with flint's working precision set to ``bits``."""
    old = flint.ctx.prec
    flint.ctx.prec = bits
    try:
        yield
    finally:
        flint.ctx.prec = old


def rational(x: float) -> flint.fmpq:
    """The float ``x`` as the exact rational it is."""
    n, d = float(x).as_integer_ratio()
    return flint.fmpq(n, d)


def ball(x: float) -> flint.arb:
    """The float ``x`` as an exact ball (radius zero) at the current precision."""
    n, d = float(x).as_integer_ratio()
    return flint.arb(n) / d


def sign(value: Any) -> int | None:
    """Sign of an exact rational, or of a ball that excludes zero; ``None`` if undecided."""
    if isinstance(value, flint.fmpq):
        return (value > 0) - (value < 0)
    if value > 0:
        return 1
    if value < 0:
        return -1
    if value == 0:
        return 0
    return None


def to_float(value: Any) -> float:
    """Nearest float of a rational, or the midpoint of a ball."""
    if isinstance(value, flint.fmpq):
        return int(value.p) / int(value.q)
    return float(value.mid())


def radius(value: Any) -> float:
    """Half-width of a ball as a float (zero for an exact rational)."""
    return 0.0 if isinstance(value, flint.fmpq) else float(value.rad())


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


def decide_norm_at_most(row: ExactRow, bound: Any) -> tuple[int | None, str]:
    """Decide :math:`\\lVert J(\\hat p) \\rVert_2 \\le t` for ``bound`` = t.

    Returns ``(s, method)`` with s = +1 if the norm is strictly below t, 0 if equal, -1 if
    strictly above, ``None`` if no precision decided it. ``bound`` is a callable taking
    ``(m, s, exact)`` and returning t in the same arithmetic (so t can depend on m and s)."""
    attempts = [("exact-rational", None)] if row.use_exact() else []
    attempts += [("interval", bits) for bits in BALL_PRECISIONS]
    for method, bits in attempts:
        exact = bits is None
        with precision(bits or 64):
            m, s, tail, counts = row.parts(exact)
            t = bound(m, s, exact)
            outcome = _secular_comparison(m, s, tail, counts, t)
        if outcome is not None:
            return outcome, method if exact else f"interval-{bits}"
    return None, "interval"


def _secular_comparison(m: Any, s: Any, tail: list[Any], counts: list[int], t: Any) -> int | None:
    """Compare :math:`\\lambda_{\\max}` with t using the interlacing bracket and F(t)."""
    support = [(q, c) for q, c in zip(tail, counts, strict=True) if c > 0 and q != 0]
    if not support:  # one-hot: J = 0
        return sign(t)
    second = support[0][0]
    if sign(second - m) == 0:  # tie at the top: lambda = m
        return sign(t - m)
    if sign(t - m) in (0, 1):  # lambda < m <= t (strict: no tie)
        return 1
    if sign(t - second) in (0, -1):  # lambda > second >= t
        return -1
    if sign(t - m) is None or sign(t - second) is None:
        return None
    return sign(secular_function(t, m, s, [q for q, _ in support], [c for _, c in support]))


def certified_norm(row: ExactRow, estimate: float) -> tuple[float, float, str]:
    """An enclosure ``[lo, hi]`` of :math:`\\lVert J(\\hat p) \\rVert_2` around a float estimate,
    certified by the signs of the secular function at both ends."""
    u = 2.0**-53
    for widen in (4, 64, 2**12, 2**24, 2**40):
        lo = estimate * (1 - widen * u)
        hi = estimate * (1 + widen * u)
        below, method = decide_norm_at_most(row, lambda m, s, exact, t=hi: _num(t, exact))
        above, _ = decide_norm_at_most(row, lambda m, s, exact, t=lo: _num(t, exact))
        if below == 0:
            return hi, hi, method
        if above == 0:
            return lo, lo, method
        if below == 1 and above == -1:
            return lo, hi, method
    return 0.0, float("inf"), "undecided"


def _num(x: float, exact: bool) -> Any:
    return rational(x) if exact else ball(x)
